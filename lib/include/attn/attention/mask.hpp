// The mask of CONTRACT.md section 2 as the kernel applies it: which keys each query sees and what
// is added to its scores, the zeroing of padded rows, and the mask of a batch's part. No I/O: the
// mask files are read by mask_files.hpp.
#pragma once

#include "attn/attention/posenc.hpp"
#include "attn/core/tensor.hpp"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace attn {

// A mask tensor broadcast to (B, H, n, m): axes of size 1 have stride 0.
struct BroadcastMask {
  std::vector<float> values; // blocked: 1/0; additive: the bias
  std::int64_t sb = 0, sh = 0, si = 0, sj = 0;
  float at(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    return values[static_cast<std::size_t>(b * sb + h * sh + i * si + j * sj)];
  }
};

// Which keys each query may see, and what is added to its scores. Queries stand at key position
// p = i + (m - n). The sparse patterns (window, stride, global), when any is given, allow their
// union; causal, lengths, key padding and a boolean mask then remove keys; top-k keeps the best.
struct Mask {
  std::int64_t n = 0, m = 0;
  bool causal = false;
  std::vector<std::int64_t> lengths;            // (B,) valid keys, or empty
  std::vector<std::uint8_t> key_padding;        // (B, m) nonzero = ignored, or empty
  std::unique_ptr<BroadcastMask> blocked;       // nonzero = blocked
  std::unique_ptr<BroadcastMask> bias;          // additive; -inf blocks
  std::int64_t window = -1;                     // |p - j| <= window
  std::int64_t stride = 0;                      // (p - j) mod stride == 0
  std::vector<std::uint8_t> global;             // (m,) global key positions, or empty
  std::int64_t top_k = 0;                       // 0: every allowed key
  std::vector<double> alibi;                    // (H,) ALiBi slopes: -slope_h * |p - j| added, or empty
  std::shared_ptr<const RelativeBias> relative; // T5's bias table[bucket(j - p)][h] added, or null

  bool has_pattern() const { return window >= 0 || stride > 0 || !global.empty(); }
  // A window and no other pattern: each query's keys are a band around its position (key_range).
  bool window_only() const { return window >= 0 && stride == 0 && global.empty(); }
  // Is key position j of item b padding (beyond its length, or marked in the key padding mask)?
  // In self-attention this also marks the padded queries, whose outputs are 0.
  bool padding(std::int64_t b, std::int64_t j) const {
    return (!lengths.empty() && j >= lengths[static_cast<std::size_t>(b)]) ||
           (!key_padding.empty() && key_padding[static_cast<std::size_t>(b * m + j)]);
  }
  bool allowed(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const;
  // The ALiBi term of score (i, j) of head h (0 without ALiBi), in double as alibi_bias computes it.
  double alibi_term(std::int64_t h, std::int64_t i, std::int64_t j) const {
    return alibi.empty() ? 0.0 : -alibi[static_cast<std::size_t>(h)] * static_cast<double>(std::llabs(i + (m - n) - j));
  }
  // The relative bias of score (i, j) of head h (0 without one).
  float relative_term(std::int64_t h, std::int64_t i, std::int64_t j) const {
    return relative ? relative->term(h, j - (i + (m - n))) : 0.0f;
  }
  // Keys [lo, hi) outside which no key of queries i0..i1-1 of item b is allowed.
  void key_range(std::int64_t b, std::int64_t i0, std::int64_t i1, std::int64_t& lo, std::int64_t& hi) const;
  // False when every key in the tile is allowed and nothing is added (the common, fast case).
  bool needs_elementwise(std::int64_t b, std::int64_t i0, std::int64_t ni, std::int64_t j0, std::int64_t nj) const;
};

// The first part of `mask` beyond causal, lengths and key padding, named as its flag names it ("a
// mask tensor (--attn-mask)", "--window", "--stride", "--global", "--top-k", "ALiBi"), or null: for
// the attention forms that apply only those (linear_attention.hpp, monotonic_attention.hpp).
const char* pattern_part(const Mask& mask);

// Zeroes the padded positions of x (B, n, width), those where mask.padding(b, i): every output
// there (output, logits) is 0 (CONTRACT.md section 2).
void zero_padding(float* x, std::int64_t B, std::int64_t n, std::int64_t width, const Mask& mask);
// The same for attention weights (B, H, n, m) of the mask's items first..first+B-1: the rows of
// padded queries are 0.
void zero_padding_rows(float* weights, std::int64_t B, std::int64_t H, std::int64_t n, std::int64_t m, const Mask& mask,
                       std::int64_t first);

// `mask` (n, m) for keys that gain `extra` more at the end (add_bias_kv, add_zero_attn), which
// every query sees unmasked: (n, m + extra), with causal and lengths written out as key padding
// and a blocked mask. Items 0..batch-1 and heads 0..heads-1. A mask of attn-score's patterns or
// top-k is a logic error.
Mask with_extra_keys(const Mask& mask, std::int64_t batch, std::int64_t heads, std::int64_t n, std::int64_t extra);

// Builds a BroadcastMask from a mask tensor of rank 2 (n, m), 3 (B, n, m) or 4 (B, H, n, m);
// throws Error naming `label` when its shape does not broadcast to (batch, heads, n, m).
std::unique_ptr<BroadcastMask> broadcast_mask(std::vector<float> values, const Shape& shape, std::int64_t batch,
                                              std::int64_t heads, std::int64_t n, std::int64_t m,
                                              const std::string& label);

// s (ni, nj), leading dimension lds, scores of queries i0.. and keys j0.. of (b, h): blocked ones
// become -inf, allowed ones get the additive bias.
void apply_mask(float* s, std::int64_t lds, const Mask& mask, std::int64_t b, std::int64_t h, std::int64_t i0,
                std::int64_t ni, std::int64_t j0, std::int64_t nj);
// The same for scores stored transposed: st (nj, ni), leading dimension ld (the fused kernel's).
void apply_mask_transposed(float* st, std::int64_t ld, const Mask& mask, std::int64_t b, std::int64_t h,
                           std::int64_t i0, std::int64_t ni, std::int64_t j0, std::int64_t nj);

// Items [first, first + count) of `mask`, each repeated `repeat` times (beams), for n queries: a
// batch chunk's mask, or an MPI rank's items. Every part is carried (a mask tensor without a batch
// axis stays whole); only causal, lengths and key padding may repeat, any other part then is a
// logic error.
Mask mask_items(const Mask& mask, std::int64_t first, std::int64_t count, std::int64_t repeat, std::int64_t n);

} // namespace attn
