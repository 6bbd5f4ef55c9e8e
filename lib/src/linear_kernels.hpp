// The hot loops of blas::linear (src/linear.cpp), written once for any SIMD width and compiled per
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

#include "linear_table.hpp"

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

// W-packed tile: R rows of x (row-major, stride ldx) times one panel of 2L columns of W, packed
// k-major (wp[k * 2L + c]; columns past `cols` are zero). y (R, cols) at stride ldy. With `resume`
// the chain continues from the values in y (a later block of k); bias, when given, is added last.
template <class V, int R>
void tile_wpacked(const float* x, long ldx, const float* wp, long kc, float* y, long ldy, int cols, bool resume,
                  const float* bias) {
  constexpr int L = V::lanes;
  typename V::vec a0[R], a1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    a0[r] = resume ? load_part<V>(y + r * ldy, cols) : V::zero();
    a1[r] = resume ? load_part<V>(y + r * ldy + L, cols - L) : V::zero();
  }
  for (long k = 0; k < kc; ++k) {
    const typename V::vec w0 = V::load(wp + k * 2 * L), w1 = V::load(wp + k * 2 * L + L);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const typename V::vec xr = V::bcast(x[r * ldx + k]);
      a0[r] = V::fma(xr, w0, a0[r]);
      a1[r] = V::fma(xr, w1, a1[r]);
    }
  }
  if (bias) {
    const typename V::vec b0 = load_part<V>(bias, cols), b1 = load_part<V>(bias + L, cols - L);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) a0[r] = V::add(a0[r], b0), a1[r] = V::add(a1[r], b1);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    store_part<V>(y + r * ldy, a0[r], cols);
    store_part<V>(y + r * ldy + L, a1[r], cols - L);
  }
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
// order: 55 GB/s.
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
      if (next) __builtin_prefetch(next + k0 * L + c * 16, 0, 3); // prefetcht0
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

// Tiles over an int8 or float16 weight (linear_weight.hpp's column tiles: 16 columns, k-major): R
// rows of x times NT consecutive tiles (tile i at w + i * 16 kc, its scales at scales + i * 16 *
// blocks), all 16 columns of each but `cols` of the last; a single tile may start at a lane lo > 0
// (w and scales then point there, cols <= 16 - lo). Each k loads a tile's 16 values as vectors,
// widens them to float and (int8) multiplies by the block's scales: w' = float(q) * scale, the value
// the file's dequantization gives, so the FMA chain and the bits are those of the float32 tiles. No
// transposing: the weight streams in its own order at 1 or 2 bytes per value. Several tiles at once
// for few rows: each output is one dependent FMA chain, so one row of one tile would wait on the
// FMA latency. Lanes past `cols` compute on whatever follows in the buffer and are never stored.
template <class V, int R, int NT, class Q>
void tile_quant(const float* x, long ldx, const Q* w, const float* scales, long kc, long block, float* y, long ldy,
                int cols, const float* bias) {
  constexpr int L = V::lanes, N = 16 / L;
  const long blocks = (kc + block - 1) / block;
  typename V::vec acc[R][NT][N];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
      for (int i = 0; i < N; ++i) acc[r][t][i] = V::zero();
  for (long k0 = 0, b = 0; k0 < kc; k0 += block, ++b) {
    typename V::vec s[NT][N];
    if constexpr (sizeof(Q) == 1)
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
        for (int i = 0; i < N; ++i) s[t][i] = V::load(scales + (t * blocks + b) * 16 + i * L);
    const long k1 = k0 + block < kc ? k0 + block : kc;
    for (long k = k0; k < k1; ++k) {
      typename V::vec xk[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) xk[r] = V::bcast(x[r * ldx + k]);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
        for (int i = 0; i < N; ++i) {
          typename V::vec wk;
          if constexpr (sizeof(Q) == 1)
            wk = V::mul(V::load_i8(w + (t * kc + k) * 16 + i * L), s[t][i]);
          else
            wk = V::load_f16(w + (t * kc + k) * 16 + i * L);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) acc[r][t][i] = V::fma(xk[r], wk, acc[r][t][i]);
        }
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

// Run-time row and column counts to the instantiated tiles.
template <class V, int R = V::max_rows>
void wpacked_rows(int rows, const float* x, long ldx, const float* wp, long kc, float* y, long ldy, int cols,
                  bool resume, const float* bias) {
  if constexpr (R > 1)
    if (rows < R) return wpacked_rows<V, R - 1>(rows, x, ldx, wp, kc, y, ldy, cols, resume, bias);
  tile_wpacked<V, R>(x, ldx, wp, kc, y, ldy, cols, resume, bias);
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

// Tiles at once for R rows: enough for 4 independent chains (the FMA latency hidden), at most 4.
template <class V, int R> constexpr int quant_tiles() {
  constexpr int chains = R * (16 / V::lanes);
  return chains >= 4 ? 1 : 4 / chains;
}

template <class V, class Q, int R, int NT = quant_tiles<V, R>()>
void quant_tiles_of(int tiles, const float* x, long ldx, const Q* w, const float* scales, long kc, long block, float* y,
                    long ldy, int cols, const float* bias) {
  if constexpr (NT > 1)
    if (tiles < NT) return quant_tiles_of<V, Q, R, NT - 1>(tiles, x, ldx, w, scales, kc, block, y, ldy, cols, bias);
  tile_quant<V, R, NT, Q>(x, ldx, w, scales, kc, block, y, ldy, cols, bias);
}

template <class V, class Q, int R = V::max_q_rows>
void quant_rows(int rows, int tiles, const float* x, long ldx, const Q* w, const float* scales, long kc, long block,
                float* y, long ldy, int cols, const float* bias) {
  if constexpr (R > 1)
    if (rows < R) return quant_rows<V, Q, R - 1>(rows, tiles, x, ldx, w, scales, kc, block, y, ldy, cols, bias);
  quant_tiles_of<V, Q, R>(tiles, x, ldx, w, scales, kc, block, y, ldy, cols, bias);
}

// The tiles quant_rows takes at once for `rows` rows (linear.cpp groups them so).
template <class V, int R = V::max_q_rows> int quant_tiles_for(int rows) {
  if constexpr (R > 1)
    if (rows < R) return quant_tiles_for<V, R - 1>(rows);
  return quant_tiles<V, R>();
}

template <class V> constexpr KernelTable table_of(const char* name) {
  return KernelTable{name,
                     V::lanes,
                     V::max_rows,
                     V::max_cols,
                     V::max_trans_rows,
                     V::max_q_rows,
                     &wpacked_rows<V>,
                     &xpacked_cols<V>,
                     &wtrans_rows<V>,
                     &quant_rows<V, signed char>,
                     &quant_rows<V, unsigned short>,
                     &quant_tiles_for<V>};
}

} // namespace attn::linear_detail
