// Location-aware (hybrid) attention (Chorowski et al. 2015, "Attention-Based Models for Speech
// Recognition", eq. 5-9), single head. Each query's scores see where the previous query attended,
// so the queries are taken one after another:
//
//   f_i = F * alpha_{i-1}                        (m, K): K filters of odd width r slid along the
//                                                previous alignment, zero-padded, as PyTorch's
//                                                conv1d(padding = (r - 1) / 2) (cross-correlation)
//   e_ij = v^T tanh(W_q q_i + W_k k_j + U f_ij + b)
//   alpha_i = softmax_j(e_ij + mask)             alpha_0 = (1, 0, ..., 0): the first query's
//                                                "previous" alignment is on position 0
//   c_i = sum_j alpha_ij v_j
//
// Luong et al. 2015's location-based score (a_i = softmax(W_a q_i)) is a Scorer of its own
// (score.hpp, ScoreKind::Location): it needs no previous alignment.
#pragma once

#include "attn/attention/mask.hpp"
#include "attn/core/tensor.hpp"

#include <cstdint>

namespace attn {

struct LocationAwareParams {
  Tensor W_q; // (h, d_q)
  Tensor W_k; // (h, d_k)
  Tensor v;   // (h)
  Tensor U;   // (h, K)
  Tensor F;   // (K, r), r odd
  Tensor b;   // (h)
  std::int64_t hidden() const { return v.dim(0); }
  std::int64_t filters() const { return F.dim(0); }
  std::int64_t width() const { return F.dim(1); }
};

// W_q, W_k, v (as a (1, h) matrix), U and F Xavier-uniform, in that order from one seeded stream;
// b zero. Throws UsageError for an even width.
LocationAwareParams xavier_location_aware(std::int64_t d_q, std::int64_t d_k, std::int64_t hidden, std::int64_t filters,
                                          std::int64_t width, std::uint64_t seed);

struct LocationAware {
  std::int64_t batch = 1, n = 0, m = 0, d_q = 0, d_k = 0, dv = 0;
  const float* q = nullptr; // (B, n, d_q)
  const float* k = nullptr; // (B, m, d_k)
  const float* v = nullptr; // (B, m, dv), or null: the alignment alone
  const LocationAwareParams* params = nullptr;
  const Mask* mask = nullptr; // any mask of section 2 and the sparse patterns; not top-k
  float* out = nullptr;       // (B, n, dv), or null
  float* weights = nullptr;   // (B, n, m) the alignments, or null
  float* scores = nullptr;    // (B, n, m) the energies e before the mask, or null
};

// Throws UsageError for top-k (which the step-by-step form does not apply).
void location_aware_attention(const LocationAware& a);

} // namespace attn
