// The hot loops of the attention kernel (src/attention/attention.cpp), written once for any vector width V
// (simd_avx512.hpp, simd_avx2.hpp, or one float: attention_scalar.cpp) and compiled per instruction
// set, each file with its own -m flags and -ffp-contract=off.
//
// The fused kernel keeps the scores transposed: st[j][r] is key j against query r, one vector
// holding L queries. Every step of the online softmax (running max, exp, sums, rescaling) is then
// lane-wise, with no reductions across a vector, and P V reads P's rows as vectors too. Each
// query's result is a fixed sequence of operations on its own lane, so its bits do not depend on
// the lane it sits in, the vector width, or the other queries of its task:
//   s_j = scale * fma-chain over t of k[j][t] q[t]                     (score_tile)
//   per step of block_keys keys (after the mask):
//     M' = max(M, s_j...); c = exp(M - M'); p_j = exp(s_j - M')
//     l = l * c + (p_0 + p_1 + ...);  o = o * c, then o = fma-chain over j of v[j] p_j   (value_tile)
//   out = o * (1 / l), and 0 when the query saw no key (l = 0).
//
// This header is included only by those files. It uses no standard-library templates: an inline
// function instantiated under -mavx512f could otherwise be merged by the linker with the generic
// copy and run on a CPU without AVX-512.
#pragma once

#include "kernels/isa/attention_table.hpp"
#include "kernels/isa/linear_kernels.hpp"

#include <math.h>

namespace attn::attention_detail {

constexpr float neg_inf = -__builtin_inff();
constexpr float lowest = -3.40282347e+38f;
constexpr long QB = block_queries;
constexpr long QS = query_stride;

// exp(x) for x <= 0 (scores minus their max): x = k ln2 + r with |r| <= ln2/2, e^r by Cephes'
// polynomial for expf, times 2^k: within 1.24 ulp of the exact value over [-87.3, 0] (every 8th
// float checked; tests/unit/test_attention.cpp checks softmax weights to 4 ulp). x < -87.3, where
// e^x nears FLT_MIN, and so -inf give exactly 0. Inline, it made attention at n = m = 512, d = 64
// 5% faster than glibc's vector expf did.
template <class V> typename V::vec exp_nonpositive(typename V::vec x) {
  const typename V::vec fk = V::round(V::mul(x, V::bcast(1.44269504088896341f)));
  typename V::vec r = V::fma(fk, V::bcast(-0.693359375f), x);
  r = V::fma(fk, V::bcast(2.12194440e-4f), r);
  typename V::vec p = V::bcast(1.9875691500e-4f);
  p = V::fma(p, r, V::bcast(1.3981999507e-3f));
  p = V::fma(p, r, V::bcast(8.3334519073e-3f));
  p = V::fma(p, r, V::bcast(4.1665795894e-2f));
  p = V::fma(p, r, V::bcast(1.6666665459e-1f));
  p = V::fma(p, r, V::bcast(5.0000001201e-1f));
  p = V::fma(p, V::mul(r, r), V::add(r, V::bcast(1.0f)));
  return V::keep_ge(V::mul_pow2(p, V::max(fk, V::bcast(-126.0f))), x, -87.3f);
}

// --- rows (the path that keeps whole score rows: weights, raw scores, top-k) -----------------------

template <class V> float row_max(const float* x, long n) {
  constexpr long L = V::lanes;
  typename V::vec m = V::bcast(neg_inf);
  long c = 0;
  for (; c + L <= n; c += L) m = V::max(m, V::load(x + c));
  float r = V::max_lanes(m);
  for (; c < n; ++c) r = x[c] > r ? x[c] : r;
  return r;
}

template <class V> float exp_sum(float* x, long n, float max) {
  constexpr long L = V::lanes;
  const typename V::vec mx = V::bcast(max);
  typename V::vec s = V::zero();
  long c = 0;
  for (; c + L <= n; c += L) {
    const typename V::vec e = exp_nonpositive<V>(V::sub(V::load(x + c), mx));
    V::store(x + c, e);
    s = V::add(s, e);
  }
  float r = V::sum_lanes_in_order(s);
  for (; c < n; ++c) {
    x[c] = expf(x[c] - max);
    r += x[c];
  }
  return r;
}

// --- the fused kernel ----------------------------------------------------------------------------

// Rows a tile asks for ahead of their use: `floats` floats at each of p, p + ld, p + 2 ld, ...
struct RowsAhead {
  const float* p;
  long ld, floats;
};

// st[j][x] (J keys, Q vectors of queries) = scale * sum over t of k[j][t] qt[t][x]. With Ahead,
// meanwhile the J rows of `ahead` are prefetched, one every dk / J steps of t.
template <class V, int J, int Q, bool Ahead>
void score_tile(const float* k, long ldk, const float* qt, long dk, float scale, float* st, RowsAhead ahead) {
  constexpr long L = V::lanes;
  typename V::vec a[J][Q];
#pragma GCC unroll 8
  for (int j = 0; j < J; ++j)
#pragma GCC unroll 8
    for (int x = 0; x < Q; ++x) a[j][x] = V::zero();
  const long every = dk / J > 0 ? dk / J : 1;
  long next = 0; // the step of t that asks for the next row
  const float* row = ahead.p;
  for (long t = 0; t < dk; ++t) {
    if constexpr (Ahead)
      if (t == next && row < ahead.p + J * ahead.ld) {
        for (long b = 0; b < ahead.floats * 4; b += 64)
          __builtin_prefetch(reinterpret_cast<const char*>(row) + b, 0, 3);
        row += ahead.ld;
        next += every;
      }
    typename V::vec q[Q];
#pragma GCC unroll 8
    for (int x = 0; x < Q; ++x) q[x] = V::load(qt + t * QS + x * L);
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) {
      const typename V::vec kj = V::bcast(k[j * ldk + t]);
#pragma GCC unroll 8
      for (int x = 0; x < Q; ++x) a[j][x] = V::fma(kj, q[x], a[j][x]);
    }
  }
  const typename V::vec s = V::bcast(scale);
#pragma GCC unroll 8
  for (int j = 0; j < J; ++j)
#pragma GCC unroll 8
    for (int x = 0; x < Q; ++x) V::store(st + j * QS + x * L, V::mul(a[j][x], s));
}

// ot[c][x] (C value columns, Q vectors of queries) = ot[c][x] * cs[x], then += sum over j < nj of
// v[j][c] p[j][x], in order: the step's rescaling of the output (softmax_step's c) done as the
// tile loads it, instead of in a pass of its own over ot.
template <class V, int C, int Q>
void value_tile(const float* v, long ldv, const float* p, long nj, const float* cs, float* ot) {
  constexpr long L = V::lanes;
  typename V::vec a[C][Q], c0[Q];
#pragma GCC unroll 8
  for (int x = 0; x < Q; ++x) c0[x] = V::load(cs + x * L);
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
    for (int x = 0; x < Q; ++x) a[c][x] = V::mul(V::load(ot + c * QS + x * L), c0[x]);
  for (long j = 0; j < nj; ++j) {
    typename V::vec pj[Q];
#pragma GCC unroll 8
    for (int x = 0; x < Q; ++x) pj[x] = V::load(p + j * QS + x * L);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const typename V::vec vc = V::bcast(v[j * ldv + c]);
#pragma GCC unroll 8
      for (int x = 0; x < Q; ++x) a[c][x] = V::fma(vc, pj[x], a[c][x]);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
    for (int x = 0; x < Q; ++x) V::store(ot + c * QS + x * L, a[c][x]);
}

// The last few keys (fewer than V::score_keys) or value columns, by run-time count.
template <class V, int J, int Q, bool Ahead>
void score_tile_n(int n, const float* k, long ldk, const float* qt, long dk, float scale, float* st, RowsAhead ahead) {
  if constexpr (J > 1)
    if (n < J) return score_tile_n<V, J - 1, Q, Ahead>(n, k, ldk, qt, dk, scale, st, ahead);
  score_tile<V, J, Q, Ahead>(k, ldk, qt, dk, scale, st, ahead);
}
template <class V, int C, int Q>
void value_tile_n(int n, const float* v, long ldv, const float* p, long nj, const float* cs, float* ot) {
  if constexpr (C > 1)
    if (n < C) return value_tile_n<V, C - 1, Q>(n, v, ldv, p, nj, cs, ot);
  value_tile<V, C, Q>(v, ldv, p, nj, cs, ot);
}

// One step's scores and values for Q vectors of queries (qt, st and ot start at the first of them).
// With Ahead, `ahead` holds the rows to prefetch for the step's keys (their values), key j's at
// ahead.p + j ahead.ld.
template <class V, int Q, bool Ahead>
void scores_step(const float* k, long ldk, long nj, const float* qt, long dk, float scale, float* st, RowsAhead ahead) {
  constexpr int J = V::score_keys;
  const auto from = [&](long j) { return RowsAhead{ahead.p + j * ahead.ld, ahead.ld, ahead.floats}; };
  long j = 0;
  for (; j + J <= nj; j += J) score_tile<V, J, Q, Ahead>(k + j * ldk, ldk, qt, dk, scale, st + j * QS, from(j));
  if (j < nj)
    score_tile_n<V, J, Q, Ahead>(static_cast<int>(nj - j), k + j * ldk, ldk, qt, dk, scale, st + j * QS, from(j));
}
template <class V, int Q>
void values_step(const float* v, long ldv, long dv, const float* p, long nj, const float* cs, float* ot) {
  constexpr int C = V::value_cols;
  long c = 0;
  for (; c + C <= dv; c += C) value_tile<V, C, Q>(v + c, ldv, p, nj, cs, ot + c * QS);
  if (c < dv) value_tile_n<V, C, Q>(static_cast<int>(dv - c), v + c, ldv, p, nj, cs, ot + c * QS);
}

// The same for nq (1..V::query_vecs) vectors, by run-time count.
template <class V, bool Ahead, int Q = V::query_vecs>
void scores_step_n(int nq, const float* k, long ldk, long nj, const float* qt, long dk, float scale, float* st,
                   RowsAhead ahead) {
  if constexpr (Q > 1)
    if (nq < Q) return scores_step_n<V, Ahead, Q - 1>(nq, k, ldk, nj, qt, dk, scale, st, ahead);
  scores_step<V, Q, Ahead>(k, ldk, nj, qt, dk, scale, st, ahead);
}
template <class V, int Q = V::query_vecs>
void values_step_n(int nq, const float* v, long ldv, long dv, const float* p, long nj, const float* cs, float* ot) {
  if constexpr (Q > 1)
    if (nq < Q) return values_step_n<V, Q - 1>(nq, v, ldv, dv, p, nj, cs, ot);
  values_step<V, Q>(v, ldv, dv, p, nj, cs, ot);
}

// The online softmax of one step for the query vector at offset x: st's nj scores become
// p = exp(s - M'); the running max M and sum l are updated, and cs holds the factor c by which
// value_tile rescales the output o.
template <class V> void softmax_step(float* st, long nj, float* mx, float* sum, float* cs, long x) {
  const typename V::vec old = V::load(mx + x);
  // the maximum over four chains, not one: one max waited on the last (a max is exact, so the
  // order does not change it)
  typename V::vec m4[4] = {old, old, old, old};
  long j = 0;
  for (; j + 4 <= nj; j += 4)
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) m4[i] = V::max(m4[i], V::load(st + (j + i) * QS + x));
  for (; j < nj; ++j) m4[0] = V::max(m4[0], V::load(st + j * QS + x));
  const typename V::vec m = V::max(V::max(m4[0], m4[1]), V::max(m4[2], m4[3]));
  const typename V::vec base = V::keep_ge(m, m, lowest); // a query with no key yet: 0, not -inf
  const typename V::vec c = exp_nonpositive<V>(V::sub(old, base));
  typename V::vec s = V::zero();
  for (long j = 0; j < nj; ++j) {
    const typename V::vec p = exp_nonpositive<V>(V::sub(V::load(st + j * QS + x), base));
    V::store(st + j * QS + x, p);
    s = V::add(s, p);
  }
  V::store(sum + x, V::add(V::mul(V::load(sum + x), c), s));
  V::store(mx + x, m);
  V::store(cs + x, c);
}

// out[r][c] = ot[c * QS + r] * inv[r] for r < ni, c < dv (out's rows at stride ldo): the inverse
// of the queries' rows_to_panel, L x L blocks transposed in registers. Value by value, the two
// copies took ~10% of attention at n = m = 512, d = 64.
template <class V> void output_transposed(float* out, long ldo, const float* ot, const float* inv, long ni, long dv) {
  using linear_detail::store_part;
  constexpr int L = V::lanes;
  for (long r0 = 0; r0 < ni; r0 += L) {
    const typename V::vec s = V::load(inv + r0);
    for (long c0 = 0; c0 < dv; c0 += L) {
      const int nc = dv - c0 < L ? static_cast<int>(dv - c0) : L;
      typename V::vec b[L];
#pragma GCC unroll 16
      for (int c = 0; c < L; ++c) b[c] = c < nc ? V::mul(V::load(ot + (c0 + c) * QS + r0), s) : V::zero();
      V::transpose(b);
#pragma GCC unroll 16
      for (int i = 0; i < L; ++i)
        if (r0 + i < ni) store_part<V>(out + (r0 + i) * ldo + c0, b[i], nc);
    }
  }
}

template <class V> void dot_task(const DotTask& t) {
  constexpr long L = V::lanes;
  const long nvec = (t.ni + L - 1) / L, width = nvec * L;
  float* qt = t.scratch;            // (dk, QB) at stride QS: the queries, transposed; lanes past ni 0
  float* st = qt + t.dk * QS;       // (block_keys, QB) at stride QS: scores, then p
  float* ot = st + block_keys * QS; // (dv, QB) at stride QS: the output, transposed
  float* mx = ot + t.dv * QS;       // (QB): running max
  float* sum = mx + QB;             // (QB): running sum
  float* cs = sum + QB;             // (QB): the step's rescaling of the output
  linear_detail::rows_to_panel<V>(qt, QS, width, t.q, t.ldq, static_cast<int>(t.ni), t.dk);
  for (long c = 0; c < t.dv; ++c)
    for (long r = 0; r < width; ++r) ot[c * QS + r] = 0.0f;
  for (long r = 0; r < width; ++r) mx[r] = neg_inf, sum[r] = 0.0f;

  // Values whose rows lie apart (the heads of a row-major projection: mha's with extra keys, a
  // caller's; when mha-run's were, 6 KiB apart) are prefetched as their keys are scored: each row
  // is a line or few of its own, which the hardware's prefetchers do not foresee; mha-run's
  // computation was 1.02-1.03x. Rows one after another they do foresee: prefetched too,
  // attn-score's values (d floats a row) were 0.98x, so not those.
  const bool rows_apart = t.ldv > t.dv;
  constexpr int Q = V::query_vecs;
  for (long j0 = t.lo; j0 < t.hi; j0 += block_keys) {
    const long nj = t.hi - j0 < block_keys ? t.hi - j0 : block_keys;
    for (long x = 0; x < nvec; x += Q) {
      const int nq = nvec - x < Q ? static_cast<int>(nvec - x) : Q;
      const RowsAhead values{t.v + j0 * t.ldv, t.ldv, t.dv};
      if (x == 0 && rows_apart)
        scores_step_n<V, true>(nq, t.k + j0 * t.ldk, t.ldk, nj, qt + x * L, t.dk, t.scale, st + x * L, values);
      else
        scores_step_n<V, false>(nq, t.k + j0 * t.ldk, t.ldk, nj, qt + x * L, t.dk, t.scale, st + x * L, values);
    }
    if (t.mask) t.mask(t.mask_ctx, st, QS, j0, nj);
    for (long x = 0; x < nvec; ++x) softmax_step<V>(st, nj, mx, sum, cs, x * L);
    for (long x = 0; x < nvec; x += Q) {
      const int nq = nvec - x < Q ? static_cast<int>(nvec - x) : Q;
      values_step_n<V>(nq, t.v + j0 * t.ldv, t.ldv, t.dv, st + x * L, nj, cs + x * L, ot + x * L);
    }
  }
  for (long x = 0; x < width; x += L) { // 1 / l, or 0 for a query that saw no key
    const typename V::vec l = V::load(sum + x);
    V::store(mx + x, V::keep_ge(V::div(V::bcast(1.0f), l), l, 1e-30f));
  }
  output_transposed<V>(t.out, t.ldo, ot, mx, t.ni, t.dv);
}

// --- few queries (a decoding step): score rows, then P V, reading K and V in place ----------------

// s (ni, nj) at stride lds = scale * q (ni, dk) k (nj, dk)^T: blas::linear's transposing tile (each
// L x L block of K transposed in registers), so each score is the fused kernel's chain over t.
template <class V>
void few_scores(const float* q, long ldq, const float* k, long ldk, long dk, long ni, long nj, float scale, float* s,
                long lds) {
  constexpr long L = V::lanes, R = V::max_trans_rows;
  for (long r0 = 0; r0 < ni; r0 += R)
    for (long j0 = 0; j0 < nj; j0 += L)
      linear_detail::wtrans_rows<V>(static_cast<int>(ni - r0 < R ? ni - r0 : R), q + r0 * ldq, ldq, k + j0 * ldk, ldk,
                                    dk, s + r0 * lds + j0, lds, static_cast<int>(nj - j0 < L ? nj - j0 : L), nullptr,
                                    nullptr);
  const typename V::vec sv = V::bcast(scale);
  for (long r = 0; r < ni; ++r) {
    long c = 0;
    for (; c + L <= nj; c += L) V::store(s + r * lds + c, V::mul(V::load(s + r * lds + c), sv));
    for (; c < nj; ++c) s[r * lds + c] *= scale;
  }
}

// As few_scores, with k in column tiles (KeyTiles: a head's tiles at kt, in blocks of `width`
// keys, dk-major; keys j0, a multiple of 16, to j0 + nj - 1), float32 or float16 (E; widened exactly
// as each vector is loaded): linear's tiles over a weight in column tiles, the same chain per
// score, with no transposing. A call's tiles never cross a block.
template <class V, class E>
void few_scores_tiles(const float* q, long ldq, const E* kt, long width, long j0, long dk, long ni, long nj,
                      float scale, float* s, long lds) {
  constexpr long L = V::lanes, R = V::max_q_rows;
  const long G = width / 16, first = j0 / 16, tiles = (nj + 15) / 16;
  for (long r0 = 0; r0 < ni; r0 += R) {
    const int rows = static_cast<int>(ni - r0 < R ? ni - r0 : R);
    const long per = linear_detail::col_tiles_for<V, E>(rows);
    for (long u = 0; u < tiles;) { // tiles u.. of the call (key tile first + u)
      const long t = first + u, in_block = G - t % G;
      long nt = tiles - u < per ? tiles - u : per;
      nt = nt < in_block ? nt : in_block;
      const int cols = static_cast<int>(u + nt == tiles ? nj - (tiles - 1) * 16 : 16);
      linear_detail::col_rows<V, E>(rows, static_cast<int>(nt), q + r0 * ldq, ldq,
                                    kt + (t / G) * dk * width + (t % G) * 16, dk, width, s + r0 * lds + u * 16, lds,
                                    cols, nullptr);
      u += nt;
    }
  }
  const typename V::vec sv = V::bcast(scale);
  for (long r = 0; r < ni; ++r) {
    long c = 0;
    for (; c + L <= nj; c += L) V::store(s + r * lds + c, V::mul(V::load(s + r * lds + c), sv));
    for (; c < nj; ++c) s[r * lds + c] *= scale;
  }
}

// The first n values at p as floats (n may be <= 0 or >= the lanes), the other lanes 0: float32
// loaded, float16 widened (exact).
template <class V> typename V::vec load_values(const float* p, int n) { return linear_detail::load_part<V>(p, n); }
template <class V> typename V::vec load_values(const unsigned short* p, int n) {
  if (n >= V::lanes) return V::load_f16(p);
  if (n <= 0) return V::zero();
  unsigned short t[V::lanes] = {};
  for (int i = 0; i < n; ++i) t[i] = p[i];
  return V::load_f16(t);
}

// acc (R rows, up to 4 vectors of columns) += p (R, nj) v (nj, cols), a chain over j in order; v
// float32 or float16 (E).
template <class V, int R, class E>
void few_values_tile(const float* p, long ldp, long nj, const E* v, long ldv, int cols, float* acc, long lda) {
  constexpr int L = V::lanes;
  typename V::vec a[R][4];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < 4; ++x) a[r][x] = linear_detail::load_part<V>(acc + r * lda + x * L, cols - x * L);
  for (long j = 0; j < nj; ++j) {
    typename V::vec vj[4];
#pragma GCC unroll 4
    for (int x = 0; x < 4; ++x) vj[x] = load_values<V>(v + j * ldv + x * L, cols - x * L);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const typename V::vec pr = V::bcast(p[r * ldp + j]);
#pragma GCC unroll 4
      for (int x = 0; x < 4; ++x) a[r][x] = V::fma(pr, vj[x], a[r][x]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < 4; ++x) linear_detail::store_part<V>(acc + r * lda + x * L, a[r][x], cols - x * L);
}

template <class V, class E, int R = 4>
void few_values_rows(int rows, const float* p, long ldp, long nj, const E* v, long ldv, int cols, float* acc,
                     long lda) {
  if constexpr (R > 1)
    if (rows < R) return few_values_rows<V, E, R - 1>(rows, p, ldp, nj, v, ldv, cols, acc, lda);
  few_values_tile<V, R>(p, ldp, nj, v, ldv, cols, acc, lda);
}

// acc (ni, dv) at stride lda += p (ni, nj) v (nj, dv); v float32 or float16 (E).
template <class V, class E>
void few_values(const float* p, long ldp, long ni, long nj, const E* v, long ldv, long dv, float* acc, long lda) {
  constexpr long L = V::lanes;
  for (long r0 = 0; r0 < ni; r0 += 4)
    for (long c0 = 0; c0 < dv; c0 += 4 * L)
      few_values_rows<V, E>(static_cast<int>(ni - r0 < 4 ? ni - r0 : 4), p + r0 * ldp, ldp, nj, v + c0, ldv,
                            static_cast<int>(dv - c0 < 4 * L ? dv - c0 : 4 * L), acc + r0 * lda + c0, lda);
}

template <class V> constexpr KernelTable table_of(const char* name) {
  return KernelTable{name,
                     &dot_task<V>,
                     &row_max<V>,
                     &exp_sum<V>,
                     &few_scores<V>,
                     &few_scores_tiles<V, float>,
                     &few_values<V, float>,
                     &few_scores_tiles<V, unsigned short>,
                     &few_values<V, unsigned short>,
                     linear_detail::col_tiles<V, 1, float>(),
                     linear_detail::col_tiles<V, 1, unsigned short>()};
}

} // namespace attn::attention_detail
