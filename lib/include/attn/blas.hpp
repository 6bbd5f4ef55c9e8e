// Row-major matrix products over OpenBLAS, and the one thread setting of the library.
//
// There is one thread pool: OpenMP's. OpenBLAS always runs single-threaded; a large product is
// split into row (or column) panels, one per OpenMP thread. Two pools on the same cores (OpenBLAS's
// pthreads spinning while OpenMP threads start, and the reverse) made alternating sgemm and
// attention phases up to 2x slower, measured on mha-run.
#pragma once

#include <cstdint>

namespace attn::blas {

// Threads for the library's parallel loops and products; n <= 0 means every core.
void set_threads(int n);
int threads();

// C (m, n) = alpha * op(A) op(B) + beta * C, all row-major with leading dimensions lda, ldb, ldc.
// A is (m, k), or (k, m) with trans_a; B is (k, n), or (n, k) with trans_b. Split over the threads
// when large and not already inside a parallel region.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// y (rows, out) = x (rows, in) W^T + bias, with W (out, in) as in PyTorch's nn.Linear.
// bias (out) may be null.
void linear(float* y, const float* x, const float* w, const float* bias, std::int64_t rows, std::int64_t in,
            std::int64_t out);

} // namespace attn::blas
