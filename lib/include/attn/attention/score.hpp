// The score functions of attn-score (single head): scaled dot product, dot, Luong's general
// q^T W k, Bahdanau's additive v^T tanh(W_q q + W_k k), and Luong's location-based W_a q (a score
// per source position from the query alone), with their parameters.
#pragma once

#include "attn/attention/attention.hpp"
#include "attn/core/tensor.hpp"

#include <cstdint>
#include <memory>
#include <string_view>

namespace attn {

enum class ScoreKind { ScaledDot, Dot, General, Additive, Location };
// "scaled-dot" | "dot" | "general" | "additive" | "location"
ScoreKind parse_score_kind(std::string_view s);

// general: W (d_q, d_k). additive: W_q (hid, d_q), W_k (hid, d_k), v (hid). location: W_a (m, d_q)
// (Luong et al. 2015, eq. 8: a_i = softmax(W_a q_i), so the keys' values are not used, only m).
struct ScoreParams {
  Tensor W, W_q, W_k, v, W_a;
};

// Xavier-uniform parameters (Glorot and Bengio 2010) as torch.nn.init.xavier_uniform_: U(-a, a),
// a = sqrt(6 / (fan_in + fan_out)) with fan_in = columns and fan_out = rows of a matrix; the
// vector v is treated as a (1, hid) matrix. Drawn in the order W / W_q, W_k, v / W_a from one
// seeded stream.
ScoreParams xavier_score_params(ScoreKind kind, std::int64_t d_q, std::int64_t d_k, std::int64_t hidden, std::int64_t m,
                                std::uint64_t seed);

// Dot-product scores scale * q.k must fit float32, or the softmax of an infinite score is NaN. By
// Cauchy-Schwarz |scale q.k| <= |scale| max|q| max|k| (rows' Euclidean norms), which also bounds
// every partial sum; throws Error naming both tensors when that exceeds half of float32's range.
void check_dot_scores_fit(const Tensor& q, const Tensor& k, float scale, std::string_view q_label,
                          std::string_view k_label);
// The same from the largest row norms (max_row_norm), e.g. taken over several MPI ranks' items.
void check_dot_scores_fit(double max_q_norm, double max_k_norm, float scale, std::string_view q_label,
                          std::string_view k_label);
// The largest Euclidean norm of a row (along the last axis) of t.
double max_row_norm(const Tensor& t);

// Score function ready for the kernel, over q (B, n, d_q) and k (B, m, d_k): it owns what it
// precomputes (q W for general; the projections for additive) and keeps references to q and k.
struct PreparedScorer {
  Tensor q_proj, k_proj; // general: q W; additive: q W_q^T and k W_k^T
  std::unique_ptr<Scorer> scorer;
};
PreparedScorer prepare_scorer(ScoreKind kind, const Tensor& q, const Tensor& k, const ScoreParams& params, float scale);

} // namespace attn
