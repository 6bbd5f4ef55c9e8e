// Autoregressive generation: greedy, beam and sampled decoding with or without the KV cache
// (generate.hpp).
#include "attn/model/generate.hpp"

#include "attn/core/error.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/model/kv_cache.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace attn {

void generator_logits(float* logits, const float* x, const Generator& gen, std::int64_t rows) {
  Tensor scaled;
  if (gen.input_scale != 1.0f) { // rows x E floats beside the rows x V logits
    const std::int64_t E = gen.weight.in();
    scaled = Tensor(Shape{rows, E}, Uninitialized{});
    for (std::int64_t i = 0; i < rows * E; ++i) scaled.data()[i] = x[i] * gen.input_scale;
    x = scaled.data();
  }
  blas::linear(logits, x, gen.weight, gen.bias.size() ? gen.bias.data() : nullptr, rows);
}

void target_logits(float* logits, const float* x, const Generator& gen, std::int64_t B, std::int64_t t,
                   const Mask& self_mask) {
  generator_logits(logits, x, gen, B * t);
  zero_padding(logits, B, t, gen.vocab(), self_mask);
}

void top_tokens(const float* logits, std::int64_t V, std::int64_t K, std::vector<std::int64_t>& best) {
  best.clear();
  for (std::int64_t v = 0; v < V && K > 0; ++v) {
    if (static_cast<std::int64_t>(best.size()) == K && !(logits[v] > logits[best.back()])) continue;
    if (static_cast<std::int64_t>(best.size()) == K) best.pop_back();
    auto at = best.end(); // after every kept token whose logit is at least this one's
    while (at != best.begin() && !(logits[*(at - 1)] >= logits[v])) --at;
    best.insert(at, v);
  }
}

bool steps_use_tiles(std::int64_t rows, std::int64_t steps) { return rows <= blas::tile_rows() && steps >= 4; }

namespace {

// A decoder layer's Linear weights, those its layout lacks empty: both attentions' projections and
// the feed-forward's (const or not, as the layer).
template <class Layer> auto layer_linears(Layer& l) {
  return std::array{&l.self_attn.in_proj_weight,
                    &l.self_attn.q_proj_weight,
                    &l.self_attn.k_proj_weight,
                    &l.self_attn.v_proj_weight,
                    &l.self_attn.out_proj_weight,
                    &l.cross_attn.in_proj_weight,
                    &l.cross_attn.q_proj_weight,
                    &l.cross_attn.k_proj_weight,
                    &l.cross_attn.v_proj_weight,
                    &l.cross_attn.out_proj_weight,
                    &l.ffn.w1,
                    &l.ffn.w2,
                    &l.ffn.wg};
}

} // namespace

int tile_for_steps(Decoder& dec, Generator& gen, std::int64_t rows, std::int64_t steps) {
  if (!steps_use_tiles(rows, steps)) return 0;
  const bool in_place = blas::f32_steps_in_place(rows, steps);
  const auto lay_out = [&](LinearWeight& w) { return !(in_place && w.mapped()) && w.to_tiles(); };
  int n = 0;
  for (DecoderLayer& l : dec.layers)
    for (LinearWeight* lw : layer_linears(l)) n += lay_out(*lw);
  return n + lay_out(gen.weight);
}

bool quantized_decoder(const Decoder& dec) {
  return std::any_of(dec.layers.begin(), dec.layers.end(), [](const DecoderLayer& l) {
    const auto ws = layer_linears(l);
    return std::any_of(ws.begin(), ws.end(), [](const LinearWeight* w) { return w->quantized(); });
  });
}

namespace {

constexpr double kDead = -std::numeric_limits<double>::infinity();

// The hypotheses of every item's K beams: rows b K + k.
struct Beams {
  std::int64_t rows, max_len;
  std::vector<std::int64_t> tokens; // (rows, max_len)
  std::vector<std::int64_t> len;    // generated so far
  std::vector<double> score;        // kDead: an empty beam slot
  std::vector<std::uint8_t> done;   // produced eos (or an empty slot)
};

struct Proposal {
  double score;
  std::int64_t beam, token; // token -1: a finished hypothesis kept as it is
};

// One step of beam search over logits (rows, V) for the items whose prefix is fed (active[b]);
// returns each new row's parent row.
std::vector<std::int64_t> select(Beams& bm, const float* logits, std::int64_t V, std::int64_t K,
                                 const GenerateOptions& opt, const std::vector<std::uint8_t>& active) {
  const std::int64_t B = bm.rows / K;
  Beams next = bm;
  std::vector<std::int64_t> parent(static_cast<std::size_t>(bm.rows));
  for (std::int64_t r = 0; r < bm.rows; ++r) parent[static_cast<std::size_t>(r)] = r;
  std::vector<Proposal> props;
  std::vector<std::int64_t> best;
  for (std::int64_t b = 0; b < B; ++b) {
    if (!active[static_cast<std::size_t>(b)]) continue;
    props.clear();
    for (std::int64_t k = 0; k < K; ++k) {
      const auto r = static_cast<std::size_t>(b * K + k);
      if (bm.score[r] == kDead) continue;
      if (bm.done[r]) {
        props.push_back({bm.score[r], k, -1});
        continue;
      }
      const float* row = logits + static_cast<std::int64_t>(r) * V;
      const double lse = log_sum_exp(row, V);
      if (!std::isfinite(lse)) { // every token proposed, as the definition says
        for (std::int64_t v = 0; v < V; ++v) props.push_back({bm.score[r] + (row[v] - lse), k, v});
        continue;
      }
      // Only the row's K best tokens can be among the K best proposals (its score is one for all
      // its tokens): those, by logit, the lower token first among equal ones, as `better` orders.
      top_tokens(row, V, K, best);
      for (std::int64_t v : best) props.push_back({bm.score[r] + (row[v] - lse), k, v});
    }
    const auto better = [](const Proposal& x, const Proposal& y) {
      if (x.score != y.score) return x.score > y.score;
      return x.beam != y.beam ? x.beam < y.beam : x.token < y.token;
    };
    const auto keep = std::min<std::size_t>(static_cast<std::size_t>(K), props.size());
    std::partial_sort(props.begin(), props.begin() + static_cast<std::ptrdiff_t>(keep), props.end(), better);
    for (std::int64_t k = 0; k < K; ++k) {
      const auto r = static_cast<std::size_t>(b * K + k);
      if (static_cast<std::size_t>(k) >= keep) { // fewer proposals than beams: an empty slot
        parent[r] = static_cast<std::int64_t>(r);
        next.score[r] = kDead, next.done[r] = 1;
        continue;
      }
      const Proposal& p = props[static_cast<std::size_t>(k)];
      const auto from = static_cast<std::size_t>(b * K + p.beam);
      parent[r] = static_cast<std::int64_t>(from);
      std::copy_n(bm.tokens.begin() + static_cast<std::ptrdiff_t>(from * bm.max_len), bm.max_len,
                  next.tokens.begin() + static_cast<std::ptrdiff_t>(r * bm.max_len));
      next.len[r] = bm.len[from];
      next.score[r] = p.score;
      next.done[r] = bm.done[from];
      if (p.token >= 0) {
        next.tokens[r * bm.max_len + static_cast<std::size_t>(bm.len[from])] = p.token;
        next.len[r] = bm.len[from] + 1;
        next.done[r] = opt.ends(p.token);
      }
    }
  }
  bm = std::move(next);
  return parent;
}

// The tokens sampling draws from for one row: softmax(logits / temperature) (z, unnormalised, per
// token), its tokens most likely first (ties: the lower id), the first `keep` of them kept (top_k,
// then the smallest prefix whose probability reaches top_p), `kept` their total. Sums in double.
struct SamplingCandidates {
  std::vector<double> z;
  std::vector<std::int64_t> order;
  std::size_t keep = 0;
  double kept = 0;
};

SamplingCandidates sampling_candidates(const float* logits, std::int64_t V, const GenerateOptions& opt) {
  SamplingCandidates c;
  c.z.resize(static_cast<std::size_t>(V));
  for (std::int64_t v = 0; v < V; ++v)
    c.z[static_cast<std::size_t>(v)] = static_cast<double>(logits[v]) / opt.temperature;
  const double mx = *std::max_element(c.z.begin(), c.z.end());
  double sum = 0;
  for (double& x : c.z) sum += x = std::exp(x - mx);
  c.order.resize(static_cast<std::size_t>(V));
  for (std::int64_t v = 0; v < V; ++v) c.order[static_cast<std::size_t>(v)] = v;
  std::stable_sort(c.order.begin(), c.order.end(), [&](std::int64_t a, std::int64_t b) {
    return c.z[static_cast<std::size_t>(a)] > c.z[static_cast<std::size_t>(b)];
  });
  c.keep = opt.top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(opt.top_k), c.order.size()) : c.order.size();
  double cum = 0;
  for (std::size_t i = 0; i < c.keep; ++i) {
    cum += c.z[static_cast<std::size_t>(c.order[i])] / sum;
    if (cum >= opt.top_p) {
      c.keep = i + 1;
      break;
    }
  }
  for (std::size_t i = 0; i < c.keep; ++i) c.kept += c.z[static_cast<std::size_t>(c.order[i])];
  return c;
}

// The token drawn for one row: the first kept token, in that order, whose cumulative probability
// exceeds u = rng.uniform().
std::int64_t sample_token(const float* logits, std::int64_t V, const GenerateOptions& opt, Rng& rng) {
  const SamplingCandidates c = sampling_candidates(logits, V, opt);
  const double u = rng.uniform();
  double acc = 0;
  for (std::size_t i = 0; i < c.keep; ++i) {
    acc += c.z[static_cast<std::size_t>(c.order[i])] / c.kept;
    if (acc > u) return c.order[i];
  }
  return c.order[c.keep - 1]; // u beyond the rounded total
}

} // namespace

void token_probabilities(const float* logits, std::int64_t V, const GenerateOptions& opt, std::vector<double>& p) {
  const SamplingCandidates c = sampling_candidates(logits, V, opt);
  p.assign(static_cast<std::size_t>(V), 0.0);
  for (std::size_t i = 0; i < c.keep; ++i) {
    const auto v = static_cast<std::size_t>(c.order[i]);
    p[v] = c.z[v] / c.kept;
  }
}

double log_sum_exp(const float* logits, std::int64_t V) {
  const double mx = *std::max_element(logits, logits + V);
  double sum = 0;
  for (std::int64_t v = 0; v < V; ++v) sum += std::exp(logits[v] - mx);
  return mx + std::log(sum);
}

std::vector<std::vector<std::int64_t>> prompt_prefixes(std::int64_t batch, const GenerateOptions& opt) {
  std::vector<std::vector<std::int64_t>> prefix(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    auto& p = prefix[static_cast<std::size_t>(b)];
    const std::int64_t len = !opt.prompt ? 0 : opt.prompt_lengths ? opt.prompt_lengths[b] : opt.prompt_cols;
    p.assign(opt.prompt ? opt.prompt + b * opt.prompt_cols : nullptr,
             opt.prompt ? opt.prompt + b * opt.prompt_cols + len : nullptr);
    if (p.empty()) p.push_back(opt.bos);
  }
  return prefix;
}

namespace {

// One sampling step (beam 1, so rows are items): each active, unfinished row draws its token from
// its item's stream.
void sample(Beams& bm, const float* logits, std::int64_t V, const GenerateOptions& opt,
            const std::vector<std::uint8_t>& active, std::vector<Rng>& rngs) {
  for (std::int64_t r = 0; r < bm.rows; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (!active[i] || bm.done[i]) continue;
    const std::int64_t token = sample_token(logits + r * V, V, opt, rngs[i]);
    bm.score[i] += logits[r * V + token] - log_sum_exp(logits + r * V, V);
    bm.tokens[i * static_cast<std::size_t>(bm.max_len) + static_cast<std::size_t>(bm.len[i])] = token;
    ++bm.len[i];
    bm.done[i] = opt.ends(token) || bm.len[i] == bm.max_len;
  }
}

// The forced tokens of opt (forced_first, forced_last) on the logits of rows about to choose: every
// other token's logit -inf and the forced one's 0 (log-probability 0).
void force_tokens(float* logits, std::int64_t V, const Beams& bm, std::int64_t K, const GenerateOptions& opt,
                  const std::vector<std::vector<std::int64_t>>& prefix, const std::vector<std::uint8_t>& active) {
  if (opt.forced_first < 0 && opt.forced_last < 0) return;
  for (std::int64_t r = 0; r < bm.rows; ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (!active[static_cast<std::size_t>(r / K)] || bm.done[i]) continue;
    std::int64_t token = -1;
    if (opt.forced_first >= 0 && bm.len[i] == 0 && prefix[static_cast<std::size_t>(r / K)].size() == 1)
      token = opt.forced_first;
    else if (opt.forced_last >= 0 && bm.len[i] == bm.max_len - 1)
      token = opt.forced_last;
    if (token < 0) continue;
    std::fill_n(logits + r * V, V, -std::numeric_limits<float>::infinity());
    logits[r * V + token] = 0.0f;
  }
}

// Each item's best hypothesis (ties: the lower beam).
Generated best_hypotheses(const Beams& bm, std::int64_t batch, std::int64_t K, std::int64_t pad) {
  const std::int64_t N = bm.max_len;
  Generated out;
  std::vector<std::size_t> best(static_cast<std::size_t>(batch));
  std::int64_t L = 1;
  for (std::int64_t b = 0; b < batch; ++b) {
    std::size_t r = static_cast<std::size_t>(b * K);
    for (std::int64_t k = 1; k < K; ++k)
      if (bm.score[static_cast<std::size_t>(b * K + k)] > bm.score[r]) r = static_cast<std::size_t>(b * K + k);
    best[static_cast<std::size_t>(b)] = r;
    L = std::max(L, bm.len[r]);
  }
  out.tokens = TensorI(Shape{batch, L});
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::size_t r = best[static_cast<std::size_t>(b)];
    for (std::int64_t j = 0; j < L; ++j)
      out.tokens[b * L + j] =
          j < bm.len[r] ? bm.tokens[r * static_cast<std::size_t>(N) + static_cast<std::size_t>(j)] : pad;
    out.scores.push_back(bm.score[r]);
  }
  return out;
}

// Sampling: item b (counted from first_item) draws from Rng(seed + b), so the tokens do not depend
// on how the batch is split; none without sampling.
std::vector<Rng> item_streams(std::int64_t batch, const GenerateOptions& opt) {
  std::vector<Rng> rngs;
  if (opt.temperature > 0)
    for (std::int64_t b = 0; b < batch; ++b)
      rngs.emplace_back(opt.seed + static_cast<std::uint64_t>(opt.first_item + b));
  return rngs;
}

// What the cached steps of `rows` rows read of the memory (kv_cache.hpp).
StepKV step_kv(const GenerateOptions& opt, std::int64_t rows) {
  return opt.kv_f16 ? StepKV::f16 : steps_use_tiles(rows, opt.max_len) ? StepKV::tiles : StepKV::rows;
}

// active[b]: whether item b chooses its next token from position t's logits: once its prefix has
// been fed, until it has N tokens.
void mark_choosing(std::vector<std::uint8_t>& active, const std::vector<std::vector<std::int64_t>>& prefix,
                   std::int64_t t, std::int64_t N) {
  for (std::size_t b = 0; b < active.size(); ++b) {
    const auto fed = static_cast<std::int64_t>(prefix[b].size());
    active[b] = t + 1 >= fed && t + 1 - fed < N;
  }
}

// (batch K, width): each of the batch items' rows of `x` (batch, width) K times.
Tensor repeat_items(const float* x, std::int64_t batch, std::int64_t K, std::int64_t width) {
  Tensor out(Shape{batch * K, width}, Uninitialized{});
  for (std::int64_t r = 0; r < batch * K; ++r) std::copy_n(x + (r / K) * width, width, out.data() + r * width);
  return out;
}

// K beam slots per item, item b's first one live (score 0), the others empty.
Beams start_beams(std::int64_t batch, std::int64_t K, std::int64_t N, std::int64_t pad) {
  const std::int64_t R = batch * K;
  Beams bm{R,
           N,
           std::vector<std::int64_t>(static_cast<std::size_t>(R * N), pad),
           std::vector<std::int64_t>(static_cast<std::size_t>(R), 0),
           std::vector<double>(static_cast<std::size_t>(R), kDead),
           std::vector<std::uint8_t>(static_cast<std::size_t>(R), 0)};
  for (std::int64_t b = 0; b < batch; ++b) bm.score[static_cast<std::size_t>(b * K)] = 0; // one live beam to start
  return bm;
}

// Without the cache: x (R, E) = the stack's output at the last of the n positions of ids (R, n),
// every position recomputed (causal).
void recompute_position(float* x, const Decoder& dec, const TokenEmbedding& tgt, const std::int64_t* ids,
                        std::int64_t R, std::int64_t n, const float* memory, std::int64_t s, const Mask& memory_mask,
                        const Probe* probe) {
  const std::int64_t E = dec.embed_dim();
  Tensor xs(Shape{R, n, E}, Uninitialized{});
  embed_tokens(xs.data(), ids, R, n, tgt, 0, "generated tokens");
  Mask causal;
  causal.n = causal.m = n, causal.causal = true;
  decoder_forward(dec, xs.data(), R, n, memory, s, causal, memory_mask, {}, probe);
  for (std::int64_t r = 0; r < R; ++r) std::copy_n(xs.data() + (r * n + n - 1) * E, E, x + r * E);
}

} // namespace

GeneratedBatch::GeneratedBatch(std::int64_t items, std::int64_t max_len, std::int64_t pad)
    : tokens(Shape{items, max_len}), scores(Shape{items}), pad_(pad) {}

void GeneratedBatch::add(std::int64_t first, const Generated& r) {
  const std::int64_t n = r.tokens.dim(0), l = r.tokens.dim(1), max_len = tokens.dim(1);
  longest = std::max(longest, l);
  for (std::int64_t b = 0; b < n; ++b) {
    for (std::int64_t j = 0; j < max_len; ++j) tokens[(first + b) * max_len + j] = j < l ? r.tokens[b * l + j] : pad_;
    scores[first + b] = static_cast<float>(r.scores[static_cast<std::size_t>(b)]);
  }
}

TensorI GeneratedBatch::trimmed() const {
  const std::int64_t B = tokens.dim(0), max_len = tokens.dim(1), L = longest;
  TensorI out(Shape{B, L});
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < L; ++j) out[b * L + j] = tokens[b * max_len + j];
  return out;
}

Sequences final_sequences(const GeneratedBatch& batch, const GenerateOptions& opt) {
  const std::int64_t B = batch.tokens.dim(0), N = batch.tokens.dim(1);
  const std::vector<std::vector<std::int64_t>> prefix = prompt_prefixes(B, opt);
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(B));
  std::int64_t T = 1;
  for (std::int64_t b = 0; b < B; ++b) {
    auto& row = rows[static_cast<std::size_t>(b)];
    row = prefix[static_cast<std::size_t>(b)];
    for (std::int64_t j = 0; j < N; ++j) {
      const std::int64_t t = batch.tokens[b * N + j];
      row.push_back(t);
      if (opt.ends(t)) break;
    }
    T = std::max(T, static_cast<std::int64_t>(row.size()));
  }
  Sequences out{TensorI(Shape{B, T}), std::vector<std::int64_t>(static_cast<std::size_t>(B))};
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& row = rows[static_cast<std::size_t>(b)];
    const auto len = static_cast<std::int64_t>(row.size());
    out.lengths[static_cast<std::size_t>(b)] = len;
    for (std::int64_t j = 0; j < T; ++j) out.ids[b * T + j] = j < len ? row[static_cast<std::size_t>(j)] : opt.pad;
  }
  return out;
}

void forward_sequences(const Decoder& dec, const TokenEmbedding& tgt, const Sequences& seq, std::int64_t b0,
                       std::int64_t n, const float* memory, std::int64_t s, const Mask& memory_mask, Mask& self_mask,
                       const Probe* probe) {
  const std::int64_t T = seq.ids.dim(1), E = dec.embed_dim();
  Tensor x(Shape{n, T, E}, Uninitialized{});
  embed_tokens(x.data(), seq.ids.data() + b0 * T, n, T, tgt, 0, "generated sequences");
  self_mask = Mask();
  self_mask.n = self_mask.m = T, self_mask.causal = true;
  self_mask.lengths.assign(seq.lengths.begin() + b0, seq.lengths.begin() + b0 + n);
  decoder_forward(dec, x.data(), n, T, memory, s, self_mask, mask_items(memory_mask, b0, n, 1, T), {}, probe);
}

Generated generate(const Decoder& dec, const TokenEmbedding& tgt, const Generator& gen, const float* memory,
                   std::int64_t batch, std::int64_t s, const Mask& memory_mask, const GenerateOptions& opt) {
  const std::int64_t K = opt.beam, R = batch * K, V = gen.vocab(), E = dec.embed_dim(), Em = dec.memory_dim();
  const std::int64_t N = opt.max_len;
  if (N <= 0 || K <= 0) throw UsageError("generate: max_len and beam must be positive");
  if (opt.temperature > 0 && K > 1) throw UsageError("generate: sampling draws one token per row: beam 1");

  // Each item's prefix: its prompt, or bos, fed before item b generates: the positions every prefix
  // covers through the cache at once (a prefill), the rest one at a time.
  const std::vector<std::vector<std::int64_t>> prefix = prompt_prefixes(batch, opt);
  std::int64_t longest = 1;
  for (const auto& p : prefix) longest = std::max(longest, static_cast<std::int64_t>(p.size()));
  const std::int64_t positions = longest + N - 1; // the last generated token is never fed

  // Beam k of item b reads item b's memory.
  Tensor repeated;
  if (K > 1 && memory) {
    repeated = repeat_items(memory, batch, K, s * Em);
    memory = repeated.data();
  }
  const Mask mmask = mask_items(memory_mask, 0, batch, K, 1);

  Beams bm = start_beams(batch, K, N, opt.pad);
  std::vector<Rng> rngs = item_streams(batch, opt);

  // The token row r feeds at position t: its prefix, then what it generated, then (a row that is
  // complete while others go on) pad, whose results nothing reads.
  const auto input = [&](std::int64_t r, std::int64_t t) {
    const auto& p = prefix[static_cast<std::size_t>(r / K)];
    const auto plen = static_cast<std::int64_t>(p.size());
    if (t < plen) return p[static_cast<std::size_t>(t)];
    return t - plen < bm.len[static_cast<std::size_t>(r)] ? bm.tokens[static_cast<std::size_t>(r * N + t - plen)]
                                                          : opt.pad;
  };
  // the positions every item's prefix covers: fed at once (a prefill) but for the last
  std::int64_t common = longest;
  for (const auto& p : prefix) common = std::min(common, static_cast<std::int64_t>(p.size()));
  const std::int64_t prefill = common > 1 ? common - 1 : 0;
  DecoderCache cache;
  if (opt.cache)
    cache = start_decoder_cache(dec, memory, R, s, positions, step_kv(opt, R), prefill >= few_query_rows, opt.probe);
  Tensor x(Shape{R, E}, Uninitialized{}), logits(Shape{R, V}, Uninitialized{});
  std::vector<std::int64_t> ids;
  // ids (R, n): each row's tokens at positions j0..j0+n-1
  const auto tokens_at = [&](std::int64_t j0, std::int64_t n) {
    ids.resize(static_cast<std::size_t>(R * n));
    for (std::int64_t r = 0; r < R; ++r)
      for (std::int64_t j = 0; j < n; ++j) ids[static_cast<std::size_t>(r * n + j)] = input(r, j0 + j);
    return ids.data();
  };
  std::vector<std::uint8_t> active(static_cast<std::size_t>(batch)); // per item (sampling: K = 1, rows are items)
  std::int64_t t0 = 0;
  if (opt.cache) { // prefill: the positions every item's prefix still covers, through the stack at once
    if (prefill > 0) {
      const std::int64_t n = prefill; // the last prefix token is fed by the loop, which takes its logits
      Tensor xs(Shape{R, n, E}, Uninitialized{});
      embed_tokens(xs.data(), tokens_at(0, n), R, n, tgt, 0, "prompt tokens");
      decoder_steps(dec, cache, xs.data(), n, mmask, opt.probe);
      t0 = n;
    }
  }
  for (std::int64_t t = t0; t < positions; ++t) {
    if (opt.cache) { // each row's token at position t
      embed_tokens(x.data(), tokens_at(t, 1), R, 1, tgt, t, "generated tokens");
      decoder_step(dec, cache, x.data(), mmask, opt.probe);
    } else { // every token so far, through the whole stack; keep position t
      const std::int64_t n = t + 1;
      recompute_position(x.data(), dec, tgt, tokens_at(0, n), R, n, memory, s, mask_items(memory_mask, 0, batch, K, n),
                         opt.probe);
    }
    mark_choosing(active, prefix, t, N);
    generator_logits(logits.data(), x.data(), gen, R);
    force_tokens(logits.data(), V, bm, K, opt, prefix, active);
    const std::vector<std::int64_t> before = bm.len;
    if (opt.temperature > 0) {
      sample(bm, logits.data(), V, opt, active, rngs);
    } else {
      const std::vector<std::int64_t> parent = select(bm, logits.data(), V, K, opt, active);
      if (opt.cache && K > 1) reorder_decoder_cache(cache, parent);
    }
    if (opt.on_token && K == 1) // each row's new token, as it is chosen
      for (std::int64_t r = 0; r < R; ++r)
        if (bm.len[r] > before[r]) opt.on_token(opt.first_item + r, bm.tokens[r * bm.max_len + bm.len[r] - 1]);
    if (std::all_of(bm.done.begin(), bm.done.end(), [](std::uint8_t d) { return d != 0; })) break;
  }

  return best_hypotheses(bm, batch, K, opt.pad);
}

} // namespace attn
