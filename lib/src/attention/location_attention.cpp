// Location-aware attention (Chorowski et al. 2015): energies from the queries, the keys and a
// convolution of the previous weights (location_attention.hpp).
#include "attn/attention/location_attention.hpp"

#include "attn/core/error.hpp"
#include "attn/core/init.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/blas.hpp"

#include "attention/sequential_context.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace attn {

LocationAwareParams xavier_location_aware(std::int64_t d_q, std::int64_t d_k, std::int64_t hidden, std::int64_t filters,
                                          std::int64_t width, std::uint64_t seed) {
  if (width % 2 == 0)
    throw UsageError(fmt::format("--filter-width must be odd (a window centred on each position), got {}", width));
  Rng rng(seed);
  LocationAwareParams p;
  p.W_q = xavier_uniform(hidden, d_q, rng);
  p.W_k = xavier_uniform(hidden, d_k, rng);
  p.v = xavier_uniform(1, hidden, rng);
  p.v.reshape({hidden});
  p.U = xavier_uniform(hidden, filters, rng);
  p.F = xavier_uniform(filters, width, rng);
  p.b = Tensor(Shape{hidden});
  return p;
}

namespace {

// The queries of item b, one after another.
void location_aware_item(const LocationAware& a, std::int64_t b) {
  const LocationAwareParams& p = *a.params;
  const std::int64_t n = a.n, m = a.m, h = p.hidden(), K = p.filters(), r = p.width(), pad = (r - 1) / 2;
  // qp (n, h) = q W_q^T; kp (m, h) = k W_k^T + b: the parts that do not depend on the alignment
  std::vector<float> qp(static_cast<std::size_t>(n * h)), kp(static_cast<std::size_t>(m * h));
  blas::linear(qp.data(), a.q + b * n * a.d_q, p.W_q.data(), nullptr, n, a.d_q, h);
  blas::linear(kp.data(), a.k + b * m * a.d_k, p.W_k.data(), p.b.data(), m, a.d_k, h);
  std::vector<float> prev(static_cast<std::size_t>(m), 0.0f), f(static_cast<std::size_t>(m * K)),
      loc(static_cast<std::size_t>(m * h)), e(static_cast<std::size_t>(m));
  if (m > 0) prev[0] = 1.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    // f (m, K): f_jk = sum_t F_kt prev_{j + t - pad}
    for (std::int64_t j = 0; j < m; ++j)
      for (std::int64_t c = 0; c < K; ++c) {
        const float* Fk = p.F.data() + c * r;
        double s = 0;
        for (std::int64_t t = std::max<std::int64_t>(0, pad - j); t < r && j + t - pad < m; ++t)
          s += static_cast<double>(Fk[t]) * prev[static_cast<std::size_t>(j + t - pad)];
        f[static_cast<std::size_t>(j * K + c)] = static_cast<float>(s);
      }
    blas::linear(loc.data(), f.data(), p.U.data(), nullptr, m, K, h); // U f_j
    const float* qi = qp.data() + i * h;
    for (std::int64_t j = 0; j < m; ++j) {
      const float* kj = kp.data() + j * h;
      const float* lj = loc.data() + j * h;
      double s = 0;
      for (std::int64_t c = 0; c < h; ++c) s += static_cast<double>(p.v.data()[c]) * std::tanh(qi[c] + kj[c] + lj[c]);
      e[static_cast<std::size_t>(j)] = static_cast<float>(s);
    }
    if (a.scores) std::copy(e.begin(), e.end(), a.scores + (b * n + i) * m);
    if (a.mask) apply_mask(e.data(), m, *a.mask, b, 0, i, 1, 0, m);
    // alpha_i = softmax(e) over the allowed keys; none allowed: 0
    const float top = m > 0 ? *std::max_element(e.begin(), e.end()) : -std::numeric_limits<float>::infinity();
    double sum = 0;
    std::vector<double> ex(static_cast<std::size_t>(m));
    for (std::int64_t j = 0; j < m; ++j)
      sum += ex[static_cast<std::size_t>(j)] = std::isinf(top) && top < 0 ? 0.0 : std::exp(double(e[j]) - top);
    for (std::int64_t j = 0; j < m; ++j)
      prev[static_cast<std::size_t>(j)] = sum > 0 ? static_cast<float>(ex[static_cast<std::size_t>(j)] / sum) : 0.0f;
    if (a.weights) std::copy(prev.begin(), prev.end(), a.weights + (b * n + i) * m);
    if (a.out) detail::weighted_values(prev.data(), m, a.v + b * m * a.dv, a.dv, a.out + (b * n + i) * a.dv);
  }
}

} // namespace

void location_aware_attention(const LocationAware& a) {
  if (a.mask && a.mask->top_k > 0)
    throw UsageError("--score location-aware does not apply --top-k (its alignments feed the next query's scores)");
  if ((a.out != nullptr) != (a.v != nullptr)) throw std::logic_error("location_aware_attention: out and v go together");
    // Items in parallel; within one, each query after the previous.
#pragma omp parallel for schedule(dynamic, 1) num_threads(blas::threads()) if (a.batch > 1)
  for (std::int64_t b = 0; b < a.batch; ++b) location_aware_item(a, b);
}

} // namespace attn
