// blas::linear's tiles for AVX2 with FMA (8 floats per vector). Built with -mavx2 -mfma; called only
// when the CPU has both (linear.cpp).
#include "linear_kernels.hpp"

namespace attn::linear_detail {

namespace {

alignas(32) constexpr int mask_source[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

struct V256 {
  using vec = __m256;
  // 12, 12 or 6 accumulators of the 16 registers (the transposing tile also holds 8 of W)
  static constexpr int lanes = 8, max_rows = 6, max_cols = 12, max_trans_rows = 6;
  static vec zero() { return _mm256_setzero_ps(); }
  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static vec bcast(float v) { return _mm256_set1_ps(v); }
  static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static __m256i first(int n) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mask_source + 8 - n)); }
  // The first n floats, 0 < n < lanes (load_part and store_part in linear_kernels.hpp)
  static vec load_first(const float* p, int n) { return _mm256_maskload_ps(p, first(n)); }
  static void store_first(float* p, vec v, int n) { _mm256_maskstore_ps(p, first(n), v); }
  // r[c] (8 values of k for column c) -> r[k] (8 columns for one k).
  static void transpose(vec r[8]) {
    vec t[8], s[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {
      s[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
      s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
      s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int j = 0; j < 4; ++j) {
      r[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
      r[4 + j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
    }
  }
};

constexpr KernelTable table = table_of<V256>("avx2");

} // namespace

const KernelTable* avx2_table() { return &table; }

} // namespace attn::linear_detail
