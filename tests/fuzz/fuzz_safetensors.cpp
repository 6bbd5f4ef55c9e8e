// libFuzzer target: arbitrary bytes as a .safetensors file, opened (header, offsets, buffer order
// checked) and read as weights: every tensor widened to float32, 2-D ones as Linear weights kept
// 16-bit. Bad files must be attn::Error, never a crash or a hang.
#include "attn/core/error.hpp"
#include "attn/hf/safetensors.hpp"
#include "attn/weights/weights.hpp"
#include "scratch_files.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // a file of its own per process: the bytes, and the config.json the weights need beside them
  static const std::filesystem::path dir = [] {
    static const fuzz::ScratchDir scratch("attn-fuzz-st-");
    const std::filesystem::path d = scratch.dir;
    std::ofstream(d / "config.json") << R"({"num_attention_heads": 2})";
    return d;
  }();
  const std::string path = (dir / "model.safetensors").string();
  fuzz::write_bytes(path, data, size);
  try {
    const attn::hf::SafetensorsFile file(path);
    unsigned sum = 0;
    for (const attn::hf::StTensor& t : file.tensors())
      for (std::uint64_t i = t.begin; i < t.end; ++i) sum += static_cast<unsigned char>(file.data(t)[i - t.begin]);
    (void)sum;
  } catch (const attn::Error&) {
    return 0;
  }
  try {
    attn::h5::InputFiles in;
    const attn::WeightGroup g = attn::WeightGroup::open(in, {path, ""});
    for (const std::string& p : g.source().tensors()) {
      const attn::Shape s = g.source().shape(p);
      try {
        g.read(p.substr(1), s);
        if (s.size() == 2) g.read_linear(p.substr(1), s);
      } catch (const attn::Error&) {
      }
    }
  } catch (const attn::Error&) {
  }
  return 0;
}
