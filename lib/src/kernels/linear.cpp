// blas::linear: y = x W^T + b, as nn.Linear, with bits that do not depend on the batch.
//
// OpenBLAS's sgemm gives a row different bits depending on how many rows share the call and where
// the row sits (its edge kernels, small-matrix kernels and sgemv each sum in their own order; seen
// on every core Debian's 0.3.21 has). So `--chunk`, `--threads` or a split over processes would
// change the output. Here every element is one FMA chain over k in order (linear_kernels.hpp), the
// same on every path: the SIMD tiles and the scalar reference below agree to the bit.
//
// Three tiles, chosen by the number of rows (which cannot change the bits):
//  - the fewest rows (generation at batch 1): W read in place, each L x L block transposed in
//    registers, one FMA per k and L columns;
//  - many rows: W is packed once per call into panels of 2L columns (k-major), and x per block
//    of MC rows by KC into groups of R rows (k-major) that each tile broadcasts from;
//  - few rows (up to 8L): x is packed and W read in place, once per group of L rows, so generation
//    with beams or a batch streams each weight once per group and packs nothing; up to 8L rows this
//    beat packing W per call (1.2-1.7x at 33-128 rows with AVX-512, E = 512; past that it loses).
//
// Weights of other formats (linear_weight.hpp): float16 runs the same chain over its values (its
// own tiles up to 128 rows, the W-packed tiles past that); int8 runs the int8 product (blas.hpp),
// exact integer sums per block on the CPU's int8 dot products (linear_vnni.cpp, linear_avx2.cpp),
// with a reference below.
#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/kernels/linear_weight.hpp"
#include "attn/kernels/parallel.hpp"

#include "kernels/isa/linear_table.hpp"

#include <fmt/format.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#if !defined(__x86_64__)
namespace attn::linear_detail { // no SIMD tiles built: every product takes the scalar path
const KernelTable* avx512_table() { return nullptr; }
const KernelTable* avx2_table() { return nullptr; }
const Int8Table* avx512_vnni_int8_table() { return nullptr; }
const Int8Table* avx2_int8_table() { return nullptr; }
const Int8Table* amx_int8_table() { return nullptr; }
const Bf16DotTable* avx512_bf16_table() { return nullptr; }
const Bf16DotTable* amx_bf16_table() { return nullptr; }
} // namespace attn::linear_detail
#endif

namespace attn::blas {

using linear_detail::Bf16DotTable;
using linear_detail::Int8Table;
using linear_detail::KernelTable;

namespace {

const KernelTable* table_for(Isa isa) {
  switch (isa) {
  case Isa::avx512: return linear_detail::avx512_table();
  case Isa::avx2: return linear_detail::avx2_table();
  case Isa::scalar: break;
  }
  return nullptr;
}

bool cpu_runs(Isa isa);

// The int8 product's tiles for `isa`: AVX-512 VNNI's when the CPU has it (else AVX2's) for avx512,
// AVX2's for avx2, none (the reference) for scalar.
const linear_detail::Int8Table* int8_table_for(Isa isa) {
  static const CpuFeatures f = cpu_features();
  if (!cpu_runs(isa) || isa == Isa::scalar) return nullptr;
  if (isa == Isa::avx512 && f.avx512vnni && f.avx512bw && linear_detail::avx512_vnni_int8_table())
    return linear_detail::avx512_vnni_int8_table();
  return f.avx2 ? linear_detail::avx2_int8_table() : nullptr;
}

bool g_vnni_int8_only = false; // prefer_vnni_int8

// Whether the int8 product on `isa` takes AMX-INT8's tiles for many rows: VNNI's table there, a
// CPU (and build) with AMX-INT8, and no prefer_vnni_int8. The OS's leave is asked only by a product
// (int8_table_for_rows), not by a name (int8_kernel_name).
bool amx_int8_for(Isa isa) {
  static const CpuFeatures f = cpu_features();
  const Int8Table* it = int8_table_for(isa);
  return it && it == linear_detail::avx512_vnni_int8_table() && f.amx_int8 && linear_detail::amx_int8_table() &&
         !g_vnni_int8_only;
}

// The int8 product's tiles for a product of `rows` rows on `isa`: AMX-INT8's from amx_int8_rows()
// rows where the CPU and the OS have them (with VNNI's quantization, whose values they take as they
// are), else int8_table_for's. Steps of few rows stay with VNNI: a tile product costs as much for
// one row as for 16.
const linear_detail::Int8Table* int8_table_for_rows(Isa isa, std::int64_t rows) {
  const Int8Table* it = int8_table_for(isa);
  if (rows < amx_int8_rows() || !amx_int8_for(isa) || !amx_granted()) return it;
  static const Int8Table amx = [it] {
    Int8Table t = *it;
    const Int8Table& a = *linear_detail::amx_int8_table();
    t.name = a.name, t.max_rows = a.max_rows, t.rows = a.rows, t.tiles = a.tiles;
    return t;
  }();
  return &amx;
}

bool cpu_runs(Isa isa) {
  static const CpuFeatures f = cpu_features(); // all false off x86-64; asked once, not per product
  switch (isa) {
  case Isa::avx512: return f.avx512f && f.fma;
  case Isa::avx2: return f.avx2 && f.fma && f.f16c;
  case Isa::scalar: return true;
  }
  return false;
}

MatmulPrecision g_matmul_precision = MatmulPrecision::f32;
bool g_vdpbf16ps_only = false;

// The bfloat16 tiles this CPU has, best first: AMX-BF16's, then AVX512-BF16's vdpbf16ps (which on
// a Xeon with AMX ran at 0.64-0.67x the float32 tiles; on a Zen 4, which has no AMX, at 1.8-1.9x);
// null if none.
const Bf16DotTable* bf16_table() {
  static const CpuFeatures f = cpu_features();
  static const bool vdpbf16ps = f.avx512bf16 && f.avx512bw && cpu_runs(Isa::avx512) &&
                                linear_detail::avx512_bf16_table() && linear_detail::avx512_table();
  if (!vdpbf16ps) return nullptr;
  return f.amx_bf16 && !g_vdpbf16ps_only && linear_detail::amx_bf16_table() && amx_granted()
             ? linear_detail::amx_bf16_table()
             : linear_detail::avx512_bf16_table();
}

// The bfloat16 tiles when the run asked for them and the products run on AVX-512's (whose panels
// they share), else null: the float32 tiles.
const Bf16DotTable* bf16_dot(Isa isa) {
  return g_matmul_precision == MatmulPrecision::bf16 && isa == Isa::avx512 ? bf16_table() : nullptr;
}

Isa choose_isa() {
  Isa best = cpu_runs(Isa::avx512) ? Isa::avx512 : cpu_runs(Isa::avx2) ? Isa::avx2 : Isa::scalar;
  // ATTN_LINEAR_ISA narrows the choice (tests and bisecting; the results are the same bits).
  if (const char* want = std::getenv("ATTN_LINEAR_ISA")) {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
      if (std::strcmp(want, isa_name(isa)) == 0 && static_cast<int>(isa) < static_cast<int>(best)) best = isa;
  }
  return best;
}

// Below this many multiply-adds a product runs on one thread.
constexpr double parallel_min_work = 1 << 17;

int threads_for(double work, int threads) {
  return (threads <= 1 || omp_in_parallel() || work < parallel_min_work) ? 1 : threads;
}

// Scratch reused across calls on the same thread (a fresh buffer per call is zeroed by the kernel
// on first touch), left unset when it grows and on huge pages from 2 MiB (tensor.hpp's Buffer):
// packing a (1536, 512) weight first touched 3 MiB in 4 KiB pages, zeroed twice.
Buffer<float>& scratch() {
  thread_local Buffer<float> buffer;
  return buffer;
}

// The reference: the chain of linear_kernels.hpp as plain loops. Also the path for CPUs without FMA
// (std::fma is then a library call, exact but slow).
void linear_scalar(float* y, const float* x, const float* w, const float* bias, std::int64_t rows, std::int64_t in,
                   std::int64_t out, int threads) {
  const int t = threads_for(double(rows) * in * out, threads);
  parallel_for(rows, t, [&](std::int64_t r) {
    for (std::int64_t j = 0; j < out; ++j) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < in; ++k) acc = std::fma(x[r * in + k], w[j * in + k], acc);
      y[r * out + j] = bias ? acc + bias[j] : acc;
    }
  });
}

// The fewest rows: tiles of L columns of W, all rows in each.
void linear_wtrans(const KernelTable& kt, float* y, const float* x, const float* w, const float* bias,
                   std::int64_t rows, std::int64_t in, std::int64_t out, int threads) {
  const std::int64_t L = kt.lanes, tiles = (out + L - 1) / L;
  const int t = threads_for(double(rows) * in * out, threads);
  parallel_for(tiles, t, [&](std::int64_t tile) {
    const std::int64_t j0 = tile * L;
    // prefetch the next tile this thread takes (static schedule: the next index), if any
    const float* next = tile + 1 < tiles ? w + (j0 + L) * in : nullptr;
    kt.wtrans(static_cast<int>(rows), x, in, w + j0 * in, in, in, y + j0, out, static_cast<int>(std::min(L, out - j0)),
              bias ? bias + j0 : nullptr, next);
  });
}

// Few rows: groups of L rows packed k-major, W read in place in tiles of max_cols columns.
void linear_xpacked(const KernelTable& kt, float* y, const float* x, const float* w, const float* bias,
                    std::int64_t rows, std::int64_t in, std::int64_t out, int threads) {
  const std::int64_t L = kt.lanes, groups = (rows + L - 1) / L, C = kt.max_cols;
  Buffer<float>& xp = scratch();
  xp.assign(static_cast<std::size_t>(groups * in * L), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < in; ++k) xp[static_cast<std::size_t>(((r / L) * in + k) * L + r % L)] = x[r * in + k];
  const std::int64_t col_tiles = (out + C - 1) / C, tasks = groups * col_tiles;
  const int t = threads_for(double(rows) * in * out, threads);
  parallel_for(tasks, t, [&](std::int64_t task) {
    const std::int64_t g = task / col_tiles, j0 = (task % col_tiles) * C;
    const int cols = static_cast<int>(std::min(C, out - j0)), n = static_cast<int>(std::min(L, rows - g * L));
    kt.xpacked(cols, xp.data() + g * in * L, w + j0 * in, in, in, y + g * L * out + j0, out, n,
               bias ? bias + j0 : nullptr);
  });
}

// Many rows: W packed into panels of P = 2L columns, wp[(panel * in + k) * P + c], zero past `out`;
// pack(dst, j0, cols) writes panel dst: dst[k * P + c] = W'[j0 + c][k] for c < cols, 0 for the
// other c < P (float32 rows transposed, tiles read in place, or float16 values widened).
// With `keep` (float32 rows at `source`), the panels are packed into it once and reused after;
// with `relu`, y = max(y, 0) as the tiles store it. y in column blocks when `blocks` says so (their
// width a multiple of P, so that no panel straddles two).
// With `dot` (MatmulPrecision::bf16), the panels and x's blocks are rounded to bfloat16 pairs
// (Bf16DotTable) and the products are its tiles'; nothing is kept then. A panel comes from
// pack_pairs(wp, j0, cols) (Bf16DotTable::panel's layout) when there is one and it returns true,
// else from pack's float32 panel.
template <class Pack, class PackPairs = std::nullptr_t>
void linear_wpacked(const KernelTable& kt, float* y, const float* x, const Pack& pack, const float* bias,
                    std::int64_t rows, std::int64_t in, std::int64_t out, int threads, bool relu, ColumnBlocks blocks,
                    PackedWeight* keep = nullptr, const float* source = nullptr, const Bf16DotTable* dot = nullptr,
                    const PackPairs& pack_pairs = nullptr) {
  const std::int64_t P = 2 * kt.lanes, panels = (out + P - 1) / P;
  const std::int64_t ldy = blocks.cols ? blocks.cols : out;
  const auto y_at = [&](std::int64_t r, std::int64_t j) { // y's row r from column j (j within one block)
    return blocks.cols ? y + j / blocks.cols * blocks.stride + r * blocks.cols + j % blocks.cols : y + r * out + j;
  };
  const int t = threads_for(double(rows) * in * out, threads);
  if (dot) keep = nullptr;
  Buffer<float>& wp = keep ? keep->panels : scratch();
  const std::int64_t pairs = (in + 1) / 2; // a bfloat16 panel: (pairs, P) pairs, P / 2 floats' room a pair row
  if (dot) {
    wp.resize(static_cast<std::size_t>(panels * pairs * P));
    auto* wb = reinterpret_cast<unsigned short*>(wp.data());
    parallel_for(panels, t, [&](std::int64_t p) {
      unsigned short* dst = wb + p * pairs * 2 * P;
      const std::int64_t cols = std::min(P, out - p * P);
      if constexpr (!std::is_same_v<PackPairs, std::nullptr_t>)
        if (pack_pairs(dst, p * P, cols)) return;
      thread_local std::vector<float> panel;
      panel.resize(static_cast<std::size_t>(in * P));
      pack(panel.data(), p * P, cols);
      dot->panel(dst, panel.data(), in);
    });
  } else if (!keep || keep->source != source || keep->in != in || keep->out != out || keep->kernels != &kt) {
    if (keep) keep->source = nullptr; // nothing valid kept until packed
    wp.resize(static_cast<std::size_t>(panels * in * P));
    parallel_for(panels, t, [&](std::int64_t p) { pack(wp.data() + p * in * P, p * P, std::min(P, out - p * P)); });
    if (keep) keep->source = source, keep->in = in, keep->out = out, keep->kernels = &kt;
  }
  // Blocks: MC rows of x by KC of k, packed for the tiles (xp below, in L2), times a panel's KC
  // slice, reused by MC / R tiles. Measured on one thread, (4608, 512|2048) x (1536|512, in)^T:
  // KC = 512 with MC = 8R beat KC = 256 (by 2-5%) and 1024, and MC = 4R or 16R. Since the tile
  // prefetches its panel (Xeon model 85, 2 threads): longer products take KC = 1024 with MC = 4R
  // (the same bytes of x), (4096|1024, 2048) x (512, 2048)^T 1.03-1.04x (AVX2 tiles 1.02x); and
  // KC = 512 takes MC = 4R too when that still gives 4 blocks a thread, whose finer tasks end
  // closer together: (1024, 512) x (512|1536, 512)^T 1.01-1.02x, mha-run's computation 1.02-1.03x,
  // encode the same; with fewer rows 4R was slower ((300, 512) x (2048, 512)^T 0.93x: each block
  // streams every panel for fewer tiles). Rows of x that sit a multiple of 4 KiB apart no longer
  // slow the tile (they were copied apart first): the packed block is one stream.
  const std::int64_t R = dot ? dot->max_rows : kt.max_rows, KC = in > 512 ? 1024 : 512;
  const std::int64_t MC = (KC > 512 || (rows + 4 * R - 1) / (4 * R) >= 4 * t ? 4 : 8) * R;
  // Enough tasks for the threads, and a multiple of their number, so that neither waits at the end
  // (1024 rows in 11 blocks: one thread ran 6 while the other waited). Row blocks of up to MC rows,
  // R-row tiles shared out evenly (1024 rows: 12 blocks of 7 or 8 tiles); the panels are split too
  // only for fewer than 4 blocks a thread, since each task packs its block of x again. (Splitting
  // the panels whenever the blocks were odd, pack_x took 2.2% of encode's samples; 2 threads,
  // (300, 512) x (2048, 512)^T: 4 blocks of 96, 96, 96 and 12 rows ran at 140 GFLOP/s, 8 tasks
  // over 4 even blocks at 184.)
  // Handed out as threads free up, so a thread the host slows does not hold the other at the end
  // (paired runs of two builds: encode 1.04x, mha-run's computation 1.01x, over static halves).
  const std::int64_t row_tiles = (rows + R - 1) / R;
  std::int64_t row_blocks = (row_tiles + MC / R - 1) / (MC / R);
  row_blocks = std::min(row_tiles, (row_blocks + t - 1) / t * t);
  std::int64_t panel_groups = std::min(panels, std::max<std::int64_t>(1, (4 * t + row_blocks - 1) / row_blocks));
  while (panel_groups < panels && row_blocks * panel_groups % t != 0) ++panel_groups;
  const std::int64_t tasks = row_blocks * panel_groups;
  parallel_for_dynamic(tasks, t, [&](std::int64_t task) {
    const std::int64_t rb = task / panel_groups, pg = task % panel_groups;
    const std::int64_t r0 = row_tiles * rb / row_blocks * R, r1 = std::min(rows, row_tiles * (rb + 1) / row_blocks * R);
    const std::int64_t p0 = panels * pg / panel_groups, p1 = panels * (pg + 1) / panel_groups;
    thread_local std::vector<float> xp; // x's rows r0..r1, columns k0..k0+kc, as pack_x lays them
    xp.resize(static_cast<std::size_t>(MC * KC));
    for (std::int64_t k0 = 0; k0 < in; k0 += KC) { // KC is even: a block's pairs start at k0 / 2
      const std::int64_t kc = std::min(KC, in - k0), kp = (kc + 1) / 2;
      const std::int64_t kpa = dot ? (kp + dot->pair_align - 1) / dot->pair_align * dot->pair_align : kp;
      const bool last = k0 + kc == in;
      auto* xb = reinterpret_cast<unsigned*>(xp.data());
      if (dot)
        dot->pack_x(xb, x + r0 * in + k0, in, r1 - r0, kc);
      else
        kt.pack_x(xp.data(), x + r0 * in + k0, in, r1 - r0, kc);
      for (std::int64_t p = p0; p < p1; ++p) {
        const int cols = static_cast<int>(std::min(P, out - p * P));
        const float* b = last && bias ? bias + p * P : nullptr;
        for (std::int64_t r = r0; r < r1; r += R) {
          const int n = static_cast<int>(std::min(R, r1 - r));
          if (dot)
            dot->tile(n, xb + (r - r0) * kpa,
                      reinterpret_cast<const unsigned short*>(wp.data()) + (p * pairs + k0 / 2) * 2 * P, kp,
                      y_at(r, p * P), ldy, cols, k0 > 0, b, last && relu);
          else
            kt.wpacked(n, xp.data() + (r - r0) * kc, wp.data() + (p * in + k0) * P, kc, y_at(r, p * P), ldy, cols,
                       k0 > 0, b, last && relu);
        }
      }
    }
  });
}

// Over the column tiles of an int8 or float16 weight (linear_weight.hpp): tasks of consecutive
// tiles (a range that starts inside a tile gives that tile a task of its own) by blocks of MC rows,
// each run by groups of R rows; run(r, n, tile, ntiles, lo, cols, c0) computes rows [r, r + n) of
// ntiles tiles from `tile`, from lane lo, `cols` lanes of the last, into y's columns from c0;
// tiles(n) is how many tiles a call takes for n rows. Tasks are handed out as threads free up: at
// batch 1 a product streams its weight from memory, and when one thread streams slower (the other
// task on its core, the host) a static half left the other waiting at the region's end (9% of a
// generation's samples in libgomp on the first thread; 2.6% with this, and 2-4% less time per token).
template <class Tiles, class Run>
void over_tiles(const WeightRows& w, std::int64_t rows, std::int64_t R, std::int64_t MC, const Tiles& tiles,
                int threads, const Run& run) {
  const std::int64_t T = LinearWeight::tile, end = w.first + w.count, t0 = w.first / T, t1 = (end + T - 1) / T;
  const bool head = w.first % T != 0;                                  // tile t0 starts inside
  const std::int64_t body = head ? t0 + 1 : t0;                        // tiles [body, t1) from lane 0
  const std::int64_t G = tiles(static_cast<int>(std::min(R, rows)));   // tiles per task
  const std::int64_t units = (head ? 1 : 0) + (t1 - body + G - 1) / G; // column units
  const std::int64_t row_blocks = (rows + MC - 1) / MC, tasks = units * row_blocks;
  const int t = threads_for(double(rows) * w.in() * w.count, threads);
  parallel_for_dynamic(tasks, t, [&](std::int64_t task) {
    const std::int64_t unit = task % units, r0 = (task / units) * MC, r1 = std::min(rows, r0 + MC);
    const bool first_tile = head && unit == 0;
    const std::int64_t tile = first_tile ? t0 : body + (unit - (head ? 1 : 0)) * G;
    const std::int64_t ntiles = first_tile ? 1 : std::min(G, t1 - tile);
    const std::int64_t lo = first_tile ? w.first - t0 * T : 0;
    const std::int64_t last_end = std::min(end, (tile + ntiles) * T) - (tile + ntiles - 1) * T; // lanes of the last
    for (std::int64_t r = r0; r < r1; r += R) {
      const int n = static_cast<int>(std::min(R, r1 - r));
      const std::int64_t per = tiles(n);
      for (std::int64_t i = 0; i < ntiles; i += per) {
        const int m = static_cast<int>(std::min(per, ntiles - i));
        const std::int64_t at = tile + i;
        run(r, n, at, m, lo, static_cast<int>(i + m == ntiles ? last_end - lo : T), at * T + lo - w.first);
      }
    }
  });
}

// A float16 or float32 weight in column tiles, for few rows: its tiles read in place.
// A float32 weight's buffer ends with its last tile, so a tile from lane lo > 0 (whose loads would
// run lo values past it) is computed whole into scratch, and its lanes copied out.
void linear_cols(const KernelTable& kt, float* y, const float* x, const WeightRows& w, const float* bias,
                 std::int64_t rows, int threads) {
  const LinearWeight& lw = *w.w;
  const std::int64_t T = LinearWeight::tile, in = lw.in(), out = w.count;
  const bool half = lw.format() == LinearWeight::Format::f16 || lw.format() == LinearWeight::Format::bf16;
  const auto half_cols = lw.format() == LinearWeight::Format::bf16 ? kt.bf16_cols : kt.f16_cols;
  over_tiles(
      w, rows, kt.max_q_rows, rows, half ? kt.f16_col_tiles : kt.col_tiles, threads,
      [&](std::int64_t r, int n, std::int64_t tile, int ntiles, std::int64_t lo, int cols, std::int64_t c0) {
        const float* b = bias ? bias + c0 : nullptr;
        if (half) {
          half_cols(n, ntiles, x + r * in, in, lw.h16() + tile * in * T + lo, in, y + r * out + c0, out, cols, b);
        } else if (lo == 0) {
          kt.f32_cols(n, ntiles, x + r * in, in, lw.f32_tiles() + tile * in * T, in, y + r * out + c0, out, cols, b);
        } else {
          float whole[16 * 8]; // n <= max_q_rows <= 8 rows of a tile
          kt.f32_cols(n, 1, x + r * in, in, lw.f32_tiles() + tile * in * T, in, whole, T, static_cast<int>(lo) + cols,
                      nullptr);
          for (int i = 0; i < n; ++i)
            for (int c = 0; c < cols; ++c)
              y[(r + i) * out + c0 + c] = b ? whole[i * T + lo + c] + b[c] : whole[i * T + lo + c];
        }
      });
}

// Few rows over a 16-bit weight held in rows: the transposing tile over the rows where they are,
// max_trans_rows rows of x at a time, in tasks of groups of L outputs (several at once for one
// row). Each thread takes a contiguous share of the tasks, and each call prefetches the rows of its
// thread's next task. A last group of fewer than L rows is copied, padded with zeros, first (the
// tile reads L rows).
void linear_half_rows(const KernelTable& kt, float* y, const float* x, const WeightRows& w, const float* bias,
                      std::int64_t rows, int threads) {
  const LinearWeight& lw = *w.w;
  const std::int64_t L = kt.lanes, in = lw.in(), out = w.count, R = kt.max_trans_rows;
  const std::int64_t G = kt.half_trans_groups(static_cast<int>(std::min(R, rows))) * L; // outputs a task
  const std::int64_t tasks = (out + G - 1) / G;
  const auto trans = lw.format() == LinearWeight::Format::bf16 ? kt.bf16_trans : kt.f16_trans;
  const std::uint16_t* h = lw.h16_rows() + w.first * in;
  parallel_shares(tasks, threads_for(double(rows) * in * out, threads), [&](std::int64_t first, std::int64_t end) {
    std::vector<std::uint16_t> padded;
    for (std::int64_t task = first; task < end; ++task) {
      const std::int64_t j0 = task * G, n = std::min(G, out - j0), full = n / L, part = n - full * L;
      const std::uint16_t* next = task + 1 < end ? h + (j0 + G) * in : nullptr;
      if (part > 0) {
        padded.assign(static_cast<std::size_t>(L * in), 0);
        std::copy_n(h + (j0 + full * L) * in, part * in, padded.data());
      }
      for (std::int64_t r = 0; r < rows; r += R) {
        const int m = static_cast<int>(std::min(R, rows - r));
        if (full > 0)
          trans(m, static_cast<int>(full), x + r * in, in, h + j0 * in, in, in, y + r * out + j0, out,
                static_cast<int>(L), bias ? bias + j0 : nullptr, r == 0 ? next : nullptr, r == 0 && task == first);
        if (part > 0) {
          const std::int64_t jp = j0 + full * L;
          trans(m, 1, x + r * in, in, padded.data(), in, in, y + r * out + jp, out, static_cast<int>(part),
                bias ? bias + jp : nullptr, nullptr, false);
        }
      }
    }
  });
}

// One row of y by linear_scalar's chain over W' (int8 values widened, or a tiled weight's): the
// reference for weights in column tiles, and the int8 product's row whose values are not all
// finite (it cannot be quantized; its outputs are then what float32 gives: infinities, NaN).
void linear_row_float(float* y, const float* x, const WeightRows& w, const float* bias) {
  for (std::int64_t j = 0; j < w.count; ++j) {
    float acc = 0.0f;
    for (std::int64_t k = 0; k < w.in(); ++k) acc = std::fma(x[k], w.w->at(w.first + j, k), acc);
    y[j] = bias ? acc + bias[j] : acc;
  }
}

// The reference for weights in column tiles (float16, float32).
void linear_cols_scalar(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                        int threads) {
  const int t = threads_for(double(rows) * w.in() * w.count, threads);
  parallel_for(rows, t, [&](std::int64_t r) { linear_row_float(y + r * w.count, x + r * w.in(), w, bias); });
}

// --- the int8 product (blas.hpp) ---

// Row x (in values) as the int8 product takes it, packed as the weight's rows (P values, blocks
// padded with zeros), each block of the weight's B values with its own scale: a = max |x| over the
// block, q = x * (127 / a) rounded to nearest even, scale[b] = a / 127 (0 for a zero block). False,
// and nothing written, when a value is not finite. The reference's; the SIMD files have their own
// (linear_kernels.hpp, quantize_row_i8), which give the same values.
bool quantize_row(const float* x, const LinearWeight& w, signed char* q, float* scale) {
  const std::int64_t in = w.in(), B = w.block(), B4 = w.block4();
  float z = 0.0f;
  for (std::int64_t k = 0; k < in; ++k) z += x[k] * 0.0f; // NaN if any is not finite
  if (std::isnan(z)) return false;
  for (std::int64_t b = 0, k0 = 0; k0 < in; ++b, k0 += B) {
    signed char* qb = q + b * B4;
    const std::int64_t n = std::min(B, in - k0);
    float a = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) a = std::max(a, std::abs(x[k0 + i]));
    const float inv = a > 0.0f ? 127.0f / a : 0.0f;
    for (std::int64_t i = 0; i < n; ++i)
      qb[i] = static_cast<signed char>(std::nearbyint(std::min(127.0f, std::max(-127.0f, x[k0 + i] * inv))));
    for (std::int64_t i = n; i < B4; ++i) qb[i] = 0;
    scale[b] = a / 127.0f;
  }
  return true;
}

// The reference: the definition in blas.hpp, one output at a time, the dot products in int64.
void linear_int8_scalar(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                        int threads) {
  const LinearWeight& lw = *w.w;
  const std::int64_t in = lw.in(), out = w.count, B = lw.block(), B4 = lw.block4();
  const int t = threads_for(double(rows) * in * out, threads);
  parallel_for(rows, t, [&](std::int64_t r) {
    std::vector<signed char> q(static_cast<std::size_t>(lw.packed_in()));
    std::vector<float> xs(static_cast<std::size_t>(lw.blocks()));
    if (!quantize_row(x + r * in, lw, q.data(), xs.data())) {
      linear_row_float(y + r * out, x + r * in, w, bias);
      return;
    }
    for (std::int64_t j = 0; j < out; ++j) {
      const std::int64_t row = w.first + j;
      float acc = 0.0f;
      for (std::int64_t b = 0; b < lw.blocks(); ++b) {
        std::int64_t d = 0;
        for (std::int64_t k = b * B; k < std::min(in, (b + 1) * B); ++k) d += q[b * B4 + k % B] * lw.int8_at(row, k);
        const float dx = static_cast<float>(d) * xs[static_cast<std::size_t>(b)];
        acc = std::fma(dx, lw.int8_scale(row, b), acc);
      }
      y[r * out + j] = bias ? acc + bias[j] : acc;
    }
  });
}

// Tiles [t0, t1) of the int8 rows q (out, in; no padding within a row) as LinearWeight::int8 lays
// them, at `tiles` (tile t at + (t - t0) 16 in). A tile is its 16 rows' quads transposed,
// q[g * 16 + c] = Q[16 t + c][quad g] as 4-byte words: the float32 panel transpose moves them
// (bits only, no arithmetic).
void int8_rows_to_tiles_on(Isa isa, std::int8_t* tiles, const std::int8_t* q, std::int64_t out, std::int64_t in,
                           std::int64_t t0, std::int64_t t1, int threads) {
  constexpr std::int64_t T = LinearWeight::tile;
  const std::int64_t quads = in / 4;
  const KernelTable* kt = isa_available(isa) ? table_for(isa) : nullptr;
  parallel_for(t1 - t0, threads_for(double(t1 - t0) * T * in, threads), [&](std::int64_t i) {
    const std::int64_t t = t0 + i;
    const int cols = static_cast<int>(std::min(T, out - t * T));
    std::int8_t* dst = tiles + i * T * in;
    const std::int8_t* src = q + t * T * in;
    if (kt) {
      kt->to_panel(reinterpret_cast<float*>(dst), T, T, reinterpret_cast<const float*>(src), quads, cols, quads);
      return;
    }
    for (std::int64_t g = 0; g < quads; ++g)
      for (std::int64_t c = 0; c < T; ++c) {
        if (c < cols)
          std::memcpy(dst + (g * T + c) * 4, src + c * in + g * 4, 4);
        else
          std::memset(dst + (g * T + c) * 4, 0, 4);
      }
  });
}

// The int8 product on an instruction set's tiles: every row quantized once into scratch, then the
// tiles over blocks of 256 rows (the weight's tiles of a task stay in cache while they pass). A
// weight held in rows is read in place by steps of few rows (the instruction set's
// rows_in_place), and laid out in tiles for more (into scratch, by this call: a prompt's rows
// repay that pass, which a step's would not).
void linear_int8(Isa isa, const Int8Table& it, float* y, const float* x, const WeightRows& w, const float* bias,
                 std::int64_t rows, int threads) {
  const LinearWeight& lw = *w.w;
  const std::int64_t T = LinearWeight::tile, in = lw.in(), out = w.count, P = lw.packed_in();
  const std::int64_t blocks = lw.blocks();
  thread_local std::vector<signed char> xq;
  thread_local std::vector<float> xs;
  thread_local std::vector<int> xsums;
  thread_local std::vector<char> finite;
  xq.resize(static_cast<std::size_t>(rows * P));
  xs.resize(static_cast<std::size_t>(rows * blocks));
  xsums.resize(static_cast<std::size_t>(rows * blocks));
  finite.resize(static_cast<std::size_t>(rows));
  signed char* q = xq.data();
  float* s = xs.data();
  int* z = xsums.data();
  char* ok = finite.data();
  // a row's quantization: a few passes over it; one row (a decoding step) without a parallel region
  const auto quantize = [&](std::int64_t r) {
    ok[r] = it.quantize(x + r * in, in, lw.block(), lw.block4(), q + r * P, s + r * blocks, z + r * blocks);
  };
  parallel_for(rows, rows > 1 ? threads_for(double(rows) * in * 64, threads) : 1, quantize);
  const std::int64_t t0 = w.first / T, t1 = (w.first + w.count + T - 1) / T;
  if (lw.in_rows() && it.rows_in_place && rows <= it.max_rows_in_place) {
    // tasks of 8 tiles (one when it starts inside a tile), each tile a call
    over_tiles(
        w, rows, it.max_rows_in_place, rows, [](int) { return 8; }, threads,
        [&](std::int64_t r, int n, std::int64_t tile, int ntiles, std::int64_t lo, int cols, std::int64_t c0) {
          for (int i = 0; i < ntiles; ++i) {
            const std::int64_t l = i == 0 ? lo : 0, row = (tile + i) * T + l;
            it.rows_in_place(n, q + r * P, P, s + r * blocks, z + r * blocks, lw.q8_rows() + row * in, in, in,
                             lw.scales() + (tile + i) * blocks * T + l, blocks, lw.block(), y + r * out + c0 + i * T,
                             out, static_cast<int>(i + 1 == ntiles ? cols : T - l), bias ? bias + c0 + i * T : nullptr,
                             i + 1 < ntiles ? lw.q8_rows() + (tile + i + 1) * T * in : nullptr);
          }
        });
  } else {
    const std::int8_t* tiles = lw.q8(); // tile t at tiles + (t - first) 16 P
    std::int64_t first = 0;
    if (lw.in_rows()) {
      thread_local Buffer<std::int8_t> laid;
      laid.resize(static_cast<std::size_t>((t1 - t0) * P * T + 64)); // a vector load past the last k
      int8_rows_to_tiles_on(isa, laid.data(), lw.q8_rows(), lw.out(), in, t0, t1, threads);
      tiles = laid.data(), first = t0;
    }
    over_tiles(w, rows, it.max_rows, 256, it.tiles, threads,
               [&](std::int64_t r, int n, std::int64_t tile, int ntiles, std::int64_t lo, int cols, std::int64_t c0) {
                 it.rows(n, ntiles, q + r * P, P, s + r * blocks, z + r * blocks,
                         tiles + (tile - first) * P * T + lo * 4, P, lw.scales() + tile * blocks * T + lo, blocks,
                         lw.block4() / 4, y + r * out + c0, out, cols, bias ? bias + c0 : nullptr);
               });
  }
  for (std::int64_t r = 0; r < rows; ++r)
    if (!ok[r]) linear_row_float(y + r * out, x + r * in, w, bias);
}

// Weights in column tiles are read in place up to this many rows for float16 (2 bytes a weight),
// and up to the transposing tile's rows for float32 (tile_rows; with 128, --no-cache generation,
// whose steps have up to 128 rows, took 1.4x as long); past that, the W-packed tiles, the weight
// copied (float16 widened) into the panels as they are packed.
constexpr std::int64_t f16_max_rows = 128;

} // namespace

void set_matmul_precision(MatmulPrecision p) { g_matmul_precision = p; }

MatmulPrecision matmul_precision() { return g_matmul_precision; }

bool bf16_products_available() { return bf16_table() != nullptr; }

const char* bf16_tiles() {
  const Bf16DotTable* t = bf16_table();
  return t ? t->name : "";
}

void prefer_vdpbf16ps(bool yes) { g_vdpbf16ps_only = yes; }

const char* isa_name(Isa isa) {
  switch (isa) {
  case Isa::avx512: return "avx512";
  case Isa::avx2: return "avx2";
  case Isa::scalar: break;
  }
  return "scalar";
}

bool isa_available(Isa isa) { return isa == Isa::scalar || (table_for(isa) != nullptr && cpu_runs(isa)); }

Isa linear_isa() {
  static const Isa isa = choose_isa();
  return isa;
}

namespace {

// Whether a product of `rows` rows over a weight of format f takes the W-packed tiles (kt: the
// tiles of the instruction set, null for the reference): float32 rows past 8L rows (up to there,
// W read in place was up to 1.7x the W-packed tile's rate, which packs W per call), float16 past
// f16_max_rows, float32 column tiles past 4 times the transposing tile's rows (a prompt of 9 to 17
// tokens before one-row steps, decode --chunk 1 on a 4-layer 256-wide model: 0.91 -> 0.53 s for
// 200 prompts, the weights no longer copied into panels for each prompt); never int8.
bool takes_wpacked(const KernelTable* kt, LinearWeight::Format f, std::int64_t rows) {
  if (!kt) return false;
  switch (f) {
  case LinearWeight::Format::f32: return rows > 8 * kt->lanes;
  case LinearWeight::Format::f16:
  case LinearWeight::Format::bf16: return rows > f16_max_rows;
  case LinearWeight::Format::f32_tiles: return rows > 4 * kt->max_trans_rows;
  case LinearWeight::Format::int8: break;
  }
  return false;
}

// The products below return whether they applied `relu` (only the W-packed tiles do). Only the
// W-packed tiles write column blocks (linear_rows sees to the others).
bool linear_f32(Isa isa, float* y, const float* x, const float* w, const float* bias, std::int64_t rows,
                std::int64_t in, std::int64_t out, int threads, PackedWeight* keep, bool relu,
                ColumnBlocks blocks = {}) {
  const KernelTable* kt = isa_available(isa) ? table_for(isa) : nullptr;
  const Bf16DotTable* dot = bf16_dot(isa);
  if (!kt)
    linear_scalar(y, x, w, bias, rows, in, out, threads);
  else if (rows <= kt->max_trans_rows)
    linear_wtrans(*kt, y, x, w, bias, rows, in, out, threads);
  else if (!takes_wpacked(kt, LinearWeight::Format::f32, rows))
    linear_xpacked(*kt, y, x, w, bias, rows, in, out, threads);
  else {
    linear_wpacked(
        *kt, y, x,
        [kt, w, in](float* dst, std::int64_t j0, std::int64_t cols) {
          kt->to_panel(dst, 2 * kt->lanes, 2 * kt->lanes, w + j0 * in, in, static_cast<int>(cols), in);
        },
        bias, rows, in, out, threads, relu, blocks, keep, w, dot,
        [dot, w, in](unsigned short* dst, std::int64_t j0, std::int64_t cols) {
          dot->rows_panel(dst, w + j0 * in, in, static_cast<int>(cols), in);
          return true;
        });
    return relu;
  }
  return false;
}

// y's plain rows (rows, out) copied into column blocks at `to`.
void rows_to_blocks(float* to, const float* y, std::int64_t rows, std::int64_t out, ColumnBlocks blocks, int threads) {
  const std::int64_t n = (out + blocks.cols - 1) / blocks.cols;
  parallel_for(n, threads_for(double(rows) * out, threads), [&](std::int64_t b) {
    const std::int64_t j0 = b * blocks.cols, cols = std::min(blocks.cols, out - j0);
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy_n(y + r * out + j0, cols, to + b * blocks.stride + r * blocks.cols);
  });
}

bool linear_rows(Isa isa, float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                 int threads, PackedWeight* keep, bool relu, ColumnBlocks blocks = {}) {
  const LinearWeight& lw = *w.w;
  lw.run_check();
  const std::int64_t in = lw.in();
  const Bf16DotTable* dot = bf16_dot(isa);
  if (blocks.cols) {
    const KernelTable* kt = isa_available(isa) ? table_for(isa) : nullptr;
    if (!takes_wpacked(kt, lw.format(), rows) || blocks.cols % (2 * kt->lanes) != 0) {
      // Tiles that write plain rows: into scratch, then copied into the blocks.
      thread_local Buffer<float> plain;
      plain.resize(static_cast<std::size_t>(rows * w.count));
      const bool applied = linear_rows(isa, plain.data(), x, w, bias, rows, threads, keep, relu);
      rows_to_blocks(y, plain.data(), rows, w.count, blocks, threads);
      return applied;
    }
  }
  switch (lw.format()) {
  case LinearWeight::Format::f32:
    return linear_f32(isa, y, x, lw.data() + w.first * in, bias, rows, in, w.count, threads, keep, relu, blocks);
  case LinearWeight::Format::int8: {
    // int32 sums: a block's |sum of (x + 128) w| < 2^31 up to 66000 values; longer ones take int64
    const Int8Table* it = lw.block4() <= 65536 ? int8_table_for_rows(isa, rows) : nullptr;
    if (it)
      linear_int8(isa, *it, y, x, w, bias, rows, threads);
    else
      linear_int8_scalar(y, x, w, bias, rows, threads);
    return false;
  }
  case LinearWeight::Format::f16:
  case LinearWeight::Format::bf16:
  case LinearWeight::Format::f32_tiles: break;
  }
  const LinearWeight::Format f = lw.format();
  const KernelTable* kt = isa_available(isa) ? table_for(isa) : nullptr;
  if (kt && lw.in_rows()) { // 16-bit rows in place: widened as the product runs
    if (!takes_wpacked(kt, f, rows)) {
      linear_half_rows(*kt, y, x, w, bias, rows, threads);
      return false;
    }
    const auto to_panel = f == LinearWeight::Format::bf16 ? kt->bf16_to_panel : kt->f16_to_panel;
    linear_wpacked(
        *kt, y, x,
        [&lw, first = w.first, in, P = 2 * kt->lanes, to_panel](float* dst, std::int64_t j0, std::int64_t cols) {
          to_panel(dst, P, P, lw.h16_rows() + (first + j0) * in, in, static_cast<int>(cols), in);
        },
        bias, rows, in, w.count, threads, relu, blocks, nullptr, nullptr, dot,
        [dot, &lw, f, first = w.first, in](unsigned short* dst, std::int64_t j0, std::int64_t cols) {
          if (f != LinearWeight::Format::bf16) return false; // float16: widened, then rounded
          dot->bf16_rows_panel(dst, lw.h16_rows() + (first + j0) * in, in, static_cast<int>(cols), in);
          return true;
        });
    return relu;
  }
  if (!kt) {
    linear_cols_scalar(y, x, w, bias, rows, threads);
  } else if (!takes_wpacked(kt, lw.format(), rows)) {
    linear_cols(*kt, y, x, w, bias, rows, threads);
  } else {
    // Columns j0.. of row k come from the tiles in runs (a tile holds one k's 16 columns together):
    // float32 copied, float16 and bfloat16 widened.
    linear_wpacked(
        *kt, y, x,
        [&lw, f, first = w.first, in, P = 2 * kt->lanes](float* dst, std::int64_t j0, std::int64_t cols) {
          constexpr std::int64_t T = LinearWeight::tile;
          for (std::int64_t k = 0; k < in; ++k, dst += P) {
            for (std::int64_t c = 0, j = first + j0; c < cols;) {
              const std::int64_t run = std::min(cols - c, T - j % T), at = LinearWeight::tile_index(j, k, in);
              if (f == LinearWeight::Format::f16)
                f16_to_floats(dst + c, lw.h16() + at, run);
              else if (f == LinearWeight::Format::bf16)
                bf16_to_floats(dst + c, lw.h16() + at, run);
              else
                std::copy_n(lw.f32_tiles() + at, run, dst + c);
              c += run, j += run;
            }
            std::fill(dst + cols, dst + P, 0.0f);
          }
        },
        bias, rows, in, w.count, threads, relu, blocks, nullptr, nullptr, dot);
    return relu;
  }
  return false;
}

} // namespace

void linear_with(Isa isa, float* y, const float* x, const float* w, const float* bias, std::int64_t rows,
                 std::int64_t in, std::int64_t out, int threads) {
  linear_f32(isa, y, x, w, bias, rows, in, out, threads, nullptr, false);
}

void linear_with(Isa isa, float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                 int threads) {
  linear_rows(isa, y, x, w, bias, rows, threads, nullptr, false);
}

std::int64_t tile_rows() {
  const KernelTable* kt = table_for(linear_isa());
  return kt ? kt->max_trans_rows : 0;
}

void rows_to_tile_with(Isa isa, float* tile, const float* rows, std::int64_t in) {
  constexpr std::int64_t T = LinearWeight::tile;
  if (const KernelTable* kt = isa_available(isa) ? table_for(isa) : nullptr)
    return kt->to_panel(tile, T, T, rows, in, static_cast<int>(T), in);
  for (std::int64_t k = 0; k < in; ++k)
    for (std::int64_t c = 0; c < T; ++c) tile[k * T + c] = rows[c * in + k];
}

void rows_to_tile(float* tile, const float* rows, std::int64_t in) { rows_to_tile_with(linear_isa(), tile, rows, in); }

void half_rows_to_tile_with(Isa isa, std::uint16_t* tile, const std::uint16_t* rows, std::int64_t ldr, int cols,
                            std::int64_t in) {
  constexpr std::int64_t T = LinearWeight::tile;
  if (const KernelTable* kt = isa_available(isa) ? table_for(isa) : nullptr)
    return kt->half_rows_to_tile(tile, rows, ldr, cols, in);
  for (std::int64_t k = 0; k < in; ++k)
    for (std::int64_t c = 0; c < T; ++c) tile[k * T + c] = c < cols ? rows[c * ldr + k] : 0;
}

void half_rows_to_tile(std::uint16_t* tile, const std::uint16_t* rows, std::int64_t ldr, int cols, std::int64_t in) {
  half_rows_to_tile_with(linear_isa(), tile, rows, ldr, cols, in);
}

const char* int8_kernel_name(Isa isa) {
  if (amx_int8_for(isa)) {
    static const std::string name = fmt::format("avx512-vnni, amx-int8 for {} rows or more", amx_int8_rows());
    return name.c_str();
  }
  const Int8Table* it = int8_table_for(isa);
  return it ? it->name : "scalar";
}

std::int64_t amx_int8_rows() { return 32; }

void prefer_vnni_int8(bool yes) { g_vnni_int8_only = yes; }

void int8_rows_to_tiles(std::int8_t* tiles, const std::int8_t* q, std::int64_t out, std::int64_t in) {
  int8_rows_to_tiles_on(linear_isa(), tiles, q, out, in, 0, (out + LinearWeight::tile - 1) / LinearWeight::tile,
                        threads());
}

bool int8_rows_in_place(const Shape& shape, std::int64_t block) {
  const Int8Table* it = int8_table_for(linear_isa());
  return it && it->rows_in_place && LinearWeight::int8_rows_fit(shape, block);
}

bool int8_steps_in_place(std::int64_t rows) {
  const Int8Table* it = int8_table_for(linear_isa());
  return it && it->rows_in_place && rows <= it->max_rows_in_place;
}

bool f32_steps_in_place(std::int64_t rows, std::int64_t steps) { return rows <= tile_rows() && steps <= 256; }

bool keep_half_rows(HalfKind kind, const Shape& shape, bool steps_use_tiles) {
  return !steps_use_tiles || (kind == HalfKind::BF16 && linear_isa() == Isa::avx512 && shape.size() == 2 &&
                              shape[1] <= 1024 && shape[0] >= 512);
}

void linear(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows) {
  linear_with(linear_isa(), y, x, w, bias, rows, threads());
}

void linear(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows, PackedWeight* keep) {
  linear_rows(linear_isa(), y, x, w, bias, rows, threads(), keep, false);
}

void linear_blocks_with(Isa isa, float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                        ColumnBlocks blocks, PackedWeight* keep, int threads) {
  if (blocks.cols <= 0) throw Error("linear: column blocks need a positive width");
  linear_rows(isa, y, x, w, bias, rows, threads, keep, false, blocks);
}

void linear_blocks(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                   ColumnBlocks blocks, PackedWeight* keep) {
  linear_blocks_with(linear_isa(), y, x, w, bias, rows, blocks, keep, threads());
}

void linear_relu_with(Isa isa, float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                      int threads) {
  if (!linear_rows(isa, y, x, w, bias, rows, threads, nullptr, true)) relu_in_place(y, rows * w.count, threads);
}

void relu_in_place(float* y, std::int64_t n, int threads) {
  // over the threads from 2^15 values: a decoding step's few rows stay on one thread
  parallel_for(n, n >= (1 << 15) && !omp_in_parallel() ? threads : 1,
               [y](std::int64_t i) { y[i] = y[i] > 0.0f ? y[i] : 0.0f; });
}

void linear_relu(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows) {
  linear_relu_with(linear_isa(), y, x, w, bias, rows, threads());
}

void linear(float* y, const float* x, const float* w, const float* bias, std::int64_t rows, std::int64_t in,
            std::int64_t out) {
  linear_with(linear_isa(), y, x, w, bias, rows, in, out, threads());
}

} // namespace attn::blas
