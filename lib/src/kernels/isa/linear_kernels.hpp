// The hot loops of blas::linear (src/kernels/linear.cpp), written once for any SIMD width and compiled per
// instruction set by linear_avx512.cpp and linear_avx2.cpp (each with its own -m flags).
//
// Every output element, in every tile and on every instruction set, is the same chain
//   acc = 0;  for k = 0 .. in-1:  acc = fma(x[r][k], W[j][k], acc);   y[r][j] = acc (+ bias[j])
// so a row's bits do not depend on how many rows share the call, where the row sits in it, how the
// work is split over threads, or which of the two tiles below computes it.
//
// This header is included only by those two files. It uses no standard-library templates: an
// inline function instantiated under -mavx512f could otherwise be merged by the linker with the
// generic copy and run on a CPU without AVX-512.
#pragma once

#include "kernels/isa/linear_table.hpp"

namespace attn::linear_detail {

// The first n floats at p (n may be <= 0 or >= the lanes), the other lanes 0; and the store of the
// first n lanes of v. Each instruction set gives only its masked load_first and store_first.
template <class V> typename V::vec load_part(const float* p, int n) {
  return n >= V::lanes ? V::load(p) : n <= 0 ? V::zero() : V::load_first(p, n);
}
template <class V> void store_part(float* p, typename V::vec v, int n) {
  if (n >= V::lanes)
    V::store(p, v);
  else if (n > 0)
    V::store_first(p, v, n);
}

// The W-packed tile's steps k0 .. k1-1: a0, a1 += x[r][k] * W's panel at k, each step also asking
// for the panel's lines `wpacked_prefetch` steps ahead when `prefetch`. The panel slice (KC = 512
// by 2L columns: 64 KiB with AVX-512) does not fit in L1 and comes from L2 for each tile; the
// hardware prefetchers left the FMA units waiting (Xeon model 85, one thread, (96, 512) x (1536,
// 512)^T as linear_wpacked blocks it: 123-137 GFLOP/s medians without, 138-142 with 16 steps
// ahead, of a 152 peak; 8 and 32 steps gave the same). With the prefetch of y's lines below, in
// paired runs of the tools on 2 threads: mha-run's computation 1.05x, encode 1.07x (1.13x on the
// AVX2 tiles); the same bits.
constexpr long wpacked_prefetch = 16;
template <class V, int R, bool prefetch>
inline __attribute__((always_inline)) void wpacked_steps(typename V::vec* a0, typename V::vec* a1, const float* xp,
                                                         const float* wp, long k0, long k1) {
  constexpr int L = V::lanes;
  for (long k = k0; k < k1; ++k) {
    if constexpr (prefetch)
#pragma GCC unroll 4
      for (int line = 0; line < 2 * L; line += 16) __builtin_prefetch(wp + (k + wpacked_prefetch) * 2 * L + line, 0, 3);
    const typename V::vec w0 = V::load(wp + k * 2 * L), w1 = V::load(wp + k * 2 * L + L);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const typename V::vec xr = V::bcast(xp[k * R + r]);
      a0[r] = V::fma(xr, w0, a0[r]);
      a1[r] = V::fma(xr, w1, a1[r]);
    }
  }
}

// A W-packed tile's R rows x 2L columns of accumulators (a0: columns 0..L-1, a1: L..2L-1): from
// y's `cols` values with `resume` (a later block of k), else 0 ...
template <class V, int R>
inline __attribute__((always_inline)) void wpacked_start(typename V::vec* a0, typename V::vec* a1, const float* y,
                                                         long ldy, int cols, bool resume) {
  constexpr int L = V::lanes;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    a0[r] = resume ? load_part<V>(y + r * ldy, cols) : V::zero();
    a1[r] = resume ? load_part<V>(y + r * ldy + L, cols - L) : V::zero();
  }
}

// ... and into y: + bias when given, then with `relu` max(y, 0) (0 for NaN and -0, as y > 0 ? y : 0
// gives: V::max(a, b) gives b when a is NaN or both are zeros), `cols` values a row.
template <class V, int R>
inline __attribute__((always_inline)) void wpacked_finish(typename V::vec* a0, typename V::vec* a1, float* y, long ldy,
                                                          int cols, const float* bias, bool relu) {
  constexpr int L = V::lanes;
  if (bias) {
    const typename V::vec b0 = load_part<V>(bias, cols), b1 = load_part<V>(bias + L, cols - L);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) a0[r] = V::add(a0[r], b0), a1[r] = V::add(a1[r], b1);
  }
  if (relu)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) a0[r] = V::max(a0[r], V::zero()), a1[r] = V::max(a1[r], V::zero());
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    store_part<V>(y + r * ldy, a0[r], cols);
    store_part<V>(y + r * ldy + L, a1[r], cols - L);
  }
}

// W-packed tile: R rows of x, packed k-major (xp[k * R + r]), times one panel of 2L columns of W,
// packed k-major (wp[k * 2L + c]; columns past `cols` are zero). y (R, cols) at stride ldy. With
// `resume` the chain continues from the values in y (a later block of k); bias, when given, is
// added last, and then, with `relu`, max(y, 0) (0 for NaN and -0, as y > 0 ? y : 0 gives). Both
// operands stream from one address each, in order. Reading x's R rows in place instead (R streams
// at a stride, which often share L1 sets) was slower: packing x made products of (1024..4096,
// 512..3072) x (512..2048) 1.00-1.10x faster on 2 threads (above OpenBLAS's sgemm).
template <class V, int R>
void tile_wpacked(const float* xp, const float* wp, long kc, float* y, long ldy, int cols, bool resume,
                  const float* bias, bool relu) {
  constexpr int L = V::lanes;
  typename V::vec a0[R], a1[R];
  wpacked_start<V, R>(a0, a1, y, ldy, cols, resume);
  if (!resume) // y's lines, asked for now to be written at the end (2-5% on 2 threads at E = 512)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int c = 0; c < 2 * L; c += 16) __builtin_prefetch(y + r * ldy + c, 1, 3);
      __builtin_prefetch(y + r * ldy + 2 * L - 1, 1, 3); // the row's last line, if it starts one more
    }
  const long ahead = kc > wpacked_prefetch ? kc - wpacked_prefetch : 0;
  wpacked_steps<V, R, true>(a0, a1, xp, wp, 0, ahead);
  wpacked_steps<V, R, false>(a0, a1, xp, wp, ahead, kc);
  wpacked_finish<V, R>(a0, a1, y, ldy, cols, bias, relu);
}

// x-packed tile: up to L rows of x, packed k-major (xp[k * L + lane]; lanes past `rows` are zero),
// times C columns of W in its own layout (row j of W at w + j * ldw). For few rows: W is read in
// place, once, with no packing (generation streams every weight once per token).
template <class V, int C>
void tile_xpacked(const float* xp, const float* w, long ldw, long kc, float* y, long ldy, int rows, const float* bias) {
  constexpr int L = V::lanes;
  typename V::vec a[C];
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) a[c] = V::zero();
  for (long k = 0; k < kc; ++k) {
    const typename V::vec xk = V::load(xp + k * L);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) a[c] = V::fma(xk, V::bcast(w[c * ldw + k]), a[c]);
  }
  alignas(64) float t[C][L];
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) V::store(t[c], a[c]);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < C; ++c) y[r * ldy + c] = bias ? t[c][r] + bias[c] : t[c][r];
}

// Transposing tile, for the fewest rows (generation at batch 1): R rows of x times L columns of W
// read in place. Each L x L block of W (L columns by L values of k) is transposed in registers, so
// one k is one vector of L columns: a row costs one FMA per k and L columns, and W is streamed once,
// unpacked. Past the last full block only the remaining k are added (no fma(0, 0, acc) steps).
// The tile's L rows of W are read at a stride, L streams at once, which the hardware prefetchers do
// not follow well (38 GB/s against sgemv's 50 on 86 MiB of weights); so each block step also
// prefetches L lines of `next` (the next tile's rows, one contiguous region when ldw = kc) in address
// order: 55 GB/s. Into L2 (prefetcht1): a tile ahead is as large as L1 (48 KiB at kc = 768), and
// into L1 it pushed out lines still to be read; batch 1 over the float32 LLaMA-shaped bench model's
// 400 MB (Xeon with AMX, 2 threads, against its column tiles in one process) went from 0.79x to
// 0.87-0.90x the tiles' rate.
template <class V, int R>
void tile_wtrans(const float* x, long ldx, const float* w, long ldw, long kc, float* y, long ldy, int cols,
                 const float* bias, const float* next) {
  constexpr int L = V::lanes;
  typename V::vec acc[R], b[L];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = V::zero();
  long k0 = 0;
  for (; k0 + L <= kc; k0 += L) {
#pragma GCC unroll 16
    for (int c = 0; c < L; ++c) {
      if (next) __builtin_prefetch(next + k0 * L + c * 16, 0, 2); // prefetcht1
      b[c] = c < cols ? V::load(w + c * ldw + k0) : V::zero();
    }
    V::transpose(b);
#pragma GCC unroll 16
    for (int k = 0; k < L; ++k)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r] = V::fma(V::bcast(x[r * ldx + k0 + k]), b[k], acc[r]);
  }
  if (k0 < kc) {
    const int rest = static_cast<int>(kc - k0);
    for (int c = 0; c < L; ++c) b[c] = c < cols ? load_part<V>(w + c * ldw + k0, rest) : V::zero();
    V::transpose(b);
    for (int k = 0; k < rest; ++k)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r] = V::fma(V::bcast(x[r * ldx + k0 + k]), b[k], acc[r]);
  }
  const typename V::vec bv = bias ? load_part<V>(bias, cols) : V::zero();
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) store_part<V>(y + r * ldy, bias ? V::add(acc[r], bv) : acc[r], cols);
}

// AMX's tile configuration as ldtilecfg reads it (64 bytes, palette 1): each tile's rows and bytes
// a row, 0 for a tile left unconfigured (linear_bf16.cpp's and linear_amx_int8.cpp's tiles).
struct alignas(64) AmxTileConfig {
  unsigned char palette = 1, start_row = 0, reserved[14] = {};
  unsigned short colsb[16] = {};
  unsigned char rows[16] = {};
};

// bfloat16 bits, a type of their own so that the tiles below know them from float16's.
struct Bf16 {
  unsigned short bits;
};

// A weight's 16 values at w as float vectors: float32 loaded, float16 and bfloat16 widened (exact).
template <class V> typename V::vec load_weight(const float* w) { return V::load(w); }
template <class V> typename V::vec load_weight(const unsigned short* w) { return V::load_f16(w); }
template <class V> typename V::vec load_weight(const Bf16* w) {
  return V::load_bf16(reinterpret_cast<const unsigned short*>(w));
}

// A vector of 16-bit pairs as the floats of their first and second values (see V::bf16_pairs).
template <class V> void widen_pairs(typename V::vec p, typename V::vec& a, typename V::vec& b, const Bf16*) {
  V::bf16_pairs(p, a, b);
}
template <class V> void widen_pairs(typename V::vec p, typename V::vec& a, typename V::vec& b, const unsigned short*) {
  V::f16_pairs(p, a, b);
}

// b[j] = values 2j and 2j + 1 of k, from k0, of `nrows` (<= L) rows at rows + c ldr (lane c; lanes
// past nrows zero) as 32-bit pairs: the rows' 2L values at k0 as L vectors, transposed (bits
// only). Fewer than 2L values (`n`) are copied into a zeroed buffer first: nothing past them is read.
template <class V>
inline __attribute__((always_inline)) void pairs_transposed(typename V::vec* b, const unsigned short* rows, long ldr,
                                                            int nrows, int n) {
  constexpr int L = V::lanes, step = 2 * L;
  if (n == step) {
#pragma GCC unroll 16
    for (int c = 0; c < L; ++c) b[c] = c < nrows ? V::load(reinterpret_cast<const float*>(rows + c * ldr)) : V::zero();
  } else {
    alignas(64) unsigned short part[L][step];
    for (int c = 0; c < L; ++c) {
      for (int i = 0; i < step; ++i) part[c][i] = c < nrows && i < n ? rows[c * ldr + i] : 0;
      b[c] = V::load(reinterpret_cast<const float*>(part[c]));
    }
  }
  V::transpose(b);
}

// Transposing tile over 16-bit rows where they are (LinearWeight::half_rows_in_place; E: Bf16, or
// unsigned short for float16), for the fewest rows (a prompt's few tokens, a step): R rows of x
// times NT groups of L rows of W (group t's row c at w + (t L + c) ldw, all readable; `cols`
// outputs of the last group stored), kc values each. A step reads 2L values of k from each of L
// rows as L vectors of 32-bit pairs, transposes them in registers (bits only) and widens each into
// the vectors of k and k + 1 for the L columns: the FMA chain of the other tiles, so the bits of
// float32 over the same values, with half tile_wtrans's shuffles per weight and no copy of the
// rows. NT groups at once for one row: each output is one dependent chain, so a step transposes
// the NT groups' blocks first and then advances their NT chains together (one group after the
// other left one chain's FMA latency exposed).
// The rows are NT L short streams, which the hardware's prefetchers do not follow: each step asks
// for NT runs of 1 KiB (AVX-512) of `next`, the next call's rows (contiguous when ldw = kc), in
// address order into L2, one line with each pair of k rather than all at the step's start, and
// with `lead` for its own rows 3 steps ahead (a thread's first call, which nothing asked for). No
// value past kc is read (pairs_transposed).
// Measured (2 threads, batch 1, bf16, against the 16-bit column tiles in one process, medians of
// 15 alternated rounds, bench/half_rows_rate): on a Xeon with AMX, from memory, 4 groups:
// (2048, 768) 0.70x (the groups one after the other, the 16 prefetches of a step at its start and
// into L1: 0.55x; the groups together alone 0.60-0.65x), (768, 2048) 0.60x (0.49x), (32000, 768)
// 0.68x (0.54x); 4 and 8 rows of x 0.90x and 1.25x (0.62x, 0.90x); fewer groups did better still
// (half_trans_groups). On a Zen 4, before the groups went together: from the cache 0.86x; from
// memory (2048, 768) 0.92x, (32000, 768) 0.99x, (256, 768) 0.68x, (768, 2048) 0.51x (rows 4 KiB
// apart share L1 sets); without the prefetches 0.3x. Blocks of 512 values of k, each prefetching
// the next block, were slower (0.52-0.69x). The path before it (rows widened into the cache, then
// the float32 transposing tile) took 2.0-2.2 s for 128 float16 tokens where the tiles took
// 0.8-1.1 s.
template <class V, int R, int NT, class E>
void tile_half_trans(const float* x, long ldx, const unsigned short* w, long ldw, long kc, float* y, long ldy, int cols,
                     const float* bias, const unsigned short* next, bool lead) {
  constexpr int L = V::lanes, step = 2 * L, step_bytes = 4 * L * L; // a step: L rows x 2L values
  typename V::vec acc[R][NT];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[r][t] = V::zero();
  const long steps = kc / step;
  for (long s = 0; s < steps; ++s) {
    const long k0 = s * step;
    // the NT groups' steps transposed first, then their NT chains advanced together
    typename V::vec b[NT][L];
#pragma GCC unroll 1
    for (int t = 0; t < NT; ++t) {
      const unsigned short* wt = w + t * L * ldw + k0;
      if (lead)
#pragma GCC unroll 16
        for (int c = 0; c < L; ++c) __builtin_prefetch(wt + c * ldw + 3 * step, 0, 3);
#pragma GCC unroll 16
      for (int c = 0; c < L; ++c) b[t][c] = V::load(reinterpret_cast<const float*>(wt + c * ldw));
      V::transpose(b[t]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < L; ++j) {
      if (next)
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t)
          __builtin_prefetch(reinterpret_cast<const char*>(next) + (s * NT + t) * step_bytes + j * (step_bytes / L), 0,
                             2);
      typename V::vec first[NT], second[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) widen_pairs<V>(b[t][j], first[t], second[t], static_cast<const E*>(nullptr));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const typename V::vec xa = V::bcast(x[r * ldx + k0 + 2 * j]);
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) acc[r][t] = V::fma(xa, first[t], acc[r][t]);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const typename V::vec xb = V::bcast(x[r * ldx + k0 + 2 * j + 1]);
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) acc[r][t] = V::fma(xb, second[t], acc[r][t]);
      }
    }
  }
  if (const int rest = static_cast<int>(kc - steps * step); rest > 0) {
    const long k0 = steps * step;
    for (int t = 0; t < NT; ++t) {
      typename V::vec b[L];
      pairs_transposed<V>(b, w + t * L * ldw + k0, ldw, L, rest);
      for (int k = 0; k < rest; k += 2) { // only the values there are: fma(0, x, -0) would be +0
        typename V::vec first, second;
        widen_pairs<V>(b[k / 2], first, second, static_cast<const E*>(nullptr));
        for (int r = 0; r < R; ++r) acc[r][t] = V::fma(V::bcast(x[r * ldx + k0 + k]), first, acc[r][t]);
        if (k + 1 < rest)
          for (int r = 0; r < R; ++r) acc[r][t] = V::fma(V::bcast(x[r * ldx + k0 + k + 1]), second, acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) {
    const int n = t + 1 < NT ? L : cols;
    const typename V::vec bv = bias ? load_part<V>(bias + t * L, n) : V::zero();
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) store_part<V>(y + r * ldy + t * L, bias ? V::add(acc[r][t], bv) : acc[r][t], n);
  }
}

// Tiles over a weight in column tiles (linear_weight.hpp: 16 columns, k-major), float32 or float16
// (E): R rows of x times NT consecutive tiles, all 16 columns of each but `cols` of the last; a
// single tile may start at a lane lo > 0 (w then points there, cols <= 16 - lo). The tiles sit in
// blocks of `width` columns (a multiple of 16), k-major: tile i's values for k at
// w + (i / G) kc width + k width + (i % G) 16, G = width / 16. A weight's tiles are blocks of 16
// (tile i at w + i * 16 kc); attention's key tiles are wider (attention.hpp, KeyTiles), so that
// the tiles a call reads together are one contiguous run per k instead of NT short ones.
// Each k loads a tile's 16 values as vectors (float16 widened to float, exactly), so the FMA chain
// and the bits are those of the other float32 tiles, while the weight streams in its own order with
// no transposing (batch 1 on 86 MiB of float32 weights, 2 threads: 1.2x the transposing tile's
// rate, the memory's). Several tiles at once for few rows: each output is one dependent FMA chain,
// so one row of one tile would wait on the FMA latency. Lanes past `cols` compute on whatever
// follows in the buffer and are never stored.
template <class V, int R, int NT, class E>
void tile_cols(const float* x, long ldx, const E* w, long kc, long width, float* y, long ldy, int cols,
               const float* bias) {
  constexpr int L = V::lanes, N = 16 / L;
  const long G = width / 16;
  const E* p[NT]; // tile t's values for k = 0
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) p[t] = w + (t / G) * kc * width + (t % G) * 16;
  typename V::vec acc[R][NT][N];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
      for (int i = 0; i < N; ++i) acc[r][t][i] = V::zero();
  for (long k = 0; k < kc; ++k) {
    typename V::vec xk[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) xk[r] = V::bcast(x[r * ldx + k]);
    // 16-bit tiles: each tile's line 16 steps (512 bytes) ahead asked for in software, one request a
    // line (two steps). The 8 tiles' streams outran the hardware's prefetchers: a bf16 LLaMA-shaped
    // model's 128 tokens (bench_hf's) took 0.91 s, 0.74 s with this, on a host streaming 44 GB/s.
    // A prefetch past a tile's end is harmless (never a fault).
    if constexpr (sizeof(E) == 2)
      if ((k & 1) == 0)
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) __builtin_prefetch(p[t] + (k + 16) * width, 0, 3);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
      for (int i = 0; i < N; ++i) {
        const typename V::vec wk = load_weight<V>(p[t] + k * width + i * L);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][t][i] = V::fma(xk[r], wk, acc[r][t][i]);
      }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
    for (int i = 0; i < N; ++i) {
      const int n = (t + 1 < NT ? 16 : cols) - i * L, c = t * 16 + i * L;
      const typename V::vec bv = bias ? load_part<V>(bias + c, n) : V::zero();
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) store_part<V>(y + r * ldy + c, bias ? V::add(acc[r][t][i], bv) : acc[r][t][i], n);
    }
}

// Tiles of the int8 product (blas.hpp): R rows of int8 inputs x (row r at x + r ldx, packed as the
// weight's rows, each block b with its scale xs[r blocks + b] and its correction
// xsums[r blocks + b]) times NT consecutive column tiles of an int8 weight (linear_weight.hpp: tile
// i at w + i * 16 P bytes, its scales at + i * 16 blocks), with `cols` and a start lane as
// tile_cols. For each block, the integer dot products of 4 values at a time (I::dot: the CPU's int8
// dot product, exact in int32; on a weight vector as I::weights prepares it, less the block's
// correction), then acc = fma(float(d) * xs, scale, acc); at the end y = acc (+ bias). Integers are
// exact and the float steps are the same on every instruction set, so the bits are the
// reference's (linear.cpp).
template <class I, int R, int NT>
void tile_i8(const signed char* x, long ldx, const float* xs, const int* xsums, const signed char* w, long P,
             const float* scales, long blocks, long quads, float* y, long ldy, int cols, const float* bias) {
  constexpr int L = I::lanes, N = 16 / L;
  typename I::vec acc[R][NT][N];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
      for (int i = 0; i < N; ++i) acc[r][t][i] = I::zero();
  for (long b = 0; b < blocks; ++b) {
    typename I::ivec d[R][NT][N]; // from minus the block's correction: nothing to subtract after
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const typename I::ivec z = I::ibcast(-xsums[r * blocks + b]);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
        for (int i = 0; i < N; ++i) d[r][t][i] = z;
    }
    for (long g = b * quads; g < (b + 1) * quads; ++g) {
      typename I::ivec xg[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) xg[r] = I::bcast4(x + r * ldx + g * 4);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
        for (int i = 0; i < N; ++i) {
          const typename I::ivec wg = I::weights(I::iload(w + t * P * 16 + (g * 16 + i * L) * 4));
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) d[r][t][i] = I::dot(d[r][t][i], xg[r], wg);
        }
    }
    typename I::vec xb[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) xb[r] = I::bcast(xs[r * blocks + b]);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
      for (int i = 0; i < N; ++i) {
        const typename I::vec s = I::load(scales + (t * blocks + b) * 16 + i * L);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][t][i] = I::fma(I::mul(I::to_float(d[r][t][i]), xb[r]), s, acc[r][t][i]);
      }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
    for (int i = 0; i < N; ++i) {
      const int n = (t + 1 < NT ? 16 : cols) - i * L, c = t * 16 + i * L;
      const typename I::vec bv = bias ? load_part<I>(bias + c, n) : I::zero();
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) store_part<I>(y + r * ldy + c, bias ? I::add(acc[r][t][i], bv) : acc[r][t][i], n);
    }
}

// Row x (in values) quantized for the int8 product (blas.hpp), packed as the weight's rows (blocks
// of B values padded with zeros to B4), each block with its own scale: a = max |x| over the block,
// q = round(x * (127 / a)) to nearest even, and scale[b] = a / 127; sums[b] = I::weight_offset times
// block b's sum of q (what I::dot adds for the offset it gives the weights). The same values as
// linear.cpp's quantize_row (the maximum does not depend on the order; the rest is elementwise).
// False, with nothing written, when a value is not finite (x * 0 is then NaN).
template <class I>
bool quantize_row_i8(const float* x, long in, long B, long B4, signed char* q, float* scale, int* sums) {
  constexpr int L = I::lanes;
  typename I::vec nan = I::zero();
  long k = 0;
  for (; k + L <= in; k += L) nan = I::add(nan, I::mul(I::load(x + k), I::zero()));
  float z = I::sum_lanes_in_order(nan);
  for (; k < in; ++k) z += x[k] * 0.0f;
  if (z != z) return false;
  for (long b = 0, k0 = 0; k0 < in; ++b, k0 += B) {
    signed char* qb = q + b * B4;
    const long n = B < in - k0 ? B : in - k0;
    typename I::vec m = I::zero();
    long i = 0;
    for (; i + L <= n; i += L) {
      const typename I::vec v = I::load(x + k0 + i);
      m = I::max(m, I::max(v, I::sub(I::zero(), v)));
    }
    float a = I::max_lanes(m);
    for (; i < n; ++i) {
      const float v = x[k0 + i] < 0 ? -x[k0 + i] : x[k0 + i];
      a = v > a ? v : a;
    }
    const typename I::vec vinv = I::bcast(a > 0.0f ? 127.0f / a : 0.0f);
    for (i = 0; i < n; i += L) {
      const int cnt = n - i < L ? static_cast<int>(n - i) : L;
      I::store_i8(qb + i, I::round(I::mul(load_part<I>(x + k0 + i, cnt), vinv)), cnt);
    }
    for (i = n; i < B4; ++i) qb[i] = 0;
    int sum = 0;
    if constexpr (I::weight_offset != 0) // AVX2's weights carry no offset: nothing to correct
      for (i = 0; i < n; ++i) sum += qb[i];
    sums[b] = I::weight_offset * sum;
    scale[b] = a / 127.0f;
  }
  return true;
}

// x's `rows` rows (stride ldx) by kc values as the W-packed tiles read them: groups of R rows (the
// last may have fewer, n), each k-major: group g at xp + g R kc, xp[g R kc + k n + i] = x[g R + i][k].
// L values of k of each row at a time, transposed in registers (a copy value by value cost 1-2
// cycles a value: 3-12% of a product with 512 to 1536 outputs).
template <class V> void pack_x(float* xp, const float* x, long ldx, long rows, long kc) {
  constexpr int L = V::lanes, R = V::max_rows;
  static_assert(R <= L, "a group's rows are the lanes of one transposed vector");
  for (long g = 0; g < rows; g += R) {
    const int n = rows - g < R ? static_cast<int>(rows - g) : R;
    const float* src = x + g * ldx;
    float* dst = xp + g * kc;
    long k0 = 0;
    for (; k0 + L <= kc; k0 += L) {
      typename V::vec b[L];
#pragma GCC unroll 16
      for (int i = 0; i < L; ++i) b[i] = i < n ? V::load(src + i * ldx + k0) : V::zero();
      V::transpose(b);
#pragma GCC unroll 16
      for (int k = 0; k < L; ++k) store_part<V>(dst + (k0 + k) * n, b[k], n);
    }
    for (; k0 < kc; ++k0)
      for (int i = 0; i < n; ++i) dst[k0 * n + i] = src[i * ldx + k0];
  }
}

// Run-time row and column counts to the instantiated tiles.
template <class V, int R = V::max_rows>
void wpacked_rows(int rows, const float* xp, const float* wp, long kc, float* y, long ldy, int cols, bool resume,
                  const float* bias, bool relu) {
  if constexpr (R > 1)
    if (rows < R) return wpacked_rows<V, R - 1>(rows, xp, wp, kc, y, ldy, cols, resume, bias, relu);
  tile_wpacked<V, R>(xp, wp, kc, y, ldy, cols, resume, bias, relu);
}

template <class V, int C = V::max_cols>
void xpacked_cols(int cols, const float* xp, const float* w, long ldw, long kc, float* y, long ldy, int rows,
                  const float* bias) {
  if constexpr (C > 1)
    if (cols < C) return xpacked_cols<V, C - 1>(cols, xp, w, ldw, kc, y, ldy, rows, bias);
  tile_xpacked<V, C>(xp, w, ldw, kc, y, ldy, rows, bias);
}

template <class V, int R = V::max_trans_rows>
void wtrans_rows(int rows, const float* x, long ldx, const float* w, long ldw, long kc, float* y, long ldy, int cols,
                 const float* bias, const float* next) {
  if constexpr (R > 1)
    if (rows < R) return wtrans_rows<V, R - 1>(rows, x, ldx, w, ldw, kc, y, ldy, cols, bias, next);
  tile_wtrans<V, R>(x, ldx, w, ldw, kc, y, ldy, cols, bias, next);
}

// Tiles at once for R rows: enough independent chains to hide the FMA latency, 4, or 8 over
// float16, whose widening lengthens each step (batch 1 over 44 MB of float16 weights on 2 threads,
// a standalone loop alternating both in one process: 8 tiles streamed 9-15% faster than 4; over
// float32, 8 gave the same as 4).
template <class V, int R, class E = float> constexpr int col_tiles() {
  constexpr int chains = R * (16 / V::lanes), want = sizeof(E) == 2 ? 8 : 4;
  return chains >= want ? 1 : want / chains;
}

template <class V, int R, class E, int NT = col_tiles<V, R, E>()>
void col_tiles_of(int tiles, const float* x, long ldx, const E* w, long kc, long width, float* y, long ldy, int cols,
                  const float* bias) {
  if constexpr (NT > 1)
    if (tiles < NT) return col_tiles_of<V, R, E, NT - 1>(tiles, x, ldx, w, kc, width, y, ldy, cols, bias);
  tile_cols<V, R, NT>(x, ldx, w, kc, width, y, ldy, cols, bias);
}

template <class V, class E, int R = V::max_q_rows>
void col_rows(int rows, int tiles, const float* x, long ldx, const E* w, long kc, long width, float* y, long ldy,
              int cols, const float* bias) {
  if constexpr (R > 1)
    if (rows < R) return col_rows<V, E, R - 1>(rows, tiles, x, ldx, w, kc, width, y, ldy, cols, bias);
  col_tiles_of<V, R, E>(tiles, x, ldx, w, kc, width, y, ldy, cols, bias);
}

// The same over a weight's tiles (blocks of 16 columns): linear's f32_cols and f16_cols.
template <class V, class E>
void weight_col_rows(int rows, int tiles, const float* x, long ldx, const E* w, long kc, float* y, long ldy, int cols,
                     const float* bias) {
  col_rows<V, E>(rows, tiles, x, ldx, w, kc, 16, y, ldy, cols, bias);
}
// bf16_cols: the table's plain type for the bits.
template <class V>
void bf16_col_rows(int rows, int tiles, const float* x, long ldx, const unsigned short* w, long kc, float* y, long ldy,
                   int cols, const float* bias) {
  col_rows<V, Bf16>(rows, tiles, x, ldx, reinterpret_cast<const Bf16*>(w), kc, 16, y, ldy, cols, bias);
}

// The groups of L rows of W tile_half_trans takes at once for R rows of x: 2 for one row, else 1.
// Batch 1 from memory on a Xeon with AMX (bench/half_rows_rate, against the tiles, medians):
// (2048, 768) 0.76x with 2 groups, 0.69-0.74x with 4, 0.62x with 1, 0.56x with 8 (their blocks
// spill); (256, 768) 0.80x against 0.65-0.71x with 4; 2 rows, 1 group against 2: (2048, 768)
// 0.83x against 0.77x, (768, 2048) 0.70x against 0.59x.
template <int R> constexpr int half_trans_groups() { return R == 1 ? 2 : 1; }

template <class V, int R, class E, int NT = half_trans_groups<R>()>
void half_trans_groups_of(int groups, const float* x, long ldx, const unsigned short* w, long ldw, long kc, float* y,
                          long ldy, int cols, const float* bias, const unsigned short* next, bool lead) {
  if constexpr (NT > 1)
    if (groups < NT)
      return half_trans_groups_of<V, R, E, NT - 1>(groups, x, ldx, w, ldw, kc, y, ldy, cols, bias, next, lead);
  tile_half_trans<V, R, NT, E>(x, ldx, w, ldw, kc, y, ldy, cols, bias, next, lead);
}

template <class V, class E, int R = V::max_trans_rows>
void half_trans_rows(int rows, int groups, const float* x, long ldx, const unsigned short* w, long ldw, long kc,
                     float* y, long ldy, int cols, const float* bias, const unsigned short* next, bool lead) {
  if constexpr (R > 1)
    if (rows < R) return half_trans_rows<V, E, R - 1>(rows, groups, x, ldx, w, ldw, kc, y, ldy, cols, bias, next, lead);
  half_trans_groups_of<V, R, E>(groups, x, ldx, w, ldw, kc, y, ldy, cols, bias, next, lead);
}

template <class V, int R = V::max_trans_rows> int half_trans_groups_for(int rows) {
  if constexpr (R > 1)
    if (rows < R) return half_trans_groups_for<V, R - 1>(rows);
  return half_trans_groups<R>();
}

// The tiles col_rows takes at once for `rows` rows (linear.cpp groups them so).
template <class V, class E = float, int R = V::max_q_rows> int col_tiles_for(int rows) {
  if constexpr (R > 1)
    if (rows < R) return col_tiles_for<V, E, R - 1>(rows);
  return col_tiles<V, R, E>();
}

// The int8 product's tiles at once for R rows: I::i8_chains independent dot-product chains (their
// latency hidden), and their float accumulators, in registers.
template <class I, int R> constexpr int i8_tiles() {
  constexpr int chains = R == 1 ? I::i8_row_chains : I::i8_chains; // one row: fewer, measured
  return chains / R > 1 ? chains / R : 1;
}

template <class I, int R, int NT = i8_tiles<I, R>()>
void i8_tiles_of(int tiles, const signed char* x, long ldx, const float* xs, const int* xsums, const signed char* w,
                 long P, const float* scales, long blocks, long quads, float* y, long ldy, int cols,
                 const float* bias) {
  if constexpr (NT > 1)
    if (tiles < NT)
      return i8_tiles_of<I, R, NT - 1>(tiles, x, ldx, xs, xsums, w, P, scales, blocks, quads, y, ldy, cols, bias);
  tile_i8<I, R, NT>(x, ldx, xs, xsums, w, P, scales, blocks, quads, y, ldy, cols, bias);
}

template <class I, int R = I::i8_rows>
void i8_rows(int rows, int tiles, const signed char* x, long ldx, const float* xs, const int* xsums,
             const signed char* w, long P, const float* scales, long blocks, long quads, float* y, long ldy, int cols,
             const float* bias) {
  if constexpr (R > 1)
    if (rows < R)
      return i8_rows<I, R - 1>(rows, tiles, x, ldx, xs, xsums, w, P, scales, blocks, quads, y, ldy, cols, bias);
  i8_tiles_of<I, R>(tiles, x, ldx, xs, xsums, w, P, scales, blocks, quads, y, ldy, cols, bias);
}

template <class I, int R = I::i8_rows> int i8_tiles_for(int rows) {
  if constexpr (R > 1)
    if (rows < R) return i8_tiles_for<I, R - 1>(rows);
  return i8_tiles<I, R>();
}

template <class I> constexpr Int8Table int8_table_of(const char* name) {
  return Int8Table{name, I::i8_rows, &i8_rows<I>, &i8_tiles_for<I>, &quantize_row_i8<I>, nullptr, 0};
}

// panel[k * ldp + c] = rows[c * ldr + k] for c < cols, 0 for cols <= c < width (a multiple of L),
// k < in: rows (at stride ldr) as a k-major panel, by L x L transposes in registers. The W-packed
// tiles' panels (value by value, they took 2.8% of mha-run's samples), 16 wide a weight's column
// tiles (linear_weight.hpp), and the attention kernel's transposed queries.
template <class V>
void rows_to_panel(float* panel, long ldp, long width, const float* rows, long ldr, int cols, long in) {
  constexpr int L = V::lanes;
  long k0 = 0;
  for (; k0 + L <= in; k0 += L)
    for (int c0 = 0; c0 < width; c0 += L) {
      typename V::vec r[L];
#pragma GCC unroll 16
      for (int c = 0; c < L; ++c) r[c] = c0 + c < cols ? V::load(rows + (c0 + c) * ldr + k0) : V::zero();
      V::transpose(r);
#pragma GCC unroll 16
      for (int k = 0; k < L; ++k) V::store(panel + (k0 + k) * ldp + c0, r[k]);
    }
  for (; k0 < in; ++k0)
    for (int c = 0; c < width; ++c) panel[k0 * ldp + c] = c < cols ? rows[c * ldr + k0] : 0.0f;
}

// panel[k * ldp + c] = W'[c][k] for c < cols, 0 for cols <= c < width (a multiple of L), k < in,
// from 16-bit rows (E: Bf16, or unsigned short for float16; row c at rows + c ldr): a W-packed
// panel of a weight held in rows, as rows_to_panel lays out float32 rows. 2L values of L rows at a
// time as 32-bit pairs, transposed in registers and widened into the vectors of k and k + 1 (as
// tile_half_trans reads them). Rows past `cols` are never read.
template <class V, class E>
void half_rows_to_panel(float* panel, long ldp, long width, const unsigned short* rows, long ldr, int cols, long in) {
  constexpr int L = V::lanes, step = 2 * L;
  for (long k0 = 0; k0 < in; k0 += step) {
    const int n = in - k0 < step ? static_cast<int>(in - k0) : step;
    for (int c0 = 0; c0 < width; c0 += L) {
      typename V::vec b[L];
      pairs_transposed<V>(b, rows + c0 * ldr + k0, ldr, cols - c0, n);
#pragma GCC unroll 16
      for (int j = 0; j < L; ++j) {
        typename V::vec first, second;
        widen_pairs<V>(b[j], first, second, static_cast<const E*>(nullptr));
        if (2 * j < n) V::store(panel + (k0 + 2 * j) * ldp + c0, first);
        if (2 * j + 1 < n) V::store(panel + (k0 + 2 * j + 1) * ldp + c0, second);
      }
    }
  }
}

// `cols` (<= 16) rows of 16-bit values (stride ldr, `in` long) as their column tile (linear_weight.hpp:
// tile[k * 16 + c], zero past cols): 2L values of k of L rows at a time transposed as 32-bit pairs
// (pairs_transposed), each pair's halves stored as the runs of k and k + 1. Bits only.
template <class V>
void half_rows_to_tile(unsigned short* tile, const unsigned short* rows, long ldr, int cols, long in) {
  constexpr int L = V::lanes, step = 2 * L, T = 16;
  for (long k0 = 0; k0 < in; k0 += step) {
    const int n = in - k0 < step ? static_cast<int>(in - k0) : step;
    for (int c0 = 0; c0 < T; c0 += L) {
      typename V::vec b[L];
      pairs_transposed<V>(b, rows + (c0 < cols ? c0 * ldr : 0) + k0, ldr, cols - c0, n); // no row: zeros
#pragma GCC unroll 16
      for (int j = 0; j < L; ++j) {
        if (2 * j < n) V::store_lo16(tile + (k0 + 2 * j) * T + c0, b[j]);
        if (2 * j + 1 < n) V::store_hi16(tile + (k0 + 2 * j + 1) * T + c0, b[j]);
      }
    }
  }
}

template <class V> constexpr KernelTable table_of(const char* name) {
  static_assert(V::max_q_rows <= 8, "linear.cpp's linear_cols keeps 8 rows of a tile in scratch");
  return KernelTable{name,
                     V::lanes,
                     V::max_rows,
                     V::max_cols,
                     V::max_trans_rows,
                     V::max_q_rows,
                     &wpacked_rows<V>,
                     &pack_x<V>,
                     &xpacked_cols<V>,
                     &wtrans_rows<V>,
                     &weight_col_rows<V, float>,
                     &weight_col_rows<V, unsigned short>,
                     &bf16_col_rows<V>,
                     &col_tiles_for<V, float>,
                     &col_tiles_for<V, unsigned short>,
                     &rows_to_panel<V>,
                     &half_trans_rows<V, Bf16>,
                     &half_trans_rows<V, unsigned short>,
                     &half_trans_groups_for<V>,
                     &half_rows_to_panel<V, Bf16>,
                     &half_rows_to_panel<V, unsigned short>,
                     &half_rows_to_tile<V>};
}

} // namespace attn::linear_detail
