#include "attn/blas.hpp"
#include "attn/random.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace attn;

namespace {

std::vector<float> random_matrix(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// The algorithmic reference: C = alpha op(A) op(B) + beta C in double, row-major.
void gemm_naive(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                float beta, float* c, int ldc) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p)
        s += double(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = static_cast<float>(alpha * s + beta * c[i * ldc + j]);
    }
}

double max_rel_err(const std::vector<float>& x, const std::vector<float>& ref) {
  double m = 0, scale = 1e-6;
  for (float r : ref) scale = std::max(scale, double(std::abs(r)));
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(double(x[i]) - ref[i]) / scale);
  return m;
}

} // namespace

TEST_CASE("gemm matches the naive product for every transpose and odd sizes") {
  for (int threads : {1, 2}) {
    blas::set_threads(threads);
    CHECK(blas::threads() == threads);
    struct Size {
      int m, n, k;
    };
    // the last three are large enough to be split over the threads, by rows and by columns
    for (auto [m, n, k] : {Size{1, 1, 1}, Size{7, 5, 3}, Size{63, 130, 17}, Size{130, 7, 64}, Size{301, 150, 97},
                           Size{3, 1500, 600}, Size{20, 903, 211}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          auto a = random_matrix(std::size_t(m * k), 1), b = random_matrix(std::size_t(k * n), 2);
          auto c = random_matrix(std::size_t(m * n), 3), ref = c;
          const int lda = ta ? m : k, ldb = tb ? k : n;
          blas::gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, c.data(), n);
          gemm_naive(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, ref.data(), n);
          INFO("m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb);
          CHECK(max_rel_err(c, ref) < 1e-5);
        }
  }
}

TEST_CASE("linear is x W^T + b as nn.Linear, with and without bias") {
  // 1 and 2 rows take the sgemv path (split over threads from 2^17 weights on), more rows sgemm
  int rows = 0, in = 0, out = 0;
  SUBCASE("sgemm") { rows = 5, in = 7, out = 3; }
  SUBCASE("sgemv, one row") { rows = 1, in = 7, out = 3; }
  SUBCASE("sgemv, two rows, split over threads") { rows = 2, in = 300, out = 500; }
  auto x = random_matrix(rows * in, 4), w = random_matrix(out * in, 5), b = random_matrix(out, 6);
  std::vector<float> y(rows * out), y0(rows * out, 123.0f);
  blas::linear(y.data(), x.data(), w.data(), b.data(), rows, in, out);
  blas::linear(y0.data(), x.data(), w.data(), nullptr, rows, in, out);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int i = 0; i < in; ++i) s += double(x[r * in + i]) * w[o * in + i];
      CHECK(y0[r * out + o] == doctest::Approx(s).epsilon(1e-5).scale(10));
      CHECK(y[r * out + o] == doctest::Approx(s + b[o]).epsilon(1e-5).scale(10));
    }
}
