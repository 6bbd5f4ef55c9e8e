// The opt-in bfloat16 products' tiles for AVX512-BF16 (linear_table.hpp's Bf16DotTable): x and W
// rounded to bfloat16 pairs as they are packed, vdpbf16ps adding each pair's two products into
// float32 sums. Built with -mavx512f -mavx512bw -mavx512bf16; called only when the CPU has them and
// a run asks for them (blas::set_matmul_precision).
//
// The float32 W-packed tile (linear_kernels.hpp's tile_wpacked) is the plain reference beside it:
// the same blocking, panels and tasks, one instruction per pair of k instead of per k.
#include "kernels/isa/linear_kernels.hpp"
#include "kernels/isa/simd_avx512.hpp"

namespace attn::linear_detail {

namespace {

using V = simd::V512;
constexpr int R = V::max_rows; // 12 rows x 2 vectors: 24 accumulators, as the float32 tile

// d += x's pairs times w's, lane by lane. In asm, as linear_vnni.cpp's vpdpbusd: GCC 12 copies an
// intrinsic's accumulator.
inline __m512 dot(__m512 d, __m512i x, __m512i w) {
  asm("vdpbf16ps %[x], %[w], %[d]" : [d] "+v"(d) : [w] "v"(w), [x] "v"(x));
  return d;
}

// 32 floats (n of them at p, the rest 0) as 32 bfloat16 values in order, rounded to nearest even.
inline __m512i round_32(const float* p, int n) {
  const __m512 lo = load_part<V>(p, n), hi = load_part<V>(p + 16, n - 16);
  return _mm512_castps_si512(reinterpret_cast<__m512>(_mm512_cvtne2ps_pbh(hi, lo)));
}

void pack_x(unsigned* xp, const float* x, long ldx, long rows, long kc) {
  const long kp = (kc + 1) / 2;
  for (long g = 0; g < rows; g += R) {
    const int n = rows - g < R ? static_cast<int>(rows - g) : R;
    const float* src = x + g * ldx;
    unsigned* dst = xp + g * kp;
    for (long p0 = 0; p0 < kp; p0 += 16) { // 16 pairs of each row: one vector, then transposed
      const int values = kc - 2 * p0 < 32 ? static_cast<int>(kc - 2 * p0) : 32;
      V::vec b[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        b[i] = i < n ? _mm512_castsi512_ps(round_32(src + i * ldx + 2 * p0, values)) : V::zero();
      V::transpose(b);
      const int pairs = kp - p0 < 16 ? static_cast<int>(kp - p0) : 16;
      for (int p = 0; p < pairs; ++p) store_part<V>(reinterpret_cast<float*>(dst + (p0 + p) * n), b[p], n);
    }
  }
}

// The 16-bit lanes of a pair vector of columns 0..15 (2c: column c of the pair's first row, 2c + 1:
// of its second) within the 64 lanes of two rows' 32 values (permutex2var); + 16 for columns 16..31.
alignas(64) constexpr unsigned short lo_cols[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                    8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};

void panel(unsigned short* wp, const float* src, long kc) {
  const __m512i lo = _mm512_load_si512(lo_cols), hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
  for (long p = 0; p < (kc + 1) / 2; ++p) {
    const __m512i first = round_32(src + 2 * p * 32, 32);
    const __m512i second = 2 * p + 1 < kc ? round_32(src + (2 * p + 1) * 32, 32) : _mm512_setzero_si512();
    _mm512_storeu_si512(wp + p * 64, _mm512_permutex2var_epi16(first, lo, second));
    _mm512_storeu_si512(wp + p * 64 + 32, _mm512_permutex2var_epi16(first, hi, second));
  }
}

// panel()'s layout straight from `cols` (<= 32) float32 rows of W at stride ldr, `in` long: 16 rows
// by 16 values of k transposed in registers (as rows_to_panel), then rounded by pairs of k. Rows past
// `cols` are never read.
void rows_panel(unsigned short* wp, const float* rows, long ldr, int cols, long in) {
  constexpr int L = V::lanes;
  const __m512i lo = _mm512_load_si512(lo_cols), hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
  long k0 = 0;
  for (; k0 + L <= in; k0 += L) {
    V::vec a[L], b[L]; // a[k]: columns 0..15 at k0 + k; b[k]: columns 16..31
#pragma GCC unroll 16
    for (int c = 0; c < L; ++c) {
      a[c] = c < cols ? V::load(rows + c * ldr + k0) : V::zero();
      b[c] = L + c < cols ? V::load(rows + (L + c) * ldr + k0) : V::zero();
    }
    V::transpose(a);
    V::transpose(b);
#pragma GCC unroll 8
    for (int k = 0; k < L; k += 2) {
      const __m512i first = _mm512_castps_si512(reinterpret_cast<__m512>(_mm512_cvtne2ps_pbh(b[k], a[k])));
      const __m512i second = _mm512_castps_si512(reinterpret_cast<__m512>(_mm512_cvtne2ps_pbh(b[k + 1], a[k + 1])));
      unsigned short* dst = wp + (k0 + k) / 2 * 64;
      _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(first, lo, second));
      _mm512_storeu_si512(dst + 32, _mm512_permutex2var_epi16(first, hi, second));
    }
  }
  if (k0 < in) { // the last values of k through a float32 panel
    alignas(64) float tail[L][32];
    for (long k = k0; k < in; ++k)
      for (int c = 0; c < 32; ++c) tail[k - k0][c] = c < cols ? rows[c * ldr + k] : 0.0f;
    panel(wp + k0 / 2 * 64, tail[0], in - k0);
  }
}

// panel()'s layout from `cols` (<= 32) rows of bfloat16 values where they are: their 32-bit pairs
// transposed (bits only, as tile_half_trans reads them; no rounding: they are bfloat16 already).
void bf16_rows_panel(unsigned short* wp, const unsigned short* rows, long ldr, int cols, long in) {
  constexpr int L = V::lanes, step = 2 * L;
  for (long k0 = 0; k0 < in; k0 += step) {
    const int n = in - k0 < step ? static_cast<int>(in - k0) : step;
    for (int c0 = 0; c0 < 32; c0 += L) {
      V::vec b[L];
      pairs_transposed<V>(b, rows + c0 * ldr + k0, ldr, cols - c0, n);
      for (int j = 0; j < (n + 1) / 2; ++j) V::store(reinterpret_cast<float*>(wp + ((k0 / 2 + j) * 32 + c0) * 2), b[j]);
    }
  }
}

template <int N>
void tile(const unsigned* xp, const unsigned short* wp, long kp, float* y, long ldy, int cols, bool resume,
          const float* bias, bool relu) {
  V::vec a0[N], a1[N];
  wpacked_start<V, N>(a0, a1, y, ldy, cols, resume);
  for (long p = 0; p < kp; ++p) {
    // the panel's lines 16 pairs ahead (it comes from L2, as tile_wpacked's does)
    __builtin_prefetch(wp + (p + wpacked_prefetch) * 64, 0, 3);
    __builtin_prefetch(wp + (p + wpacked_prefetch) * 64 + 32, 0, 3);
    const __m512i w0 = _mm512_loadu_si512(wp + p * 64), w1 = _mm512_loadu_si512(wp + p * 64 + 32);
#pragma GCC unroll 16
    for (int r = 0; r < N; ++r) {
      const __m512i xr = _mm512_set1_epi32(static_cast<int>(xp[p * N + r]));
      a0[r] = dot(a0[r], xr, w0);
      a1[r] = dot(a1[r], xr, w1);
    }
  }
  wpacked_finish<V, N>(a0, a1, y, ldy, cols, bias, relu);
}

template <int N = R>
void tile_rows(int rows, const unsigned* xp, const unsigned short* wp, long kp, float* y, long ldy, int cols,
               bool resume, const float* bias, bool relu) {
  if constexpr (N > 1)
    if (rows < N) return tile_rows<N - 1>(rows, xp, wp, kp, y, ldy, cols, resume, bias, relu);
  tile<N>(xp, wp, kp, y, ldy, cols, resume, bias, relu);
}

constexpr Bf16DotTable table{"avx512-bf16", R, &pack_x, &panel, &rows_panel, &bf16_rows_panel, &tile_rows<>};

} // namespace

const Bf16DotTable* avx512_bf16_table() { return &table; }

} // namespace attn::linear_detail
