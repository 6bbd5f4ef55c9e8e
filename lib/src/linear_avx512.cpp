// blas::linear's tiles for AVX-512F (16 floats per vector). Built with -mavx512f -mfma; called only
// when the CPU has AVX-512F (linear.cpp).
#include "linear_kernels.hpp"

namespace attn::linear_detail {

namespace {

struct V512 {
  using vec = __m512;
  static constexpr int lanes = 16, max_rows = 12, max_cols = 12; // 24 or 12 accumulators of 32 registers
  static vec zero() { return _mm512_setzero_ps(); }
  static vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static vec bcast(float v) { return _mm512_set1_ps(v); }
  static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static __mmask16 first(int n) { return static_cast<__mmask16>((1u << n) - 1); }
  // The first n floats (n may be <= 0 or >= lanes); the others 0.
  static vec load_part(const float* p, int n) {
    return n >= lanes ? load(p) : n <= 0 ? zero() : _mm512_maskz_loadu_ps(first(n), p);
  }
  static void store_part(float* p, vec v, int n) {
    if (n >= lanes)
      store(p, v);
    else if (n > 0)
      _mm512_mask_storeu_ps(p, first(n), v);
  }
};

constexpr KernelTable table = table_of<V512>("avx512");

} // namespace

const KernelTable* avx512_table() { return &table; }

} // namespace attn::linear_detail
