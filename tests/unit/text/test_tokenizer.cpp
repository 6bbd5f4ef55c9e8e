// The tokenizers against Hugging Face's tokenizers library: every fixture of
// testdata/tokenizers (tests/golden/make_tokenizers.mjs) encodes the corpus to the same ids, with
// and without special tokens, and decodes them to the same text, with and without them; so does
// each one whose model's tables are read from the cache (table_cache.hpp) the second time.
#include "attn/core/error.hpp"
#include "attn/text/tokenizer.hpp"
#include "attn/text/utf8.hpp"

#include "helpers.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <simdjson.h>

#include <string>
#include <vector>

namespace {

using attn::text::Tokenizer;

std::vector<std::string> read_strings(simdjson::dom::element e) {
  std::vector<std::string> out;
  for (auto s : e.get_array()) out.emplace_back(std::string_view(s.get_string()));
  return out;
}

std::vector<std::vector<std::int64_t>> read_rows(simdjson::dom::element e) {
  std::vector<std::vector<std::int64_t>> out;
  for (auto row : e.get_array()) {
    out.emplace_back();
    for (auto id : row.get_array()) out.back().push_back(std::int64_t(id.get_int64()));
  }
  return out;
}

// The corpus text, shortened for a message.
std::string shown(const std::string& s) {
  std::string t = s.size() > 60 ? s.substr(0, 60) + "..." : s;
  return fmt::format("{:?}", t);
}

using Rows = std::vector<std::vector<std::int64_t>>;
using Strings = std::vector<std::string>;

void check_corpus(const Tokenizer& tok, const std::string& name, const Strings& corpus, const Rows& ids,
                  const Rows& plain, const Strings& text, const Strings& skip, const Strings& tail) {
  int bad = 0;
  for (std::size_t i = 0; i < corpus.size() && bad < 5; ++i) {
    const auto got = tok.encode(corpus[i], true);
    const auto got_plain = tok.encode(corpus[i], false);
    const std::vector<std::int64_t> g(got.begin(), got.end()), gp(got_plain.begin(), got_plain.end());
    if (g != ids[i] || gp != plain[i]) {
      ++bad;
      FAIL_CHECK(fmt::format("{} text {} {}: ids {} expected {} (without specials {} expected {})", name, i,
                             shown(corpus[i]), g, ids[i], gp, plain[i]));
      continue;
    }
    const std::vector<std::int64_t> cut(ids[i].begin() + (ids[i].empty() ? 0 : 1),
                                        ids[i].size() > 1 ? ids[i].end() - 1
                                                          : ids[i].begin() + (ids[i].empty() ? 0 : 1));
    const std::string d = tok.decode(ids[i], false), ds = tok.decode(ids[i], true), dt = tok.decode(cut, false);
    if (d != text[i] || ds != skip[i] || dt != tail[i]) {
      ++bad;
      FAIL_CHECK(fmt::format("{} text {} {}: decoded {:?} / {:?} / {:?}, expected {:?} / {:?} / {:?}", name, i,
                             shown(corpus[i]), d, ds, dt, text[i], skip[i], tail[i]));
    }
  }
}

// `file`: the tokenizer under test (default: the fixture NAME.json).
void check_fixture(const std::string& name, const std::string& file = "") {
  simdjson::dom::parser p1, p2;
  const auto corpus = read_strings(p1.load(std::string(ATTN_TESTDATA) + "/tokenizers/corpus.json"));
  const simdjson::dom::element expect = p2.load(std::string(ATTN_TESTDATA) + "/tokenizers/expect/" + name + ".json");
  const auto ids = read_rows(expect["ids"]), plain = read_rows(expect["ids_plain"]);
  const auto text = read_strings(expect["text"]), skip = read_strings(expect["text_skip"]),
             tail = read_strings(expect["text_tail"]);
  REQUIRE(ids.size() == corpus.size());
  const std::string path = std::string(ATTN_TOKENIZERS) + "/" + (file.empty() ? name + ".json" : file);
  test::TempDir cache;
  const Tokenizer parsed = Tokenizer::load(path, cache.path.string()); // and written to the cache
  const Tokenizer again = Tokenizer::load(path, cache.path.string());
  const bool cacheable = file.empty() && std::filesystem::file_size(path) >= (1 << 20) &&
                         std::string_view(name) != "t5"; // the big BPE models
  CHECK(again.from_cache() == cacheable);
  CHECK(!parsed.from_cache());
  for (const Tokenizer* t : {&parsed, &again})
    check_corpus(*t, name + (t->from_cache() ? " (cached)" : ""), corpus, ids, plain, text, skip, tail);
}

} // namespace

TEST_CASE("tokenizers: LLaMA 3 (byte-level BPE, ignore_merges) as Hugging Face's") { check_fixture("llama3"); }
TEST_CASE("tokenizers: Qwen3 (byte-level BPE, NFC) as Hugging Face's") { check_fixture("qwen3"); }
TEST_CASE("tokenizers: Gemma 3 (BPE with byte fallback, 6k added tokens) as Hugging Face's") {
  check_fixture("gemma3");
}
TEST_CASE("tokenizers: LLaMA 2 (BPE with byte fallback, Prepend) as Hugging Face's") { check_fixture("llama2"); }
TEST_CASE("tokenizers: GPT-2 (byte-level BPE) as Hugging Face's") { check_fixture("gpt2"); }
TEST_CASE("tokenizers: BART's (byte-level BPE, RobertaProcessing, a <mask> with lstrip) as Hugging Face's") {
  check_fixture("bart");
}
TEST_CASE("tokenizers: GPT-2's vocab.json and merges.txt as its tokenizer.json") { check_fixture("gpt2", "gpt2_pair"); }
TEST_CASE("tokenizers: the reverse model's WordLevel digits (no decoder: tokens joined by spaces) as Hugging Face's") {
  check_fixture("reverse");
}
TEST_CASE("tokenizers: BERT (WordPiece, BertNormalizer, lstrip and single_word tokens) as Hugging Face's") {
  check_fixture("bert");
}
TEST_CASE("tokenizers: Unigram with byte fallback (Metaspace, NFKC) as Hugging Face's") { check_fixture("unigram"); }
TEST_CASE("tokenizers: Unigram with fused unknowns as Hugging Face's") { check_fixture("unigram_unk"); }
TEST_CASE("tokenizers: T5's normalizer (Precompiled: sentencepiece's nmt_nfkc charsmap) as Hugging Face's") {
  check_fixture("t5");
}
TEST_CASE("tokenizers: WordLevel behind Whitespace, Digits, Punctuation, Split as Hugging Face's") {
  check_fixture("wordlevel");
}
TEST_CASE("tokenizers: BPE behind WhitespaceSplit, regex Splits, Metaspace first, Prepend as Hugging Face's") {
  check_fixture("pieces");
}
