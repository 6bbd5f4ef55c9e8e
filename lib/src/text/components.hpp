// The parts of a Hugging Face tokenizer pipeline, as tokenizer.json names them: normalizers,
// pre-tokenizers, the model (BPE, WordPiece, Unigram, WordLevel), post-processors and decoders,
// each built from its JSON object by a make_* function of its own file. Private to the library.
#pragma once

#include "table_cache.hpp"

#include "attn/core/error.hpp"
#include "attn/text/regex.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attn::text {

// A JSON value of tokenizer.json and where it is ("tokenizer.json: pre_tokenizer.pretokenizers[1]"),
// so every complaint names the file and the component.
struct Node {
  simdjson::dom::element value;
  std::string where;

  [[noreturn]] void fail(const std::string& what) const { throw Error(fmt::format("{}: {}", where, what)); }
  bool is_null() const { return value.is_null(); }
  // The member `key`, or nullopt when it is absent or null.
  std::optional<Node> get(std::string_view key) const;
  Node at(std::string_view key) const; // the member, required
  std::vector<Node> items() const;     // an array's elements
  std::string_view str() const;
  std::int64_t integer() const;
  double number() const;
  bool boolean() const;
  std::string_view str(std::string_view key) const { return at(key).str(); }
  std::string str_or(std::string_view key, std::string_view fallback) const;
  bool bool_or(std::string_view key, bool fallback) const;
  std::int64_t int_or(std::string_view key, std::int64_t fallback) const;
  std::string type() const { return std::string(str("type")); }
  [[noreturn]] void unsupported(std::string_view family) const {
    fail(fmt::format("unsupported {} {:?} (the toolkit reads the types CONTRACT.md section 6.2 and tokenize(1) list)",
                     family, type()));
  }
};

// A piece of the input on its way through the pipeline. `zero_span`: how many of its first bytes
// stand for the original text's first character (what a normalizer made of it, and what was
// prepended to it), 0 when the piece does not start there; Metaspace's prepend_scheme "first" asks
// whether it does (Hugging Face: offsets_original().0 == 0).
struct Split {
  std::string text;
  std::size_t zero_span;
  bool at_start() const { return zero_span > 0; }
};

class Normalizer {
public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};
std::unique_ptr<Normalizer> make_normalizer(const Node& n);
// The "Precompiled" normalizer (precompiled.cpp): sentencepiece's charsmap.
std::unique_ptr<Normalizer> make_precompiled(const Node& n);

class PreTokenizer {
public:
  virtual ~PreTokenizer() = default;
  // Replaces the pieces by their splits (empty pieces are dropped by the caller).
  virtual void pre_tokenize(std::vector<Split>& pieces) const = 0;
};
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Node& n);

// Per-thread state of a model's encoding (BPE's cache of words).
struct ModelCache {
  std::unordered_map<std::string, std::vector<std::int32_t>> words;
};

class Model {
public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized word (non-empty, valid UTF-8).
  virtual void tokenize(std::string_view word, std::vector<std::int32_t>& ids, ModelCache& cache) const = 0;
  virtual std::int32_t token_to_id(std::string_view token) const = 0; // -1 when absent
  // The token with this id, or nullopt (ids may have holes).
  virtual std::optional<std::string_view> id_to_token(std::int32_t id) const = 0;
  virtual std::size_t vocab_size() const = 0; // the number of tokens (HF's get_vocab_size)
  virtual std::int32_t id_limit() const = 0;  // one past the largest id
  // Its tables as a cache file's sections (table_cache.hpp), or false when it keeps none there.
  virtual bool save_tables(TableWriter&) const { return false; }
};
// The large parts of a model's JSON, read with simdjson's On-Demand parser straight from the text
// (model_json.cpp): views into the file's text, or into `unescaped` for strings with escapes.
struct ModelData {
  std::vector<std::pair<std::string_view, std::int32_t>> vocab; // {"token": id, ...}
  std::vector<std::pair<std::string_view, double>> pieces;      // Unigram's [["piece", score], ...]
  std::vector<std::pair<std::string_view, std::string_view>> merges;
  bool has_vocab = false, vocab_is_list = false, has_merges = false;
  std::vector<std::unique_ptr<std::string>> unescaped;
};
// The model object `model` of tokenizer.json: its vocabulary and merges into `data`, its other
// members as a small JSON object returned for Node. `where` names it in errors.
std::string read_model_json(simdjson::ondemand::value model, ModelData& data, const std::string& where);
// A JSON number's text as serde_json (the tokenizers library's parser) reads it (model_json.cpp).
double serde_f64(std::string_view text);
// A value's JSON text as the file writes it.
std::string_view raw_json_text(simdjson::ondemand::value& v, const std::string& where);
// A vocabulary object {"token": id, ...} (vocab.json).
void read_vocab_json(simdjson::ondemand::value vocab, ModelData& data, const std::string& where);
std::unique_ptr<Model> make_model(const Node& options, ModelData& data);
// GPT-2's older pair of files: a byte-level BPE model from vocab.json and merges.txt.
std::unique_ptr<Model> make_bpe_from_files(const std::string& vocab_json, const std::string& merges_txt);
std::unique_ptr<Model> make_bpe(const Node& options, ModelData& data);
// The model whose tables a cache file holds (save_tables), with the model's options `options`.
std::unique_ptr<Model> make_model_from_tables(const Node& options, TableReader& tables);
std::unique_ptr<Model> make_wordpiece(const Node& options, ModelData& data);
std::unique_ptr<Model> make_wordlevel(const Node& options, ModelData& data);
std::unique_ptr<Model> make_unigram(const Node& options, ModelData& data);

class PostProcessor {
public:
  virtual ~PostProcessor() = default;
  // The special ids added around a single sequence: prefix + ids + suffix.
  virtual void specials(std::vector<std::int32_t>& prefix, std::vector<std::int32_t>& suffix) const = 0;
};
std::unique_ptr<PostProcessor> make_post_processor(const Node& n);

class Decoder {
public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
std::unique_ptr<Decoder> make_decoder(const Node& n);

// A Split's or a Replace's pattern, {"String": literal} or {"Regex": ...} (pattern.cpp).
class Pattern {
public:
  explicit Pattern(const Node& pattern);
  // The non-overlapping matches in s, left to right (a literal found as the library finds it).
  void find_all(std::string_view s, std::vector<Span>& out) const;
  // s with every match replaced by `content`.
  std::string replace_all(const std::string& s, std::string_view content) const;

private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
};
// The non-overlapping occurrences of a literal, left to right (none of an empty one).
void literal_matches(std::string_view s, std::string_view literal, std::vector<Span>& out);

// The 256 bytes as GPT-2's byte-level alphabet spells them (printable Latin-1 as itself, the
// others from U+0100 on), and back.
const std::string& byte_char(unsigned char b);
// The byte a byte-level character stands for, or -1.
int char_byte(char32_t c);

// Splits `s` at the spans `matches` (sorted, disjoint) by one of Hugging Face's
// SplitDelimiterBehavior values, appending the non-empty results to `out`.
enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
Behavior parse_behavior(const Node& n, std::string_view key, Behavior fallback);
void split_by(const Split& s, const std::vector<Span>& matches, Behavior behavior, bool invert,
              std::vector<Split>& out);

} // namespace attn::text
