// The opt-in bfloat16 products' tiles (linear_table.hpp's Bf16DotTable): x and W rounded to
// bfloat16 pairs as they are packed, each pair's two products added into float32 sums, by
// AVX512-BF16's vdpbf16ps or by AMX-BF16's tile products (tdpbf16ps: a 16 x 16 block of sums from
// 16 rows and 16 columns of 32 values each). Built with -mavx512f -mavx512bw -mavx512bf16
// -mamx-tile -mamx-bf16; called only when the CPU (and for AMX the OS) has them and a run asks for
// them (blas::set_matmul_precision).
//
// The float32 W-packed tile (linear_kernels.hpp's tile_wpacked) is the plain reference beside them:
// the same blocking, panels and tasks, one instruction per pair of k (vdpbf16ps) or per 16 x 16 x 32
// block (tdpbf16ps) instead of per k.
#include "kernels/isa/linear_kernels.hpp"
#include "kernels/isa/simd_avx512.hpp"

#include <algorithm>
#include <cstring>

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

constexpr Bf16DotTable table{"avx512-bf16", R, 1, &pack_x, &panel, &rows_panel, &bf16_rows_panel, &tile_rows<>};

// --- AMX-BF16 ---
// A call computes 32 rows by the panel's 32 columns: four 16 x 16 float32 sums (tiles 0-3) from two
// tiles of x's rows (4, 5: 16 rows by 16 pairs) and two of the panel's (6, 7: 16 pairs by 16
// columns' pairs, which is the panel's layout at a stride of its 32 columns).
constexpr int amx_rows = 32, amx_pairs = 16; // rows of a call; pairs of k a tile holds (64 bytes a row)

// x's rows for amx_tile: groups of 32 rows (0 past `rows`), each by chunks of 16 pairs (0 past
// kc), each chunk two tiles of 16 rows: xp[g 32 kpa + (c 2 + h) 256 + i 16 + j] = x[g 32 + 16 h +
// i][2 (16 c + j), + 1] as a bfloat16 pair, kpa = kp rounded up to 16
void amx_pack_x(unsigned* xp, const float* x, long ldx, long rows, long kc) {
  const long chunks = (kc + 2 * amx_pairs - 1) / (2 * amx_pairs);
  for (long g = 0; g < rows; g += amx_rows) {
    unsigned* group = xp + g * chunks * amx_pairs;
    for (int i = 0; i < amx_rows; ++i)
      for (long c = 0; c < chunks; ++c) {
        const long values = g + i < rows ? std::min<long>(kc - 2 * amx_pairs * c, 2 * amx_pairs) : 0;
        const __m512i v = values > 0 ? round_32(x + (g + i) * ldx + 2 * amx_pairs * c, static_cast<int>(values))
                                     : _mm512_setzero_si512();
        _mm512_storeu_si512(group + (c * 2 + i / 16) * 256 + (i % 16) * 16, v);
      }
  }
}

// Eight tiles of 16 rows by 64 bytes.
constexpr AmxTileConfig eight_full_tiles() {
  AmxTileConfig c;
  for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
  return c;
}

// The four sums += x's chunk (two tiles at a, 256 pairs apart) times the panel's 16 pairs at w.
inline void amx_chunk(const unsigned* a, const unsigned short* w) {
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a + 256, 64);
  _tile_loadd(6, w, 128);
  _tile_loadd(7, w + 32, 128);
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

void amx_tile(int rows, const unsigned* xp, const unsigned short* wp, long kp, float* y, long ldy, int cols,
              bool resume, const float* bias, bool relu) {
  static constexpr AmxTileConfig config = eight_full_tiles();
  _tile_loadconfig(&config);
  alignas(64) float sums[amx_rows][32];
  if (resume) {
    for (int r = 0; r < amx_rows; ++r) {
      V::store(sums[r], r < rows ? load_part<V>(y + r * ldy, cols) : V::zero());
      V::store(sums[r] + 16, r < rows ? load_part<V>(y + r * ldy + 16, cols - 16) : V::zero());
    }
    _tile_loadd(0, sums[0], 128);
    _tile_loadd(1, sums[0] + 16, 128);
    _tile_loadd(2, sums[16], 128);
    _tile_loadd(3, sums[16] + 16, 128);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const long full = kp / amx_pairs;
  for (long c = 0; c < full; ++c) amx_chunk(xp + c * 512, wp + c * amx_pairs * 64);
  if (kp % amx_pairs) { // the panel's last pairs, 0 after (x's chunk is 0 there already)
    alignas(64) unsigned short last[amx_pairs * 64] = {};
    std::memcpy(last, wp + full * amx_pairs * 64, static_cast<std::size_t>(kp % amx_pairs) * 64 * sizeof(short));
    amx_chunk(xp + full * 512, last);
  }
  _tile_stored(0, sums[0], 128);
  _tile_stored(1, sums[0] + 16, 128);
  _tile_stored(2, sums[16], 128);
  _tile_stored(3, sums[16] + 16, 128);
  _tile_release();
  const V::vec b0 = bias ? load_part<V>(bias, cols) : V::zero(),
               b1 = bias ? load_part<V>(bias + 16, cols - 16) : V::zero();
  for (int r = 0; r < rows; ++r) {
    V::vec s0 = V::load(sums[r]), s1 = V::load(sums[r] + 16);
    if (bias) s0 = V::add(s0, b0), s1 = V::add(s1, b1);
    if (relu) s0 = V::max(s0, V::zero()), s1 = V::max(s1, V::zero());
    store_part<V>(y + r * ldy, s0, cols);
    store_part<V>(y + r * ldy + 16, s1, cols - 16);
  }
}

constexpr Bf16DotTable amx_table{"amx-bf16", amx_rows,    amx_pairs,        &amx_pack_x,
                                 &panel,     &rows_panel, &bf16_rows_panel, &amx_tile};

} // namespace

const Bf16DotTable* avx512_bf16_table() { return &table; }
const Bf16DotTable* amx_bf16_table() { return &amx_table; }

} // namespace attn::linear_detail
