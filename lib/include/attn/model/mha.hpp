// Multi-head attention as PyTorch's nn.MultiheadAttention (batch_first), with grouped-query
// attention and rotary position embeddings (CONTRACT.md sections 2, 3 and 5, mha-run):
//
//   q = x_q W_q^T + b_q   (B, n, E)        split into H heads of dh = E / H
//   k = x_k W_k^T + b_k   (B, m, G dh)     G key/value heads; query head h uses KV head h / (H/G)
//   v = x_v W_v^T + b_v   (B, m, G dh)
//   head_h = softmax(q_h k_h^T / sqrt(dh) + mask) v_h
//   out = concat(head_1 .. head_H) W_o^T + b_o   (B, n, E)
//
// As nn.MultiheadAttention(add_bias_kv=True, add_zero_attn=True), the keys and values may end in
// extra rows after the projection: bias_k and bias_v (learned), then a zero row. Every query sees
// them whatever the masks say; the weights then have m + extra columns.
//
// The attention itself is lib/attention's kernel, run over strided views of the projections; or,
// when the module says so, one of lib/linear_attention's linear-time forms over the same views.
// The projections a call makes are head-major (each head's q, k or v one matrix, blas::
// linear_blocks); extra keys are appended to copies in rows.
#pragma once

#include "attn/attention/attention.hpp"
#include "attn/attention/linear_attention.hpp"
#include "attn/attention/posenc.hpp"
#include "attn/core/random.hpp"
#include "attn/core/tensor.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/kernels/linear_weight.hpp"
#include "attn/model/probe.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace attn {

struct MhaShape {
  std::int64_t embed_dim = 0; // E
  std::int64_t heads = 0;     // H
  std::int64_t kv_heads = 0;  // G, dividing H
  std::int64_t kdim = 0, vdim = 0;
  // A head's width when it is not E / H (Hugging Face's head_dim: Mistral NeMo, Qwen3); 0: E / H.
  std::int64_t dh = 0;
  // The scores' factor when it is not 1/sqrt(dh) (T5's attention: 1, its scale folded into W_q); 0:
  // 1/sqrt(dh).
  double scale = 0;
  std::int64_t head_dim() const { return dh ? dh : embed_dim / heads; }
  float score_scale() const {
    return scale > 0 ? static_cast<float>(scale) : 1.0f / std::sqrt(static_cast<float>(head_dim()));
  }
  std::int64_t q_dim() const { return heads * head_dim(); }     // H dh: q's width, out_proj's input
  std::int64_t kv_dim() const { return kv_heads * head_dim(); } // G dh
};

// The parameters in PyTorch's layout: either the packed in_proj_weight (rows q | k | v) or the
// separate q/k/v_proj_weight (for kdim/vdim != E, and for grouped KV heads).
struct MhaWeights {
  MhaShape shape;
  // The Linear weights in any format (float32, or int8 / float16 from a quantized file).
  LinearWeight in_proj_weight;                              // (E + 2 G dh, E), or empty
  LinearWeight q_proj_weight, k_proj_weight, v_proj_weight; // (E, E), (G dh, kdim), (G dh, vdim), or empty
  Tensor in_proj_bias;                                      // (E + 2 G dh), or empty: no bias
  LinearWeight out_proj_weight;                             // (E, E)
  Tensor out_proj_bias;                                     // (E), or empty: no bias
  Tensor bias_k, bias_v;                                    // (1, 1, G dh): add_bias_kv, or empty
  bool add_zero_attn = false;                               // a zero key and value after them
  // A linear-time form in place of softmax (attribute `attention`: linear, performer, linformer;
  // softmax or absent: none), with Performer's features omega (M, dh) or Linformer's E and F
  // (k, m), which fix the number of keys m of every call.
  std::optional<LinearKind> linear;
  std::string linear_source; // the `attention` attribute that chose it ("m.h5:/w@attention"), or ""
  Tensor features;
  LinformerProjections linformer;

  bool packed() const { return in_proj_weight.size() > 0; }
  WeightRows w_q() const;
  WeightRows w_k() const;
  WeightRows w_v() const;
  const float* b_q() const { return in_proj_bias.size() ? in_proj_bias.data() : nullptr; }
  const float* b_k() const { return b_q() ? b_q() + shape.embed_dim : nullptr; }
  const float* b_v() const { return b_q() ? b_q() + shape.embed_dim + shape.kv_dim() : nullptr; }
  const float* b_o() const { return out_proj_bias.size() ? out_proj_bias.data() : nullptr; }
  // Keys (and values) appended after the m projected ones: bias_k, then the zero key.
  std::int64_t extra_keys() const { return (bias_k.size() ? 1 : 0) + (add_zero_attn ? 1 : 0); }
};

struct Rope {
  RopeStyle style = RopeStyle::Half;
  double base = 10000.0;
  std::int64_t dims = 0; // rotated elements of each head, even (partial rotary); 0: all of it
  RopeScaling scaling;   // Hugging Face's rope_scaling (posenc.hpp)
};

// Buffers a stack reuses across its layers' calls (fresh memory is zeroed by the kernel on first
// touch: about 7% of an encoder's time when every call allocated its own). qkv holds a packed
// self-attention's projections and then every call's heads (B, n, E) before out_proj; q and k the
// other projections (k: k's heads, then v's); a layer's feed-forward reuses qkv for its hidden
// values (LayerScratch::hidden), never live at once.
struct MhaScratch {
  Tensor qkv, q, k, k_extra, v_extra, head_weights, avg_weights;
  Tensor probe_scores, probe_weights; // a probe's captures of the raw scores and weights (probe.hpp)
  // With keep_weights, the projections' float32 weights stay packed here from one call to the next
  // (blas::PackedWeight: q or q | k | v, k or k | v, v, out), for a caller that runs the same module
  // again and again (mha-run's groups of items); the same bits. Not for a scratch shared by modules.
  bool keep_weights = false;
  blas::PackedWeight packed[4];
};

// Receives the attention weights of items [first, first + count): (count, H, n, m') per head, or
// (count, n, m') averaged over heads, m' = m + the module's extra keys.
using WeightsSink = std::function<void(std::int64_t first, std::int64_t count, const float* weights)>;

// Keys and values a caller has projected already (a decoder's cache, or its memory projected once).
struct ProjectedKV {
  // row j of item b at k + b * batch + j * row, G dh wide
  const float* k = nullptr;
  const float* v = nullptr;
  std::int64_t batch = 0, row = 0;
  // v's values head-major instead, as a decoder's cache keeps its memory's: head g of item b's value
  // j at v + b batch + g v_head + j dh (0: side by side, as the keys). Not with the module's extra
  // keys.
  std::int64_t v_head = 0;
  // The queries already projected too (a decoding step's one projection of q | k | v), row i of
  // item b at q + (b n + i) q_row; rotated in place with `rope`. Null: the call projects x_q.
  float* q = nullptr;
  std::int64_t q_row = 0;
  // The keys also in column tiles (attention.hpp, KeyTiles: item b, KV head g at k_tiles.at(b, g)),
  // which steps of few queries read instead; unused with extra keys. With float16 tiles, v_f16
  // holds v's values in float16 (the same layout and strides), which those steps read instead too
  // (a decoder's reduced-precision cache).
  KeyTiles k_tiles;
  const std::uint16_t* v_f16 = nullptr;
};

// One call of multi-head attention.
struct MhaCall {
  std::int64_t batch = 0, n = 0, m = 0;
  const float* x_q = nullptr; // (B, n, E)
  const float* x_k = nullptr; // (B, m, kdim)
  const float* x_v = nullptr; // (B, m, vdim)
  // Self-attention (x_q = x_k = x_v): one projection for q, k and v, and lengths or key padding
  // cover the queries too: a padded query's output and weights are 0.
  bool self_attention = false;
  const Mask* mask = nullptr;
  // Queries whose output and weights are 0 (Mask::padding(b, i) true); self-attention uses `mask`.
  const Mask* query_padding = nullptr;
  // Keys and values already projected, by a decoder's cache (ProjectedKV); x_k and x_v are then unused.
  std::optional<ProjectedKV> projected;
  // On q and k per head: key j at position j, query i at i + (m - n). Keys given projected are
  // taken as already rotated at their positions (a cache rotates each key once, as it enters).
  std::optional<Rope> rope;
  float* out = nullptr;     // (B, n, E)
  float* weights = nullptr; // (B, H, n, m + w.extra_keys()) per head, or null
  // Instead of `weights`: the weights handed over as groups of items finish, so a call never
  // holds more than a few MiB of them; per head, or averaged over heads when sink_averaged.
  WeightsSink weights_sink;
  bool sink_averaged = false;
  std::int64_t sink_items = 0;   // items per group; 0: as many as fit 8 MiB of weights (at least 1)
  MhaScratch* scratch = nullptr; // null: the call allocates its own
  // A probed run (probe.hpp): q, k, v (after RoPE) and z (before out_proj) handed to the probe,
  // which may change them; the raw scores and weights captured or edited in the kernel.
  const ProbeSite* probe = nullptr;
};

void multi_head_attention(const MhaWeights& w, const MhaCall& c);

// k, v (rows, G dh) = x_k W_k^T + b_k and x_v W_v^T + b_v: the keys and values ProjectedKV's k and
// v take; keep_k and keep_v, when given, keep W_k and W_v packed (MhaScratch::packed).
void project_keys_values(const MhaWeights& w, const float* x_k, const float* x_v, std::int64_t rows, float* k, float* v,
                         blas::PackedWeight* keep_k = nullptr, blas::PackedWeight* keep_v = nullptr);

} // namespace attn
