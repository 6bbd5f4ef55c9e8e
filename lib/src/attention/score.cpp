// Score functions besides the dot product: general, additive, location; their Xavier init and the
// checks that dot scores fit float32 (score.hpp).
#include "attn/attention/score.hpp"

#include "attn/core/names.hpp"

#include "attn/core/error.hpp"
#include "attn/core/init.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/blas.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace attn {

ScoreKind parse_score_kind(std::string_view s) {
  static constexpr Named<ScoreKind> kinds[] = {{"scaled-dot", ScoreKind::ScaledDot},
                                               {"dot", ScoreKind::Dot},
                                               {"general", ScoreKind::General},
                                               {"additive", ScoreKind::Additive},
                                               {"location", ScoreKind::Location}};
  return parse_named(s, kinds, "score");
}

ScoreParams xavier_score_params(ScoreKind kind, std::int64_t d_q, std::int64_t d_k, std::int64_t hidden, std::int64_t m,
                                std::uint64_t seed) {
  Rng rng(seed);
  ScoreParams p;
  if (kind == ScoreKind::General) {
    p.W = xavier_uniform(d_q, d_k, rng);
  } else if (kind == ScoreKind::Location) {
    p.W_a = xavier_uniform(m, d_q, rng);
  } else if (kind == ScoreKind::Additive) {
    p.W_q = xavier_uniform(hidden, d_q, rng);
    p.W_k = xavier_uniform(hidden, d_k, rng);
    p.v = xavier_uniform(1, hidden, rng); // v as a (1, hidden) matrix
    p.v.reshape({hidden});
  }
  return p;
}

// In double.
double max_row_norm(const Tensor& t) {
  const std::int64_t d = t.dim(t.rank() - 1), rows = t.size() / d;
  double best = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (std::int64_t c = 0; c < d; ++c) s += double(t.data()[r * d + c]) * t.data()[r * d + c];
    best = std::max(best, s);
  }
  return std::sqrt(best);
}

void check_dot_scores_fit(const Tensor& q, const Tensor& k, float scale, std::string_view q_label,
                          std::string_view k_label) {
  check_dot_scores_fit(max_row_norm(q), max_row_norm(k), scale, q_label, k_label);
}

void check_dot_scores_fit(double nq, double nk, float scale, std::string_view q_label, std::string_view k_label) {
  const double bound = std::abs(double(scale)) * nq * nk;
  if (bound > 0.5 * std::numeric_limits<float>::max())
    throw Error(fmt::format("scores would overflow float32: |scale| {:.4g} x largest |q| {:.4g} ({}) x largest |k| "
                            "{:.4g} ({}) = {:.4g}, above {:.4g}; use a smaller --scale or smaller inputs",
                            std::abs(scale), nq, q_label, nk, k_label, bound, 0.5 * std::numeric_limits<float>::max()));
}

PreparedScorer prepare_scorer(ScoreKind kind, const Tensor& q, const Tensor& k, const ScoreParams& params,
                              float scale) {
  const std::int64_t b = q.dim(0), n = q.dim(1), dq = q.dim(2), m = k.dim(1), dk = k.dim(2);
  PreparedScorer ps;
  switch (kind) {
  case ScoreKind::ScaledDot:
  case ScoreKind::Dot:
    ps.scorer = std::make_unique<DotScorer>(View{q.data(), n * dq, 0, dq}, View{k.data(), m * dk, 0, dk}, dk, 1, scale);
    break;
  case ScoreKind::General: { // q^T W k = (q W) . k; q W through linear (W^T as its (out, in) weight)
    Tensor w_t(Shape{dk, dq}, Uninitialized{});
    for (std::int64_t i = 0; i < dq; ++i)
      for (std::int64_t j = 0; j < dk; ++j) w_t.data()[j * dq + i] = params.W.data()[i * dk + j];
    ps.q_proj = Tensor(Shape{b, n, dk}, Uninitialized{});
    blas::linear(ps.q_proj.data(), q.data(), w_t.data(), nullptr, b * n, dq, dk);
    ps.scorer =
        std::make_unique<DotScorer>(View{ps.q_proj.data(), n * dk, 0, dk}, View{k.data(), m * dk, 0, dk}, dk, 1, 1.0f);
    break;
  }
  case ScoreKind::Location: // W_a q_i: the query against each row of W_a, the same for every item
    ps.scorer =
        std::make_unique<DotScorer>(View{q.data(), n * dq, 0, dq}, View{params.W_a.data(), 0, 0, dq}, dq, 1, 1.0f);
    break;
  case ScoreKind::Additive: { // project once: (n, hid) and (m, hid), then reduce per pair
    const std::int64_t hid = params.v.dim(0);
    ps.q_proj = Tensor(Shape{b, n, hid}, Uninitialized{});
    ps.k_proj = Tensor(Shape{b, m, hid}, Uninitialized{});
    blas::linear(ps.q_proj.data(), q.data(), params.W_q.data(), nullptr, b * n, dq, hid);
    blas::linear(ps.k_proj.data(), k.data(), params.W_k.data(), nullptr, b * m, dk, hid);
    ps.scorer = std::make_unique<AdditiveScorer>(ps.q_proj.data(), ps.k_proj.data(), n, m,
                                                 std::vector<float>(params.v.span().begin(), params.v.span().end()));
    break;
  }
  }
  return ps;
}

} // namespace attn
