// libFuzzer target: arbitrary bytes as an HDF5 file image, read the way every tool reads its
// inputs: resolve the file's tensor (only dataset or root default), list the datasets, and read
// each one whole (float or integer) and as 2-D slices. Errors must be attn::Error (a one-line
// message), never a crash, a hang or another exception.
#include "attn/core/error.hpp"
#include "attn/core/tensor.hpp"
#include "attn/h5/h5guard.hpp"
#include "attn/h5/h5io.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Inputs that hang HDF5 are refused by the preflight before libFuzzer's -timeout (10 s), and
  // tensors that would not fit in a quarter of libFuzzer's -rss_limit_mb (2 GiB) are refused too.
  static const bool once = (attn::h5::set_preflight_timeout(5), attn::set_memory_budget(512 << 20), true);
  (void)once;
  try {
    attn::h5::InputFiles in;
    in.add_image("fuzz.h5", std::vector<char>(data, data + size));
    try {
      in.open({"fuzz.h5", ""});
    } catch (const attn::Error&) {
    }
    for (const std::string& name : in.list_datasets("fuzz.h5")) {
      try {
        const attn::h5::Dataset ds = in.open({"fuzz.h5", name});
        if (ds.kind() == attn::h5::ElemKind::Float) {
          ds.read_floats<float>(true);
        } else {
          ds.read_ints();
        }
        ds.read_slice(attn::Shape(static_cast<std::size_t>(std::max(ds.rank() - 2, 0)), 0));
        in.attribute("fuzz.h5", name, "default");
      } catch (const attn::Error&) {
      }
    }
  } catch (const attn::Error&) {
  }
  return 0;
}
