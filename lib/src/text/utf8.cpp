// UTF-8 validation, decoding and lossy conversion (utf8.hpp).
#include "attn/text/utf8.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

namespace attn::text {

namespace {

// The length of the valid sequence at s[i], or 0 when the bytes there are not one; `bad` gets the
// number of bytes forming the maximal invalid subpart (at least 1) in that case.
std::size_t valid_sequence(std::string_view s, std::size_t i, std::size_t& bad) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  bad = 1;
  if (c < 0x80) return 1;
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xBF; // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F; // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (std::size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return 0;
    const unsigned char x = b(k);
    const bool ok = k == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
    if (!ok) return 0;
    bad = k + 1;
  }
  return len;
}

} // namespace

std::size_t invalid_utf8_offset(std::string_view s) {
  std::size_t i = 0, bad;
  while (i < s.size()) {
    // ASCII eight bytes at a time
    while (i + 8 <= s.size()) {
      std::uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const std::size_t len = valid_sequence(s, i, bad);
    if (len == 0) return i;
    i += len;
  }
  return npos;
}

void check_utf8(std::string_view s, const std::string& what) {
  const std::size_t at = invalid_utf8_offset(s);
  if (at == npos) return;
  std::string bytes;
  for (std::size_t k = at; k < s.size() && k < at + 4; ++k)
    bytes += fmt::format("{}0x{:02X}", bytes.empty() ? "" : " ", static_cast<unsigned char>(s[k]));
  throw Error(fmt::format("{}: invalid UTF-8 at byte {} ({})", what, at, bytes));
}

char32_t next_char(std::string_view s, std::size_t& i) {
  const auto b = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k])); };
  const char32_t c = b(0);
  if (c < 0x80) {
    i += 1;
    return c;
  }
  if (c < 0xE0) {
    const char32_t r = ((c & 0x1F) << 6) | (b(1) & 0x3F);
    i += 2;
    return r;
  }
  if (c < 0xF0) {
    const char32_t r = ((c & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    i += 3;
    return r;
  }
  const char32_t r = ((c & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  i += 4;
  return r;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0, bad;
  while (i < bytes.size()) {
    const std::size_t len = valid_sequence(bytes, i, bad);
    if (len) {
      out.append(bytes.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

} // namespace attn::text
