#include "attn/generate.hpp"

#include "attn/blas.hpp"
#include "attn/error.hpp"
#include "attn/kv_cache.hpp"
#include "attn/mask_files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace attn {

std::optional<Generator> load_generator(const WeightGroup& g, std::int64_t embed_dim) {
  if (!g.has("generator/weight")) return std::nullopt;
  const Shape s = g.shape("generator/weight");
  const std::int64_t V = s.size() == 2 ? s[0] : 1;
  const std::string why = fmt::format("E = {}", embed_dim);
  Generator gen;
  gen.weight = g.read("generator/weight", {V, embed_dim}, why);
  gen.bias = g.read_optional("generator/bias", {V}, why);
  return gen;
}

void generator_logits(float* logits, const float* x, const Generator& gen, std::int64_t rows) {
  blas::linear(logits, x, gen.weight.data(), gen.bias.size() ? gen.bias.data() : nullptr, rows, gen.weight.dim(1),
               gen.vocab());
}

namespace {

constexpr double kDead = -std::numeric_limits<double>::infinity();

// log_softmax of one row of logits, in double.
void log_softmax(const float* logits, std::int64_t V, std::vector<double>& out) {
  out.resize(static_cast<std::size_t>(V));
  const double mx = *std::max_element(logits, logits + V);
  double sum = 0;
  for (std::int64_t v = 0; v < V; ++v) sum += std::exp(logits[v] - mx);
  const double lse = mx + std::log(sum);
  for (std::int64_t v = 0; v < V; ++v) out[static_cast<std::size_t>(v)] = logits[v] - lse;
}

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

// One step of beam search over logits (rows, V); returns each new row's parent row.
std::vector<std::int64_t> select(Beams& bm, const float* logits, std::int64_t V, std::int64_t K,
                                 const GenerateOptions& opt) {
  const std::int64_t B = bm.rows / K;
  Beams next = bm;
  std::vector<std::int64_t> parent(static_cast<std::size_t>(bm.rows));
  std::vector<Proposal> props;
  std::vector<double> logp;
  for (std::int64_t b = 0; b < B; ++b) {
    props.clear();
    for (std::int64_t k = 0; k < K; ++k) {
      const auto r = static_cast<std::size_t>(b * K + k);
      if (bm.score[r] == kDead) continue;
      if (bm.done[r]) {
        props.push_back({bm.score[r], k, -1});
        continue;
      }
      log_softmax(logits + static_cast<std::int64_t>(r) * V, V, logp);
      for (std::int64_t v = 0; v < V; ++v) props.push_back({bm.score[r] + logp[static_cast<std::size_t>(v)], k, v});
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
        next.done[r] = p.token == opt.eos;
      }
    }
  }
  bm = std::move(next);
  return parent;
}

} // namespace

Generated generate(const Decoder& dec, const TokenEmbedding& tgt, const Generator& gen, const float* memory,
                   std::int64_t batch, std::int64_t s, const Mask& memory_mask, const GenerateOptions& opt) {
  const std::int64_t K = opt.beam, R = batch * K, V = gen.vocab(), E = dec.embed_dim(), Em = dec.memory_dim();
  const std::int64_t N = opt.max_len;
  if (N <= 0 || K <= 0) throw UsageError("generate: max_len and beam must be positive");

  // Beam k of item b reads item b's memory.
  Tensor repeated;
  if (K > 1) {
    repeated = Tensor(Shape{R, s, Em}, Uninitialized{});
    for (std::int64_t r = 0; r < R; ++r) std::copy_n(memory + (r / K) * s * Em, s * Em, repeated.data() + r * s * Em);
    memory = repeated.data();
  }
  const Mask mmask = mask_items(memory_mask, 0, batch, K, 1);

  Beams bm{R,
           N,
           std::vector<std::int64_t>(static_cast<std::size_t>(R * N), opt.pad),
           std::vector<std::int64_t>(static_cast<std::size_t>(R), 0),
           std::vector<double>(static_cast<std::size_t>(R), kDead),
           std::vector<std::uint8_t>(static_cast<std::size_t>(R), 0)};
  for (std::int64_t b = 0; b < batch; ++b) bm.score[static_cast<std::size_t>(b * K)] = 0; // one live beam to start

  DecoderCache cache;
  if (opt.cache) cache = start_decoder_cache(dec, memory, R, s, N);
  Tensor x(Shape{R, E}, Uninitialized{}), logits(Shape{R, V}, Uninitialized{});
  std::vector<std::int64_t> ids;
  for (std::int64_t t = 0; t < N; ++t) {
    if (opt.cache) { // the last token of each row, at position t
      ids.assign(static_cast<std::size_t>(R), opt.bos);
      if (t > 0)
        for (std::int64_t r = 0; r < R; ++r)
          ids[static_cast<std::size_t>(r)] = bm.tokens[static_cast<std::size_t>(r * N + t - 1)];
      embed_tokens(x.data(), ids.data(), R, 1, tgt, t, "generated tokens");
      decoder_step(dec, cache, x.data(), mmask);
    } else { // bos and every token so far, through the whole stack; keep position t
      const std::int64_t n = t + 1;
      ids.resize(static_cast<std::size_t>(R * n));
      for (std::int64_t r = 0; r < R; ++r) {
        ids[static_cast<std::size_t>(r * n)] = opt.bos;
        std::copy_n(bm.tokens.begin() + r * N, t, ids.begin() + r * n + 1);
      }
      Tensor xs(Shape{R, n, E}, Uninitialized{});
      embed_tokens(xs.data(), ids.data(), R, n, tgt, 0, "generated tokens");
      Mask causal;
      causal.n = causal.m = n, causal.causal = true;
      const Mask prefix_mmask = mask_items(memory_mask, 0, batch, K, n);
      decoder_forward(dec, xs.data(), R, n, memory, s, causal, prefix_mmask);
      for (std::int64_t r = 0; r < R; ++r) std::copy_n(xs.data() + (r * n + t) * E, E, x.data() + r * E);
    }
    generator_logits(logits.data(), x.data(), gen, R);
    const std::vector<std::int64_t> parent = select(bm, logits.data(), V, K, opt);
    if (opt.cache && K > 1) reorder_decoder_cache(cache, parent);
    if (std::all_of(bm.done.begin(), bm.done.end(), [](std::uint8_t d) { return d != 0; })) break;
  }

  // Each item's best hypothesis (ties: the lower beam).
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
          j < bm.len[r] ? bm.tokens[r * static_cast<std::size_t>(N) + static_cast<std::size_t>(j)] : opt.pad;
    out.scores.push_back(bm.score[r]);
  }
  return out;
}

} // namespace attn
