// The AVX-512F vector of the SIMD kernels (linear_kernels.hpp, attention_kernels.hpp): 16 floats,
// the operations the kernels are written in, and each kernel's tile sizes for 32 registers.
// Included only by files built with -mavx512f -mfma -ffp-contract=off (linear_avx512.cpp,
// attention_avx512.cpp); internal to each, so no inline function compiled for AVX-512 can be
// merged with a generic copy by the linker.
#pragma once

#include <immintrin.h>

namespace attn::simd {
namespace {

struct V512 {
  using vec = __m512;
  static constexpr int lanes = 16;
  // linear: 24, 12 or 8 accumulators (the transposing tile also holds 16 of W)
  static constexpr int max_rows = 12, max_cols = 12, max_trans_rows = 8;
  // linear over int8 and float16 weights: 8 accumulators (one vector per tile of 16 columns)
  static constexpr int max_q_rows = 8;
  // attention: 24 accumulators, keys (or value columns) x vectors of queries (on a Zen 4, 4 x 4,
  // 8 x 2 and 6 x 4 all gave 345-370 GFLOP/s at n = m = 4096, d = 64 on 2 threads; on a Xeon
  // model 85, paired against 4 x 4: 6 x 4 1.02-1.04x, 8 x 2 0.98x)
  static constexpr int score_keys = 6, value_cols = 6, query_vecs = 4;

  static vec zero() { return _mm512_setzero_ps(); }
  static vec load(const float* p) { return _mm512_loadu_ps(p); }
  // 16 int8 or float16 values as floats (exact), for the int8 and float16 weights of linear (maskz_
  // forms, as below)
  static vec load_i8(const signed char* p) {
    return _mm512_maskz_cvtepi32_ps(
        all, _mm512_maskz_cvtepi8_epi32(all, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static vec load_f16(const unsigned short* p) {
    return _mm512_maskz_cvtph_ps(all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // bfloat16: the bits are float32's upper half
  static vec load_bf16(const unsigned short* p) {
    const __m512i w = _mm512_maskz_cvtepu16_epi32(all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, w, 16));
  }
  // A vector of 16-bit pairs (lane c: 32 bits of row c, its first value in the low half) as the
  // floats of the first values and of the second (exact; bits only until then)
  static void bf16_pairs(vec p, vec& first, vec& second) {
    const __m512i b = _mm512_castps_si512(p);
    first = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, b, 16));
    second = _mm512_castsi512_ps(_mm512_maskz_and_epi32(all, b, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  static void f16_pairs(vec p, vec& first, vec& second) {
    const __m512i b = _mm512_castps_si512(p);
    first = _mm512_maskz_cvtph_ps(all, _mm512_maskz_cvtepi32_epi16(all, b));
    second = _mm512_maskz_cvtph_ps(all, _mm512_maskz_cvtepi32_epi16(all, _mm512_maskz_srli_epi32(all, b, 16)));
  }
  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  // the low and the high 16 bits of each lane, as 16 values at p (bits only)
  static void store_lo16(unsigned short* p, vec v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_maskz_cvtepi32_epi16(all, _mm512_castps_si512(v)));
  }
  static void store_hi16(unsigned short* p, vec v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_maskz_cvtepi32_epi16(all, _mm512_maskz_srli_epi32(all, _mm512_castps_si512(v), 16)));
  }
  static vec bcast(float v) { return _mm512_set1_ps(v); }
  static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static vec div(vec a, vec b) { return _mm512_div_ps(a, b); }
  // max, round, mul_pow2 and the unpacks and shuffles below use the intrinsics' maskz_ forms with every
  // lane kept: the plain forms pass _mm512_undefined_ps() as their source, which GCC 12 reports as
  // an uninitialised read.
  static constexpr __mmask16 all = 0xFFFF;
  static vec max(vec a, vec b) { return _mm512_maskz_max_ps(all, a, b); }
  // to the nearest integer, ties to even
  static vec round(vec a) { return _mm512_maskz_roundscale_ps(all, a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p 2^k for integer-valued k in [-126, 127]: one instruction, where forming 2^k and multiplying
  // took five (exact either way; attention alone 1.03-1.05x)
  static vec mul_pow2(vec p, vec k) { return _mm512_maskz_scalef_ps(all, p, k); }
  // v where x >= limit, else 0 (also where x is NaN)
  static vec keep_ge(vec v, vec x, float limit) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(limit), _CMP_GE_OQ), v);
  }
  static float sum_lanes_in_order(vec v) {
    alignas(64) float l[lanes];
    _mm512_store_ps(l, v);
    float s = 0;
    for (float x : l) s += x;
    return s;
  }
  static float max_lanes(vec v) {
    alignas(64) float l[lanes];
    _mm512_store_ps(l, v);
    float m = l[0];
    for (float x : l) m = x > m ? x : m;
    return m;
  }

  static __mmask16 first(int n) { return static_cast<__mmask16>((1u << n) - 1); }
  // The first n floats, 0 < n < lanes (load_part and store_part in linear_kernels.hpp)
  static vec load_first(const float* p, int n) { return _mm512_maskz_loadu_ps(first(n), p); }
  static void store_first(float* p, vec v, int n) { _mm512_mask_storeu_ps(p, first(n), v); }
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

} // namespace
} // namespace attn::simd
