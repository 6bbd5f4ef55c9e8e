// GPT-2's byte-level alphabet: every byte as a printable character, so byte-level BPE vocabularies
// are text (components.hpp).
#include "components.hpp"

#include "attn/text/utf8.hpp"

#include <array>

namespace attn::text {

namespace {

struct Alphabet {
  std::array<std::string, 256> chars;
  std::array<char32_t, 256> code;
  Alphabet() {
    // Printable Latin-1 stands for itself; the other bytes take U+0100 onwards in byte order.
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      code[b] = printable ? static_cast<char32_t>(b) : next++;
      append_utf8(chars[b], code[b]);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

} // namespace

const std::string& byte_char(unsigned char b) { return alphabet().chars[b]; }

int char_byte(char32_t c) {
  if (c < 256) {
    const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
    return printable ? static_cast<int>(c) : -1;
  }
  if (c >= 256 + 68) return -1; // 68 bytes are not printable
  const auto& code = alphabet().code;
  for (int b = 0; b < 256; ++b)
    if (code[b] == c) return b;
  return -1;
}

} // namespace attn::text
