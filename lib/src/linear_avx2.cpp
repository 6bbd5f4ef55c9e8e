// blas::linear's tiles for AVX2 with FMA (8 floats per vector). Built with -mavx2 -mfma; called only
// when the CPU has both (linear.cpp).
#include "linear_kernels.hpp"

namespace attn::linear_detail {

namespace {

alignas(32) constexpr int mask_source[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

struct V256 {
  using vec = __m256;
  static constexpr int lanes = 8, max_rows = 6, max_cols = 12; // 12 accumulators of 16 registers
  static vec zero() { return _mm256_setzero_ps(); }
  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static vec bcast(float v) { return _mm256_set1_ps(v); }
  static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static __m256i first(int n) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mask_source + 8 - n)); }
  static vec load_part(const float* p, int n) {
    return n >= lanes ? load(p) : n <= 0 ? zero() : _mm256_maskload_ps(p, first(n));
  }
  static void store_part(float* p, vec v, int n) {
    if (n >= lanes)
      store(p, v);
    else if (n > 0)
      _mm256_maskstore_ps(p, first(n), v);
  }
};

constexpr KernelTable table = table_of<V256>("avx2");

} // namespace

const KernelTable* avx2_table() { return &table; }

} // namespace attn::linear_detail
