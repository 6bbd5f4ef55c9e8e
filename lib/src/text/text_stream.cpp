// Streaming generated text (text_stream.hpp).
#include "attn/text/text_stream.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

namespace attn::text {

namespace {
constexpr std::string_view replacement = "\xEF\xBF\xBD";
} // namespace

void TextStream::write_from(const std::string& text, std::size_t end) {
  if (end <= written_) return;
  const std::size_t n = end - written_;
  if (std::fwrite(text.data() + written_, 1, n, out_) != n || std::fflush(out_) != 0)
    throw Error("standard output: write failed");
  written_ = end;
}

void TextStream::push(std::int64_t id) {
  ids_.push_back(id);
  const std::string text = tok_.decode(ids_, false);
  std::size_t end = text.size();
  while (end >= replacement.size() && std::string_view(text).substr(end - replacement.size()) == replacement)
    end -= replacement.size(); // bytes of a character still to come
  write_from(text, end);
}

void TextStream::finish() {
  const std::string text = tok_.decode(ids_, false);
  write_from(text, text.size());
  if (std::fputc('\n', out_) == EOF || std::fflush(out_) != 0) throw Error("standard output: write failed");
}

} // namespace attn::text
