// The character properties and normal forms the tokenizers use, from utf8proc (Debian's
// libutf8proc): general categories, Unicode's White_Space, Rust's to_lowercase, NFC/NFD/NFKC/NFKD.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace attn::text {

// Unicode's White_Space property (Rust's char::is_whitespace).
bool is_white_space(char32_t c);
// General category P* (Rust's unicode_categories is_punctuation).
bool is_punctuation(char32_t c);
// Rust's char::is_ascii_punctuation: ! to /, : to @, [ to `, { to ~.
inline bool is_ascii_punctuation(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}
// General category N* (Nd, Nl, No): Rust's char::is_numeric.
bool is_numeric(char32_t c);
// General category M* (Mn, Mc, Me), and Mn alone.
bool is_mark(char32_t c);
bool is_nonspacing_mark(char32_t c);
// General category C* without the surrogates' Cs (Cc, Cf, Cn, Co): BERT's "control".
bool is_other(char32_t c);
// CJK ideographs as BERT pads them with spaces (the CJK Unified Ideographs blocks and extensions
// A to E, and the compatibility ideographs).
bool is_cjk(char32_t c);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalize(std::string_view s, NormalForm form); // s: valid UTF-8
// Each character's full lowercase mapping, as Rust's char::to_lowercase (no context: a final
// sigma lowercases as any sigma).
std::string lowercase(std::string_view s);

// s (valid UTF-8) cut into extended grapheme clusters (UAX #29, utf8proc's rules), in order.
std::vector<std::string_view> graphemes(std::string_view s);

} // namespace attn::text
