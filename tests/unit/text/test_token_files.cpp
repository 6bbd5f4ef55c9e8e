// Token files and text inputs: sequences cut at lines (CRLF, a final newline), tokenize's datasets
// written and read back (ids, lengths, pieces as strings), ids checked against the vocabulary,
// streamed text that waits for whole characters, a model directory's own tokenizer.
#include "helpers.hpp"

#include "attn/core/error.hpp"
#include "attn/text/text_stream.hpp"
#include "attn/text/token_files.hpp"
#include "attn/text/tokenizer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>

using attn::text::Tokenizer;

namespace {
const Tokenizer& llama2() {
  static const Tokenizer tok = Tokenizer::load(std::string(ATTN_TOKENIZERS) + "/llama2.json");
  return tok;
}
} // namespace

TEST_CASE("token files: sequences from lines") {
  using attn::text::split_sequences;
  CHECK(split_sequences("a\r\nb\n\nc", true) == std::vector<std::string_view>{"a", "b", "", "c"});
  CHECK(split_sequences("a\n", true) == std::vector<std::string_view>{"a"});
  CHECK(split_sequences("a\r", true) == std::vector<std::string_view>{"a\r"}); // a \r alone stays
  CHECK(split_sequences("a\nb", false) == std::vector<std::string_view>{"a\nb"});
  CHECK(split_sequences("", true).empty());
}

TEST_CASE("token files: written, read back, checked") {
  test::TempDir dir;
  const auto rows = attn::text::encode_all(llama2(), {"Hello world", "", "é"}, true, "test");
  {
    attn::h5::OutputFile out({dir.file("t.h5"), ""}, "ids", {});
    attn::text::write_token_file(out, llama2(), rows);
    out.commit();
  }
  attn::h5::InputFiles in;
  const attn::h5::Strings pieces = in.read_strings({dir.file("t.h5"), "pieces"});
  REQUIRE(rows.length(0) == 3); // <s> ▁Hello ▁world
  const auto n = static_cast<std::size_t>(rows.longest());
  REQUIRE(pieces.shape == attn::Shape{3, static_cast<std::int64_t>(n)});
  CHECK(pieces.values[0] == "<s>");
  CHECK(pieces.values[1] == "\xE2\x96\x81Hello");
  CHECK(pieces.values[n] == "<s>");
  CHECK(pieces.values[n + 1].empty()); // past the length
  const auto ids = in.open({dir.file("t.h5"), "ids"});
  const auto lengths = in.open({dir.file("t.h5"), "lengths"});
  const attn::text::TokenRows back = attn::text::read_token_rows(ids, &lengths, llama2());
  REQUIRE(back.rows.size() == 3);
  for (std::int64_t r = 0; r < 3; ++r)
    CHECK(back.rows[r] == std::vector<std::int64_t>(rows.row(r), rows.row(r) + rows.length(r)));
  CHECK(llama2().decode(back.rows[0], true) == "Hello world");
  CHECK_THROWS_WITH_AS(in.read_strings({dir.file("t.h5"), "ids"}),
                       doctest::Contains("holds numeric data; expected variable-length strings"), attn::Error);
  CHECK_THROWS_WITH_AS(attn::text::encode_all(llama2(), {"ok", "a\xC3"}, true, "in.txt"),
                       "in.txt: sequence 1: invalid UTF-8 at byte 1 (0xC3)", attn::Error);
}

TEST_CASE("token files: a file read a block of lines at a time, as the whole of it") {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 200000; ++i)
    text += (i % 7 ? "line number " + std::to_string(i) : std::string()) + (i % 3 ? "\r\n" : "\n");
  text += "last, without a newline";
  { std::ofstream(dir.file("lines.txt"), std::ios::binary) << text; }
  const attn::text::Rows rows = attn::text::encode_file(llama2(), dir.file("lines.txt"), true, true);
  const auto seqs = attn::text::split_sequences(text, true);
  REQUIRE(rows.size() == static_cast<std::int64_t>(seqs.size())); // more than one 8 MiB block
  const attn::text::Rows whole = attn::text::encode_all(llama2(), seqs, true, "whole");
  CHECK(rows.ids == whole.ids);
  CHECK(rows.offsets == whole.offsets);
  { std::ofstream(dir.file("bad.txt"), std::ios::binary) << text << "\nok\nbad \xFF\n"; }
  const std::string expected = fmt::format("sequence {}: invalid UTF-8 at byte 4", seqs.size() + 1);
  CHECK_THROWS_WITH_AS(attn::text::encode_file(llama2(), dir.file("bad.txt"), true, true),
                       doctest::Contains(expected.c_str()), attn::Error);
  { std::ofstream(dir.file("empty.txt")); }
  CHECK_THROWS_WITH_AS(attn::text::encode_file(llama2(), dir.file("empty.txt"), true, true),
                       doctest::Contains("no text to tokenize"), attn::Error);
}

TEST_CASE("token files: streamed text waits for whole characters") {
  char* buf = nullptr;
  std::size_t size = 0;
  std::FILE* f = open_memstream(&buf, &size);
  REQUIRE(f);
  {
    attn::text::TextStream s(llama2(), f);
    const auto hello = llama2().encode("Hi", false);
    for (auto id : hello) s.push(id);
    std::fflush(f);
    CHECK(std::string(buf, size) == "Hi");
    REQUIRE(llama2().token(3 + 0xC3) == "<0xC3>");
    s.push(3 + 0xC3);
    std::fflush(f);
    CHECK(std::string(buf, size) == "Hi"); // half of é: nothing yet
    s.push(3 + 0xA9);                      // <0xA9>
    std::fflush(f);
    CHECK(std::string(buf, size) == "Hi\xC3\xA9");
    s.finish();
  }
  std::fclose(f);
  CHECK(std::string(buf, size) == "Hi\xC3\xA9\n");
  std::free(buf);
}

TEST_CASE("token files: a model directory's own tokenizer.json") {
  test::TempDir dir;
  CHECK(attn::text::choose_tokenizer("given.json", dir.path.string()) == "given.json");
  CHECK(attn::text::choose_tokenizer("", dir.path.string()).empty()); // no config.json: not a model directory
  { std::ofstream(dir.file("config.json")) << "{}"; }
  { std::ofstream(dir.file("model.safetensors")) << ""; }
  CHECK(attn::text::choose_tokenizer("", dir.path.string()).empty()); // no tokenizer.json
  { std::ofstream(dir.file("tokenizer.json")) << "{}"; }
  CHECK(attn::text::choose_tokenizer("", dir.path.string()) == dir.file("tokenizer.json"));
  CHECK(attn::text::choose_tokenizer("", test::testdata("encoder.h5")).empty());
}
