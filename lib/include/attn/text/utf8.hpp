// UTF-8 as the tokenizers see it: validation with the offending byte's offset, code points one at a
// time, and the lossy conversion of Rust's String::from_utf8_lossy (what Hugging Face's decoders
// apply to byte sequences that are not text).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace attn::text {

constexpr std::size_t npos = std::string_view::npos;

// The 0-based byte offset where s stops being UTF-8 (RFC 3629: no overlong forms, no surrogates,
// nothing past U+10FFFF, no truncated sequence), or npos when all of it is.
std::size_t invalid_utf8_offset(std::string_view s);
// An Error "WHAT: invalid UTF-8 at byte OFFSET (0xNN ...)" unless s is UTF-8.
void check_utf8(std::string_view s, const std::string& what);

// The code point starting at s[i] of valid UTF-8; i moves past it.
char32_t next_char(std::string_view s, std::size_t& i);
// The byte length of the UTF-8 sequence a lead byte starts (1 for a stray byte).
inline std::size_t char_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
}
void append_utf8(std::string& out, char32_t c);

// Bytes as text, each maximal invalid subpart replaced by U+FFFD (Unicode's recommended practice,
// as Rust's String::from_utf8_lossy does it).
std::string utf8_lossy(std::string_view bytes);

} // namespace attn::text
