// Monotonic attention (Raffel et al. 2017): the soft expected alignment of training and the hard
// one of inference (monotonic_attention.hpp).
#include "attn/attention/monotonic_attention.hpp"

#include "attn/core/error.hpp"
#include "attn/kernels/blas.hpp"

#include "attention/sequential_context.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace attn {

void check_monotonic_mask(const Mask& mask) {
  const auto refuse = [](const char* what) {
    throw UsageError(fmt::format("--attention monotonic applies --lengths and --key-padding-mask only, not {} (the "
                                 "alignment itself decides which inputs an output sees)",
                                 what));
  };
  if (mask.causal) refuse("--causal");
  if (const char* part = pattern_part(mask)) refuse(part);
}

void soft_monotonic_row(const double* p, const double* prev, double* alpha, std::int64_t m) {
  double q = 0;
  for (std::int64_t j = 0; j < m; ++j) {
    q = (j > 0 ? (1.0 - p[j - 1]) * q : 0.0) + prev[j];
    alpha[j] = p[j] * q;
  }
}

namespace {

constexpr std::int64_t block_rows = 64; // outputs whose energies are computed together

// One item: energies a block of outputs at a time (the scorer's tile), then the alignment of each
// output in order, each from the previous one.
void monotonic_item(const MonotonicAttention& a, std::int64_t b, std::vector<float>& energies) {
  const std::int64_t n = a.n, m = a.m;
  std::vector<double> p(static_cast<std::size_t>(m)), prev(static_cast<std::size_t>(m), 0.0),
      alpha(static_cast<std::size_t>(m));
  std::vector<std::uint8_t> padded(static_cast<std::size_t>(m), 0);
  if (a.mask)
    for (std::int64_t j = 0; j < m; ++j) padded[static_cast<std::size_t>(j)] = a.mask->padding(b, j) ? 1 : 0;
  if (m > 0) prev[0] = 1.0; // alpha_0: the alignment starts at the first input
  std::int64_t t = 0;       // hard: where the previous output stopped (m: ran off the end)
  std::vector<float> row_alpha(static_cast<std::size_t>(m));
  for (std::int64_t i0 = 0; i0 < n; i0 += block_rows) {
    const std::int64_t ni = std::min(block_rows, n - i0);
    float* e = energies.data();
    a.scorer->tile(e, m, b, 0, i0, ni, 0, m);
    if (a.scores) std::copy_n(e, ni * m, a.scores + (b * n + i0) * m);
    for (std::int64_t r = 0; r < ni; ++r) {
      const std::int64_t i = i0 + r;
      const float* er = e + r * m;
      float* w = a.weights ? a.weights + (b * n + i) * m : row_alpha.data();
      if (a.hard) {
        std::fill_n(w, m, 0.0f);
        std::int64_t j = t;
        while (j < m && (padded[static_cast<std::size_t>(j)] || !(er[j] + a.energy_bias >= 0.0f))) ++j;
        if (j < m) w[j] = 1.0f;
        t = j;
      } else {
        for (std::int64_t j = 0; j < m; ++j) {
          const double x = static_cast<double>(er[j]) + a.energy_bias;
          p[static_cast<std::size_t>(j)] = padded[static_cast<std::size_t>(j)] ? 0.0 : 1.0 / (1.0 + std::exp(-x));
        }
        soft_monotonic_row(p.data(), prev.data(), alpha.data(), m);
        std::swap(prev, alpha);
        for (std::int64_t j = 0; j < m; ++j) w[j] = static_cast<float>(prev[static_cast<std::size_t>(j)]);
      }
      if (a.out) {
        float* o = a.out + (b * n + i) * a.dv;
        if (!a.hard) // c_i = alpha_i V
          detail::weighted_values(prev.data(), m, a.v + b * m * a.dv, a.dv, o);
        else if (t < m)
          std::copy_n(a.v + (b * m + t) * a.dv, a.dv, o);
        else // ran off the end: attends to nothing
          std::fill_n(o, a.dv, 0.0f);
      }
    }
  }
}

} // namespace

void monotonic_attention(const MonotonicAttention& a) {
  if (a.mask) check_monotonic_mask(*a.mask);
  if ((a.out != nullptr) != (a.v != nullptr)) throw std::logic_error("monotonic_attention: out and v go together");
  if (!a.scorer) throw std::logic_error("monotonic_attention: no scorer");
    // The outputs of an item depend on each other in order; the items are independent.
#pragma omp parallel num_threads(blas::threads()) if (a.batch > 1)
  {
    std::vector<float> energies(static_cast<std::size_t>(block_rows * std::max<std::int64_t>(a.m, 1)));
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < a.batch; ++b) monotonic_item(a, b, energies);
  }
}

} // namespace attn
