#include "attn/blas.hpp"

#include <cblas.h>
#include <omp.h>

#include <thread>

namespace attn::blas {

namespace {
int g_threads = 0; // 0: not set yet
int all_cores() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}
blasint as_blas(std::int64_t v) { return static_cast<blasint>(v); }
} // namespace

void set_threads(int n) {
  g_threads = n > 0 ? n : all_cores();
  openblas_set_num_threads(g_threads);
  omp_set_num_threads(g_threads);
}

int threads() {
  if (g_threads == 0) set_threads(0);
  return g_threads;
}

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              as_blas(m), as_blas(n), as_blas(k), alpha, a, as_blas(lda), b, as_blas(ldb), beta, c,
              as_blas(ldc));
}

void linear(float* y, const float* x, const float* w, const float* bias, std::int64_t rows,
            std::int64_t in, std::int64_t out) {
  if (bias) {
#pragma omp parallel for schedule(static) num_threads(threads()) if (rows * out >= (1 << 16))
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t o = 0; o < out; ++o) y[r * out + o] = bias[o];
  }
  gemm(false, true, rows, out, in, 1.0f, x, in, w, in, bias ? 1.0f : 0.0f, y, out);
}

SingleThreaded::SingleThreaded() { openblas_set_num_threads(1); }
SingleThreaded::~SingleThreaded() { openblas_set_num_threads(threads()); }

void gemm_batched(std::int64_t count, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                  std::int64_t k, float alpha, const float* a, std::int64_t lda, std::int64_t stride_a,
                  const float* b, std::int64_t ldb, std::int64_t stride_b, float beta, float* c,
                  std::int64_t ldc, std::int64_t stride_c) {
  const int t = threads();
  if (count >= t && t > 1) {
    SingleThreaded single;
#pragma omp parallel for schedule(dynamic) num_threads(t)
    for (std::int64_t i = 0; i < count; ++i)
      gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
           c + i * stride_c, ldc);
  } else {
    for (std::int64_t i = 0; i < count; ++i)
      gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
           c + i * stride_c, ldc);
  }
}

} // namespace attn::blas
