// The int8 product's tiles for AVX-512 VNNI (linear_kernels.hpp's tile_i8): vpdpbusd multiplies 4
// unsigned by 4 signed bytes and adds them into int32, 64 multiply-adds an instruction (4x a float
// FMA's). Built with -mavx512f -mavx512bw -mavx512vnni; called only when the CPU has them
// (linear.cpp).
#include "linear_kernels.hpp"
#include "simd_avx512.hpp"

#include <cstring>

namespace attn::linear_detail {

namespace {

// x holds q + 128 (unsigned); the weight's zsums (128 * the block's sum of w) take it back out.
struct I512 : simd::V512 {
  using ivec = __m512i;
  // 4 rows x 3 tiles (12 int and 12 float accumulators), 1 row x 8 tiles; measured against 8 x 1,
  // 6 x 2 and 3 x 4 (bench/int8_matmul.cpp: 4096 x 512 x 2048 at 640-670 GMAC/s with blocks of 32,
  // 810-850 with a scale per row, against 570 and 630 for 8 x 1; 3 x 4 spilled)
  static constexpr int i8_rows = 4, i8_chains = 12, i8_row_chains = 8;
  static constexpr bool unsigned_x = true;
  static ivec izero() { return _mm512_setzero_si512(); }
  static ivec iload(const void* p) { return _mm512_loadu_si512(p); }
  static ivec bcast4(const signed char* p) {
    int v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  // In asm: GCC 12 gave the intrinsic's accumulator two register copies a step (16 moves for 8
  // vpdpbusd in the 8-row tile's loop).
  static ivec dot(ivec d, ivec x, ivec w) {
    asm("vpdpbusd %[w], %[x], %[d]" : [d] "+v"(d) : [x] "v"(x), [w] "vm"(w));
    return d;
  }
  static ivec finish(ivec d, ivec z) { return _mm512_sub_epi32(d, z); }
  static vec to_float(ivec d) { return _mm512_maskz_cvtepi32_ps(all, d); }
  // the first n of 16 integer-valued floats, + 128, as bytes
  static void store_i8(signed char* p, vec v, int n) {
    const __m512i i = _mm512_add_epi32(_mm512_maskz_cvtps_epi32(all, v), _mm512_set1_epi32(128));
    const __m128i b = _mm512_maskz_cvtepi32_epi8(all, i);
    if (n == 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), b);
    } else {
      alignas(16) signed char t[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(t), b);
      std::memcpy(p, t, static_cast<std::size_t>(n));
    }
  }
};

constexpr Int8Table table = int8_table_of<I512>("avx512-vnni");

} // namespace

const Int8Table* avx512_vnni_int8_table() { return &table; }

} // namespace attn::linear_detail
