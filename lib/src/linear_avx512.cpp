// blas::linear's tiles for AVX-512F (16 floats per vector). Built with -mavx512f -mfma; called only
// when the CPU has AVX-512F (linear.cpp).
#include "linear_kernels.hpp"

namespace attn::linear_detail {

namespace {

struct V512 {
  using vec = __m512;
  // 24, 12 or 8 accumulators of the 32 registers (the transposing tile also holds 16 of W)
  static constexpr int lanes = 16, max_rows = 12, max_cols = 12, max_trans_rows = 8;
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
  // r[c] (16 values of k for column c) -> r[k] (16 columns for one k).
  static void transpose(vec r[16]) {
    vec t[16];
    // 4 x 4 within each 128-bit lane: r[4i + j] lane l = rows 4i..4i+3 of column 4l + j
    for (int i = 0; i < 4; ++i) {
      const vec a = r[4 * i], b = r[4 * i + 1], c = r[4 * i + 2], d = r[4 * i + 3];
      const vec ab0 = _mm512_unpacklo_ps(a, b), ab1 = _mm512_unpackhi_ps(a, b);
      const vec cd0 = _mm512_unpacklo_ps(c, d), cd1 = _mm512_unpackhi_ps(c, d);
      t[4 * i] = _mm512_shuffle_ps(ab0, cd0, 0x44);
      t[4 * i + 1] = _mm512_shuffle_ps(ab0, cd0, 0xEE);
      t[4 * i + 2] = _mm512_shuffle_ps(ab1, cd1, 0x44);
      t[4 * i + 3] = _mm512_shuffle_ps(ab1, cd1, 0xEE);
    }
    // then 4 x 4 of the 128-bit lanes: column 4l + j gathers lane l of t[j], t[4 + j], t[8 + j], t[12 + j]
    for (int j = 0; j < 4; ++j) {
      const vec ab0 = _mm512_shuffle_f32x4(t[j], t[4 + j], 0x44), ab1 = _mm512_shuffle_f32x4(t[j], t[4 + j], 0xEE);
      const vec cd0 = _mm512_shuffle_f32x4(t[8 + j], t[12 + j], 0x44),
                cd1 = _mm512_shuffle_f32x4(t[8 + j], t[12 + j], 0xEE);
      r[j] = _mm512_shuffle_f32x4(ab0, cd0, 0x88);
      r[4 + j] = _mm512_shuffle_f32x4(ab0, cd0, 0xDD);
      r[8 + j] = _mm512_shuffle_f32x4(ab1, cd1, 0x88);
      r[12 + j] = _mm512_shuffle_f32x4(ab1, cd1, 0xDD);
    }
  }
};

constexpr KernelTable table = table_of<V512>("avx512");

} // namespace

const KernelTable* avx512_table() { return &table; }

} // namespace attn::linear_detail
