// The Unigram model (T5, ALBERT, XLNet): the segmentation of highest total score by Viterbi over
// the vocabulary's pieces, unknown characters scored below every piece and fused (Hugging Face
// tokenizers' models/unigram/model.rs, encode_optimized).
#include "components.hpp"
#include "vocabulary.hpp"

#include "attn/text/utf8.hpp"

#include <limits>

namespace attn::text {

namespace {

constexpr double unk_penalty = 10.0;

class Unigram final : public Model {
public:
  Unigram(const Node& n, ModelData& data) : where_(n.where) {
    if (!data.has_vocab || !data.vocab_is_list) n.fail("a Unigram model needs \"vocab\": [[piece, score], ...]");
    const auto& pieces = data.pieces;
    std::vector<std::pair<std::string_view, std::int32_t>> entries;
    entries.reserve(pieces.size());
    for (std::size_t i = 0; i < pieces.size(); ++i) entries.emplace_back(pieces[i].first, static_cast<std::int32_t>(i));
    vocab_.build(entries);
    scores_.reserve(pieces.size());
    min_score_ = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      scores_.push_back(pieces[i].second);
      min_score_ = std::min(min_score_, pieces[i].second);
      max_len_ = std::max(max_len_, pieces[i].first.size());
    }
    if (auto u = n.get("unk_id")) {
      unk_id_ = u->integer();
      if (unk_id_ < 0 || unk_id_ >= static_cast<std::int64_t>(pieces.size()))
        u->fail(fmt::format("is not an id of the vocabulary [0, {})", pieces.size()));
    }
    byte_fallback_ = n.bool_or("byte_fallback", false);
    for (int b = 0; b < 256; ++b) byte_ids_[b] = vocab_.find(fmt::format("<0x{:02X}>", b));
  }

  void tokenize(std::string_view s, std::vector<std::int32_t>& ids, ModelCache&) const override {
    struct Best {
      std::int32_t id = -1;
      double score = 0;
      std::int64_t starts_at = -1;
    };
    const std::size_t size = s.size();
    const double unk_score = min_score_ - unk_penalty;
    std::vector<Best> best(size + 1);
    std::size_t at = 0;
    while (at < size) {
      const double here = best[at].score;
      const std::size_t mblen = char_length(static_cast<unsigned char>(s[at]));
      bool single = false;
      // every vocabulary piece starting here, shortest first (the trie's common prefix search)
      for (std::size_t end = at + mblen; end <= size && end - at <= max_len_;) {
        const std::int32_t id = vocab_.find(s.substr(at, end - at));
        if (id >= 0) {
          const double cand = scores_[id] + here;
          Best& t = best[end];
          if (t.starts_at < 0 || cand > t.score) t = Best{id, cand, static_cast<std::int64_t>(at)};
          if (end - at == mblen) single = true;
        }
        if (end == size) break;
        end += char_length(static_cast<unsigned char>(s[end]));
      }
      if (!single) {
        if (unk_id_ < 0)
          throw Error(fmt::format("{}: a character is not in the vocabulary and there is no unk_id", where_));
        Best& t = best[at + mblen];
        const double cand = unk_score + here;
        if (t.starts_at < 0 || cand > t.score)
          t = Best{static_cast<std::int32_t>(unk_id_), cand, static_cast<std::int64_t>(at)};
      }
      at += mblen;
    }
    // back from the end: the pieces, consecutive unknown ones fused into one
    std::vector<Span> spans;
    std::vector<bool> unknown;
    for (std::size_t end = size; end > 0;) {
      const Best& b = best[end];
      const auto start = static_cast<std::size_t>(b.starts_at);
      const bool unk = b.id == unk_id_;
      if (unk && !unknown.empty() && unknown.back())
        spans.back().first = start;
      else {
        spans.emplace_back(start, end);
        unknown.push_back(unk);
      }
      end = start;
    }
    for (std::size_t k = spans.size(); k-- > 0;) {
      const std::string_view piece = s.substr(spans[k].first, spans[k].second - spans[k].first);
      const std::int32_t id = vocab_.find(piece);
      if (id >= 0) {
        ids.push_back(id);
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (char c : piece) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
        if (all) {
          for (char c : piece) ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
          continue;
        }
      }
      ids.push_back(static_cast<std::int32_t>(unk_id_));
    }
  }
  std::int32_t token_to_id(std::string_view t) const override { return vocab_.find(t); }
  std::optional<std::string_view> id_to_token(std::int32_t id) const override { return vocab_.token(id); }
  std::size_t vocab_size() const override { return vocab_.size(); }
  std::int32_t id_limit() const override { return vocab_.id_limit(); }

private:
  std::string where_;
  Vocabulary vocab_;
  std::vector<double> scores_;
  double min_score_ = 0;
  std::size_t max_len_ = 0;
  std::int64_t unk_id_ = -1;
  bool byte_fallback_ = false;
  std::int32_t byte_ids_[256];
};

} // namespace

std::unique_ptr<Model> make_unigram(const Node& n, ModelData& data) { return std::make_unique<Unigram>(n, data); }

std::unique_ptr<Model> make_model(const Node& n, ModelData& data) {
  std::string t;
  if (auto type = n.get("type")) {
    t = std::string(type->str());
  } else { // older files name no type: the fields tell
    t = data.has_merges                     ? "BPE"
        : n.get("max_input_chars_per_word") ? "WordPiece"
        : data.vocab_is_list                ? "Unigram"
                                            : "WordLevel";
  }
  if (t == "BPE") return make_bpe(n, data);
  if (t == "WordPiece") return make_wordpiece(n, data);
  if (t == "Unigram") return make_unigram(n, data);
  if (t == "WordLevel") return make_wordlevel(n, data);
  n.fail(fmt::format("unsupported model {:?} (BPE, WordPiece, Unigram, WordLevel)", t));
}

} // namespace attn::text
