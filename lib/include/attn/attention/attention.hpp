// Attention: softmax(score(q_i, k_j) + mask) v, for one or many heads (CONTRACT.md section 2).
//
// Shapes use B (batch), H (query heads), G (key/value heads, dividing H: query head h uses KV head
// h / kv_group, kv_group = H / G; as in mha.hpp), n (queries), m (keys), dk, dv. Operands are
// strided views, so the same kernel serves attn-score's (b, n, d) tensors and the (b, n, H*dh)
// projections of multi-head attention.
//
// Two fast paths and a reference:
//   - blocked (FlashAttention on CPU): query blocks x key blocks, running max and sum, rescaled
//     accumulator. Memory O(n d). Used when neither weights, raw scores nor top-k are requested.
//     Window attention visits only the keys in the window. For dot-product scores and query blocks
//     of at least 16 rows, the fused kernel (src/kernels/isa/attention_kernels.hpp: scores, softmax and P V in
//     our own SIMD loops, the same bits on every instruction set); for fewer rows, score tiles and
//     P V by loops that read K and V in place; for other scorers, sgemm per tile.
//   - row blocks: a query block's full score rows (block x m) are kept, for weights, scores and
//     top-k. Memory O(block m) per thread beyond the outputs.
//   - reference: one query at a time in double precision, straight from the definitions.
//     Selected by ATTN_REFERENCE=1 in the environment, for bisecting numerical differences.
#pragma once

#include "attn/attention/mask.hpp"
#include "attn/core/tensor.hpp"
#include "attn/kernels/blas.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace attn {

// Element (b, h, r, c) of a view is data[b * batch + h * head + r * row + c].
struct View {
  const float* data = nullptr;
  std::int64_t batch = 0, head = 0, row = 0;
  const float* at(std::int64_t b, std::int64_t h, std::int64_t r) const {
    return data + b * batch + h * head + r * row;
  }
};
struct OutView {
  float* data = nullptr;
  std::int64_t batch = 0, head = 0, row = 0;
  float* at(std::int64_t b, std::int64_t h, std::int64_t r) const { return data + b * batch + h * head + r * row; }
};

// --- scores ----------------------------------------------------------------------------------------

class Scorer {
public:
  virtual ~Scorer() = default;
  // s (ni, nj), leading dimension lds: raw scores of queries i0.. and keys j0.. of (b, h).
  virtual void tile(float* s, std::int64_t lds, std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t ni,
                    std::int64_t j0, std::int64_t nj) const = 0;
  // One score in double precision (the reference path).
  virtual double exact(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const = 0;
};

// Keys also held in column tiles, d-major (a decoder's memory keys, laid out once for its steps):
// blocks of `width` keys (a multiple of 16), key j's value t of item b and KV head g at
//   at(b, g)[((j / width) d + t) width + j % width]
// (linear_weight.hpp's layout, keys as its rows, with blocks `width` wide), zero past the last key.
// A decoding step's scores then stream them with no transposing, 16 keys to a vector; the tiles of
// 16 keys a kernel call reads together share a block (key_tile_width), so they are one contiguous
// run per value of d instead of that many runs of 16 keys' values (a head of 512 keys, d = 64,
// float16: blocks of 128 streamed 1.8x the rate of blocks of 16, float32 blocks of 64 1.1x). The
// tiles are float32 (data) or float16 (f16: a reduced-precision cache, half the bytes a step
// reads, each value widened exactly as it is loaded).
// Queries per head below which attention reads keys from KeyTiles and values from float16 copies
// when it has them (a decoding step's few queries); from this many on, the fused kernel, which
// computes a whole vector of queries at a time, reads the float32 rows.
constexpr std::int64_t few_query_rows = 16;

struct KeyTiles {
  const float* data = nullptr;
  const std::uint16_t* f16 = nullptr;
  std::int64_t batch = 0, head = 0, width = 16;
  const float* at(std::int64_t b, std::int64_t g) const { return data + b * batch + g * head; }
  const std::uint16_t* at_f16(std::int64_t b, std::int64_t g) const { return f16 + b * batch + g * head; }
  bool empty() const { return !data && !f16; }
};

// A view of float16 values, element (b, h, r, c) at data[b * batch + h * head + r * row + c].
struct HalfView {
  const std::uint16_t* data = nullptr;
  std::int64_t batch = 0, head = 0, row = 0;
  const std::uint16_t* at(std::int64_t b, std::int64_t h, std::int64_t r) const {
    return data + b * batch + h * head + r * row;
  }
};

// k (items, m, ldk) with `heads` heads of d values from column 0 of each row -> tiles (items, heads,
// key_tiles_floats(m, d, width)), KeyTiles' layout in blocks of `width` keys (batch = heads * that,
// head = that); float32, or float16 rounded to nearest (floats_to_f16).
void to_key_tiles(float* tiles, const float* k, std::int64_t items, std::int64_t m, std::int64_t ldk,
                  std::int64_t heads, std::int64_t d, std::int64_t width);
void to_key_tiles(std::uint16_t* tiles, const float* k, std::int64_t items, std::int64_t m, std::int64_t ldk,
                  std::int64_t heads, std::int64_t d, std::int64_t width);
std::int64_t key_tiles_floats(std::int64_t m, std::int64_t d, std::int64_t width); // per item and head
// The block width the instruction set's kernels read best (blas::linear_isa()): the tiles of 16 keys
// a decoding step's scores take at once for one query, float32 or float16 keys.
std::int64_t key_tile_width(bool f16);

// scale * q_i . k_j with q (B, H, n, d), k (B, G, m, d): dot, scaled dot, and (with q already
// multiplied by W) Luong's general score. With key tiles, steps of few queries read those instead.
class DotScorer final : public Scorer {
public:
  DotScorer(View q, View k, std::int64_t d, std::int64_t kv_group, float scale, KeyTiles tiles = {})
      : q_(q), k_(k), d_(d), group_(kv_group), scale_(scale), tiles_(tiles) {}
  void tile(float* s, std::int64_t lds, std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t ni,
            std::int64_t j0, std::int64_t nj) const override;
  double exact(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const override;
  // Its operands, for the fused kernel (which computes these scores itself).
  const View& q() const { return q_; }
  const View& k() const { return k_; }
  std::int64_t d() const { return d_; }
  std::int64_t kv_group() const { return group_; }
  float scale() const { return scale_; }
  const KeyTiles& key_tiles() const { return tiles_; } // data null: none

private:
  View q_, k_;
  std::int64_t d_, group_;
  float scale_;
  KeyTiles tiles_;
};

// Bahdanau: v . tanh(qp_i + kp_j) with the projections qp = q W_q^T (B, n, hid) and
// kp = k W_k^T (B, m, hid) computed once; never an (n, m, hid) tensor. Single head.
class AdditiveScorer final : public Scorer {
public:
  // qp (B, n, hid) and kp (B, m, hid) must outlive the scorer.
  AdditiveScorer(const float* qp, const float* kp, std::int64_t n, std::int64_t m, std::vector<float> v);
  void tile(float* s, std::int64_t lds, std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t ni,
            std::int64_t j0, std::int64_t nj) const override;
  double exact(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const override;

private:
  const float* qp_;
  const float* kp_;
  std::int64_t n_, m_, hid_;
  std::vector<float> v_;
};

// --- the kernel ------------------------------------------------------------------------------------

struct Attention {
  std::int64_t batch = 1, heads = 1, n = 0, m = 0, dv = 0;
  std::int64_t kv_group = 1; // query heads per KV head
  const Scorer* scorer = nullptr;
  View v; // (B, G, m, dv); data null: no value tensor
  // v's values in float16, which steps of few queries read instead (with the keys' float16 tiles:
  // a decoder's reduced-precision cache); data null: none
  HalfView v_f16;
  const Mask* mask = nullptr;
  std::int64_t mask_batch = 0; // the mask's batch index of item 0 (a call over some of the items)
  OutView out;                 // (B, H, n, dv); data null: not wanted
  OutView weights;             // (B, H, n, m); data null: not wanted
  OutView scores;              // raw scores (B, H, n, m), before masks; data null: not wanted
  // Row edits (a probe's patches, probe.hpp): rows i0 .. i0 + ni of (b, h), leading dimension lds,
  // edited as raw scores (before `scores` is written and the mask applied) and as weights (before
  // P V). Either takes the row blocks' path.
  using RowEdit =
      std::function<void(std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t ni, float* s, std::int64_t lds)>;
  RowEdit edit_scores, edit_weights;
};

// Fills out (and weights, scores when wanted). A query that sees no key gets weights 0 and out 0.
void attention(const Attention& a);
// The fast paths, named (attention() picks one, or the reference under ATTN_REFERENCE=1).
void attention_blocked(const Attention& a);
// The blocked path with the fused kernel on the given instruction set (scalar when unavailable);
// attention_blocked uses blas::linear_isa(). Every instruction set gives the same bits.
void attention_blocked_on(blas::Isa isa, const Attention& a);
void attention_rows(const Attention& a);
void attention_reference(const Attention& a);

// x[c] = exp(x[c] - shift) for c < n, where every x[c] - shift <= 0 (as softmax's exponents): the
// kernel's vectorised exp (1.24 ulp), for other users of such exponents (Performer's features).
void exp_shifted(float* x, std::int64_t n, float shift);

} // namespace attn
