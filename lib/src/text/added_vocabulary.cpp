// Finding added tokens in text (added_vocabulary.hpp).
#include "added_vocabulary.hpp"

#include "attn/text/unicode.hpp"
#include "attn/text/utf8.hpp"

#include <algorithm>

namespace attn::text {

namespace {

constexpr std::string_view rust_word = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";

// The byte offset where the run of whitespace ending s starts.
std::size_t trailing_space_start(std::string_view s) {
  std::size_t e = s.size();
  while (e > 0) {
    std::size_t start = e - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    std::size_t i = start;
    if (!is_white_space(next_char(s, i))) break;
    e = start;
  }
  return e;
}

// The byte length of the run of whitespace starting s.
std::size_t leading_space_length(std::string_view s) {
  std::size_t b = 0;
  while (b < s.size()) {
    std::size_t i = b;
    if (!is_white_space(next_char(s, i))) break;
    b = i;
  }
  return b;
}

} // namespace

AddedTokenSet::AddedTokenSet()
    : nodes_(1), word_start_(fmt::format(R"(\A{})", rust_word), "added tokens"),
      word_end_(fmt::format(R"({}\z)", rust_word), "added tokens") {}

std::int32_t AddedTokenSet::child(std::int32_t node, unsigned char b) const {
  const auto& next = nodes_[node].next;
  auto it = std::lower_bound(next.begin(), next.end(), b, [](const auto& p, unsigned char x) { return p.first < x; });
  return it != next.end() && it->first == b ? it->second : -1;
}

void AddedTokenSet::add(std::string_view pattern, const AddedToken* token) {
  if (pattern.empty()) return;
  std::int32_t node = 0;
  for (char ch : pattern) {
    const auto b = static_cast<unsigned char>(ch);
    std::int32_t c = child(node, b);
    if (c < 0) {
      c = static_cast<std::int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& next = nodes_[node].next;
      next.insert(
          std::lower_bound(next.begin(), next.end(), b, [](const auto& p, unsigned char x) { return p.first < x; }),
          {b, c});
    }
    node = c;
  }
  if (!nodes_[node].token) nodes_[node].token = token;
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
}

std::vector<Match> AddedTokenSet::find(std::string_view s) const {
  std::vector<Match> out;
  if (s.empty()) {
    out.push_back({-1, 0, 0});
    return out;
  }
  std::size_t start_offset = 0; // the end of the last part written
  std::size_t pos = 0;          // where the search for the next match starts
  while (pos < s.size()) {
    // leftmost start with a match, its longest match
    std::size_t begin = pos, end = 0;
    const AddedToken* token = nullptr;
    for (; begin < s.size(); ++begin) {
      if (!first_byte_[static_cast<unsigned char>(s[begin])]) continue;
      std::int32_t node = 0;
      for (std::size_t k = begin; k < s.size(); ++k) {
        node = child(node, static_cast<unsigned char>(s[k]));
        if (node < 0) break;
        if (nodes_[node].token) {
          token = nodes_[node].token;
          end = k + 1;
        }
      }
      if (token) break;
    }
    if (!token) break;
    pos = end;
    std::size_t b = begin, e = end;
    if (token->single_word) {
      std::size_t last = b - (b > 0); // the character before the match, and the one after
      while (last > 0 && (static_cast<unsigned char>(s[last]) & 0xC0) == 0x80) --last;
      const bool start_space = b == 0 || !word_end_.search(s.substr(last, b - last));
      const bool stop_space =
          e == s.size() || !word_start_.search(s.substr(e, char_length(static_cast<unsigned char>(s[e]))));
      if (!start_space || !stop_space) continue;
    }
    if (token->lstrip) b = std::max(trailing_space_start(s.substr(0, b)), start_offset);
    if (token->rstrip) e += leading_space_length(s.substr(e));
    if (start_offset < b) out.push_back({-1, start_offset, b});
    out.push_back({token->id, b, e});
    start_offset = e;
  }
  if (start_offset != s.size()) out.push_back({-1, start_offset, s.size()});
  return out;
}

} // namespace attn::text
