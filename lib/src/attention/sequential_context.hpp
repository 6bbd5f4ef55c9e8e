// The context vector of one query in the attention forms that run query after query
// (monotonic_attention.cpp, location_attention.cpp): c = sum_j w_j v_j over the m rows of v (dv
// values each), accumulated in double and rounded once; zero weights are skipped.
#pragma once

#include <cstdint>
#include <vector>

namespace attn::detail {

template <class W> void weighted_values(const W* w, std::int64_t m, const float* v, std::int64_t dv, float* out) {
  std::vector<double> c(static_cast<std::size_t>(dv), 0.0);
  for (std::int64_t j = 0; j < m; ++j) {
    const double wj = w[j];
    if (wj == 0.0) continue;
    const float* vj = v + j * dv;
    for (std::int64_t x = 0; x < dv; ++x) c[static_cast<std::size_t>(x)] += wj * vj[x];
  }
  for (std::int64_t x = 0; x < dv; ++x) out[x] = static_cast<float>(c[static_cast<std::size_t>(x)]);
}

} // namespace attn::detail
