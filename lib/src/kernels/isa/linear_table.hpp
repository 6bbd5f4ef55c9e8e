// The SIMD tiles of blas::linear for one instruction set (src/kernels/isa/linear_kernels.hpp), as linear.cpp
// calls them. Plain C++ types only: this header is shared by files built with different -m flags.
#pragma once

namespace attn::linear_detail {

struct KernelTable {
  const char* name;
  int lanes;          // floats per vector: an x-packed tile's rows; a W panel is 2 * lanes columns
  int max_rows;       // rows of a W-packed tile
  int max_cols;       // columns of an x-packed tile
  int max_trans_rows; // rows of a transposing tile
  int max_q_rows;     // rows of a tile over a float16 or float32 weight in column tiles
  // rows in 1..max_rows, x packed k-major (xp[k * rows + r]); see tile_wpacked
  void (*wpacked)(int rows, const float* xp, const float* wp, long kc, float* y, long ldy, int cols, bool resume,
                  const float* bias, bool relu);
  // x's rows as wpacked reads them, in groups of max_rows; see pack_x
  void (*pack_x)(float* xp, const float* x, long ldx, long rows, long kc);
  // cols in 1..max_cols; see tile_xpacked
  void (*xpacked)(int cols, const float* xp, const float* w, long ldw, long kc, float* y, long ldy, int rows,
                  const float* bias);
  // rows in 1..max_trans_rows, cols in 1..lanes; see tile_wtrans
  void (*wtrans)(int rows, const float* x, long ldx, const float* w, long ldw, long kc, float* y, long ldy, int cols,
                 const float* bias, const float* next);
  // Over a weight in column tiles, float32, float16 or bfloat16: rows in 1..max_q_rows; tiles in
  // 1..col_tiles(rows) (f16_col_tiles for float16), all full but the last (cols of it), or one tile
  // from lane lo (cols <= 16 - lo); see tile_cols
  void (*f32_cols)(int rows, int tiles, const float* x, long ldx, const float* w, long kc, float* y, long ldy, int cols,
                   const float* bias);
  void (*f16_cols)(int rows, int tiles, const float* x, long ldx, const unsigned short* w, long kc, float* y, long ldy,
                   int cols, const float* bias);
  // bfloat16's bits (f16_col_tiles at once, as for float16)
  void (*bf16_cols)(int rows, int tiles, const float* x, long ldx, const unsigned short* w, long kc, float* y, long ldy,
                    int cols, const float* bias);
  int (*col_tiles)(int rows);     // the tiles f32_cols takes at once for that many rows
  int (*f16_col_tiles)(int rows); // and f16_cols, bf16_cols
  // `cols` rows (stride ldr) of a float32 weight, `in` long, as a panel `width` wide at stride ldp
  // (a W-packed panel, or 16 rows as their column tile); see rows_to_panel
  void (*to_panel)(float* panel, long ldp, long width, const float* rows, long ldr, int cols, long in);
  // Over 16-bit rows where they are, bfloat16 or float16: rows in 1..max_trans_rows of x times
  // `groups` (1..half_trans_groups(rows)) groups of `lanes` rows of W (row c at w + c ldw, all
  // readable; `cols` outputs of the last stored); `next` (or null) the next call's rows, to
  // prefetch; `lead`: its own rows too; see tile_half_trans
  void (*bf16_trans)(int rows, int groups, const float* x, long ldx, const unsigned short* w, long ldw, long kc,
                     float* y, long ldy, int cols, const float* bias, const unsigned short* next, bool lead);
  void (*f16_trans)(int rows, int groups, const float* x, long ldx, const unsigned short* w, long ldw, long kc,
                    float* y, long ldy, int cols, const float* bias, const unsigned short* next, bool lead);
  int (*half_trans_groups)(int rows);
  // As to_panel, from `cols` rows of 16-bit values (bfloat16, float16) at stride ldr, widened
  void (*bf16_to_panel)(float* panel, long ldp, long width, const unsigned short* rows, long ldr, int cols, long in);
  void (*f16_to_panel)(float* panel, long ldp, long width, const unsigned short* rows, long ldr, int cols, long in);
  // `cols` (<= 16) rows of 16-bit values at stride ldr as their column tile (bits only; zeros past
  // cols); see half_rows_to_tile
  void (*half_rows_to_tile)(unsigned short* tile, const unsigned short* rows, long ldr, int cols, long in);
};

// The int8 product's tiles (tile_i8) for one instruction set.
struct Int8Table {
  const char* name;
  int max_rows; // rows in 1..max_rows; tiles in 1..tiles(rows) (cols and start lane as tile_cols)
  // x's rows at stride ldx, each block with its scale xs[r blocks + b] and correction xsums[r blocks + b]
  void (*rows)(int rows, int tiles, const signed char* x, long ldx, const float* xs, const int* xsums,
               const signed char* w, long P, const float* scales, long blocks, long quads, float* y, long ldy, int cols,
               const float* bias);
  int (*tiles)(int rows);
  // a row of x quantized and packed for rows(), with its blocks' corrections; see quantize_row_i8
  bool (*quantize)(const float* x, long in, long block, long block4, signed char* q, float* scale, int* sums);
  // Over a weight's rows in place (LinearWeight::int8_rows: blocks of a multiple of 32 values that
  // divide `in`): x and y as rows(), `rows` in 1..max_rows_in_place, times `cols` (1..16) weight
  // rows at w (row c at w + c ldw, `in` values), their scales as a tile holds them (block b's at
  // scales + 16 b); `next` (or null) the rows of the call after, to prefetch. Null where the
  // instruction set has none (the rows are then laid out in tiles).
  void (*rows_in_place)(int rows, const signed char* x, long ldx, const float* xs, const int* xsums,
                        const signed char* w, long ldw, long in, const float* scales, long blocks, long block, float* y,
                        long ldy, int cols, const float* bias, const signed char* next);
  int max_rows_in_place;
};

// The opt-in bfloat16 products (blas::MatmulPrecision::bf16) for AVX512-BF16: vdpbf16ps multiplies
// pairs of bfloat16 values and adds both products into a float32 lane, 32 multiply-adds an
// instruction (twice a float FMA's); or for AMX-BF16, tdpbf16ps: 16 x 16 sums of 32 products each.
// x and W are rounded to bfloat16 (to nearest, even) as they are packed; the sums stay float32.
struct Bf16DotTable {
  const char* name;
  int max_rows;   // rows of a tile
  int pair_align; // x's pairs a row of a group holds: kp rounded up to a multiple of this (kpa)
  // x's `rows` rows (stride ldx) by kc values as the tiles read them: groups of max_rows rows, group
  // g at xp + g max_rows kpa, in the tiles' own order. The vdpbf16ps tiles' (pair_align 1): each
  // group (the last may have fewer rows, n) pair-major, xp[g max_rows kp + p n + i] =
  // x[g max_rows + i][2p, 2p + 1] as a bfloat16 pair (the first value in the low half; 0 past kc),
  // kp = (kc + 1) / 2. The AMX tiles': see amx_pack_x.
  void (*pack_x)(unsigned* xp, const float* x, long ldx, long rows, long kc);
  // A W-packed float32 panel (kc, 32), k-major (KernelTable::to_panel's), as the tiles read it:
  // wp[(p 32 + c) 2 + h] = panel[2p + h][c] in bfloat16 (0 past kc)
  void (*panel)(unsigned short* wp, const float* panel, long kc);
  // The same from `cols` (<= 32) rows of W at stride ldr, `in` long, float32 or bfloat16 (whose
  // pairs are copied); rows past cols are not read
  void (*rows_panel)(unsigned short* wp, const float* rows, long ldr, int cols, long in);
  void (*bf16_rows_panel)(unsigned short* wp, const unsigned short* rows, long ldr, int cols, long in);
  // rows in 1..max_rows of a group of xp times one panel's kp pairs: y (rows, cols) at stride ldy;
  // `resume`, `bias` and `relu` as KernelTable::wpacked
  void (*tile)(int rows, const unsigned* xp, const unsigned short* wp, long kp, float* y, long ldy, int cols,
               bool resume, const float* bias, bool relu);
};

// Null when the library was built without that instruction set (not x86-64).
const KernelTable* avx512_table();
const KernelTable* avx2_table();
const Int8Table* avx512_vnni_int8_table(); // AVX-512 VNNI's vpdpbusd
const Int8Table* avx2_int8_table();        // AVX2's vpmaddubsw on |x| and w with x's sign
const Int8Table* amx_int8_table();         // AMX-INT8's tdpbssd: its tiles only (rows, tiles, max_rows)
const Bf16DotTable* avx512_bf16_table();   // AVX512-BF16's vdpbf16ps
const Bf16DotTable* amx_bf16_table();      // AMX-BF16's tdpbf16ps (the OS must have granted the tiles)

} // namespace attn::linear_detail
