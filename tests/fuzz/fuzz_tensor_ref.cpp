// libFuzzer target: the PATH[:NAME] argument parser. Any string either parses into a path and a
// name whose str() gives the argument back (when it had a name) or is a UsageError.
#include "attn/core/error.hpp"
#include "attn/h5/h5io.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string arg(reinterpret_cast<const char*>(data), size);
  try {
    const attn::h5::TensorRef ref = attn::h5::parse_tensor_ref(arg);
    if (ref.path.empty()) std::abort();                      // an empty PATH must be refused
    if (ref.str() != arg && !ref.name.empty()) std::abort(); // splitting loses nothing
  } catch (const attn::UsageError&) {
  }
  return 0;
}
