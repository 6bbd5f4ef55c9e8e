// The int8 product's tiles for AMX-INT8 (linear_table.hpp's Int8Table::rows), for a prompt's many
// rows: tdpbssd adds a 16 x 16 block of int32 sums of up to 64 products of signed bytes each, from
// a tile of x's rows and a tile of a weight's column-tile quads. Built with -mavx512f -mavx512bw
// -mamx-tile -mamx-int8; called only when the CPU and the OS have them (blas::amx_granted), for
// products of blas::amx_int8_rows() rows or more.
//
// linear_kernels.hpp's tile_i8 is the plain reference beside it: the same integer sums per block
// (exact in int32; signed by signed here, so no offset and no correction: xsums is not read), then
// the same float steps acc = fma(float(d) * xs, scale, acc), so the bits are tile_i8's. The int8
// column tiles (16 columns by quads of 4 values of k, 64 bytes a quad) are already the layout of
// AMX's second operand: the weights are read as they are laid out.
//
// The float steps, three vector instructions per 16 sums and block, bound it: a tile product of a
// block (32 values) is 16 x 16 x 32 multiply-adds for one instruction, and its sums then take 48.
// Measured (Xeon with AMX, 2 threads, blocks of 32, VNNI's tiles alternated in one process,
// bench/int8_matmul): 512 x 768 x 768 1.15x, 512 x 768 x 2048 1.15x, 512 x 2048 x 768 1.45x,
// 512 x 768 x 32000 1.15x, 64 x 768 x 2048 1.15x; 16 rows 1.0x.
#include "kernels/isa/linear_kernels.hpp"
#include "kernels/isa/simd_avx512.hpp"

#include <cstring>

namespace attn::linear_detail {

namespace {

using V = simd::V512;
constexpr int amx_rows = 256, amx_tiles = 2; // a call: up to 256 rows of x by up to two column tiles

// The quads of k a step takes: the largest divisor of a block's quads of at most 16 (64 bytes, a
// tile's row), so that no step crosses a block.
long chunk_quads(long quads) {
  for (long q = quads < 16 ? quads : 16; q > 1; --q)
    if (quads % q == 0) return q;
  return 1;
}

// Tiles 0 and 1: a block's sums (alternately); 4: x's `rows` rows by `bytes` of k; 6: the column
// tile's quads for those bytes.
void configure(AmxTileConfig& c, int rows, int bytes) {
  c.colsb[0] = c.colsb[1] = 64, c.rows[0] = c.rows[1] = static_cast<unsigned char>(rows);
  c.colsb[4] = static_cast<unsigned short>(bytes), c.rows[4] = static_cast<unsigned char>(rows);
  c.colsb[6] = 64, c.rows[6] = static_cast<unsigned char>(bytes / 4);
}

// One block's sums for `rows` rows (the configuration's) into tile C: tdpbssd over the block's
// steps of cq quads. (A macro: the intrinsics name their tiles by literal numbers.)
#define ATTN_AMX_BLOCK_SUMS(C)                                                                                         \
  do {                                                                                                                 \
    _tile_zero(C);                                                                                                     \
    for (long s = 0; s < steps; ++s) {                                                                                 \
      const long g = b * quads + s * cq; /* the step's first quad */                                                   \
      _tile_loadd(4, x + g * 4, ldx);                                                                                  \
      _tile_loadd(6, w + g * 64, 64);                                                                                  \
      _tile_dpbssd(C, 4, 6);                                                                                           \
    }                                                                                                                  \
  } while (0)

// acc[r] = fma(float(d[r]) * xs[r blocks], s, acc[r]) for the 16 rows of one block's sums d (rows
// past `rows` read row 0's scale; they are never stored).
__attribute__((always_inline)) inline void add_block(V::vec (&acc)[16], const int (*d)[16], int rows, const float* xs,
                                                     long blocks, V::vec s) {
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) {
    // (maskz: GCC 12 warns of _mm512_cvtepi32_ps's undefined source)
    const V::vec v = _mm512_maskz_cvtepi32_ps(0xffff, _mm512_load_si512(d[r]));
    acc[r] = V::fma(V::mul(v, V::bcast(xs[(r < rows ? r : 0) * blocks])), s, acc[r]);
  }
}

// Block b's sums (tile b % 2) to sums[b % 3] (16 rows by 16 int32).
__attribute__((always_inline)) inline void store_sums(long b, int (*sums)[16][16]) {
  if (b % 2 == 0)
    _tile_stored(0, sums[b % 3][0], 64);
  else
    _tile_stored(1, sums[b % 3][0], 64);
}

// Up to 16 rows of x (the configuration's `rows`) times one column tile: acc[r] for row r. Block
// b's sums go to tile b % 2, stored to sums[b % 3] once block b + 1's products are asked for, and
// added in a block after that: the vector units work while the tile unit computes, a store never
// waits on the products just asked for, and the loads not on the stores (a block stored and added
// in at once ran at 0.75x).
inline void column_tile(int rows, const signed char* x, long ldx, const float* xs, const signed char* w,
                        const float* scales, long blocks, long quads, long cq, int (*sums)[16][16], V::vec (&acc)[16]) {
  const long steps = quads / cq;
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) acc[r] = V::zero();
  for (long b = 0; b < blocks; ++b) {
    if (b % 2 == 0)
      ATTN_AMX_BLOCK_SUMS(0);
    else
      ATTN_AMX_BLOCK_SUMS(1);
    if (b >= 2) add_block(acc, sums[(b - 2) % 3], rows, xs + b - 2, blocks, V::load(scales + (b - 2) * 16));
    if (b >= 1) store_sums(b - 1, sums);
  }
  store_sums(blocks - 1, sums);
  for (long b = blocks >= 2 ? blocks - 2 : 0; b < blocks; ++b)
    add_block(acc, sums[b % 3], rows, xs + b, blocks, V::load(scales + b * 16));
}

// Rows in 1..256 of x (row r at x + r ldx, its blocks 4 quads bytes apart, block b's scale at
// xs[r blocks + b]) times `tiles` (1 or 2) column tiles (tile t at w + 16 t P, its quad g at
// + 64 g; block b's scales at scales + (t blocks + b) 16), `cols` outputs of the last stored (+
// bias), as tile_i8, by groups of 16 rows. The configuration is in static storage: GCC 12 dropped
// the stores of one on the stack that only ldtilecfg reads (llama.cpp's AMX kernels faulted so,
// its PR 26954).
void amx_rows_i8(int rows, int tiles, const signed char* x, long ldx, const float* xs, const int* /*xsums*/,
                 const signed char* w, long P, const float* scales, long blocks, long quads, float* y, long ldy,
                 int cols, const float* bias) {
  const long cq = chunk_quads(quads);
  static thread_local AmxTileConfig config;
  alignas(64) int sums[3][16][16]; // the blocks' stored sums (column_tile)
  int loaded = 0;                  // the rows the loaded configuration has
  for (int r0 = 0; r0 < rows; r0 += 16) {
    const int n = rows - r0 < 16 ? rows - r0 : 16;
    if (n != loaded) {
      configure(config, n, static_cast<int>(cq * 4));
      _tile_loadconfig(&config);
      loaded = n;
      if (n < 16) // tilestored leaves the rows past n as they are: defined values
        for (auto& block : sums) std::memset(block[n], 0, sizeof(int) * 16 * static_cast<std::size_t>(16 - n));
    }
    for (int t = 0; t < tiles; ++t) {
      V::vec acc[16];
      column_tile(n, x + r0 * ldx, ldx, xs + r0 * blocks, w + 16 * t * P, scales + t * blocks * 16, blocks, quads, cq,
                  sums, acc);
      const int c = t + 1 < tiles ? 16 : cols;
      const V::vec bv = bias ? load_part<V>(bias + 16 * t, c) : V::zero();
#pragma GCC unroll 16
      for (int r = 0; r < 16; ++r)
        if (r < n) store_part<V>(y + (r0 + r) * ldy + 16 * t, bias ? V::add(acc[r], bv) : acc[r], c);
    }
  }
  _tile_release();
}

int amx_tiles_for(int) { return amx_tiles; }

// Only the tiles: linear.cpp takes the quantization and the rows in place from VNNI's table.
constexpr Int8Table table{"amx-int8", amx_rows, &amx_rows_i8, &amx_tiles_for, nullptr, nullptr, 0};

} // namespace

const Int8Table* amx_int8_table() { return &table; }

} // namespace attn::linear_detail
