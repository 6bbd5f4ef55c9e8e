// Row-major matrix products over OpenBLAS, and the one thread setting of the library.
//
// Threads are used at one level only: either OpenBLAS threads inside a single product, or the
// library's own OpenMP loop over independent products with OpenBLAS single-threaded inside.
#pragma once

#include <cstdint>

namespace attn::blas {

// Threads for OpenBLAS and for the library's parallel loops; n <= 0 means every core.
void set_threads(int n);
int threads();

// C (m, n) = alpha * op(A) op(B) + beta * C, all row-major with leading dimensions lda, ldb, ldc.
// A is (m, k), or (k, m) with trans_a; B is (k, n), or (n, k) with trans_b.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc);

// y (rows, out) = x (rows, in) W^T + bias, with W (out, in) as in PyTorch's nn.Linear.
// bias (out) may be null.
void linear(float* y, const float* x, const float* w, const float* bias, std::int64_t rows,
            std::int64_t in, std::int64_t out);

// For i < count: C_i = alpha * op(A_i) op(B_i) + beta * C_i where A_i = a + i * stride_a, and so on
// (a stride of 0 broadcasts one matrix to every product). Runs the products in parallel with
// OpenBLAS single-threaded inside when there are at least as many products as threads; otherwise
// one after another with OpenBLAS threads.
void gemm_batched(std::int64_t count, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                  std::int64_t k, float alpha, const float* a, std::int64_t lda, std::int64_t stride_a,
                  const float* b, std::int64_t ldb, std::int64_t stride_b, float beta, float* c,
                  std::int64_t ldc, std::int64_t stride_c);

// Scope in which OpenBLAS runs single-threaded (for calls from inside an OpenMP region).
class SingleThreaded {
public:
  SingleThreaded();
  ~SingleThreaded();
  SingleThreaded(const SingleThreaded&) = delete;
  SingleThreaded& operator=(const SingleThreaded&) = delete;
};

} // namespace attn::blas
