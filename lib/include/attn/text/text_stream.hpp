// Generated tokens shown as text while they are generated: after each token, the text of all the
// tokens so far is decoded and what is new in it is written, held back while it ends in an
// incomplete character (the decoders' U+FFFD), so every character appears once, whole.
#pragma once

#include "attn/text/tokenizer.hpp"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace attn::text {

class TextStream {
public:
  TextStream(const Tokenizer& tok, std::FILE* out) : tok_(tok), out_(out) {}
  // One more token: writes the text it completes and flushes.
  void push(std::int64_t id);
  // Writes what is left, then a newline.
  void finish();

private:
  void write_from(const std::string& text, std::size_t end);
  const Tokenizer& tok_;
  std::FILE* out_;
  std::vector<std::int64_t> ids_;
  std::size_t written_ = 0; // bytes of the text written so far
};

} // namespace attn::text
