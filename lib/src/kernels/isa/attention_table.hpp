// The attention kernel's SIMD loops for one instruction set (src/kernels/isa/attention_kernels.hpp), as
// attention.cpp calls them. Plain C types only: this header is shared by files built with
// different -m flags.
#pragma once

namespace attn::attention_detail {

// Queries per task and keys per step of the fused kernel. Fixed for every instruction set, so the
// order of every sum, and so every bit, is the same on each.
constexpr long block_queries = 64;
constexpr long block_keys = 64;
// The row stride of the kernel's transposed scratch (queries, scores, output: st[j * stride + r]),
// in floats: 16 past block_queries, so that a column's rows fall in different L1 sets. At 128
// (512 bytes) the 64 rows of one vector's column shared 8 of L1's 64 sets, and the queries, scores
// and output competed for them (Xeon model 85, 512 x 512 queries and keys, d = 64, 2 threads:
// 1.08-1.17x with 144, the same bits).
constexpr long query_stride = block_queries + 16;

// One task of the fused scaled-dot kernel: queries q (ni, dk) of one head against keys lo..hi-1 of
// k (m, dk) and v (m, dv), all rows at their strides; out (ni, dv).
struct DotTask {
  const float* q;
  long ldq;
  const float* k;
  long ldk;
  const float* v;
  long ldv;
  long dk, dv, ni, lo, hi;
  float scale;
  float* out;
  long ldo;
  // scratch_floats(dk, dv) floats, 64-byte aligned
  float* scratch;
  // Called for each step's keys j0..j0+nj-1 when set: applies the mask to the scores
  // st[j * ld + r] (key j0 + j, query r), blocked ones to -inf.
  void (*mask)(const void* ctx, float* st, long ld, long j0, long nj);
  const void* mask_ctx;
};

inline long scratch_floats(long dk, long dv) { return (dk + block_keys + dv + 3) * query_stride; }

struct KernelTable {
  const char* name;
  // softmax(scale q k^T + mask) v for one task (the fused kernel)
  void (*dot_task)(const DotTask& t);
  // the largest of x[0..n); -inf when n = 0
  float (*row_max)(const float* x, long n);
  // x[c] = exp(x[c] - max) for c < n; returns their sum (-inf gives 0)
  float (*exp_sum)(float* x, long n, float max);
  // Few queries (under 16: a decoding step), K and V read in place:
  // s (ni, nj) at stride lds = scale * q (ni, dk) k (nj, dk)^T
  void (*few_scores)(const float* q, long ldq, const float* k, long ldk, long dk, long ni, long nj, float scale,
                     float* s, long lds);
  // the same with k in column tiles (KeyTiles: a head's tiles at kt, in blocks of `width` keys),
  // keys j0 (a multiple of 16) to j0 + nj - 1
  void (*few_scores_tiles)(const float* q, long ldq, const float* kt, long width, long j0, long dk, long ni, long nj,
                           float scale, float* s, long lds);
  // acc (ni, dv) at stride lda += p (ni, nj) v (nj, dv)
  void (*few_values)(const float* p, long ldp, long ni, long nj, const float* v, long ldv, long dv, float* acc,
                     long lda);
  // few_scores_tiles and few_values over float16 keys and values (a decoder's reduced-precision
  // cache), each value widened exactly as it is loaded: the float32 chains over those values
  void (*few_scores_tiles_f16)(const float* q, long ldq, const unsigned short* kt, long width, long j0, long dk,
                               long ni, long nj, float scale, float* s, long lds);
  void (*few_values_f16)(const float* p, long ldp, long ni, long nj, const unsigned short* v, long ldv, long dv,
                         float* acc, long lda);
  // the tiles of 16 keys few_scores_tiles and few_scores_tiles_f16 take at once for one query
  int key_tiles, key_tiles_f16;
};

// Null when the library was built without that instruction set (not x86-64).
const KernelTable* avx512_table();
const KernelTable* avx2_table();
const KernelTable* scalar_table();

} // namespace attn::attention_detail
