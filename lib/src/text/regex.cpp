// Regular expressions through PCRE2 with its JIT (regex.hpp).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "attn/text/regex.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>
#include <pcre2.h>

namespace attn::text {

namespace {

constexpr std::string_view white_space_members =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// One match data block and one JIT stack per thread, reused by every match.
struct ThreadState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~ThreadState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};
ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

} // namespace

std::string with_white_space_class(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        out += in_class ? std::string(white_space_members) : fmt::format("[{}]", white_space_members);
      } else if (e == 'S' && !in_class) {
        out += fmt::format("[^{}]", white_space_members);
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // a ']' or '^]' right after the opening bracket is a member
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

Regex::Regex(std::string_view pattern, const std::string& what) {
  const std::string p = with_white_space_class(pattern);
  int code = 0;
  PCRE2_SIZE at = 0;
  pcre2_code* re =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP, &code, &at, nullptr);
  if (!re)
    throw Error(fmt::format("{}: the regular expression {:?} does not compile: {} (at {})", what, std::string(pattern),
                            pcre2_message(code), at));
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); // without the JIT (an error here) PCRE2 interprets it
  code_ = re;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view s, std::vector<Span>& out) const {
  ThreadState& ts = thread_state();
  auto* re = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  std::size_t start = 0;
  while (start <= s.size()) {
    const int rc = pcre2_match(re, subject, s.size(), start, PCRE2_NO_UTF_CHECK, ts.data, ts.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) throw Error(fmt::format("regular expression match failed: {}", pcre2_message(rc)));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ts.data);
    const std::size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      start = e;
    } else { // an empty match: move on one character
      if (b >= s.size()) return;
      start = b + 1;
      while (start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) ++start;
    }
  }
}

bool Regex::search(std::string_view s) const {
  ThreadState& ts = thread_state();
  const int rc = pcre2_match(static_cast<pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0,
                             PCRE2_NO_UTF_CHECK, ts.data, ts.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) throw Error(fmt::format("regular expression match failed: {}", pcre2_message(rc)));
  return true;
}

} // namespace attn::text
