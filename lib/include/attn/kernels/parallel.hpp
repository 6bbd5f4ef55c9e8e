// The library's loops over independent items: on an OpenMP team when there are threads to share,
// else a plain loop that never enters the OpenMP runtime.
//
// Why not `#pragma omp parallel for if (...)`: a region whose if-clause is false (or of one thread)
// still starts a team of one in libgomp, about 2.5 us here against 0.3 us for the loop it ran (a
// ReLU over 2048 floats). A generated token went through 45 such regions (each layer's norms,
// residual adds and activation), ~0.1 ms of a 1.3 ms int8 step.
#pragma once

#include "attn/kernels/blas.hpp"

#include <omp.h>

#include <cstdint>

namespace attn {

// blas::threads() when the loop is worth a team (`wide`), else 1.
inline int threads_if(bool wide) { return wide ? blas::threads() : 1; }

// body(i) for i in [0, n): statically split (each thread a contiguous share) over `threads`.
template <class Body> void parallel_for(std::int64_t n, int threads, const Body& body) {
  if (threads <= 1) {
    for (std::int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t i = 0; i < n; ++i) body(i);
}

// The same, items handed out one at a time as threads free up.
template <class Body> void parallel_for_dynamic(std::int64_t n, int threads, const Body& body) {
  if (threads <= 1) {
    for (std::int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t i = 0; i < n; ++i) body(i);
}

// body(begin, end) once per thread over its contiguous share of [0, n) (the shares of a static
// schedule), for loops that set up scratch once per thread; once over [0, n) when threads <= 1.
template <class Body> void parallel_shares(std::int64_t n, int threads, const Body& body) {
  if (threads <= 1) {
    body(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const std::int64_t k = omp_get_thread_num(), T = omp_get_num_threads();
    body(n * k / T, n * (k + 1) / T);
  }
}

} // namespace attn
