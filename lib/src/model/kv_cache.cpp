// The decoder's key/value cache: self-attention keys and values per step, the memory's projected
// once (kv_cache.hpp).
#include "attn/model/kv_cache.hpp"

#include "attn/attention/posenc.hpp"
#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/kernels/parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace attn {

namespace {

// v (items, s, G dh) -> heads (items, G, s, dh): each head's values of an item one run.
void heads_major(float* heads, const float* v, std::int64_t items, std::int64_t s, std::int64_t G, std::int64_t dh) {
  parallel_for(items * G, blas::threads(), [=](std::int64_t ig) {
    const std::int64_t i = ig / G, g = ig % G;
    for (std::int64_t j = 0; j < s; ++j) std::copy_n(v + (i * s + j) * G * dh + g * dh, dh, heads + (ig * s + j) * dh);
  });
}

// floats_to_f16 over n values, in parallel chunks.
void to_f16(std::uint16_t* h, const float* x, std::int64_t n) {
  constexpr std::int64_t chunk = 1 << 16;
  parallel_for((n + chunk - 1) / chunk, blas::threads(),
               [=](std::int64_t c) { floats_to_f16(h + c * chunk, x + c * chunk, std::min(chunk, n - c * chunk)); });
}

} // namespace

DecoderCache start_decoder_cache(const Decoder& dec, const float* memory, std::int64_t rows, std::int64_t s,
                                 std::int64_t capacity, StepKV step_kv, bool float32_rows, const Probe* probe) {
  const auto L = static_cast<std::int64_t>(dec.layers.size());
  const std::int64_t kv = dec.layers.front().self_attn.shape.kv_dim(),
                     ckv = dec.has_cross ? dec.layers.front().cross_attn.shape.kv_dim() : 0;
  DecoderCache c;
  c.rows = rows, c.capacity = capacity, c.s = s;
  c.self_k = Tensor(Shape{L, rows, capacity, kv}, Uninitialized{});
  c.self_v = Tensor(Shape{L, rows, capacity, kv}, Uninitialized{});
  if (const std::int64_t k = dec.layers.front().ffn.conv_kernel(); k > 1)
    c.conv = Tensor(Shape{L, rows, k - 1, dec.ffn_dim()}); // zeros: the causal padding before position 0
  if (!dec.has_cross) return c;
  const MhaShape& cs = dec.layers.front().cross_attn.shape;
  const std::int64_t G = cs.kv_heads, dh = cs.head_dim(), layer = rows * s * ckv;
  // Values head-major: a step's P V then reads each head's values as one run instead of dh of
  // every s rows (1.45x the rate, 6 layers of (512, 512) on 2 threads). Not with extra keys.
  c.cross_v_heads = std::all_of(dec.layers.begin(), dec.layers.end(),
                                [](const DecoderLayer& l) { return l.cross_attn.extra_keys() == 0; });
  c.cross_k = Tensor(Shape{L, rows, s, ckv}, Uninitialized{});
  c.cross_v = Tensor(Shape{L, rows, s, ckv}, Uninitialized{});
  if (step_kv != StepKV::rows) c.key_width = key_tile_width(step_kv == StepKV::f16);
  const std::int64_t per = key_tiles_floats(s, dh, c.key_width) * G * rows; // a layer's key tiles
  if (step_kv == StepKV::tiles) c.cross_kt = Tensor(Shape{L, per}, Uninitialized{});
  if (step_kv == StepKV::f16)
    c.cross_kt16.resize(static_cast<std::size_t>(L * per)), c.cross_v16.resize(static_cast<std::size_t>(L * layer));
  // Without the float32 rows, a layer's keys go through scratch to their tiles, and with f16 its
  // values through scratch to their float16 copies (float32 tiles' steps read cross_v).
  c.cross_rows = float32_rows || step_kv == StepKV::rows || !c.cross_v_heads;
  const bool v_rows_kept = c.cross_rows || step_kv == StepKV::tiles;
  Tensor v_rows; // a layer's values as projected, before they go head-major
  if (c.cross_v_heads) v_rows = Tensor(Shape{rows * s, ckv}, Uninitialized{});
  Tensor k_layer, v_layer;
  if (!c.cross_rows) k_layer = Tensor(Shape{rows * s, ckv}, Uninitialized{});
  if (!v_rows_kept) v_layer = Tensor(Shape{rows * s, ckv}, Uninitialized{});
  for (std::int64_t l = 0; l < L; ++l) {
    float* k = c.cross_rows ? c.cross_k.data() + l * layer : k_layer.data();
    float* v = v_rows_kept ? c.cross_v.data() + l * layer : v_layer.data();
    project_keys_values(dec.layers[static_cast<std::size_t>(l)].cross_attn, memory, memory, rows * s, k,
                        c.cross_v_heads ? v_rows.data() : v);
    const ProbeSite site{probe, static_cast<std::size_t>(l), true, nullptr, nullptr};
    if (probe && (site.changes(Act::K) || site.changes(Act::V))) { // the memory's keys and values, once
      site.at(Act::K, {k, rows, G, s, dh, s * ckv, dh, ckv});
      site.at(Act::V, {c.cross_v_heads ? v_rows.data() : v, rows, G, s, dh, s * ckv, dh, ckv});
    }
    if (c.cross_v_heads) heads_major(v, v_rows.data(), rows, s, G, dh);
    if (step_kv == StepKV::tiles) to_key_tiles(c.cross_kt.data() + l * per, k, rows, s, ckv, G, dh, c.key_width);
    if (step_kv == StepKV::f16) {
      to_key_tiles(c.cross_kt16.data() + l * per, k, rows, s, ckv, G, dh, c.key_width);
      to_f16(c.cross_v16.data() + l * layer, v, layer);
    }
  }
  return c;
}

namespace {

// t (L, rows, ...) with row r of every layer replaced by row parent[r]: the first `used` values of
// each row copied (what the cache holds so far).
void reorder_rows(Tensor& t, const std::vector<std::int64_t>& parent, std::int64_t rows, std::int64_t used) {
  const std::int64_t L = t.dim(0), row = t.size() / (L * rows);
  Tensor out(t.shape(), Uninitialized{});
  for (std::int64_t l = 0; l < L; ++l)
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy_n(t.data() + (l * rows + parent[static_cast<std::size_t>(r)]) * row, used,
                  out.data() + (l * rows + r) * row);
  t = std::move(out);
}

} // namespace

void reorder_decoder_cache(DecoderCache& c, const std::vector<std::int64_t>& parent) {
  const std::int64_t used = c.len * c.self_k.dim(3);
  reorder_rows(c.self_k, parent, c.rows, used);
  reorder_rows(c.self_v, parent, c.rows, used);
  if (c.conv.size()) reorder_rows(c.conv, parent, c.rows, c.conv.dim(2) * c.conv.dim(3));
  // The cross keys and values depend only on the item, which a beam keeps: nothing to move.
}

void decoder_step(const Decoder& dec, DecoderCache& c, float* x, const Mask& memory_mask, const Probe* probe) {
  decoder_steps(dec, c, x, 1, memory_mask, probe);
}

namespace {

// Layer l's cross-attention over the cached memory: out (R n, E) for the queries in (R n, E).
void cross_attention(const DecoderLayer& layer, const DecoderCache& c, std::int64_t l, std::int64_t n,
                     const Mask& cross_mask, const float* in, float* out, MhaScratch& scratch, const ProbeSite* site) {
  const std::int64_t R = c.rows, ckv = c.cross_k.dim(3);
  const MhaShape& cs = layer.cross_attn.shape;
  MhaCall call;
  call.batch = R, call.n = n, call.m = c.s;
  call.x_q = in;
  ProjectedKV& kv = call.projected.emplace();
  kv.k = c.cross_keys(l), kv.v = c.cross_values(l);
  kv.batch = c.s * ckv, kv.row = ckv;
  if (c.cross_v_heads) kv.v_head = c.s * cs.head_dim();
  const std::int64_t head = key_tiles_floats(c.s, cs.head_dim(), c.key_width), layer_tiles = R * cs.kv_heads * head;
  kv.k_tiles.batch = cs.kv_heads * head, kv.k_tiles.head = head, kv.k_tiles.width = c.key_width;
  if (c.cross_kt.size()) kv.k_tiles.data = c.cross_kt.data() + l * layer_tiles;
  if (!c.cross_kt16.empty()) {
    kv.k_tiles.f16 = c.cross_kt16.data() + l * layer_tiles;
    kv.v_f16 = c.cross_v16.data() + l * R * c.s * ckv;
  }
  call.mask = &cross_mask;
  call.out = out;
  call.scratch = &scratch;
  call.probe = site;
  multi_head_attention(layer.cross_attn, call);
}

} // namespace

void decoder_steps(const Decoder& dec, DecoderCache& c, float* x, std::int64_t n, const Mask& memory_mask,
                   const Probe* probe) {
  const std::int64_t E = dec.embed_dim(), R = c.rows, t = c.len, rows = R * n;
  if (t + n > c.capacity) throw Error(fmt::format("decoder cache full at {} positions", c.capacity));
  if (!c.cross_rows && n >= few_query_rows)
    throw std::logic_error("decoder_steps: a cache without the memory's float32 rows takes fewer positions at once");
  const std::int64_t kv = c.self_k.dim(3);
  if (!c.scratch || c.scratch->normed.dim(0) != rows) c.scratch.emplace(rows, E, dec.opt.parallel_residual);
  LayerScratch& sc = *c.scratch;
  // this step's q | k | v (rows, H dh + 2 kv) in one product when in_proj_weight holds all three (a
  // parallel region instead of three), else k and v (rows, kv) each, the queries left to the call
  const bool packed = dec.layers.front().self_attn.packed();
  const std::int64_t Q = dec.layers.front().self_attn.shape.q_dim(), ld = packed ? Q + 2 * kv : kv;
  if (c.step_qkv.size() == 0 || c.step_qkv.dim(0) != rows)
    c.step_qkv = Tensor(Shape{rows, packed ? ld : 2 * kv}, Uninitialized{});
  Tensor& qkv = c.step_qkv;
  float* k_new = packed ? qkv.data() + Q : qkv.data();
  float* v_new = packed ? qkv.data() + Q + kv : qkv.data() + rows * kv;
  // positions t..t+n-1 over keys 0..t+n-1, causal; the stack's window and ALiBi
  Mask step_mask;
  step_mask.n = n, step_mask.m = t + n, step_mask.causal = n > 1;
  const Mask self_mask = self_attention_mask(step_mask, dec.opt, R, dec.heads());
  const Mask cross_mask = mask_items(memory_mask, 0, R, 1, n); // the memory's lengths or padding, n queries
  const bool rope = dec.opt.positions == LayerPositions::Rope;
  const MhaShape& ss = dec.layers.front().self_attn.shape;
  for (std::size_t i = 0; i < dec.layers.size(); ++i) {
    const DecoderLayer& layer = dec.layers[i];
    const auto l = static_cast<std::int64_t>(i);
    float* self_k = c.self_keys(l);
    float* self_v = c.self_values(l);
    // a probe's sites: positions t..t+n-1, the keys and values changed here before the cache holds them
    const ProbeSite self_site{probe, i, false, nullptr, nullptr, t, true},
        cross_site{probe, i, true, nullptr, nullptr, t, true}, ffn_site{probe, i, false, nullptr, nullptr, t};
    const auto at = [&](Act a, float* data) { probe_at(probe, i, a, data, R, n, E, nullptr, t); };
    const auto attn = [&](const float* in, float* out) {
      // append positions t..t+n-1's keys and values, then attend over positions 0..t+n-1
      if (packed)
        blas::linear(qkv.data(), in, layer.self_attn.in_proj_weight, layer.self_attn.b_q(), rows);
      else
        project_keys_values(layer.self_attn, in, in, rows, k_new, v_new);
      if (rope) // each key rotated once, at its position, as it enters the cache
        apply_rope(k_new, R, n, ss.kv_heads, ss.head_dim(), dec.opt.rope.style, dec.opt.rope.base, t, ld,
                   dec.opt.rope.dims, dec.opt.rope.scaling);
      if (probe && (self_site.changes(Act::K) || self_site.changes(Act::V))) {
        const std::int64_t dh = ss.head_dim();
        self_site.at(Act::K, {k_new, R, ss.kv_heads, n, dh, n * ld, dh, ld});
        self_site.at(Act::V, {v_new, R, ss.kv_heads, n, dh, n * ld, dh, ld});
      }
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t i = 0; i < n; ++i) {
          std::copy_n(k_new + (r * n + i) * ld, kv, self_k + (r * c.capacity + t + i) * kv);
          std::copy_n(v_new + (r * n + i) * ld, kv, self_v + (r * c.capacity + t + i) * kv);
        }
      MhaCall call;
      call.batch = R, call.n = n, call.m = t + n;
      call.x_q = in;
      ProjectedKV& cached = call.projected.emplace();
      if (packed) cached.q = qkv.data(), cached.q_row = ld;
      cached.k = self_k, cached.v = self_v, cached.batch = c.capacity * kv, cached.row = kv;
      call.mask = &self_mask;
      if (rope) call.rope = dec.opt.rope; // the queries, at positions t..t+n-1
      call.out = out;
      call.scratch = &sc.mha;
      call.probe = probe ? &self_site : nullptr;
      multi_head_attention(layer.self_attn, call);
      at(Act::AttnOut, out);
    };
    const auto ffn = [&](const float* in, float* out) {
      FfnSequence seq{R, n, true, nullptr, nullptr};
      if (c.conv.size()) seq.state = c.conv_state(l);
      feed_forward(out, in, layer.ffn, dec.opt.activation, rows, sc.hidden(), sc.gate, seq,
                   probe ? &ffn_site : nullptr);
      at(Act::MlpOut, out);
    };
    at(Act::ResidPre, x);
    if (dec.opt.parallel_residual) { // decoder-only stacks
      parallel_residual(dec.opt, layer.norm1, layer.norm2, x, rows, E, sc, attn, ffn);
      at(Act::ResidPost, x);
      continue;
    }
    residual(dec.opt, layer.norm1, x, rows, E, sc, attn);
    at(Act::ResidMid, x);
    if (dec.has_cross) {
      residual(dec.opt, layer.norm2, x, rows, E, sc, [&](const float* in, float* out) {
        cross_attention(layer, c, l, n, cross_mask, in, out, sc.mha, probe ? &cross_site : nullptr);
        at(Act::CrossAttnOut, out);
      });
      at(Act::CrossResidMid, x);
    }
    residual(dec.opt, dec.ffn_norm(layer), x, rows, E, sc, ffn);
    at(Act::ResidPost, x);
  }
  if (dec.has_final_norm) normalize(x, rows, dec.norm, dec.opt);
  c.len += n;
}

} // namespace attn
