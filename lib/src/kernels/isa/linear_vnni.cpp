// The int8 product's tiles for AVX-512 VNNI (linear_kernels.hpp's tile_i8): vpdpbusd multiplies 4
// unsigned by 4 signed bytes and adds them into int32, 64 multiply-adds an instruction (4x a float
// FMA's). Built with -mavx512f -mavx512bw -mavx512vnni; called only when the CPU has them
// (linear.cpp).
#include "kernels/isa/linear_kernels.hpp"
#include "kernels/isa/simd_avx512.hpp"

#include <cstring>
#include <vector>

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

// --- a weight's rows in place (Int8Table::rows_in_place) ---
// 16 weight rows at once, 64 values of k at a time (two 32-value units): each row's 16 int32 dot
// products of 4 values (I512::dot on w + 128, as tile_i8), then summed within each unit for the 16
// rows together by a tree of adds and interleaves (44 instructions, where 16 horizontal sums take
// more), into one vector per unit whose lane c is row c's sum: a block's integer as tile_i8 holds
// it. Integers are exact in any order and the float steps are tile_i8's, block by block, so the
// bits are those of the tiles (and the reference's).

// lo, hi: lane c = the sum of v[c]'s lanes 0..7, 8..15. (The masked forms of the interleaves:
// GCC 12 warns of the unmasked ones' undefined source.)
constexpr __mmask16 all16 = 0xffff;
constexpr __mmask8 all8 = 0xff;
inline void unit_sums(__m512i v[16], __m512i& lo, __m512i& hi) {
  __m512i a[8], b[4];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) // a 128-bit lane j: v[2i]'s and v[2i+1]'s pairs of lane j's 4
    a[i] = _mm512_add_epi32(_mm512_maskz_unpacklo_epi32(all16, v[2 * i], v[2 * i + 1]),
                            _mm512_maskz_unpackhi_epi32(all16, v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) // lane j: rows 4i..4i+3's sums of their lane j
    b[i] = _mm512_add_epi32(_mm512_maskz_unpacklo_epi64(all8, a[2 * i], a[2 * i + 1]),
                            _mm512_maskz_unpackhi_epi64(all8, a[2 * i], a[2 * i + 1]));
  // lanes 0, 1 hold unit 0's values, lanes 2, 3 unit 1's: c0 = rows 0-3 lo, hi, rows 4-7 lo, hi
  const __m512i c0 = _mm512_add_epi32(_mm512_maskz_shuffle_i32x4(all16, b[0], b[1], 0x88),
                                      _mm512_maskz_shuffle_i32x4(all16, b[0], b[1], 0xdd));
  const __m512i c1 = _mm512_add_epi32(_mm512_maskz_shuffle_i32x4(all16, b[2], b[3], 0x88),
                                      _mm512_maskz_shuffle_i32x4(all16, b[2], b[3], 0xdd));
  lo = _mm512_maskz_shuffle_i32x4(all16, c0, c1, 0x88);
  hi = _mm512_maskz_shuffle_i32x4(all16, c0, c1, 0xdd);
}

// 16 full rows at w (row c at w + c ldw); `next`, when not null, the next call's rows (16 ldw
// bytes from there), prefetched as this call streams its own, 16 lines a step, two calls ahead:
// the memory then sees one run instead of 16 short rows that each start cold (rows of 768 bytes
// are 12 lines, too short for the prefetchers; 2048 x 768 weights, batch 1, 2 threads, from
// memory: 14-17 GB/s without, 26-29 GB/s into L2, 16 GB/s non-temporal, against 31-37 GB/s for
// the same weights in tiles, on a Zen 4). The step's prefetches go one with each row's dot
// product rather than all at its start: 1.02-1.05x on a Xeon with AMX (20 GB/s, 0.82x the tiles).
template <int R>
void rows_in_place_of(const signed char* x, long ldx, const float* xs, const int* xsums, const signed char* w, long ldw,
                      long in, const float* scales, long blocks, long block, float* y, long ldy, int cols,
                      const float* bias, const signed char* next) {
  const long units = block / 32;
  __m512 acc[R];
  __m512i d[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps(), d[r] = _mm512_setzero_si512();
  // unit j's sums s of row r: into its block's integer; at the block's end, tile_i8's float step
  const auto add_unit = [&](int r, long j, __m512i s) {
    d[r] = _mm512_add_epi32(d[r], s);
    if (units != 1 && (j + 1) % units != 0) return; // (blocks of 32: every unit ends one)
    const long b = units == 1 ? j : j / units;
    const __m512i db = _mm512_sub_epi32(d[r], _mm512_set1_epi32(xsums[r * blocks + b]));
    const __m512 dx = _mm512_mul_ps(I512::to_float(db), _mm512_set1_ps(xs[r * blocks + b]));
    acc[r] = _mm512_fmadd_ps(dx, _mm512_loadu_ps(scales + b * 16), acc[r]);
    d[r] = _mm512_setzero_si512();
  };
  // rows 0..7 from w, 8..15 from w8, at offsets the addressing modes reach from a few registers
  const signed char* w8 = w + 8 * ldw;
  const long l3 = 3 * ldw, l5 = 5 * ldw, l7 = 7 * ldw;
  const signed char* ahead = next ? next + 16 * ldw : nullptr;
  for (long k = 0, step = 0; k < in; k += 64, ++step) {
    const bool two = k + 64 <= in; // else the last unit alone: bytes past it loaded as 0
    const __mmask64 m = two ? ~__mmask64{0} : __mmask64{0xffffffff};
    const long j0 = k / 32;
    const signed char* p = w + k;
    const signed char* p8 = w8 + k;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512i xv = _mm512_maskz_loadu_epi8(m, x + r * ldx + k);
      int i = 0; // this step's prefetches, one with each row's dot product
      const auto dot = [&](const signed char* row) {
        if (r == 0 && ahead) __builtin_prefetch(ahead + (step * 16 + i) * 64, 0, 2);
        ++i;
        return I512::dot(_mm512_setzero_si512(), xv, I512::weights(_mm512_maskz_loadu_epi8(m, row)));
      };
      __m512i v[16];
      // rows 0..7 from `at`, at offsets the addressing modes reach from ldw, l3, l5, l7
      const auto eight = [&](const signed char* at, __m512i* out) {
        out[0] = dot(at), out[1] = dot(at + ldw), out[2] = dot(at + 2 * ldw), out[3] = dot(at + l3);
        out[4] = dot(at + 4 * ldw), out[5] = dot(at + l5), out[6] = dot(at + 2 * l3), out[7] = dot(at + l7);
      };
      eight(p, v);
      eight(p8, v + 8);
      __m512i lo, hi;
      unit_sums(v, lo, hi);
      add_unit(r, j0, lo);
      if (two) add_unit(r, j0 + 1, hi);
    }
  }
  const __mmask16 cm = static_cast<__mmask16>((1u << cols) - 1);
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(cm, bias) : _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy, cm, bias ? _mm512_add_ps(acc[r], bv) : acc[r]);
}

template <int R>
void rows_in_place_r(const signed char* x, long ldx, const float* xs, const int* xsums, const signed char* w, long ldw,
                     long in, const float* scales, long blocks, long block, float* y, long ldy, int cols,
                     const float* bias, const signed char* next) {
  if (cols == 16)
    return rows_in_place_of<R>(x, ldx, xs, xsums, w, ldw, in, scales, blocks, block, y, ldy, cols, bias, next);
  // fewer rows (a weight's last, when `out` is not a multiple of 16): copied, zeros after them
  thread_local std::vector<signed char> rows;
  rows.assign(static_cast<std::size_t>(16 * in), 0);
  for (int c = 0; c < cols; ++c) std::memcpy(rows.data() + c * in, w + c * ldw, static_cast<std::size_t>(in));
  rows_in_place_of<R>(x, ldx, xs, xsums, rows.data(), in, in, scales, blocks, block, y, ldy, cols, bias, nullptr);
}

void rows_in_place(int rows, const signed char* x, long ldx, const float* xs, const int* xsums, const signed char* w,
                   long ldw, long in, const float* scales, long blocks, long block, float* y, long ldy, int cols,
                   const float* bias, const signed char* next) {
  switch (rows) {
  case 1: return rows_in_place_r<1>(x, ldx, xs, xsums, w, ldw, in, scales, blocks, block, y, ldy, cols, bias, next);
  case 2: return rows_in_place_r<2>(x, ldx, xs, xsums, w, ldw, in, scales, blocks, block, y, ldy, cols, bias, next);
  case 3: return rows_in_place_r<3>(x, ldx, xs, xsums, w, ldw, in, scales, blocks, block, y, ldy, cols, bias, next);
  default: return rows_in_place_r<4>(x, ldx, xs, xsums, w, ldw, in, scales, blocks, block, y, ldy, cols, bias, next);
  }
}

constexpr Int8Table vnni_table() {
  Int8Table t = int8_table_of<I512>("avx512-vnni");
  t.rows_in_place = &rows_in_place;
  t.max_rows_in_place = 4;
  return t;
}

constexpr Int8Table table = vnni_table();

} // namespace

const Int8Table* avx512_vnni_int8_table() { return &table; }

} // namespace attn::linear_detail
