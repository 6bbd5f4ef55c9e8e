// The tokenizers' regular expressions, through PCRE2 (Debian's libpcre2, JIT-compiled): UTF-8 with
// Unicode properties (\p{L}, \p{N}) and look-around, as the Oniguruma engine Hugging Face's
// tokenizers library uses reads them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn::text {

using Span = std::pair<std::size_t, std::size_t>; // [begin, end) in bytes

class Regex {
public:
  // `what` names the pattern in the error a bad one gives ("tokenizer.json: pre_tokenizer Split").
  Regex(std::string_view pattern, const std::string& what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // The non-overlapping matches in s (valid UTF-8), left to right; empty matches are skipped.
  void find_all(std::string_view s, std::vector<Span>& out) const;
  // Does the pattern match somewhere in s?
  bool search(std::string_view s) const;

private:
  void* code_; // pcre2_code_8
};

// Oniguruma's \s and \S are Unicode's White_Space (PCRE2's also take U+180E): the pattern with
// them written as that class.
std::string with_white_space_class(std::string_view pattern);

} // namespace attn::text
