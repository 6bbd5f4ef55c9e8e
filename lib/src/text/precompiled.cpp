// Sentencepiece's precompiled normalization: the "Precompiled" normalizer of T5's, ALBERT's and
// mBART's tokenizer.json (Hugging Face tokenizers' normalizers/precompiled.rs over the
// spm_precompiled crate). Its precompiled_charsmap (base64) is a little-endian u32 size in bytes,
// a Darts-clone double-array trie over UTF-8 byte strings, then the replacement strings, each
// ending in NUL, which the trie's values index.
#include "components.hpp"

#include "attn/text/unicode.hpp"
#include "attn/text/utf8.hpp"

#include <cstring>
#include <optional>

namespace attn::text {

namespace {

// RFC 4648 base64 (with or without padding); nullopt on any other character.
std::optional<std::string> base64_decode(std::string_view in) {
  std::string out;
  out.reserve(in.size() / 4 * 3);
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z')
      v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z')
      v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9')
      v = ch - '0' + 52;
    else if (ch == '+')
      v = 62;
    else if (ch == '/')
      v = 63;
    else if (ch == '=')
      break;
    else
      return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

class Precompiled final : public Normalizer {
public:
  explicit Precompiled(const Node& n) {
    const Node map = n.at("precompiled_charsmap");
    const auto blob = base64_decode(map.str());
    if (!blob) map.fail("not base64");
    std::uint32_t trie_bytes = 0;
    if (blob->size() >= 4) std::memcpy(&trie_bytes, blob->data(), 4); // little-endian, as x86 reads it
    if (blob->size() < 4 || trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob->size() - 4)
      map.fail(fmt::format("a charsmap of {} bytes whose trie claims {}", blob->size(), trie_bytes));
    trie_.resize(trie_bytes / 4);
    std::memcpy(trie_.data(), blob->data() + 4, trie_bytes);
    normalized_ = blob->substr(4 + trie_bytes);
  }

  // Each grapheme shorter than 6 bytes replaced whole when the table has it; otherwise each of its
  // characters replaced when the table has it, else kept (sentencepiece's order, as precompiled.rs).
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for (const std::string_view g : graphemes(s)) {
      if (g.size() < 6)
        if (const auto r = transform(g)) {
          out += *r;
          continue;
        }
      std::size_t i = 0;
      while (i < g.size()) {
        const std::size_t at = i;
        next_char(g, i);
        const std::string_view c = g.substr(at, i - at);
        const auto r = transform(c);
        out += r ? *r : c;
      }
    }
    s = std::move(out);
  }

private:
  // The replacement of the shortest prefix of `chunk` the trie holds (spm_precompiled's
  // transform: the first result of its common prefix search), or nullopt.
  std::optional<std::string_view> transform(std::string_view chunk) const {
    std::size_t node = offset(trie_[0]);
    for (const char ch : chunk) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == 0) break;
      node ^= c;
      if (node >= trie_.size()) return std::nullopt;
      const std::uint32_t unit = trie_[node];
      if (label(unit) != c) return std::nullopt;
      node ^= offset(unit);
      if (node >= trie_.size()) return std::nullopt;
      if (has_leaf(unit)) {
        const std::size_t start = value(trie_[node]);
        if (start >= normalized_.size()) return std::nullopt;
        const std::size_t end = normalized_.find('\0', start);
        return std::string_view(normalized_)
            .substr(start, (end == std::string::npos ? normalized_.size() : end) - start);
      }
    }
    return std::nullopt;
  }
  // Darts-clone's unit layout.
  static bool has_leaf(std::uint32_t u) { return ((u >> 8) & 1) == 1; }
  static std::uint32_t value(std::uint32_t u) { return u & ((1u << 31) - 1); }
  static std::uint32_t label(std::uint32_t u) { return u & ((1u << 31) | 0xFF); }
  static std::size_t offset(std::uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

  std::vector<std::uint32_t> trie_;
  std::string normalized_;
};

} // namespace

std::unique_ptr<Normalizer> make_precompiled(const Node& n) { return std::make_unique<Precompiled>(n); }

} // namespace attn::text
