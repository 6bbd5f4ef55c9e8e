// Patterns of Split and Replace: a literal string or a regular expression (components.hpp).
#include "components.hpp"

namespace attn::text {

void literal_matches(std::string_view s, std::string_view literal, std::vector<Span>& out) {
  if (literal.empty()) return;
  for (std::size_t at = s.find(literal); at != std::string_view::npos; at = s.find(literal, at + literal.size()))
    out.emplace_back(at, at + literal.size());
}

Pattern::Pattern(const Node& pattern) {
  if (auto s = pattern.get("String"))
    literal_ = std::string(s->str());
  else if (auto r = pattern.get("Regex"))
    regex_ = std::make_unique<Regex>(r->str(), r->where);
  else
    pattern.fail("is neither {\"String\": ...} nor {\"Regex\": ...}");
}

void Pattern::find_all(std::string_view s, std::vector<Span>& out) const {
  if (regex_)
    regex_->find_all(s, out);
  else
    literal_matches(s, literal_, out);
}

std::string Pattern::replace_all(const std::string& s, std::string_view content) const {
  std::vector<Span> m;
  find_all(s, m);
  if (m.empty()) return s;
  std::string out;
  std::size_t prev = 0;
  for (const auto& [b, e] : m) {
    out.append(s, prev, b - prev);
    out += content;
    prev = e;
  }
  out.append(s, prev, std::string::npos);
  return out;
}

} // namespace attn::text
