// The int8 product's tiles for AVX-512 VNNI (linear_kernels.hpp's tile_i8): vpdpbusd multiplies 4
// unsigned by 4 signed bytes and adds them into int32, 64 multiply-adds an instruction (4x a float
// FMA's). Built with -mavx512f -mavx512bw -mavx512vnni; called only when the CPU has them
// (linear.cpp).
#include "kernels/isa/linear_kernels.hpp"
#include "kernels/isa/simd_avx512.hpp"

#include <cstring>

namespace attn::linear_detail {

namespace {

// vpdpbusd multiplies unsigned bytes by signed ones: the weights are given as w + 128 (unsigned; a
// flip of the sign bit in the register) and x as it is, and the block's correction, 128 times its
// sum of x (quantize_row_i8), takes the offset back out. Per input row, not per weight: generation
// would otherwise stream an int32 sum per block of every weight row (a quarter of the int8 bytes
// at blocks of 32).
struct I512 : simd::V512 {
  using ivec = __m512i;
  // 5 rows x 2 tiles (10 int and 10 float accumulators), 1 row x 8 tiles. 4 x 3 (first measured on
  // Zen 5: 640-670 GMAC/s at 4096 x 512 x 2048 with blocks of 32, against 570 for 8 x 1) holds 24
  // accumulators, 4 broadcasts and the scales and correction in 32 registers, and spills: on Zen 4
  // (2 threads, blocks of 32, alternated in one process) 5 x 2 ran 1.26-1.32x its rate at 4096 x
  // 512 x 1536 and 2048, 1.16-1.19x at 4096 x 2048 x 512 (4 x 2 within 3% of 5 x 2, 3 x 3 within 6%).
  static constexpr int i8_rows = 5, i8_chains = 10, i8_row_chains = 8;
  static constexpr int weight_offset = 128;
  static ivec iload(const void* p) { return _mm512_loadu_si512(p); }
  static ivec ibcast(int v) { return _mm512_set1_epi32(v); }
  static ivec bcast4(const signed char* p) {
    int v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  static ivec weights(ivec w) { return _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80))); } // w + 128
  // In asm: GCC 12 gave the intrinsic's accumulator two register copies a step (16 moves for 8
  // vpdpbusd in the 8-row tile's loop).
  static ivec dot(ivec d, ivec x, ivec w) {
    asm("vpdpbusd %[x], %[w], %[d]" : [d] "+v"(d) : [w] "v"(w), [x] "vm"(x));
    return d;
  }
  static vec to_float(ivec d) { return _mm512_maskz_cvtepi32_ps(all, d); }
  // the first n of 16 integer-valued floats as bytes
  static void store_i8(signed char* p, vec v, int n) {
    const __m128i b = _mm512_maskz_cvtepi32_epi8(all, _mm512_maskz_cvtps_epi32(all, v));
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
