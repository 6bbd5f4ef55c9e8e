// Speculative and prompt-lookup generation: drafted tokens checked by the model in one pass
// (speculative.hpp).
#include "attn/model/speculative.hpp"

#include "attn/core/error.hpp"
#include "attn/core/random.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace attn {

namespace {

// The greedy token of a row: beam search's choice with one beam (top_tokens: the largest logit, the
// lower token among equal ones).
std::int64_t greedy_token(const float* logits, std::int64_t V) {
  thread_local std::vector<std::int64_t> best;
  top_tokens(logits, V, 1, best);
  return best.front();
}

// The token of distribution p (V) at u in [0, 1): the first, in token order, whose cumulative
// probability exceeds u; the last token of positive probability when rounding leaves u beyond.
std::int64_t draw(const std::vector<double>& p, double u) {
  double acc = 0;
  std::int64_t last = 0;
  for (std::size_t v = 0; v < p.size(); ++v) {
    if (p[v] <= 0) continue;
    acc += p[v];
    last = static_cast<std::int64_t>(v);
    if (acc > u) return last;
  }
  return last;
}

} // namespace

void LookupDrafter::propose(const std::vector<std::int64_t>& seq, std::int64_t n, Rng*,
                            std::vector<std::int64_t>& draft, std::vector<double>& q) {
  draft.clear(), q.clear();
  const std::size_t len = seq.size();
  for (std::size_t g = std::min(max_ngram, len); g >= 1; --g) {
    const auto tail = seq.end() - static_cast<std::ptrdiff_t>(g);
    // the first occurrence starting at i with a token after it (i + g < len: not the tail itself)
    for (std::size_t i = 0; i + g < len; ++i) {
      if (!std::equal(tail, seq.end(), seq.begin() + static_cast<std::ptrdiff_t>(i))) continue;
      const std::size_t from = i + g, to = std::min(len, from + static_cast<std::size_t>(n));
      draft.assign(seq.begin() + static_cast<std::ptrdiff_t>(from), seq.begin() + static_cast<std::ptrdiff_t>(to));
      return;
    }
  }
}

ModelDrafter::ModelDrafter(const Decoder& dec, const TokenEmbedding& emb, const Generator& gen,
                           const GenerateOptions& opt, std::int64_t capacity)
    : dec_(dec), emb_(emb), gen_(gen), opt_(opt), capacity_(capacity) {
  if (dec.has_cross) throw UsageError("a draft model is decoder-only (it has no memory to read)");
  if (dec.layers.front().ffn.conv_kernel() > 1)
    throw UsageError("a draft model's feed-forward convolution keeps a state that cannot go back: not a draft model");
}

void ModelDrafter::start_item() {
  cache_ = start_decoder_cache(dec_, nullptr, 1, 0, capacity_);
  fed_.clear();
}

void ModelDrafter::propose(const std::vector<std::int64_t>& seq, std::int64_t n, Rng* rng,
                           std::vector<std::int64_t>& draft, std::vector<double>& q) {
  draft.clear(), q.clear();
  const std::int64_t E = dec_.embed_dim(), V = gen_.vocab();
  // keep the cached positions the sequence still agrees with, feed the rest
  std::size_t keep = 0;
  while (keep < fed_.size() && keep < seq.size() && fed_[keep] == seq[keep]) ++keep;
  keep = std::min(keep, seq.size() - 1); // the last token is fed to get its logits
  fed_.resize(keep);
  cache_.len = static_cast<std::int64_t>(keep);
  std::vector<std::int64_t> feed(seq.begin() + static_cast<std::ptrdiff_t>(keep), seq.end());
  const Mask none; // no memory
  std::vector<double> p;
  for (std::int64_t i = 0; i < n && cache_.len + static_cast<std::int64_t>(feed.size()) <= capacity_; ++i) {
    const auto m = static_cast<std::int64_t>(feed.size());
    if (x_.size() < m * E) x_ = Tensor(Shape{m, E}, Uninitialized{});
    if (logits_.size() < V) logits_ = Tensor(Shape{V}, Uninitialized{});
    embed_tokens(x_.data(), feed.data(), 1, m, emb_, cache_.len, "draft tokens");
    decoder_steps(dec_, cache_, x_.data(), m, none);
    fed_.insert(fed_.end(), feed.begin(), feed.end());
    generator_logits(logits_.data(), x_.data() + (m - 1) * E, gen_, 1);
    std::int64_t token;
    if (rng) {
      token_probabilities(logits_.data(), V, opt_, p);
      token = draw(p, rng->uniform());
      q.insert(q.end(), p.begin(), p.end());
    } else {
      token = greedy_token(logits_.data(), V);
    }
    draft.push_back(token);
    if (opt_.ends(token)) break;
    feed.assign(1, token);
  }
}

Generated generate_speculative(const Decoder& dec, const TokenEmbedding& tgt, const Generator& gen, const float* memory,
                               std::int64_t batch, std::int64_t s, const Mask& memory_mask, const GenerateOptions& opt,
                               Drafter& drafter, std::int64_t draft_tokens, SpeculativeStats* stats) {
  const std::int64_t N = opt.max_len, V = gen.vocab(), E = dec.embed_dim(), Em = dec.memory_dim();
  if (N <= 0) throw UsageError("generate: max_len must be positive");
  if (opt.beam != 1) throw UsageError("drafted tokens are checked for one row: beam 1");
  if (!opt.cache) throw UsageError("drafted tokens are checked through the key/value cache");
  if (opt.probe) throw UsageError("drafted tokens do not combine with interventions");
  if (opt.forced_first >= 0 || opt.forced_last >= 0)
    throw UsageError("drafted tokens do not combine with the config's forced tokens (forced_bos_token_id, "
                     "forced_eos_token_id)");
  if (draft_tokens < 1 || draft_tokens > max_draft_tokens)
    throw UsageError(fmt::format("drafted tokens per pass: 1 to {}, not {}", max_draft_tokens, draft_tokens));
  if (dec.layers.front().ffn.conv_kernel() > 1)
    throw UsageError("the feed-forward's convolution keeps a state that cannot go back: no drafted tokens");
  const bool sampling = opt.temperature > 0;
  const std::vector<std::vector<std::int64_t>> prefix = prompt_prefixes(batch, opt);
  SpeculativeStats st;
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(batch));
  std::vector<double> scores(static_cast<std::size_t>(batch), 0.0);
  Tensor x(Shape{draft_tokens + 1, E}, Uninitialized{}), logits(Shape{draft_tokens + 1, V}, Uninitialized{});
  std::vector<std::int64_t> draft, feed;
  std::vector<double> q, p;
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<std::int64_t> seq = prefix[static_cast<std::size_t>(b)];
    const auto plen = static_cast<std::int64_t>(seq.size());
    const Mask mmask = mask_items(memory_mask, b, 1, 1, 1);
    // the memory's keys and values as generate() keeps them for steps of one row (the same bits)
    const StepKV kv = opt.kv_f16 ? StepKV::f16 : steps_use_tiles(1, N) ? StepKV::tiles : StepKV::rows;
    DecoderCache cache = start_decoder_cache(dec, memory ? memory + b * s * Em : nullptr, 1, s, plen + N - 1, kv,
                                             plen - 1 >= few_query_rows);
    if (plen > 1) { // the prompt but its last token, at once
      Tensor xs(Shape{plen - 1, E}, Uninitialized{});
      embed_tokens(xs.data(), seq.data(), 1, plen - 1, tgt, 0, "prompt tokens");
      decoder_steps(dec, cache, xs.data(), plen - 1, mmask);
    }
    Rng rng(opt.seed + static_cast<std::uint64_t>(opt.first_item + b));
    drafter.start_item();
    std::int64_t generated = 0;
    double& score = scores[static_cast<std::size_t>(b)];
    for (bool done = false; !done;) {
      const std::int64_t room = std::min(draft_tokens, N - generated - 1);
      draft.clear(), q.clear();
      if (room > 0) drafter.propose(seq, room, sampling ? &rng : nullptr, draft, q);
      // one pass: the last token and the drafted ones at positions len..len+d
      feed.assign(1, seq.back());
      feed.insert(feed.end(), draft.begin(), draft.end());
      const auto n = static_cast<std::int64_t>(feed.size());
      embed_tokens(x.data(), feed.data(), 1, n, tgt, cache.len, "generated tokens");
      decoder_steps(dec, cache, x.data(), n, mmask);
      generator_logits(logits.data(), x.data(), gen, n);
      ++st.passes, st.drafted += n - 1;
      for (std::int64_t i = 0; i < n; ++i) {
        const float* row = logits.data() + i * V;
        const bool drafted = i < n - 1;
        std::int64_t token;
        if (!sampling) {
          token = greedy_token(row, V);
        } else {
          token_probabilities(row, V, opt, p);
          if (!drafted) {
            token = draw(p, rng.uniform());
          } else {
            const auto x_i = static_cast<std::size_t>(draft[static_cast<std::size_t>(i)]);
            const double qx = q.empty() ? 1.0 : q[static_cast<std::size_t>(i * V) + x_i];
            if (rng.uniform() * qx < p[x_i]) { // kept with probability min(1, p(x) / q(x))
              token = static_cast<std::int64_t>(x_i);
            } else { // the residual max(0, p - q), renormalised by draw's running sum
              double total = 0;
              for (std::int64_t v = 0; v < V; ++v) {
                const double qv = q.empty() ? (static_cast<std::size_t>(v) == x_i ? 1.0 : 0.0)
                                            : q[static_cast<std::size_t>(i * V + v)];
                total += p[static_cast<std::size_t>(v)] = std::max(0.0, p[static_cast<std::size_t>(v)] - qv);
              }
              token = draw(p, rng.uniform() * total);
            }
          }
        }
        score += row[token] - log_sum_exp(row, V);
        seq.push_back(token);
        ++generated;
        if (opt.on_token) opt.on_token(opt.first_item + b, token);
        const bool kept = drafted && token == draft[static_cast<std::size_t>(i)];
        st.accepted += kept;
        if (opt.ends(token) || generated == N) {
          done = true;
          break;
        }
        if (!kept) break;
      }
      cache.len = static_cast<std::int64_t>(seq.size()) - 1; // the positions of the kept tokens
    }
    st.tokens += generated;
    rows[static_cast<std::size_t>(b)].assign(seq.begin() + plen, seq.end());
  }
  if (stats) *stats = st;

  Generated out;
  std::int64_t L = 1;
  for (const auto& r : rows) L = std::max(L, static_cast<std::int64_t>(r.size()));
  out.tokens = TensorI(Shape{batch, L});
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto& r = rows[static_cast<std::size_t>(b)];
    for (std::int64_t j = 0; j < L; ++j)
      out.tokens[b * L + j] = j < static_cast<std::int64_t>(r.size()) ? r[static_cast<std::size_t>(j)] : opt.pad;
  }
  out.scores = scores;
  return out;
}

} // namespace attn
