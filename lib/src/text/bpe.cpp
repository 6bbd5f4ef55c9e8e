// The BPE model (byte-level as GPT-2, LLaMA 3 and Qwen; with byte fallback as LLaMA 2, Mistral
// and Gemma): a word's characters merged pair by pair, the lowest-ranked merge first, as Hugging
// Face tokenizers' models/bpe/{model,word}.rs does it.
#include "components.hpp"
#include "pair_table.hpp"
#include "vocabulary.hpp"

#include "attn/text/utf8.hpp"

#include <omp.h>

#include <fstream>
#include <queue>
#include <sstream>

namespace attn::text {

namespace {

class Bpe final : public Model {
public:
  struct Options {
    std::optional<std::string> unk_token, prefix, suffix;
    bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  };

  Bpe(const std::vector<std::pair<std::string_view, std::int32_t>>& vocab, Options o) : o_(std::move(o)) {
    vocab_.build(vocab);
    set_up();
  }
  // The tables saved by save_tables, viewed where they are mapped.
  Bpe(TableReader& r, Options o) : vocab_(Vocabulary::view(r)), o_(std::move(o)) {
    merges_ = PairTable::view(r, vocab_.id_limit());
    set_up();
  }
  bool save_tables(TableWriter& w) const override {
    vocab_.save(w);
    merges_.save(w);
    return true;
  }

  // The merges, rank by rank: each pair's tokens and their concatenation looked up with the table
  // slots prefetched a few merges ahead (the lookups, not the arithmetic, are the cost).
  void add_merges(const std::vector<std::pair<std::string_view, std::string_view>>& merges, const std::string& where) {
    const auto n = static_cast<std::int64_t>(merges.size());
    std::vector<std::int32_t> ids(3 * static_cast<std::size_t>(n));
    std::int64_t bad = n; // the first merge that names a token the vocabulary lacks (n: none)
    constexpr std::int64_t ahead = 8;
    // Each thread resolves a block of merges: the hashes of the merges `ahead` on are computed and
    // their slots prefetched while this one is looked up.
#pragma omp parallel reduction(min : bad)
    {
      struct Pending {
        std::uint64_t ha, hb, hm;
        std::string merged;
      };
      std::vector<Pending> ring(ahead);
      auto prepare = [&](std::int64_t k, Pending& p) {
        const auto& [a, b] = merges[static_cast<std::size_t>(k)];
        p.merged.assign(a);
        p.merged.append(o_.prefix && b.starts_with(*o_.prefix) ? b.substr(o_.prefix->size()) : b);
        p.ha = hash_bytes(a);
        p.hb = hash_bytes(b);
        p.hm = hash_bytes(p.merged);
        vocab_.prefetch(p.ha);
        vocab_.prefetch(p.hb);
        vocab_.prefetch(p.hm);
      };
      const int threads = omp_get_num_threads(), me = omp_get_thread_num();
      const std::int64_t first = n * me / threads, last = n * (me + 1) / threads;
      for (std::int64_t k = first; k < std::min(last, first + ahead); ++k) prepare(k, ring[k % ahead]);
      for (std::int64_t k = first; k < last; ++k) {
        Pending& p = ring[k % ahead];
        const auto& [a, b] = merges[static_cast<std::size_t>(k)];
        const std::int32_t ia = vocab_.find(a, p.ha), ib = vocab_.find(b, p.hb), im = vocab_.find(p.merged, p.hm);
        if (ia < 0 || ib < 0 || im < 0) bad = std::min(bad, k);
        ids[3 * k] = ia;
        ids[3 * k + 1] = ib;
        ids[3 * k + 2] = im;
        if (k + ahead < last) prepare(k + ahead, p);
      }
    }
    if (bad < n) {
      const std::int64_t k = bad;
      const auto& [a, b] = merges[static_cast<std::size_t>(k)];
      if (ids[3 * k] < 0 || ids[3 * k + 1] < 0)
        throw Error(
            fmt::format("{}.merges[{}]: {:?} is not in the vocabulary", where, k, std::string(ids[3 * k] < 0 ? a : b)));
      throw Error(fmt::format("{}.merges[{}]: the merged token {:?} is not in the vocabulary", where, k,
                              std::string(a) + std::string(b)));
    }
    merges_.reserve(static_cast<std::size_t>(n));
    for (std::int64_t k = 0; k < n; ++k) {
      if (k + ahead < n) merges_.prefetch(ids[3 * (k + ahead)], ids[3 * (k + ahead) + 1]);
      merges_.insert(ids[3 * k], ids[3 * k + 1], {static_cast<std::int32_t>(k), ids[3 * k + 2]});
    }
  }

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
      if (cache.words.size() >= 20000) cache.words.clear(); // bounded, as the library's 10,000 words
      cache.words.emplace(std::move(key), std::move(out));
    }
  }

  std::int32_t token_to_id(std::string_view t) const override { return vocab_.find(t); }
  std::optional<std::string_view> id_to_token(std::int32_t id) const override { return vocab_.token(id); }
  std::size_t vocab_size() const override { return vocab_.size(); }
  std::int32_t id_limit() const override { return vocab_.id_limit(); }

private:
  void set_up() {
    if (o_.prefix && o_.prefix->empty()) o_.prefix.reset(); // "" behaves as none
    if (o_.suffix && o_.suffix->empty()) o_.suffix.reset();
    if (o_.unk_token) unk_id_ = vocab_.find(*o_.unk_token);
    for (int b = 0; b < 256; ++b) byte_ids_[b] = vocab_.find(fmt::format("<0x{:02X}>", b));
  }

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

Bpe::Options bpe_options(const Node& n) {
  Bpe::Options o;
  o.unk_token = optional_str(n, "unk_token");
  o.prefix = optional_str(n, "continuing_subword_prefix");
  o.suffix = optional_str(n, "end_of_word_suffix");
  o.fuse_unk = n.bool_or("fuse_unk", false);
  o.byte_fallback = n.bool_or("byte_fallback", false);
  o.ignore_merges = n.bool_or("ignore_merges", false);
  if (auto d = n.get("dropout"); d && d->number() != 0.0)
    d->fail("BPE dropout is random; the toolkit does not apply it");
  return o;
}

} // namespace

std::unique_ptr<Model> make_model_from_tables(const Node& n, TableReader& tables) {
  if (n.str_or("type", "") != "BPE") throw BadTables("the tables are not a BPE model's");
  return std::make_unique<Bpe>(tables, bpe_options(n));
}

std::unique_ptr<Model> make_bpe(const Node& n, ModelData& data) {
  const Bpe::Options o = bpe_options(n);
  if (!data.has_vocab || data.vocab_is_list) n.fail("a BPE model needs \"vocab\": {\"token\": id, ...}");
  if (!data.has_merges) n.fail("a BPE model needs \"merges\"");
  auto bpe = std::make_unique<Bpe>(data.vocab, o);
  bpe->add_merges(data.merges, n.where);
  return bpe;
}

std::unique_ptr<Model> make_bpe_from_files(const std::string& vocab_json, const std::string& merges_txt) {
  simdjson::padded_string text;
  if (auto e = simdjson::padded_string::load(vocab_json).get(text))
    throw Error(fmt::format("{}: cannot read ({})", vocab_json, simdjson::error_message(e)));
  simdjson::ondemand::parser parser;
  ModelData data;
  simdjson::ondemand::document doc;
  simdjson::ondemand::value root;
  if (auto e = parser.iterate(text).get(doc))
    throw Error(fmt::format("{}: not JSON ({})", vocab_json, simdjson::error_message(e)));
  if (auto e = doc.get_value().get(root))
    throw Error(fmt::format("{}: not JSON ({})", vocab_json, simdjson::error_message(e)));
  read_vocab_json(root, data, vocab_json);
  std::ifstream in(merges_txt, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot read", merges_txt));
  std::stringstream all;
  all << in.rdbuf();
  const std::string body = all.str();
  check_utf8(body, merges_txt);
  std::size_t at = 0, line_no = 0;
  while (at < body.size()) {
    std::size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    std::string_view line(body.data() + at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!(line_no == 0 && line.starts_with("#version")) && !line.empty()) {
      const std::size_t sp = line.find(' ');
      if (sp == std::string_view::npos)
        throw Error(fmt::format("{}: line {}: {:?} is not two tokens separated by a space", merges_txt, line_no + 1,
                                std::string(line)));
      data.merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    }
    at = end + 1;
    ++line_no;
  }
  auto bpe = std::make_unique<Bpe>(data.vocab, Bpe::Options{});
  bpe->add_merges(data.merges, merges_txt);
  return bpe;
}

} // namespace attn::text
