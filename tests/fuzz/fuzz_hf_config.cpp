// libFuzzer target: arbitrary bytes as the config.json of a Hugging Face model directory whose
// weights are testdata/hf/llama's, loaded as the tools load them (LLaMA, GPT-2 and BERT layouts,
// rope_scaling, eos lists, the converter's attributes). Bad configs must be attn::Error, never a
// crash, a hang or a NaN.
#include "attn/core/error.hpp"
#include "attn/hf/model_dir.hpp"
#include "attn/weights/layouts/model_layouts.hpp"
#include "attn/weights/weights.hpp"
#include "scratch_files.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path dir = [] {
    static const fuzz::ScratchDir scratch("attn-fuzz-cfg-");
    const std::filesystem::path d = scratch.dir;
    std::filesystem::copy_file(ATTN_TESTDATA "/hf/llama/model.safetensors", d / "model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    return d;
  }();
  fuzz::write_bytes(dir / "config.json", data, size);
  try {
    attn::h5::InputFiles in;
    const attn::WeightGroup g = attn::WeightGroup::open(in, {dir.string(), ""});
    try {
      const attn::CausalLm lm = attn::load_llama(g);
      (void)lm;
    } catch (const attn::Error&) {
    }
    for (const char* key : {"eos_token_id", "bos_token_id", "rope_scaling.factor"}) {
      try {
        g.attr_ints(key);
        g.attr_real(key);
      } catch (const attn::Error&) {
      }
    }
  } catch (const attn::Error&) {
  }
  return 0;
}
