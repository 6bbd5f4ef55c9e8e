// The cache of compiled tokenizer tables (lib/src/text/table_cache.cpp), through Tokenizer::load:
// written once and read in place after; ignored (the JSON read, the file written again) when damaged,
// truncated or stale; no file at all where the directory cannot be written, for small files, or with
// no directory. The ids of every tokenizer from the cache against Hugging Face's: test_tokenizer.cpp.
#include "attn/core/error.hpp"
#include "attn/text/tokenizer.hpp"

#include "helpers.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using attn::text::Tokenizer;

namespace {

const std::string llama3 = std::string(ATTN_TOKENIZERS) + "/llama3.json";

// The cache files under `dir`.
std::vector<fs::path> cache_files(const test::TempDir& dir) {
  std::vector<fs::path> out;
  if (fs::exists(dir.path / "tokenizers"))
    for (const auto& e : fs::directory_iterator(dir.path / "tokenizers")) out.push_back(e.path());
  return out;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The ids of a few texts that use the vocabulary, the merges and the added tokens.
std::vector<std::vector<std::int32_t>> sample(const Tokenizer& t) {
  std::vector<std::vector<std::int32_t>> out;
  for (const char* s : {"Hello world", "tokenization of unbelievable things", "<|begin_of_text|>naïve café 12345"})
    out.push_back(t.encode(s, true));
  return out;
}

// A copy of llama3.json in `dir` whose change time is in the past by the time it is read (a file
// changed in the current tick of the coarse clock is not cached: table_cache.hpp).
std::string settled_copy(const test::TempDir& dir, const std::string& text) {
  const std::string path = dir.file("tokenizer.json");
  std::ofstream(path, std::ios::binary) << text;
  std::this_thread::sleep_for(std::chrono::milliseconds(30)); // past the coarse clock's tick
  return path;
}

} // namespace

TEST_CASE("tokenizer cache: written by the first load, read in place by the next, the same ids") {
  test::TempDir cache;
  const Tokenizer parsed = Tokenizer::load(llama3, cache.path.string());
  CHECK(!parsed.from_cache());
  REQUIRE(cache_files(cache).size() == 1);
  const Tokenizer cached = Tokenizer::load(llama3, cache.path.string());
  CHECK(cached.from_cache());
  CHECK(sample(cached) == sample(parsed));
  CHECK(cached.token(9906) == parsed.token(9906));
  CHECK(cached.decode(std::vector<std::int64_t>{9906, 1917}, false) == "Hello world");
  CHECK(cache_files(cache).size() == 1);
}

TEST_CASE("tokenizer cache: a damaged, truncated or foreign cache file is read as none and written again") {
  test::TempDir cache;
  const auto expected = sample(Tokenizer::load(llama3, cache.path.string()));
  REQUIRE(cache_files(cache).size() == 1);
  const fs::path file = cache_files(cache)[0];
  const std::string good = bytes_of(file);
  // one byte changed in each region of the file: the header, the small JSON, the tables
  for (const std::size_t at : {std::size_t{9}, std::size_t{200}, good.size() / 3, good.size() / 2, good.size() - 100}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bad;
    const Tokenizer t = Tokenizer::load(llama3, cache.path.string());
    CHECK_MESSAGE(!t.from_cache(), "byte ", at, " changed");
    CHECK(sample(t) == expected);
    CHECK(bytes_of(file) == good); // written again
  }
  fs::resize_file(file, good.size() / 2);
  const Tokenizer t = Tokenizer::load(llama3, cache.path.string());
  CHECK(!t.from_cache());
  CHECK(sample(t) == expected);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << "not a cache file";
  CHECK(!Tokenizer::load(llama3, cache.path.string()).from_cache());
  CHECK(Tokenizer::load(llama3, cache.path.string()).from_cache());
}

TEST_CASE("tokenizer cache: a tokenizer.json changed in place is read again, not served from its old tables") {
  test::TempDir cache, model;
  const std::string text = bytes_of(llama3);
  const std::string path = settled_copy(model, text);
  const auto before = sample(Tokenizer::load(path, cache.path.string()));
  REQUIRE(Tokenizer::load(path, cache.path.string()).from_cache());
  // the same size and inode, two tokens' ids swapped: "Hello" 9906 <-> "vt" 9907
  const std::size_t hello = text.find("\"Hello\": 9906,"), vt = text.find("\"vt\": 9907,");
  REQUIRE(hello != std::string::npos);
  REQUIRE(vt != std::string::npos);
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(hello + 12));
    f.put('7');
    f.seekp(static_cast<std::streamoff>(vt + 9));
    f.put('6');
  }
  const Tokenizer changed = Tokenizer::load(path, cache.path.string()); // changed in this tick: not cached
  CHECK(!changed.from_cache());
  CHECK(changed.token(9906) == std::optional<std::string_view>("vt"));
  CHECK(changed.encode("Hello", false) == std::vector<std::int32_t>{9907});
  CHECK(sample(changed) != before);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  Tokenizer::load(path, cache.path.string()); // settled now: cached again
  const Tokenizer again = Tokenizer::load(path, cache.path.string());
  CHECK(again.from_cache());
  CHECK(again.token(9906) == std::optional<std::string_view>("vt"));
  CHECK(sample(again) == sample(changed));
  CHECK(cache_files(cache).size() == 1); // one cache file per tokenizer.json: replaced, not added
}

TEST_CASE("tokenizer cache: none without a directory, for small files, or where the directory cannot be written") {
  test::TempDir cache;
  CHECK(!Tokenizer::load(llama3, "").from_cache());
  CHECK(!Tokenizer::load(llama3, "").from_cache());
  Tokenizer::load(std::string(ATTN_TOKENIZERS) + "/bert.json", cache.path.string()); // 0.5 MB
  CHECK(cache_files(cache).empty());
  const fs::path blocked = cache.path / "file";
  std::ofstream(blocked) << "a file where the directory would be";
  const Tokenizer t = Tokenizer::load(llama3, blocked.string());
  CHECK(!t.from_cache());
  CHECK(sample(t) == sample(Tokenizer::load(llama3, "")));
}
