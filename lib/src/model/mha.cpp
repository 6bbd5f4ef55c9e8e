// Multi-head attention's forward pass: projections, RoPE, extra keys, the attention kernel or a
// linear form, out_proj (mha.hpp).
#include "attn/model/mha.hpp"

#include "attn/core/error.hpp"
#include "attn/core/init.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/kernels/parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace attn {

WeightRows MhaWeights::w_q() const {
  return packed() ? WeightRows(in_proj_weight, 0, shape.q_dim()) : WeightRows(q_proj_weight);
}

WeightRows MhaWeights::w_k() const {
  return packed() ? WeightRows(in_proj_weight, shape.q_dim(), shape.kv_dim()) : WeightRows(k_proj_weight);
}

WeightRows MhaWeights::w_v() const {
  return packed() ? WeightRows(in_proj_weight, shape.q_dim() + shape.kv_dim(), shape.kv_dim())
                  : WeightRows(v_proj_weight);
}

namespace {

// Weights a call with a sink holds at a time (8 MiB): one (8, 512, 512) item.
constexpr std::int64_t sink_floats = 2 << 20;

// avg (B, n, m) = the mean over heads of weights (B, H, n, m).
void average_heads(float* avg, const float* weights, std::int64_t B, std::int64_t H, std::int64_t n, std::int64_t m) {
  const float inv = 1.0f / static_cast<float>(H);
  parallel_for(B * n, threads_if(B * n * m * H > (1 << 16)), [&](std::int64_t bi) {
    const std::int64_t b = bi / n, i = bi % n;
    float* out = avg + bi * m;
    std::fill_n(out, m, 0.0f);
    for (std::int64_t h = 0; h < H; ++h) {
      const float* wr = weights + ((b * H + h) * n + i) * m;
      for (std::int64_t j = 0; j < m; ++j) out[j] += wr[j];
    }
    for (std::int64_t j = 0; j < m; ++j) out[j] *= inv;
  });
}

// dst (B, m + extra, G dh) = keys or values 0..m-1 (head g of item b's j at src.at(b, g, j), dh
// floats), then `bias` (G dh, or empty), then a zero row when `zero`: add_bias_kv's and
// add_zero_attn's keys or values, in rows.
void append_extra_rows(float* dst, const View& src, std::int64_t B, std::int64_t m, std::int64_t G, std::int64_t dh,
                       const Tensor& bias, bool zero) {
  const std::int64_t kv = G * dh, mx = m + (bias.size() ? 1 : 0) + (zero ? 1 : 0);
  for (std::int64_t b = 0; b < B; ++b) {
    float* out = dst + b * mx * kv;
    for (std::int64_t j = 0; j < m; ++j)
      for (std::int64_t g = 0; g < G; ++g) std::copy_n(src.at(b, g, j), dh, out + j * kv + g * dh);
    float* next = out + m * kv;
    if (bias.size()) next = std::copy_n(bias.data(), kv, next);
    if (zero) std::fill_n(next, kv, 0.0f);
  }
}

} // namespace

namespace {

// Where a call's q, k and v lie: item b's rows at q + b q_batch (k, v: + b kv_batch), head h's at
// + h q_head (k_head, v_head), row i at + i ldq (ldk, ldv).
struct Projections {
  float* q = nullptr;
  const float *k = nullptr, *v = nullptr;
  float* k_ours = nullptr; // k when this call projected it, head-major (RoPE rotates it in place)
  std::int64_t ldq = 0, ldk = 0, ldv = 0, kv_batch = 0, q_head = 0, k_head = 0, v_head = 0;
  std::int64_t q_batch = -1; // -1: n ldq
};

// Projections, head-major: each head's q, k and v as one (rows, dh) matrix, the H heads of q (B n
// rows each), then the G of k and the G of v (B m rows each); one product for q | k | v in packed
// self-attention (into qkv), one for k | v when a packed module's keys and values come from one
// input, else one each (or q alone, in rows, when the keys and values come projected). The
// attention kernel then reads a head's rows one after another, not a projection's width apart,
// where the hardware's prefetchers follow them (paired runs, the same bits: mha-run's computation
// 1.04-1.05x, encode 1.02x, decode teacher-forced 1.03x).
Projections project(const MhaWeights& w, const MhaCall& c, MhaScratch& sc, float* qkv, bool packed_self) {
  const MhaShape& s = w.shape;
  // Q: q's width H dh (E unless the model's heads are of another width)
  const std::int64_t B = c.batch, n = c.n, m = c.m, Q = s.q_dim(), H = s.heads, G = s.kv_heads, dh = s.head_dim(),
                     kv = s.kv_dim();
  const auto keep = [&sc](int i) { return sc.keep_weights ? &sc.packed[i] : nullptr; };
  Projections p;
  p.q_head = p.k_head = p.v_head = dh;
  if (c.projected) {
    const ProjectedKV& kv_in = *c.projected;
    if (kv_in.q) {
      p.q = kv_in.q, p.ldq = kv_in.q_row;
    } else {
      p.q = reserve(sc.q, B * n * Q), p.ldq = Q;
      blas::linear(p.q, c.x_q, w.w_q(), w.b_q(), B * n, keep(0));
    }
    p.k = kv_in.k, p.v = kv_in.v;
    p.ldk = p.ldv = kv_in.row, p.kv_batch = kv_in.batch;
    if (kv_in.v_head) {
      if (w.extra_keys()) throw Error("multi_head_attention: head-major values with bias_k or add_zero_attn");
      p.ldv = dh, p.v_head = kv_in.v_head;
    }
    return p;
  }
  const std::int64_t q_block = B * n * dh, kv_block = B * m * dh;
  if (packed_self) { // one product (m = n)
    p.q = qkv;
    blas::linear_blocks(p.q, c.x_q, w.in_proj_weight, w.b_q(), B * n, {dh, q_block}, keep(0));
    p.k_ours = p.q + H * q_block;
  } else {
    p.q = reserve(sc.q, B * n * Q);
    blas::linear_blocks(p.q, c.x_q, w.w_q(), w.b_q(), B * n, {dh, q_block}, keep(0));
    p.k_ours = reserve(sc.k, B * m * 2 * kv);
    if (w.packed() && c.x_k == c.x_v) { // keys and values of one input (a decoder's memory): one product
      blas::linear_blocks(p.k_ours, c.x_k, WeightRows(w.in_proj_weight, Q, 2 * kv), w.b_k(), B * m, {dh, kv_block},
                          keep(1));
    } else {
      blas::linear_blocks(p.k_ours, c.x_k, w.w_k(), w.b_k(), B * m, {dh, kv_block}, keep(1));
      blas::linear_blocks(p.k_ours + G * kv_block, c.x_v, w.w_v(), w.b_v(), B * m, {dh, kv_block}, keep(2));
    }
  }
  p.k = p.k_ours, p.v = p.k + G * kv_block;
  p.ldq = p.ldk = p.ldv = dh, p.q_batch = n * dh, p.kv_batch = m * dh, p.q_head = q_block;
  p.k_head = p.v_head = kv_block;
  return p;
}

// RoPE on q and on the keys this call projected (keys given projected are rotated already).
void rotate(const MhaWeights& w, const MhaCall& c, const Projections& p) {
  if (w.extra_keys()) throw Error("multi_head_attention: RoPE with bias_k or add_zero_attn is not defined");
  const std::int64_t B = c.batch, n = c.n, m = c.m, H = w.shape.heads, G = w.shape.kv_heads, dh = w.shape.head_dim();
  const Rope& r = *c.rope;
  if (p.k_ours) { // each head's rows, as H B (or G B) items of n (or m) rows of dh
    apply_rope(p.q, H * B, n, 1, dh, r.style, r.base, m - n, dh, r.dims, r.scaling);
    apply_rope(p.k_ours, G * B, m, 1, dh, r.style, r.base, 0, dh, r.dims, r.scaling);
  } else {
    apply_rope(p.q, B, n, H, dh, r.style, r.base, m - n, p.ldq, r.dims, r.scaling);
  }
}

// add_bias_kv and add_zero_attn: keys and values m.. (bias_k, then zeros) that every query sees,
// copied after the m keys into rows; `extended` receives the mask widened to them.
void append_extra_keys(const MhaWeights& w, const MhaCall& c, MhaScratch& sc, Projections& p, Mask& extended) {
  const std::int64_t B = c.batch, n = c.n, m = c.m, G = w.shape.kv_heads, dh = w.shape.head_dim(),
                     kv = w.shape.kv_dim(), extra = w.extra_keys(), mx = m + extra;
  float* k_ext = reserve(sc.k_extra, B * mx * kv);
  float* v_ext = reserve(sc.v_extra, B * mx * kv);
  append_extra_rows(k_ext, {p.k, p.kv_batch, p.k_head, p.ldk}, B, m, G, dh, w.bias_k, w.add_zero_attn);
  append_extra_rows(v_ext, {p.v, p.kv_batch, p.v_head, p.ldv}, B, m, G, dh, w.bias_v, w.add_zero_attn);
  p.k = k_ext, p.v = v_ext;
  p.ldk = p.ldv = kv, p.kv_batch = mx * kv, p.k_head = p.v_head = dh;
  Mask none; // every key allowed
  none.n = n, none.m = m;
  extended = with_extra_keys(c.mask ? *c.mask : none, B, w.shape.heads, n, extra);
}

// q, k and v to the probe, which may change them: views of the call's projections.
void probe_projections(const MhaWeights& w, const MhaCall& c, const Projections& p) {
  const ProbeSite& site = *c.probe;
  const std::int64_t B = c.batch, H = w.shape.heads, G = w.shape.kv_heads, dh = w.shape.head_dim();
  const std::int64_t qb = p.q_batch >= 0 ? p.q_batch : c.n * p.ldq;
  if (site.touches(Act::Q)) site.at(Act::Q, {p.q, B, H, c.n, dh, qb, p.q_head, p.ldq});
  if (site.kv_given || (!site.touches(Act::K) && !site.touches(Act::V))) return;
  if (!p.k_ours) throw std::logic_error("multi_head_attention: a probe of keys and values given projected");
  site.at(Act::K, {p.k_ours, B, G, c.m, dh, p.kv_batch, p.k_head, p.ldk});
  site.at(Act::V, {p.k_ours + (p.v - p.k), B, G, c.m, dh, p.kv_batch, p.v_head, p.ldv});
}

// The kernel's row edits of a probe's patches of scores and pattern, items from b0.
void probe_edits(const ProbeSite& site, std::int64_t b0, Attention& a) {
  const std::int64_t m = a.m;
  const auto edit = [&site, b0, m](Act name) {
    return [&site, b0, m, name](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t ni, float* s,
                                std::int64_t lds) {
      site.probe->edit_rows(site.layer, name, b0 + b, h, site.pos0 + i0, ni, s, lds, m);
    };
  };
  if (site.changes(Act::Scores)) a.edit_scores = edit(site.act(Act::Scores));
  if (site.changes(Act::Pattern)) a.edit_weights = edit(site.act(Act::Pattern));
}

// heads_out (bn items) = softmax(q_h k_h^T / sqrt(dh) (or the module's scale) + mask) v_h for items b0.. of the call,
// or the module's linear form; their weights (bn, H, n, mx) into `weights` when not null.
void attend(const MhaWeights& w, const MhaCall& c, const Projections& p, const Mask* mask, std::int64_t b0,
            std::int64_t bn, const OutView& heads_out, float* weights, float* scores) {
  const MhaShape& s = w.shape;
  const std::int64_t n = c.n, m = c.m, H = s.heads, dh = s.head_dim(), extra = w.extra_keys(), mx = m + extra;
  const std::int64_t item_weights = H * n * mx, kv_group = H / s.kv_heads;
  const float scale = s.score_scale();
  const std::int64_t qb = p.q_batch >= 0 ? p.q_batch : n * p.ldq;
  const View qv{p.q + b0 * qb, qb, p.q_head, p.ldq}, kview{p.k + b0 * p.kv_batch, p.kv_batch, p.k_head, p.ldk},
      vview{p.v + b0 * p.kv_batch, p.kv_batch, p.v_head, p.ldv};
  if (w.linear) {
    LinearAttention a;
    a.kind = *w.linear;
    a.source = w.linear_source;
    a.batch = bn, a.heads = H, a.kv_group = kv_group, a.n = n, a.m = m, a.d = a.dv = dh;
    a.q = qv, a.k = kview, a.v = vview;
    a.mask = mask, a.mask_batch = b0;
    a.scale = scale;
    a.features = &w.features, a.proj = &w.linformer;
    a.out = heads_out;
    if (weights) a.weights = {weights, item_weights, n * mx, mx};
    return linear_attention(a);
  }
  KeyTiles tiles; // the caller's, from item b0
  if (c.projected && !c.projected->k_tiles.empty() && !extra) {
    tiles = c.projected->k_tiles;
    if (tiles.data) tiles.data = c.projected->k_tiles.at(b0, 0);
    if (tiles.f16) tiles.f16 = c.projected->k_tiles.at_f16(b0, 0);
  }
  const DotScorer scorer(qv, kview, dh, kv_group, scale, tiles);
  Attention a;
  a.batch = bn, a.heads = H, a.n = n, a.m = mx, a.dv = dh, a.kv_group = kv_group;
  a.scorer = &scorer;
  a.v = vview;
  if (c.projected && c.projected->v_f16 && !extra)
    a.v_f16 = {c.projected->v_f16 + b0 * p.kv_batch, p.kv_batch, p.v_head, p.ldv};
  Mask no_mask; // every key allowed
  no_mask.n = n, no_mask.m = mx;
  a.mask = mask ? mask : &no_mask;
  a.mask_batch = mask ? b0 : 0;
  a.out = heads_out;
  if (weights) a.weights = {weights, item_weights, n * mx, mx};
  if (scores) a.scores = {scores, item_weights, n * mx, mx};
  if (c.probe) probe_edits(*c.probe, b0, a);
  attention(a);
}

} // namespace

// The phases: project, rotate, extra keys, attend (in groups of items when a sink takes the
// weights), out_proj.
void multi_head_attention(const MhaWeights& w, const MhaCall& c) {
  const MhaShape& s = w.shape;
  const std::int64_t B = c.batch, n = c.n, m = c.m, E = s.embed_dim, Q = s.q_dim(), H = s.heads, kv = s.kv_dim();
  MhaScratch own;
  MhaScratch& sc = c.scratch ? *c.scratch : own;
  // sc.qkv: the packed q | k | v projections, when this call makes them, then the heads' outputs
  const bool packed_self = !c.projected && c.self_attention && w.packed();
  const std::int64_t qkv_floats = packed_self ? B * n * (Q + 2 * kv) : 0;
  float* const qkv = reserve(sc.qkv, qkv_floats + B * n * Q);
  Projections p = project(w, c, sc, qkv, packed_self);
  if (c.rope) rotate(w, c, p);
  if (c.probe) probe_projections(w, c, p);
  const std::int64_t mx = m + w.extra_keys(); // the keys attended to
  const Mask* mask = c.mask;
  Mask extended;
  if (w.extra_keys()) {
    append_extra_keys(w, c, sc, p, extended);
    mask = &extended;
  }

  // heads (B, n, H dh), written side by side; over all items at once, or, with a weights sink,
  // over groups of items whose weights fit sink_floats.
  float* heads = qkv + qkv_floats;
  const std::int64_t item_weights = H * n * mx;
  std::int64_t group = B;
  if (c.weights_sink)
    group = std::clamp<std::int64_t>(
        c.sink_items > 0 ? c.sink_items : sink_floats / std::max<std::int64_t>(item_weights, 1), 1, B);
  const Mask* query_padding = c.query_padding ? c.query_padding : c.self_attention ? c.mask : nullptr;
  const bool averaged = c.weights_sink && c.sink_averaged;
  // a probe's raw scores and weights, (B, H, n, mx), when it captures them
  float* all_weights = c.weights;
  float* probe_scores = nullptr;
  if (c.probe && c.probe->captures(Act::Scores)) probe_scores = reserve(sc.probe_scores, B * H * n * mx);
  if (c.probe && !all_weights && c.probe->captures(Act::Pattern))
    all_weights = reserve(sc.probe_weights, B * H * n * mx);
  for (std::int64_t b0 = 0; b0 < B; b0 += group) {
    const std::int64_t bn = std::min(group, B - b0);
    float* weights = all_weights ? all_weights + b0 * item_weights : nullptr;
    if (!weights && c.weights_sink) weights = reserve(sc.head_weights, bn * item_weights);
    attend(w, c, p, mask, b0, bn, {heads + b0 * n * Q, n * Q, s.head_dim(), Q}, weights,
           probe_scores ? probe_scores + b0 * item_weights : nullptr);
    if (weights && query_padding) zero_padding_rows(weights, bn, H, n, mx, *query_padding, b0);
    float* avg = nullptr;
    if (averaged) {
      avg = reserve(sc.avg_weights, bn * n * mx);
      average_heads(avg, weights, bn, H, n, mx);
    }
    if (c.weights_sink) c.weights_sink(b0, bn, averaged ? avg : weights);
  }

  if (c.probe) {
    const ProbeSite& site = *c.probe;
    if (probe_scores) { // the scores of padded keys are 0, as those keys are written
      if (site.key_padding)
        for (std::int64_t b = 0; b < B; ++b)
          for (std::int64_t j = 0; j < m; ++j)
            if (site.key_padding->padding(b, j))
              for (std::int64_t r = 0; r < H * n; ++r) probe_scores[(b * H * n + r) * mx + j] = 0.0f;
      site.at(Act::Scores, {probe_scores, B, H, n, mx, item_weights, n * mx, mx, 0, true});
    }
    if (all_weights && site.captures(Act::Pattern))
      site.at(Act::Pattern, {all_weights, B, H, n, mx, item_weights, n * mx, mx, 0, true});
    if (site.touches(Act::Z)) site.at(Act::Z, {heads, B, H, n, s.head_dim(), n * Q, s.head_dim(), Q});
  }

  // out = heads W_o^T + b_o; a query that saw no key has heads 0 and so out = b_o.
  blas::linear(c.out, heads, w.out_proj_weight, w.b_o(), B * n, sc.keep_weights ? &sc.packed[3] : nullptr);
  if (query_padding) zero_padding(c.out, B, n, E, *query_padding);
}

void project_keys_values(const MhaWeights& w, const float* x_k, const float* x_v, std::int64_t rows, float* k, float* v,
                         blas::PackedWeight* keep_k, blas::PackedWeight* keep_v) {
  blas::linear(k, x_k, w.w_k(), w.b_k(), rows, keep_k);
  blas::linear(v, x_v, w.w_v(), w.b_v(), rows, keep_v);
}

} // namespace attn
