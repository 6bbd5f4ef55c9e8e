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
  // The first n floats, 0 < n < lanes (load_part and store_part in linear_kernels.hpp)
  static vec load_first(const float* p, int n) { return _mm512_maskz_loadu_ps(first(n), p); }
  static void store_first(float* p, vec v, int n) { _mm512_mask_storeu_ps(p, first(n), v); }
  // The unpack and shuffle intrinsics in their maskz_ forms with every lane kept: the plain forms
  // pass _mm512_undefined_ps() as their source, which GCC 12 reports as an uninitialised read.
  static constexpr __mmask16 all = 0xFFFF;
  static vec unpacklo(vec a, vec b) { return _mm512_maskz_unpacklo_ps(all, a, b); }
  static vec unpackhi(vec a, vec b) { return _mm512_maskz_unpackhi_ps(all, a, b); }
  template <int imm> static vec shuffle(vec a, vec b) { return _mm512_maskz_shuffle_ps(all, a, b, imm); }
  template <int imm> static vec shuffle_lanes(vec a, vec b) { return _mm512_maskz_shuffle_f32x4(all, a, b, imm); }
  // r[c] (16 values of k for column c) -> r[k] (16 columns for one k).
  static void transpose(vec r[16]) {
    vec t[16];
    // 4 x 4 within each 128-bit lane: r[4i + j] lane l = rows 4i..4i+3 of column 4l + j
    for (int i = 0; i < 4; ++i) {
      const vec a = r[4 * i], b = r[4 * i + 1], c = r[4 * i + 2], d = r[4 * i + 3];
      const vec ab0 = unpacklo(a, b), ab1 = unpackhi(a, b);
      const vec cd0 = unpacklo(c, d), cd1 = unpackhi(c, d);
      t[4 * i] = shuffle<0x44>(ab0, cd0);
      t[4 * i + 1] = shuffle<0xEE>(ab0, cd0);
      t[4 * i + 2] = shuffle<0x44>(ab1, cd1);
      t[4 * i + 3] = shuffle<0xEE>(ab1, cd1);
    }
    // then 4 x 4 of the 128-bit lanes: column 4l + j gathers lane l of t[j], t[4 + j], t[8 + j], t[12 + j]
    for (int j = 0; j < 4; ++j) {
      const vec ab0 = shuffle_lanes<0x44>(t[j], t[4 + j]), ab1 = shuffle_lanes<0xEE>(t[j], t[4 + j]);
      const vec cd0 = shuffle_lanes<0x44>(t[8 + j], t[12 + j]), cd1 = shuffle_lanes<0xEE>(t[8 + j], t[12 + j]);
      r[j] = shuffle_lanes<0x88>(ab0, cd0);
      r[4 + j] = shuffle_lanes<0xDD>(ab0, cd0);
      r[8 + j] = shuffle_lanes<0x88>(ab1, cd1);
      r[12 + j] = shuffle_lanes<0xDD>(ab1, cd1);
    }
  }
};

constexpr KernelTable table = table_of<V512>("avx512");

} // namespace

const KernelTable* avx512_table() { return &table; }

} // namespace attn::linear_detail
