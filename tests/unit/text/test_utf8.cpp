// UTF-8 as the tokenizers see it: invalid sequences found at their first byte, the lossy
// conversion's replacement of maximal invalid subparts (Rust's String::from_utf8_lossy).
#include "attn/core/error.hpp"
#include "attn/text/utf8.hpp"

#include <doctest/doctest.h>

using namespace attn::text;

TEST_CASE("utf8: the first invalid byte, RFC 3629's rules") {
  CHECK(invalid_utf8_offset("") == npos);
  CHECK(invalid_utf8_offset("plain ascii, long enough for the 8-byte path") == npos);
  CHECK(invalid_utf8_offset("h\xC3\xA9llo \xF0\x9F\x98\x80") == npos);
  CHECK(invalid_utf8_offset("ab\xC3(") == 2);           // a lead byte without its continuation
  CHECK(invalid_utf8_offset("abc\xC0\xAF") == 3);       // overlong
  CHECK(invalid_utf8_offset("\xED\xA0\x80") == 0);      // a surrogate
  CHECK(invalid_utf8_offset("x\xF4\x90\x80\x80") == 1); // past U+10FFFF
  CHECK(invalid_utf8_offset("0123456789\x80") == 10);   // a stray continuation after the fast path
  CHECK(invalid_utf8_offset("\xE2\x82") == 0);          // truncated at the end
  CHECK_THROWS_WITH_AS(check_utf8("ok\xFF", "input: sequence 2"), "input: sequence 2: invalid UTF-8 at byte 2 (0xFF)",
                       attn::Error);
}

TEST_CASE("utf8: lossy conversion replaces each maximal invalid subpart once") {
  CHECK(utf8_lossy("abc") == "abc");
  CHECK(utf8_lossy("a\xFF"
                   "b") == "a\xEF\xBF\xBD"
                           "b");
  CHECK(utf8_lossy("\xE2\x82") == "\xEF\xBF\xBD");                             // one subpart
  CHECK(utf8_lossy("\xE2\x82(") == "\xEF\xBF\xBD(");                           // then a valid byte
  CHECK(utf8_lossy("\xF0\x80\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); // F0 80: not a prefix
  CHECK(utf8_lossy("\xC3\xA9\xC3") == "\xC3\xA9\xEF\xBF\xBD");
}

TEST_CASE("utf8: code points") {
  std::string s;
  for (char32_t c : {U'a', U'\u00E9', U'\u20AC', U'\U0001F600'}) append_utf8(s, c);
  std::size_t i = 0;
  CHECK(next_char(s, i) == U'a');
  CHECK(next_char(s, i) == U'\u00E9');
  CHECK(next_char(s, i) == U'\u20AC');
  CHECK(next_char(s, i) == U'\U0001F600');
  CHECK(i == s.size());
}
