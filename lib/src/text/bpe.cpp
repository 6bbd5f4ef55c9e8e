// The BPE model (byte-level as GPT-2, LLaMA 3 and Qwen; with byte fallback as LLaMA 2, Mistral
// and Gemma): a word's characters merged pair by pair, the lowest-ranked merge first, as Hugging
// Face tokenizers' models/bpe/{model,word}.rs does it.
#include "components.hpp"
#include "vocabulary.hpp"

#include "attn/text/utf8.hpp"

#include <fstream>
#include <queue>
#include <sstream>

namespace attn::text {

// The vocabulary of a JSON object token -> id, checked (also WordPiece's and WordLevel's).
Vocabulary read_vocab_object(const Node& vocab);

Vocabulary read_vocab_object(const Node& vocab) {
  simdjson::dom::object obj;
  if (vocab.value.get_object().get(obj)) vocab.fail("is not a JSON object of token: id");
  std::size_t count = 0, bytes = 0;
  for (auto field : obj) {
    ++count;
    bytes += field.key.size();
  }
  Vocabulary v;
  v.reserve(count, bytes);
  for (auto field : obj) {
    std::int64_t id;
    if (field.value.get_int64().get(id) || id < 0 || id > std::int64_t(4) * std::int64_t(count) + 65536)
      vocab.fail(fmt::format("the id of {:?} is not an integer in [0, {}]", std::string(field.key),
                             std::int64_t(4) * std::int64_t(count) + 65536));
    v.add(field.key, static_cast<std::int32_t>(id));
  }
  return v;
}

namespace {

class Bpe final : public Model {
public:
  struct Options {
    std::optional<std::string> unk_token, prefix, suffix;
    bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  };

  Bpe(Vocabulary vocab, Options o, std::string where) : vocab_(std::move(vocab)), o_(std::move(o)) {
    if (o_.prefix && o_.prefix->empty()) o_.prefix.reset(); // "" behaves as none
    if (o_.suffix && o_.suffix->empty()) o_.suffix.reset();
    if (o_.unk_token) {
      unk_id_ = vocab_.find(*o_.unk_token);
      (void)where;
    }
    for (int b = 0; b < 256; ++b) byte_ids_[b] = vocab_.find(fmt::format("<0x{:02X}>", b));
  }

  // Adds the merge (a, b) of rank `rank`; `where` names it in the error.
  void add_merge(std::string_view a, std::string_view b, std::int32_t rank, const Node& where, std::string& scratch) {
    const std::int32_t ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia < 0 || ib < 0)
      where.fail(fmt::format("merge {:?} {:?}: {:?} is not in the vocabulary", std::string(a), std::string(b),
                             std::string(ia < 0 ? a : b)));
    scratch.assign(a);
    if (o_.prefix && b.starts_with(*o_.prefix))
      scratch.append(b.substr(o_.prefix->size()));
    else
      scratch.append(b);
    const std::int32_t merged = vocab_.find(scratch);
    if (merged < 0)
      where.fail(fmt::format("merge {:?} {:?}: the merged token {:?} is not in the vocabulary", std::string(a),
                             std::string(b), scratch));
    merges_.insert(ia, ib, {rank, merged});
  }
  void reserve_merges(std::size_t n) { merges_.reserve(n); }

  void tokenize(std::string_view word, std::vector<std::int32_t>& ids, ModelCache& cache) const override {
    if (o_.ignore_merges) {
      const std::int32_t id = vocab_.find(word);
      if (id >= 0) {
        ids.push_back(id);
        return;
      }
    }
    const bool cacheable = word.size() < 256;
    std::string key;
    if (cacheable) {
      key.assign(word);
      auto it = cache.words.find(key);
      if (it != cache.words.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<std::int32_t> out;
    merge_word(word, out);
    ids.insert(ids.end(), out.begin(), out.end());
    if (cacheable) {
      if (cache.words.size() > 200000) cache.words.clear();
      cache.words.emplace(std::move(key), std::move(out));
    }
  }

  std::int32_t token_to_id(std::string_view t) const override { return vocab_.find(t); }
  std::optional<std::string_view> id_to_token(std::int32_t id) const override { return vocab_.token(id); }
  std::size_t vocab_size() const override { return vocab_.size(); }
  std::int32_t id_limit() const override { return vocab_.id_limit(); }

private:
  struct Symbol {
    std::int32_t id;
    std::int32_t prev, next;
    std::uint32_t len; // 0 = merged into its left neighbour
  };
  struct Candidate {
    std::int32_t rank, pos, id;
    bool operator<(const Candidate& o) const { // the priority queue's top: lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };

  // The word's characters as symbols (word.rs' construction in model.rs, merge_word).
  void initial_symbols(std::string_view w, std::vector<Symbol>& symbols) const {
    std::int32_t unk_id = -1;
    std::uint32_t unk_len = 0;
    bool pending_unk = false;
    auto add = [&](std::int32_t id, std::uint32_t len) {
      const auto n = static_cast<std::int32_t>(symbols.size());
      symbols.push_back({id, n - 1, n + 1, len});
    };
    std::string s;
    std::size_t i = 0;
    while (i < w.size()) {
      const std::size_t b = i;
      i += char_length(static_cast<unsigned char>(w[i]));
      const std::uint32_t byte_len = static_cast<std::uint32_t>(i - b);
      const bool first = b == 0, last = i >= w.size();
      std::string_view piece = w.substr(b, byte_len);
      if ((!first && o_.prefix) || (last && o_.suffix)) {
        s.clear();
        if (!first && o_.prefix) s += *o_.prefix;
        s.append(piece);
        if (last && o_.suffix) s += *o_.suffix;
        piece = s;
      }
      const std::int32_t id = vocab_.find(piece);
      if (id >= 0) {
        if (pending_unk) {
          add(unk_id, unk_len);
          pending_unk = false;
        }
        add(id, byte_len);
        continue;
      }
      if (o_.byte_fallback) {
        bool all = true;
        for (char c : piece) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
        if (all) {
          for (char c : piece) add(byte_ids_[static_cast<unsigned char>(c)], 1);
          continue;
        }
      }
      if (o_.unk_token) {
        if (unk_id_ < 0)
          throw Error(fmt::format("tokenizer: the unk_token {:?} is not in the vocabulary", *o_.unk_token));
        if (pending_unk && o_.fuse_unk) {
          unk_len += byte_len;
        } else {
          if (pending_unk) add(unk_id, unk_len);
          unk_id = unk_id_;
          unk_len = byte_len;
          pending_unk = true;
        }
      }
    }
    if (pending_unk) add(unk_id, unk_len);
    if (!symbols.empty()) symbols.back().next = -1;
  }

  void merge_word(std::string_view w, std::vector<std::int32_t>& out) const {
    std::vector<Symbol> sym;
    sym.reserve(w.size());
    initial_symbols(w, sym);
    std::priority_queue<Candidate> queue;
    for (std::size_t k = 0; k + 1 < sym.size(); ++k)
      if (const auto* m = merges_.find(sym[k].id, sym[k + 1].id))
        queue.push({m->rank, static_cast<std::int32_t>(k), m->id});
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& cur = sym[top.pos];
      if (cur.len == 0 || cur.next < 0) continue;
      const std::int32_t next_pos = cur.next;
      const Symbol right = sym[next_pos];
      const auto* still = merges_.find(cur.id, right.id);
      if (!still || still->id != top.id) continue; // an expired candidate
      cur.id = top.id;
      cur.len += right.len;
      cur.next = right.next;
      sym[next_pos].len = 0;
      if (right.next >= 0) sym[right.next].prev = top.pos;
      if (cur.prev >= 0)
        if (const auto* m = merges_.find(sym[cur.prev].id, cur.id)) queue.push({m->rank, cur.prev, m->id});
      if (cur.next >= 0)
        if (const auto* m = merges_.find(cur.id, sym[cur.next].id)) queue.push({m->rank, top.pos, m->id});
    }
    for (const Symbol& s : sym)
      if (s.len) out.push_back(s.id);
  }

  Vocabulary vocab_;
  Options o_;
  PairTable merges_;
  std::int32_t unk_id_ = -1;
  std::int32_t byte_ids_[256];
};

std::optional<std::string> optional_str(const Node& n, std::string_view key) {
  auto v = n.get(key);
  if (!v) return std::nullopt;
  return std::string(v->str());
}

} // namespace

std::unique_ptr<Model> make_bpe(const Node& n) {
  Bpe::Options o;
  o.unk_token = optional_str(n, "unk_token");
  o.prefix = optional_str(n, "continuing_subword_prefix");
  o.suffix = optional_str(n, "end_of_word_suffix");
  o.fuse_unk = n.bool_or("fuse_unk", false);
  o.byte_fallback = n.bool_or("byte_fallback", false);
  o.ignore_merges = n.bool_or("ignore_merges", false);
  if (auto d = n.get("dropout"); d && d->number() != 0.0)
    d->fail("BPE dropout is random; the toolkit does not apply it");
  auto bpe = std::make_unique<Bpe>(read_vocab_object(n.at("vocab")), o, n.where);
  const Node merges = n.at("merges");
  simdjson::dom::array list;
  if (merges.value.get_array().get(list)) merges.fail("is not a JSON array");
  bpe->reserve_merges(list.size());
  std::string scratch;
  std::int32_t rank = 0;
  for (auto m : list) {
    std::string_view line;
    if (!m.get_string().get(line)) { // "a b"
      const std::size_t sp = line.find(' ');
      if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos)
        merges.fail(fmt::format("merge {} {:?} is not two tokens separated by one space", rank, std::string(line)));
      bpe->add_merge(line.substr(0, sp), line.substr(sp + 1), rank, merges, scratch);
    } else { // ["a", "b"]
      simdjson::dom::array pair;
      std::string_view a, b;
      if (m.get_array().get(pair) || pair.size() != 2 || pair.at(0).get_string().get(a) ||
          pair.at(1).get_string().get(b))
        merges.fail(fmt::format("merge {} is neither \"a b\" nor [\"a\", \"b\"]", rank));
      bpe->add_merge(a, b, rank, merges, scratch);
    }
    ++rank;
  }
  return bpe;
}

std::unique_ptr<Model> make_bpe_from_files(const std::string& vocab_json, const std::string& merges_txt) {
  simdjson::dom::parser parser;
  simdjson::padded_string text;
  if (auto e = simdjson::padded_string::load(vocab_json).get(text))
    throw Error(fmt::format("{}: cannot read ({})", vocab_json, simdjson::error_message(e)));
  simdjson::dom::element doc;
  if (auto e = parser.parse(text).get(doc))
    throw Error(fmt::format("{}: not JSON ({})", vocab_json, simdjson::error_message(e)));
  auto bpe = std::make_unique<Bpe>(read_vocab_object(Node{doc, vocab_json}), Bpe::Options{}, vocab_json);
  std::ifstream in(merges_txt, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot read", merges_txt));
  std::stringstream all;
  all << in.rdbuf();
  const std::string body = all.str();
  std::vector<std::string_view> lines;
  std::size_t at = 0;
  while (at < body.size()) {
    std::size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    std::string_view line(body.data() + at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!(lines.empty() && line.starts_with("#version")) && !line.empty()) lines.push_back(line);
    at = end + 1;
  }
  bpe->reserve_merges(lines.size());
  std::string scratch;
  const Node where{simdjson::dom::element(), merges_txt};
  for (std::size_t r = 0; r < lines.size(); ++r) {
    const std::size_t sp = lines[r].find(' ');
    if (sp == std::string_view::npos)
      throw Error(fmt::format("{}: merge {} {:?} is not two tokens separated by a space", merges_txt, r,
                              std::string(lines[r])));
    bpe->add_merge(lines[r].substr(0, sp), lines[r].substr(sp + 1), static_cast<std::int32_t>(r), where, scratch);
  }
  return bpe;
}

} // namespace attn::text
