// GPT-2's byte-level alphabet: every byte as a printable character, so byte-level BPE vocabularies
// are text (components.hpp).
#include "components.hpp"

#include "attn/text/utf8.hpp"

#include <array>

namespace attn::text {

namespace {

struct Alphabet {
  std::array<std::string, 256> chars;
  std::array<int, 256 + 68> byte_of; // the byte each character U+0000..U+0143 stands for, or -1
  Alphabet() {
    // Printable Latin-1 stands for itself; the other bytes take U+0100 onwards in byte order.
    byte_of.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t code = printable ? static_cast<char32_t>(b) : next++;
      byte_of[code] = b;
      append_utf8(chars[b], code);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

} // namespace

const std::string& byte_char(unsigned char b) { return alphabet().chars[b]; }

int char_byte(char32_t c) { return c < 256 + 68 ? alphabet().byte_of[c] : -1; }

} // namespace attn::text
