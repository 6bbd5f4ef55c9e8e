// libFuzzer target: arbitrary bytes as a weight file image, loaded as every module the tools load:
// multi-head attention at the root, an encoder and a decoder stack (with their seq2seq groups),
// embeddings and a generator. Bad files must be attn::Error, never a crash or a hang.
#include "attn/core/error.hpp"
#include "attn/core/tensor.hpp"
#include "attn/h5/h5guard.hpp"
#include "attn/h5/h5io.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/mha.hpp"
#include "attn/model/transformer.hpp"
#include "attn/weights/embedding_weights.hpp"
#include "attn/weights/mha_weights.hpp"
#include "attn/weights/stack_weights.hpp"
#include "attn/weights/weights.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

template <typename F> void attempt(F&& f) {
  try {
    f();
  } catch (const attn::Error&) {
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Inputs that hang HDF5 are refused by the preflight before libFuzzer's -timeout (10 s), and
  // tensors that would not fit in a quarter of libFuzzer's -rss_limit_mb (2 GiB) are refused too.
  static const bool once = (attn::h5::set_preflight_timeout(5), attn::set_memory_budget(512 << 20), true);
  (void)once;
  attn::h5::InputFiles in;
  try {
    in.add_image("w.h5", std::vector<char>(data, data + size));
  } catch (const attn::Error&) {
    return 0;
  }
  attempt([&] {
    const attn::WeightGroup root = attn::WeightGroup::open(in, {"w.h5", ""});
    attempt([&] { attn::load_mha(root); });
    attempt([&] {
      const attn::Encoder enc = attn::load_encoder(attn::stack_group(root, "encoder"));
      attempt([&] { attn::load_embedding(root, "src_embed", enc.embed_dim(), "encoder"); });
    });
    attempt([&] {
      const attn::Decoder dec = attn::load_decoder(attn::stack_group(root, "decoder"));
      attempt([&] { attn::load_embedding(root, "tgt_embed", dec.embed_dim(), "decoder"); });
      attempt([&] { attn::load_generator(root, dec.embed_dim()); });
    });
  });
  return 0;
}
