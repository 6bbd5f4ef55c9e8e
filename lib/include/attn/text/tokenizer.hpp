// A Hugging Face tokenizer read from its tokenizer.json (or GPT-2's vocab.json and merges.txt):
// text to ids and ids to text with the same results as the tokenizers library (CONTRACT.md
// section 6.2). The pipeline: added tokens found in the raw text, the rest normalized (and searched
// again for normalized added tokens), pre-tokenized into words, each word through the model (BPE,
// WordPiece, Unigram, WordLevel), then the post-processor's special tokens; decoding maps ids back
// to token strings and runs the decoder.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace simdjson {
class padded_string_view;
}

namespace attn::text {

class Tokenizer {
public:
  // `path`: a tokenizer.json, or a directory holding one (a model directory), or holding GPT-2's
  // vocab.json and merges.txt. A missing or damaged file, or a component the toolkit does not
  // read, is an Error naming the file and the component. A BPE model's tables from a tokenizer.json
  // of 1 MiB or more are kept in the cache directory `cache_dir` (the environment's by default:
  // ATTN_CACHE_DIR, XDG_CACHE_HOME, HOME; "" for none) and read from there the next time.
  static Tokenizer load(const std::string& path);
  static Tokenizer load(const std::string& path, const std::string& cache_dir);
  // The same from the JSON text; `label` names it in errors.
  static Tokenizer from_json(std::string_view json, const std::string& label);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Per-thread state of encode() (a cache of words); one per thread.
  class Cache;
  struct CacheDeleter {
    void operator()(Cache* c) const;
  };
  using CachePtr = std::unique_ptr<Cache, CacheDeleter>;
  CachePtr new_cache() const;

  // The ids of `text` (valid UTF-8: check_utf8 first), as encode(text, add_special_tokens).
  std::vector<std::int32_t> encode(std::string_view text, bool add_special, Cache& cache) const;
  std::vector<std::int32_t> encode(std::string_view text, bool add_special) const;
  // The text of `ids` (each one has_id), as decode(ids, skip_special_tokens).
  std::string decode(std::span<const std::int64_t> ids, bool skip_special) const;
  // The token with this id as the vocabulary spells it (added tokens included), or nullopt.
  std::optional<std::string_view> token(std::int64_t id) const;
  bool has_id(std::int64_t id) const { return token(id).has_value(); }
  bool is_special(std::int64_t id) const;
  // tokenizer.json's padding.pad_id, else 0.
  std::int64_t pad_id() const;
  // Its tokens spell bytes in GPT-2's byte-level alphabet (a ByteLevel pre-tokenizer or decoder).
  bool byte_level() const;
  // The file it was read from.
  const std::string& label() const;
  // Its model's tables are viewed in a cache file (load).
  bool from_cache() const;

private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  struct Cached;
  // `cached`: the cache file whose tables the model views (its small JSON is `text`); `small_json`:
  // where to put the JSON a cache file keeps.
  static Tokenizer parse(simdjson::padded_string_view text, const std::string& label, Cached* cached,
                         std::string* small_json);
  static Tokenizer load_json(const std::string& file, const std::string& cache_dir);
  std::unique_ptr<Impl> impl_;
};

// The file `path` names: a tokenizer.json as it is, a directory's tokenizer.json; "" when the
// directory has none (then vocab.json and merges.txt are looked for).
std::string tokenizer_file(const std::string& path);

// A token as text for a label: byte-level characters (GPT-2's Ġ, Ċ) as the bytes they stand for,
// SentencePiece's ▁ as a space, "<0x0A>" byte tokens as their byte; bytes that are not UTF-8 by
// themselves shown as \xNN.
std::string display_piece(std::string_view piece, bool byte_level);

} // namespace attn::text
