// Location-based attention: Luong's location score is W_a q_i for every item; Chorowski's
// location-aware scores are the additive score plus U (F * alpha_{i-1}) + b, checked query by query
// against the alignment the previous query returned (PyTorch's conv1d orientation), with U = 0
// equal to additive attention; and the parameters' shapes.
#include "attn/attention/location_attention.hpp"

#include "attn/attention/attention.hpp"
#include "attn/attention/score.hpp"
#include "attn/core/error.hpp"
#include "attn/core/random.hpp"

#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace attn;
using test::random_tensor;

namespace {} // namespace

TEST_CASE("Luong's location score is W_a q, whatever the keys and the item") {
  const Tensor q = random_tensor({2, 3, 4}, 1), k = random_tensor({2, 5, 4}, 2);
  ScoreParams p;
  p.W_a = random_tensor({5, 4}, 3);
  const PreparedScorer ps = prepare_scorer(ScoreKind::Location, q, k, p, 1.0f);
  std::vector<float> s(3 * 5);
  for (std::int64_t b = 0; b < 2; ++b) {
    ps.scorer->tile(s.data(), 5, b, 0, 0, 3, 0, 5);
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 5; ++j) {
        double e = 0;
        for (std::int64_t c = 0; c < 4; ++c) e += double(p.W_a.data()[j * 4 + c]) * q.data()[(b * 3 + i) * 4 + c];
        CHECK(std::abs(s[static_cast<std::size_t>(i * 5 + j)] - e) < 1e-5);
      }
  }
}

TEST_CASE("location-aware scores see the previous query's alignment through the filters") {
  const std::int64_t B = 2, n = 6, m = 9, d = 5, dv = 3, h = 4;
  const Tensor q = random_tensor({B, n, d}, 4), k = random_tensor({B, m, d}, 5), v = random_tensor({B, m, dv}, 6);
  LocationAwareParams p = xavier_location_aware(d, d, h, 2, 3, 7);
  // filter 0 reads the next position (F * a)_j = a_{j+1}; filter 1 the previous, a_{j-1}
  const float F[] = {0, 0, 1, 1, 0, 0};
  std::copy(F, F + 6, p.F.data());
  for (std::int64_t c = 0; c < h; ++c) p.b.data()[c] = 0.1f * static_cast<float>(c);
  for (auto& x : p.U.span()) x *= 4; // a visible effect
  Mask mask;
  mask.n = n, mask.m = m, mask.lengths = {m, 6};
  Tensor out(Shape{B, n, dv}), w(Shape{B, n, m}), e(Shape{B, n, m});
  LocationAware a;
  a.batch = B, a.n = n, a.m = m, a.d_q = d, a.d_k = d, a.dv = dv;
  a.q = q.data(), a.k = k.data(), a.v = v.data(), a.params = &p, a.mask = &mask;
  a.out = out.data(), a.weights = w.data(), a.scores = e.data();
  location_aware_attention(a);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < n; ++i) {
      std::vector<double> prev(static_cast<std::size_t>(m), 0.0);
      for (std::int64_t j = 0; j < m; ++j)
        prev[static_cast<std::size_t>(j)] = i == 0 ? (j == 0) : w.data()[(b * n + i - 1) * m + j];
      double sum = 0;
      for (std::int64_t j = 0; j < m; ++j) {
        const double f0 = j + 1 < m ? prev[static_cast<std::size_t>(j + 1)] : 0.0,
                     f1 = j > 0 ? prev[static_cast<std::size_t>(j - 1)] : 0.0;
        double s = 0;
        for (std::int64_t c = 0; c < h; ++c) {
          double x = p.b.data()[c] + p.U.data()[c * 2] * f0 + p.U.data()[c * 2 + 1] * f1;
          for (std::int64_t t = 0; t < d; ++t)
            x += double(p.W_q.data()[c * d + t]) * q.data()[(b * n + i) * d + t] +
                 double(p.W_k.data()[c * d + t]) * k.data()[(b * m + j) * d + t];
          s += p.v.data()[c] * std::tanh(x);
        }
        CHECK(std::abs(e.data()[(b * n + i) * m + j] - s) < 1e-5);
        const float wij = w.data()[(b * n + i) * m + j];
        if (j >= mask.lengths[static_cast<std::size_t>(b)]) CHECK(wij == 0.0f);
        sum += wij;
      }
      CHECK(std::abs(sum - 1.0) < 1e-5);
    }

  // U = 0: Bahdanau's additive attention with the bias b inside the tanh
  for (auto& x : p.U.span()) x = 0;
  location_aware_attention(a);
  Tensor qp(Shape{B, n, h}), kp(Shape{B, m, h});
  for (std::int64_t r = 0; r < B * n; ++r)
    for (std::int64_t c = 0; c < h; ++c)
      for (std::int64_t t = 0; t < d; ++t) qp.data()[r * h + c] += p.W_q.data()[c * d + t] * q.data()[r * d + t];
  for (std::int64_t r = 0; r < B * m; ++r)
    for (std::int64_t c = 0; c < h; ++c) {
      kp.data()[r * h + c] = p.b.data()[c];
      for (std::int64_t t = 0; t < d; ++t) kp.data()[r * h + c] += p.W_k.data()[c * d + t] * k.data()[r * d + t];
    }
  const AdditiveScorer scorer(qp.data(), kp.data(), n, m, std::vector<float>(p.v.span().begin(), p.v.span().end()));
  Tensor expect(Shape{B, n, dv});
  Attention att;
  att.batch = B, att.n = n, att.m = m, att.dv = dv, att.scorer = &scorer, att.mask = &mask;
  att.v = {v.data(), m * dv, 0, dv};
  att.out = {expect.data(), n * dv, 0, dv};
  attention(att);
  for (std::int64_t x = 0; x < out.size(); ++x) CHECK(std::abs(out.data()[x] - expect.data()[x]) < 1e-5);
}

TEST_CASE("location-aware parameters: odd widths, and top-k refused") {
  CHECK_THROWS_WITH_AS(xavier_location_aware(2, 2, 3, 2, 4, 1), doctest::Contains("must be odd"), UsageError);
  const LocationAwareParams p = xavier_location_aware(2, 3, 4, 5, 7, 1);
  CHECK(p.W_q.shape() == Shape{4, 2});
  CHECK(p.W_k.shape() == Shape{4, 3});
  CHECK(p.U.shape() == Shape{4, 5});
  CHECK(p.F.shape() == Shape{5, 7});
  Mask mask;
  mask.n = 1, mask.m = 1, mask.top_k = 1;
  LocationAware a;
  a.mask = &mask;
  CHECK_THROWS_AS(location_aware_attention(a), UsageError);
}
