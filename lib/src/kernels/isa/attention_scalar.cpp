// The attention kernel's loops on one float at a time: the reference the SIMD files agree with to
// the bit, and the kernel of CPUs without AVX2 (and of ATTN_LINEAR_ISA=scalar).
#include "attn/core/half.hpp"
#include "kernels/isa/attention_kernels.hpp"

namespace attn::attention_detail {

namespace {

struct V1 {
  using vec = float;
  static constexpr int lanes = 1;
  static constexpr int score_keys = 4, value_cols = 4, query_vecs = 4;
  static constexpr int max_trans_rows = 8; // few_scores: rows per call of linear's transposing tile
  static constexpr int max_q_rows = 8;     // few_scores_tiles: rows per call of linear's column tiles

  static vec zero() { return 0.0f; }
  static vec load(const float* p) { return *p; }
  static vec load_f16(const unsigned short* p) { return f16_to_float(*p); }
  static void store(float* p, vec v) { *p = v; }
  static vec bcast(float v) { return v; }
  static vec fma(vec a, vec b, vec c) { return __builtin_fmaf(a, b, c); }
  static vec add(vec a, vec b) { return a + b; }
  static vec sub(vec a, vec b) { return a - b; }
  static vec mul(vec a, vec b) { return a * b; }
  static vec div(vec a, vec b) { return a / b; }
  static vec max(vec a, vec b) { return a > b ? a : b; } // as maxps: b when either is NaN
  static vec round(vec a) { return __builtin_rintf(a); } // the default rounding: ties to even
  static vec pow2(vec k) {
    const int bits = (static_cast<int>(k) + 127) << 23;
    float r;
    __builtin_memcpy(&r, &bits, sizeof r);
    return r;
  }
  static vec mul_pow2(vec p, vec k) { return p * pow2(k); }
  static vec keep_ge(vec v, vec x, float limit) { return x >= limit ? v : 0.0f; }
  static float sum_lanes_in_order(vec v) { return v; }
  static float max_lanes(vec v) { return v; }
  // one lane: nothing to transpose, and no part of a vector to load (load_part never asks)
  static void transpose(vec*) {}
  static vec load_first(const float*, int) { return 0.0f; }
  static void store_first(float*, vec, int) {}
};

constexpr KernelTable table = table_of<V1>("scalar");

} // namespace

const KernelTable* scalar_table() { return &table; }

} // namespace attn::attention_detail
