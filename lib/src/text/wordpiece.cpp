// The WordPiece model (BERT): the longest vocabulary prefix first, the rest as "##" pieces, the
// whole word unknown when any part is (Hugging Face tokenizers' models/wordpiece); and WordLevel,
// a word's id or the unknown token's.
#include "components.hpp"
#include "vocabulary.hpp"

#include "attn/text/utf8.hpp"

namespace attn::text {

namespace {

class WordPiece final : public Model {
public:
  WordPiece(const Node& n, ModelData& data)
      : unk_(n.str_or("unk_token", "[UNK]")), prefix_(n.str_or("continuing_subword_prefix", "##")),
        max_chars_(static_cast<std::size_t>(n.int_or("max_input_chars_per_word", 100))), where_(n.where) {
    if (!data.has_vocab || data.vocab_is_list) n.fail("a WordPiece model needs \"vocab\": {\"token\": id, ...}");
    vocab_.build(data.vocab);
  }

  void tokenize(std::string_view word, std::vector<std::int32_t>& ids, ModelCache&) const override {
    std::size_t chars = 0;
    for (char c : word) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (chars > max_chars_) return push_unk(ids);
    const std::size_t first = ids.size();
    std::string sub;
    std::size_t start = 0;
    while (start < word.size()) {
      std::size_t end = word.size();
      std::int32_t found = -1;
      while (start < end) {
        std::string_view piece = word.substr(start, end - start);
        if (start > 0) {
          sub.assign(prefix_);
          sub.append(piece);
          piece = sub;
        }
        found = vocab_.find(piece);
        if (found >= 0) break;
        std::size_t last = end - 1; // drop the last character
        while (last > start && (static_cast<unsigned char>(word[last]) & 0xC0) == 0x80) --last;
        end = last;
      }
      if (found < 0) {
        ids.resize(first);
        return push_unk(ids);
      }
      ids.push_back(found);
      start = end;
    }
  }
  std::int32_t token_to_id(std::string_view t) const override { return vocab_.find(t); }
  std::optional<std::string_view> id_to_token(std::int32_t id) const override { return vocab_.token(id); }
  std::size_t vocab_size() const override { return vocab_.size(); }
  std::int32_t id_limit() const override { return vocab_.id_limit(); }

private:
  void push_unk(std::vector<std::int32_t>& ids) const {
    const std::int32_t u = vocab_.find(unk_);
    if (u < 0) throw Error(fmt::format("{}: the unk_token {:?} is not in the vocabulary", where_, unk_));
    ids.push_back(u);
  }
  Vocabulary vocab_;
  std::string unk_, prefix_;
  std::size_t max_chars_;
  std::string where_;
};

class WordLevel final : public Model {
public:
  WordLevel(const Node& n, ModelData& data) : unk_(n.str_or("unk_token", "<unk>")), where_(n.where) {
    if (!data.has_vocab || data.vocab_is_list) n.fail("a WordLevel model needs \"vocab\": {\"token\": id, ...}");
    vocab_.build(data.vocab);
  }
  void tokenize(std::string_view word, std::vector<std::int32_t>& ids, ModelCache&) const override {
    std::int32_t id = vocab_.find(word);
    if (id < 0) id = vocab_.find(unk_);
    if (id < 0)
      throw Error(
          fmt::format("{}: {:?} is not in the vocabulary, nor is the unk_token {:?}", where_, std::string(word), unk_));
    ids.push_back(id);
  }
  std::int32_t token_to_id(std::string_view t) const override { return vocab_.find(t); }
  std::optional<std::string_view> id_to_token(std::int32_t id) const override { return vocab_.token(id); }
  std::size_t vocab_size() const override { return vocab_.size(); }
  std::int32_t id_limit() const override { return vocab_.id_limit(); }

private:
  Vocabulary vocab_;
  std::string unk_, where_;
};

} // namespace

std::unique_ptr<Model> make_wordpiece(const Node& n, ModelData& data) { return std::make_unique<WordPiece>(n, data); }
std::unique_ptr<Model> make_wordlevel(const Node& n, ModelData& data) { return std::make_unique<WordLevel>(n, data); }

} // namespace attn::text
