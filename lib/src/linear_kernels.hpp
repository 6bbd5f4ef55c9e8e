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

template <class V> constexpr KernelTable table_of(const char* name) {
  return KernelTable{
      name, V::lanes, V::max_rows, V::max_cols, V::max_trans_rows, &wpacked_rows<V>, &xpacked_cols<V>, &wtrans_rows<V>};
}

} // namespace attn::linear_detail
