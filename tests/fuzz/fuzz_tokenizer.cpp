// libFuzzer target: the tokenizers on arbitrary bytes. The first byte picks what the rest is:
// even, a tokenizer.json (read, then made to encode and decode a fixed text with both settings);
// odd, text encoded by the real LLaMA 2, Qwen3-less small fixtures of the tests (LLaMA 2's BPE
// with byte fallback, BERT's WordPiece, the Unigram, the WordLevel with every other component) and
// the ids decoded again, with the bytes read as ids decoded too. Bad input must be attn::Error,
// never a crash, a hang or a wrong-length result.
#include "attn/core/error.hpp"
#include "attn/text/tokenizer.hpp"
#include "attn/text/utf8.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

const std::vector<std::unique_ptr<attn::text::Tokenizer>>& fixtures() {
  static const auto all = [] {
    std::vector<std::unique_ptr<attn::text::Tokenizer>> v;
    for (const char* name : {"llama2", "bert", "unigram", "wordlevel", "pieces"})
      v.push_back(std::make_unique<attn::text::Tokenizer>(
          attn::text::Tokenizer::load(std::string(ATTN_TOKENIZERS) + "/" + name + ".json", "")));
    return v;
  }();
  return all;
}

void round_trip(const attn::text::Tokenizer& tok, std::string_view text) {
  for (bool special : {true, false}) {
    const auto ids = tok.encode(text, special);
    std::vector<std::int64_t> wide(ids.begin(), ids.end());
    for (std::int64_t id : wide)
      if (!tok.has_id(id)) __builtin_trap(); // an id the tokenizer cannot spell
    const std::string back = tok.decode(wide, !special);
    if (attn::text::invalid_utf8_offset(back) != attn::text::npos) __builtin_trap(); // decoders give text
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      const attn::text::Tokenizer tok = attn::text::Tokenizer::from_json(rest, "fuzz.json");
      try {
        round_trip(tok, "Hello <s> world 123 \xC3\xA9\n\t  x");
      } catch (const attn::Error&) {
      }
      return 0;
    }
    const auto& all = fixtures();
    std::vector<std::int64_t> ids;
    for (std::size_t i = 0; i + 2 <= rest.size() && ids.size() < 64; i += 2)
      ids.push_back(static_cast<unsigned char>(rest[i]) | (static_cast<unsigned char>(rest[i + 1]) << 8));
    for (const auto& tok : all) {
      std::vector<std::int64_t> known;
      for (std::int64_t id : ids)
        if (tok->has_id(id)) known.push_back(id);
      if (attn::text::invalid_utf8_offset(tok->decode(known, false)) != attn::text::npos) __builtin_trap();
    }
    attn::text::check_utf8(rest, "fuzz text");
    for (const auto& tok : all) round_trip(*tok, rest);
  } catch (const attn::Error&) {
  }
  return 0;
}
