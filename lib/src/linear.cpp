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
  case Isa::avx2: return f.avx2 && f.fma;
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

// Many rows: W packed into panels of P = 2L columns, wp[(panel * in + k) * P + c], zero past `out`.
void linear_wpacked(const KernelTable& kt, float* y, const float* x, const float* w, const float* bias,
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
      for (std::int64_t c = 0; c < cols; ++c) dst[k * P + c] = w[(p * P + c) * in + k];
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
    linear_wpacked(*kt, y, x, w, bias, rows, in, out, threads);
}

void linear(float* y, const float* x, const float* w, const float* bias, std::int64_t rows, std::int64_t in,
            std::int64_t out) {
  linear_with(linear_isa(), y, x, w, bias, rows, in, out, threads());
}

} // namespace attn::blas
