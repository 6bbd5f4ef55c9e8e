// The SIMD tiles of blas::linear for one instruction set (src/linear_kernels.hpp), as linear.cpp
// calls them. Plain C++ types only: this header is shared by files built with different -m flags.
#pragma once

namespace attn::linear_detail {

struct KernelTable {
  const char* name;
  int lanes;          // floats per vector: an x-packed tile's rows; a W panel is 2 * lanes columns
  int max_rows;       // rows of a W-packed tile
  int max_cols;       // columns of an x-packed tile
  int max_trans_rows; // rows of a transposing tile
  int max_q_rows;     // rows of a tile over an int8 or float16 weight
  // rows in 1..max_rows; see tile_wpacked
  void (*wpacked)(int rows, const float* x, long ldx, const float* wp, long kc, float* y, long ldy, int cols,
                  bool resume, const float* bias);
  // cols in 1..max_cols; see tile_xpacked
  void (*xpacked)(int cols, const float* xp, const float* w, long ldw, long kc, float* y, long ldy, int rows,
                  const float* bias);
  // rows in 1..max_trans_rows, cols in 1..lanes; see tile_wtrans
  void (*wtrans)(int rows, const float* x, long ldx, const float* w, long ldw, long kc, float* y, long ldy, int cols,
                 const float* bias, const float* next);
  // rows in 1..max_q_rows; tiles in 1..q_tiles(rows), all full but the last (cols of it), or one
  // tile from lane lo (cols <= 16 - lo); see tile_quant (scales unused for float16)
  void (*int8)(int rows, int tiles, const float* x, long ldx, const signed char* w, const float* scales, long kc,
               long block, float* y, long ldy, int cols, const float* bias);
  void (*f16)(int rows, int tiles, const float* x, long ldx, const unsigned short* w, const float* scales, long kc,
              long block, float* y, long ldy, int cols, const float* bias);
  int (*q_tiles)(int rows); // the tiles int8 and f16 take at once for that many rows
};

// Null when the library was built without that instruction set (not x86-64).
const KernelTable* avx512_table();
const KernelTable* avx2_table();

} // namespace attn::linear_detail
