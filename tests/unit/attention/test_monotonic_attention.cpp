// Monotonic attention: the soft scan against the direct sum of the paper and its cumulative-product
// form, over rows long enough for that form's cumprod to leave float's range, alignments that sum to at most
// 1, hard alignments that move forward and stop at the first p >= 0.5, padded keys passed over, and
// the same bits whatever the threads.
#include "attn/attention/monotonic_attention.hpp"

#include "attn/core/error.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/blas.hpp"

#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace attn;
using test::random_tensor;

namespace {

// alpha_j = p_j sum_{k<=j} prev_k prod_{l=k}^{j-1} (1 - p_l), the product grown as k falls.
std::vector<double> direct_row(const std::vector<double>& p, const std::vector<double>& prev) {
  const std::size_t m = p.size();
  std::vector<double> alpha(m);
  for (std::size_t j = 0; j < m; ++j) {
    double s = 0, prod = 1;
    for (std::size_t k = j + 1; k-- > 0;) {
      s += prev[k] * prod;
      if (k > 0) prod *= 1 - p[k - 1];
    }
    alpha[j] = p[j] * s;
  }
  return alpha;
}

// The paper's parallel form: alpha = p * cumprod_excl(1 - p) * cumsum(prev / cumprod_excl(1 - p)).
std::vector<double> cumprod_row(const std::vector<double>& p, const std::vector<double>& prev) {
  const std::size_t m = p.size();
  std::vector<double> alpha(m);
  double cp = 1, cs = 0;
  for (std::size_t j = 0; j < m; ++j) {
    cs += prev[j] / cp;
    alpha[j] = p[j] * cp * cs;
    cp *= 1 - p[j];
  }
  return alpha;
}

} // namespace

TEST_CASE("the soft scan is the paper's sum, also where cumprod(1 - p) underflows") {
  Rng rng(3);
  for (std::size_t m : {1u, 2u, 7u, 64u, 3000u}) {
    std::vector<double> p(m), prev(m, 0.0), alpha(m);
    // over 3000 inputs with p ~ 0.065, prod (1 - p) reaches ~1e-88, far below float's range
    for (auto& x : p) x = m > 100 ? 0.05 + 0.03 * rng.uniform() : rng.uniform();
    prev[0] = 1;
    for (int row = 0; row < 3; ++row) {
      soft_monotonic_row(p.data(), prev.data(), alpha.data(), static_cast<std::int64_t>(m));
      const std::vector<double> expect = direct_row(p, prev);
      double sum = 0, err = 0;
      for (std::size_t j = 0; j < m; ++j) {
        sum += alpha[j];
        err = std::max(err, std::abs(alpha[j] - expect[j]));
        CHECK(alpha[j] >= 0.0);
      }
      CAPTURE(m);
      CHECK(err < 1e-12);
      CHECK(sum <= 1.0 + 1e-12);
      // the cumulative-product form gives the same (in double, whose range holds its cumprod)
      const std::vector<double> parallel = cumprod_row(p, prev);
      double perr = 0;
      for (std::size_t j = 0; j < m; ++j) perr = std::max(perr, std::abs(parallel[j] - alpha[j]));
      CHECK(perr < 1e-12);
      prev = alpha;
    }
  }
}

TEST_CASE("monotonic attention: hard alignments move forward; padded keys are passed over; threads") {
  const std::int64_t B = 3, n = 50, m = 130, d = 6, dv = 4;
  const Tensor q = random_tensor({B, n, d}, 1), k = random_tensor({B, m, d}, 2), v = random_tensor({B, m, dv}, 3);
  const DotScorer scorer({q.data(), n * d, 0, d}, {k.data(), m * d, 0, d}, d, 1, 1.0f / std::sqrt(6.0f));
  Mask mask;
  mask.n = n, mask.m = m, mask.lengths = {m, 90, 0};
  mask.key_padding.assign(static_cast<std::size_t>(B * m), 0);
  mask.key_padding[5] = 1; // item 0, key 5
  const auto run = [&](bool hard, int threads) {
    blas::set_threads(threads);
    Tensor out(Shape{B, n, dv}), w(Shape{B, n, m}), e(Shape{B, n, m});
    MonotonicAttention a;
    a.hard = hard, a.batch = B, a.n = n, a.m = m, a.dv = dv, a.scorer = &scorer, a.energy_bias = -0.5f;
    a.v = v.data(), a.mask = &mask, a.out = out.data(), a.weights = w.data(), a.scores = e.data();
    monotonic_attention(a);
    blas::set_threads(0);
    return std::tuple{std::move(out), std::move(w), std::move(e)};
  };
  for (bool hard : {false, true}) {
    auto [out, w, e] = run(hard, 1);
    auto [out3, w3, e3] = run(hard, 3);
    CHECK(std::memcmp(out.data(), out3.data(), static_cast<std::size_t>(out.size()) * sizeof(float)) == 0);
    CHECK(std::memcmp(w.data(), w3.data(), static_cast<std::size_t>(w.size()) * sizeof(float)) == 0);
    for (std::int64_t b = 0; b < B; ++b) {
      std::int64_t last = 0;
      bool ended = false;
      for (std::int64_t i = 0; i < n; ++i) {
        const float* row = w.data() + (b * n + i) * m;
        double sum = 0;
        std::int64_t at = -1;
        for (std::int64_t j = 0; j < m; ++j) {
          sum += row[j];
          if (mask.padding(b, j)) CHECK(row[j] == 0.0f);
          if (row[j] != 0.0f) at = j;
        }
        CHECK(sum <= 1.0 + 1e-5);
        if (!hard) continue;
        if (at < 0) {
          ended = true;
          continue;
        }
        CHECK(!ended); // nothing after an output that ran off the end
        CHECK(at >= last);
        CHECK(row[at] == 1.0f);
        // the first key at or after the previous stop with e + r >= 0
        for (std::int64_t j = last; j < at; ++j)
          CHECK((mask.padding(b, j) || e.data()[(b * n + i) * m + j] - 0.5f < 0.0f));
        CHECK(e.data()[(b * n + i) * m + at] - 0.5f >= 0.0f);
        for (std::int64_t c = 0; c < dv; ++c)
          CHECK(out.data()[(b * n + i) * dv + c] == v.data()[(b * m + at) * dv + c]);
        last = at;
      }
    }
    // item 2 has no keys: nothing attended, context 0
    for (std::int64_t x = 0; x < n * dv; ++x) CHECK(out.data()[2 * n * dv + x] == 0.0f);
  }
}

TEST_CASE("monotonic attention refuses the masks it does not apply") {
  Mask mask;
  mask.n = 2, mask.m = 3;
  CHECK_NOTHROW(check_monotonic_mask(mask));
  mask.causal = true;
  CHECK_THROWS_WITH_AS(check_monotonic_mask(mask), doctest::Contains("not --causal"), UsageError);
  mask.causal = false;
  mask.window = 1;
  CHECK_THROWS_WITH_AS(check_monotonic_mask(mask), doctest::Contains("not --window"), UsageError);
}
