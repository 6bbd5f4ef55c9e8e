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
//  - many rows: W is packed once per call into panels of 2L columns (k-major) and each tile
//    broadcasts x; blocked so an x block (MC x KC) stays in L2 and a panel slice (2L x KC) in L1;
//  - few rows (up to 8L): x is packed and W read in place, once per group of L rows, so generation
//    with beams or a batch streams each weight once per group and packs nothing; up to 8L rows this
//    beat packing W per call (1.2-1.7x at 33-128 rows with AVX-512, E = 512; past that it loses).
#include "attn/blas.hpp"
#include "attn/linear_weight.hpp"

#include "linear_table.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#if !defined(__x86_64__)
namespace attn::linear_detail { // no SIMD tiles built: every product takes the scalar path
const KernelTable* avx512_table() { return nullptr; }
const KernelTable* avx2_table() { return nullptr; }
} // namespace attn::linear_detail
#endif

namespace attn::blas {

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

bool cpu_runs(Isa isa) {
  static const CpuFeatures f = cpu_features(); // all false off x86-64; asked once, not per product
  switch (isa) {
  case Isa::avx512: return f.avx512f && f.fma;
  case Isa::avx2: return f.avx2 && f.fma && f.f16c;
  case Isa::scalar: return true;
  }
  return false;
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
// on first touch).
std::vector<float>& scratch() {
  thread_local std::vector<float> buffer;
  return buffer;
}

// The reference: the chain of linear_kernels.hpp as plain loops. Also the path for CPUs without FMA
// (std::fma is then a library call, exact but slow).
void linear_scalar(float* y, const float* x, const float* w, const float* bias, std::int64_t rows, std::int64_t in,
                   std::int64_t out, int threads) {
  const int t = threads_for(double(rows) * in * out, threads);
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < out; ++j) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < in; ++k) acc = std::fma(x[r * in + k], w[j * in + k], acc);
      y[r * out + j] = bias ? acc + bias[j] : acc;
    }
}

// The fewest rows: tiles of L columns of W, all rows in each.
void linear_wtrans(const KernelTable& kt, float* y, const float* x, const float* w, const float* bias,
                   std::int64_t rows, std::int64_t in, std::int64_t out, int threads) {
  const std::int64_t L = kt.lanes, tiles = (out + L - 1) / L;
  const int t = threads_for(double(rows) * in * out, threads);
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
  for (std::int64_t tile = 0; tile < tiles; ++tile) {
    const std::int64_t j0 = tile * L;
    // prefetch the next tile this thread takes (static schedule: the next index), if any
    const float* next = tile + 1 < tiles ? w + (j0 + L) * in : nullptr;
    kt.wtrans(static_cast<int>(rows), x, in, w + j0 * in, in, in, y + j0, out, static_cast<int>(std::min(L, out - j0)),
              bias ? bias + j0 : nullptr, next);
  }
}

// Few rows: groups of L rows packed k-major, W read in place in tiles of max_cols columns.
void linear_xpacked(const KernelTable& kt, float* y, const float* x, const float* w, const float* bias,
                    std::int64_t rows, std::int64_t in, std::int64_t out, int threads) {
  const std::int64_t L = kt.lanes, groups = (rows + L - 1) / L, C = kt.max_cols;
  std::vector<float>& xp = scratch();
  xp.assign(static_cast<std::size_t>(groups * in * L), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < in; ++k) xp[static_cast<std::size_t>(((r / L) * in + k) * L + r % L)] = x[r * in + k];
  const std::int64_t col_tiles = (out + C - 1) / C, tasks = groups * col_tiles;
  const int t = threads_for(double(rows) * in * out, threads);
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const std::int64_t g = task / col_tiles, j0 = (task % col_tiles) * C;
    const int cols = static_cast<int>(std::min(C, out - j0)), n = static_cast<int>(std::min(L, rows - g * L));
    kt.xpacked(cols, xp.data() + g * in * L, w + j0 * in, in, in, y + g * L * out + j0, out, n,
               bias ? bias + j0 : nullptr);
  }
}

// Many rows: W packed into panels of P = 2L columns, wp[(panel * in + k) * P + c], zero past `out`;
// weight(j, k) gives W'[j][k] (float32 read in place, or an int8 or float16 value widened).
template <class Weight>
void linear_wpacked(const KernelTable& kt, float* y, const float* x, const Weight& weight, const float* bias,
                    std::int64_t rows, std::int64_t in, std::int64_t out, int threads) {
  const std::int64_t P = 2 * kt.lanes, panels = (out + P - 1) / P;
  const int t = threads_for(double(rows) * in * out, threads);
  std::vector<float>& wp = scratch();
  wp.resize(static_cast<std::size_t>(panels * in * P));
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
  for (std::int64_t p = 0; p < panels; ++p) {
    float* dst = wp.data() + p * in * P;
    const std::int64_t cols = std::min(P, out - p * P);
    for (std::int64_t k = 0; k < in; ++k) {
      for (std::int64_t c = 0; c < cols; ++c) dst[k * P + c] = weight(p * P + c, k);
      for (std::int64_t c = cols; c < P; ++c) dst[k * P + c] = 0.0f;
    }
  }
  // Blocks: MC rows of x by KC of k (in L2), a panel's KC slice (in L1) reused by MC / max_rows tiles.
  const std::int64_t R = kt.max_rows, MC = 8 * R, KC = 256;
  const std::int64_t row_blocks = (rows + MC - 1) / MC;
  // Enough tasks for the threads: split the panels too when there are few row blocks.
  const std::int64_t panel_groups = std::min(panels, std::max<std::int64_t>(1, (2 * t + row_blocks - 1) / row_blocks));
  const std::int64_t tasks = row_blocks * panel_groups;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const std::int64_t rb = task / panel_groups, pg = task % panel_groups;
    const std::int64_t r0 = rb * MC, r1 = std::min(rows, r0 + MC);
    const std::int64_t p0 = panels * pg / panel_groups, p1 = panels * (pg + 1) / panel_groups;
    for (std::int64_t k0 = 0; k0 < in; k0 += KC) {
      const std::int64_t kc = std::min(KC, in - k0);
      const bool last = k0 + kc == in;
      for (std::int64_t p = p0; p < p1; ++p) {
        const int cols = static_cast<int>(std::min(P, out - p * P));
        const float* slice = wp.data() + (p * in + k0) * P;
        for (std::int64_t r = r0; r < r1; r += R)
          kt.wpacked(static_cast<int>(std::min(R, r1 - r)), x + r * in + k0, in, slice, kc, y + r * out + p * P, out,
                     cols, k0 > 0, last && bias ? bias + p * P : nullptr);
      }
    }
  }
}

// An int8 or float16 weight, up to quant_max_rows rows: the column tiles of linear_weight.hpp read
// in place. Tasks are groups of consecutive tiles (a range that starts inside a tile gives that
// tile its own task), each run by groups of max_q_rows rows (the later groups find it in cache).
void linear_quant(const KernelTable& kt, float* y, const float* x, const WeightRows& w, const float* bias,
                  std::int64_t rows, int threads) {
  const LinearWeight& lw = *w.w;
  const std::int64_t T = LinearWeight::tile, in = lw.in(), out = w.count, R = kt.max_q_rows;
  const std::int64_t end = w.first + w.count, t0 = w.first / T, t1 = (end + T - 1) / T;
  const bool head = w.first % T != 0;                                     // tile t0 starts inside: a task of its own
  const std::int64_t body = head ? t0 + 1 : t0;                           // tiles [body, t1) from lane 0
  const std::int64_t G = kt.q_tiles(static_cast<int>(std::min(R, rows))); // tiles per task
  const std::int64_t tasks = (head ? 1 : 0) + (t1 - body + G - 1) / G;
  const bool int8 = lw.format() == LinearWeight::Format::int8;
  const int t = threads_for(double(rows) * in * out, threads);
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const bool first_tile = head && task == 0;
    const std::int64_t tile = first_tile ? t0 : body + (task - (head ? 1 : 0)) * G;
    const std::int64_t ntiles = first_tile ? 1 : std::min(G, t1 - tile);
    const std::int64_t lo = first_tile ? w.first - t0 * T : 0;
    const std::int64_t last_end = std::min(end, (tile + ntiles) * T) - (tile + ntiles - 1) * T; // lanes of the last
    for (std::int64_t r = 0; r < rows; r += R) {
      const int n = static_cast<int>(std::min(R, rows - r));
      const std::int64_t per = kt.q_tiles(n);
      for (std::int64_t i = 0; i < ntiles; i += per) {
        const int m = static_cast<int>(std::min(per, ntiles - i));
        const std::int64_t at = tile + i, c0 = at * T + lo - w.first; // the first column in y
        const int cols = static_cast<int>(i + m == ntiles ? last_end - lo : T);
        float* yr = y + r * out + c0;
        const float* b = bias ? bias + c0 : nullptr;
        if (int8)
          kt.int8(n, m, x + r * in, in, lw.q8() + at * in * T + lo, lw.scales() + at * lw.blocks() * T + lo, in,
                  lw.block(), yr, out, cols, b);
        else
          kt.f16(n, m, x + r * in, in, lw.h16() + at * in * T + lo, nullptr, in, in, yr, out, cols, b);
      }
    }
  }
}

// The reference for int8 and float16 weights: linear_scalar's chain over W'.
void linear_quant_scalar(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                         int threads) {
  const std::int64_t in = w.in(), out = w.count;
  const int t = threads_for(double(rows) * in * out, threads);
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < out; ++j) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < in; ++k) acc = std::fma(x[r * in + k], w.w->at(w.first + j, k), acc);
      y[r * out + j] = bias ? acc + bias[j] : acc;
    }
}

// A float16 value as float, exactly (half.hpp's from_half, without the double): the exponent field
// moved into float's place and rebiased by a multiplication, which also makes subnormals normal.
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16, em = h & 0x7fffu;
  std::uint32_t bits;
  if (em >= 0x7c00u) {
    bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13); // infinity, NaN
  } else {
    float f;
    const std::uint32_t shifted = em << 13;
    std::memcpy(&f, &shifted, 4);
    f *= 0x1p112f; // 2^(127 - 15)
    std::memcpy(&bits, &f, 4);
    bits |= sign;
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// Rows past this many take the W-packed tiles, the weight widened into the panels as they are packed.
constexpr std::int64_t quant_max_rows = 128;

} // namespace

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

void linear_with(Isa isa, float* y, const float* x, const float* w, const float* bias, std::int64_t rows,
                 std::int64_t in, std::int64_t out, int threads) {
  const KernelTable* kt = isa_available(isa) ? table_for(isa) : nullptr;
  if (!kt)
    linear_scalar(y, x, w, bias, rows, in, out, threads);
  else if (rows <= kt->max_trans_rows)
    linear_wtrans(*kt, y, x, w, bias, rows, in, out, threads);
  else if (rows <= 8 * kt->lanes) // measured: up to 1.7x the W-packed tile's rate, which packs W per call
    linear_xpacked(*kt, y, x, w, bias, rows, in, out, threads);
  else
    linear_wpacked(
        *kt, y, x, [w, in](std::int64_t j, std::int64_t k) { return w[j * in + k]; }, bias, rows, in, out, threads);
}

void linear_with(Isa isa, float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                 int threads) {
  const LinearWeight& lw = *w.w;
  const std::int64_t in = lw.in(), T = LinearWeight::tile;
  if (!lw.quantized()) return linear_with(isa, y, x, lw.data() + w.first * in, bias, rows, in, w.count, threads);
  const KernelTable* kt = isa_available(isa) ? table_for(isa) : nullptr;
  if (!kt)
    linear_quant_scalar(y, x, w, bias, rows, threads);
  else if (rows <= quant_max_rows)
    linear_quant(*kt, y, x, w, bias, rows, threads);
  else if (lw.format() == LinearWeight::Format::int8) {
    const std::int8_t* q = lw.q8();
    const float* s = lw.scales();
    const std::int64_t first = w.first, block = lw.block(), blocks = lw.blocks();
    linear_wpacked(
        *kt, y, x,
        [=](std::int64_t j, std::int64_t k) {
          const std::int64_t r = first + j, at = (r / T) * T;
          return static_cast<float>(q[(at * in) + k * T + r % T]) * s[at * blocks + (k / block) * T + r % T];
        },
        bias, rows, in, w.count, threads);
  } else {
    const std::uint16_t* h = lw.h16();
    const std::int64_t first = w.first;
    linear_wpacked(
        *kt, y, x,
        [=](std::int64_t j, std::int64_t k) {
          const std::int64_t r = first + j;
          return half_to_float(h[(r / T) * T * in + k * T + r % T]);
        },
        bias, rows, in, w.count, threads);
  }
}

void linear(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows) {
  linear_with(linear_isa(), y, x, w, bias, rows, threads());
}

void linear(float* y, const float* x, const float* w, const float* bias, std::int64_t rows, std::int64_t in,
            std::int64_t out) {
  linear_with(linear_isa(), y, x, w, bias, rows, in, out, threads());
}

} // namespace attn::blas
