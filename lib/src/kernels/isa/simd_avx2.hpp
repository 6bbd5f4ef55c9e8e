// The AVX2 vector of the SIMD kernels (linear_kernels.hpp, attention_kernels.hpp): 8 floats, the
// operations the kernels are written in, and each kernel's tile sizes for 16 registers. Included
// only by files built with -mavx2 -mfma -ffp-contract=off (linear_avx2.cpp, attention_avx2.cpp);
// internal to each, so no inline function compiled for AVX2 can be merged with a generic copy.
#pragma once

#include <immintrin.h>

namespace attn::simd {
namespace {

alignas(32) constexpr int mask_source[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

struct V256 {
  using vec = __m256;
  static constexpr int lanes = 8;
  // linear: 12, 12 or 6 accumulators (the transposing tile also holds 8 of W)
  static constexpr int max_rows = 6, max_cols = 12, max_trans_rows = 6;
  // linear over int8 and float16 weights: 8 accumulators (a tile of 16 columns is two vectors)
  static constexpr int max_q_rows = 4;
  // attention: 12 accumulators, keys (or value columns) x vectors of queries (measured at
  // n = m = 4096, d = 64: 6 x 2 gave 186 GFLOP/s on 2 threads, 4 x 2 172, 2 x 4 118, 3 x 3 87)
  static constexpr int score_keys = 6, value_cols = 6, query_vecs = 2;

  static vec zero() { return _mm256_setzero_ps(); }
  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  // 8 int8 or float16 values as floats (exact), for the int8 and float16 weights of linear (F16C)
  static vec load_i8(const signed char* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static vec load_f16(const unsigned short* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // bfloat16: the bits are float32's upper half
  static vec load_bf16(const unsigned short* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  // A vector of 16-bit pairs (lane c: 32 bits of row c, its first value in the low half) as the
  // floats of the first values and of the second (exact; bits only until then)
  static void bf16_pairs(vec p, vec& first, vec& second) {
    const __m256i b = _mm256_castps_si256(p);
    first = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
    second = _mm256_castsi256_ps(_mm256_and_si256(b, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  static void f16_pairs(vec p, vec& first, vec& second) {
    const __m256i b = _mm256_castps_si256(p);
    const __m256i lo = _mm256_and_si256(b, _mm256_set1_epi32(0xFFFF)), hi = _mm256_srli_epi32(b, 16);
    // packus per 128-bit lane: (lo 0-3, hi 0-3 | lo 4-7, hi 4-7) as words; then (lo 0-7 | hi 0-7)
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
    first = _mm256_cvtph_ps(_mm256_castsi256_si128(words));
    second = _mm256_cvtph_ps(_mm256_extracti128_si256(words, 1));
  }
  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  // the low and the high 16 bits of each lane, as 8 values at p (bits only)
  static void store_lo16(unsigned short* p, vec v) {
    alignas(32) unsigned int l[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(l), _mm256_castps_si256(v));
    for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned short>(l[i]);
  }
  static void store_hi16(unsigned short* p, vec v) {
    alignas(32) unsigned int l[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(l), _mm256_castps_si256(v));
    for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned short>(l[i] >> 16);
  }
  static vec bcast(float v) { return _mm256_set1_ps(v); }
  static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  static vec div(vec a, vec b) { return _mm256_div_ps(a, b); }
  static vec max(vec a, vec b) { return _mm256_max_ps(a, b); }
  // to the nearest integer, ties to even
  static vec round(vec a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // 2^k for integer-valued k in [-126, 127]
  static vec pow2(vec k) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23));
  }
  static vec mul_pow2(vec p, vec k) { return _mm256_mul_ps(p, pow2(k)); } // p 2^k
  // v where x >= limit, else 0 (also where x is NaN)
  static vec keep_ge(vec v, vec x, float limit) {
    return _mm256_and_ps(v, _mm256_cmp_ps(x, _mm256_set1_ps(limit), _CMP_GE_OQ));
  }
  static float sum_lanes_in_order(vec v) {
    alignas(32) float l[lanes];
    _mm256_store_ps(l, v);
    float s = 0;
    for (float x : l) s += x;
    return s;
  }
  static float max_lanes(vec v) {
    alignas(32) float l[lanes];
    _mm256_store_ps(l, v);
    float m = l[0];
    for (float x : l) m = x > m ? x : m;
    return m;
  }

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

} // namespace
} // namespace attn::simd
