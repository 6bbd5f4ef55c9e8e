// Monotonic attention (Raffel et al. 2017, "Online and Linear-Time Attention by Enforcing Monotonic
// Alignments"), single head, over the energies of any Scorer (attention.hpp) plus an energy bias r:
//
//   p_ij = sigmoid(e_ij + r)                    the probability that output i stops at input j
//
//   soft (training, the expected alignment, eq. 9 of the paper):
//     alpha_ij = p_ij sum_{k<=j} alpha_{i-1,k} prod_{l=k}^{j-1} (1 - p_il),   alpha_0 = (1, 0, ..., 0)
//   hard (inference, Algorithm 1 with z_ij = [p_ij >= 0.5]): output i attends to the first input
//     j >= t_{i-1} with p_ij >= 0.5, t_i = j; when there is none it attends to nothing (alignment and
//     context 0) and so does every later output (the process ran off the end of the input); t_0 = 0.
//
//   context c_i = sum_j alpha_ij v_j.
//
// The soft form is evaluated as the paper's parallel cumulative-product form rewritten as a
// first-order scan over j: with q_ij = sum_{k<=j} alpha_{i-1,k} prod_{l=k}^{j-1} (1 - p_il),
//   q_i0 = alpha_{i-1,0},  q_ij = (1 - p_i,j-1) q_i,j-1 + alpha_{i-1,j},  alpha_ij = p_ij q_ij,
// the same sums with no division by cumprod(1 - p) (which underflows for long inputs and is why the
// paper clips it): exact and stable for any m, O(m) per output. Rows sum to at most 1 (the mass
// that passes the last input is lost). Padded keys (lengths, key padding) have p = 0: the
// alignment passes over them and never stops there.
#pragma once

#include "attn/attention/attention.hpp"
#include "attn/attention/mask.hpp"

#include <cstdint>

namespace attn {

struct MonotonicAttention {
  bool hard = false;
  std::int64_t batch = 1, n = 0, m = 0, dv = 0;
  const Scorer* scorer = nullptr; // energies e (B, n, m) (head 0)
  float energy_bias = 0.0f;       // r
  const float* v = nullptr;       // (B, m, dv), or null: the alignment alone
  const Mask* mask = nullptr;     // lengths and key padding only (check_monotonic_mask), or null
  float* out = nullptr;           // (B, n, dv) contexts, or null
  float* weights = nullptr;       // (B, n, m) the alignment alpha, or null
  float* scores = nullptr;        // (B, n, m) the energies e (before r and the masks), or null
};

// Throws UsageError naming the part of `mask` monotonic attention does not apply (anything but
// lengths and key padding: the alignment itself decides which inputs an output sees).
void check_monotonic_mask(const Mask& mask);

void monotonic_attention(const MonotonicAttention& a);

// One row of the soft form: alpha (m) from prev (m, alpha_{i-1}) and p (m); the scan above, in
// double.
void soft_monotonic_row(const double* p, const double* prev, double* alpha, std::int64_t m);

} // namespace attn
