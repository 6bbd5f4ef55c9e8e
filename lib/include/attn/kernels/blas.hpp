// Row-major matrix products over OpenBLAS, and the one thread setting of the library.
//
// There is one thread pool: OpenMP's. OpenBLAS always runs single-threaded; a large product is
// split into row (or column) panels, one per OpenMP thread. Two pools on the same cores (OpenBLAS's
// pthreads spinning while OpenMP threads start, and the reverse) made alternating sgemm and
// attention phases up to 2x slower, measured on mha-run.
#pragma once

#include "attn/kernels/linear_weight.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace attn::blas {

// --- OpenBLAS's core (src/kernels/blas_core.cpp) ---
struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512 = false;                       // F, BW, DQ, VL and CD: what OpenBLAS's SkylakeX kernels use
  bool avx512f = false;                      // F alone: what linear's AVX-512 tiles use
  bool f16c = false;                         // float16 conversions: what linear's AVX2 tiles need for float16 weights
  bool avx512bw = false, avx512vnni = false; // int8 dot products: linear's int8 product
  bool avx512bf16 = false;                   // bfloat16 pair products: linear's MatmulPrecision::bf16
  bool amx_bf16 = false;                     // AMX-BF16's tile products (and AMX-TILE; the OS's leave: amx_granted)
  bool amx_int8 = false;                     // AMX-INT8's (and AMX-TILE): linear's int8 product of many rows
};
// What this CPU (and its OS) runs; also what linear's instruction sets are chosen from.
CpuFeatures cpu_features();
// Whether the OS lets this process use the AMX tiles, asked for on the first call (Linux's
// arch_prctl ARCH_REQ_XCOMP_PERM): only by a run that asks for bfloat16 products, or computes an int8
// product of many rows, on a CPU with AMX.
bool amx_granted();
// The core to ask OpenBLAS for, or "" to keep the one it picked: SkylakeX (AVX-512) or Haswell
// (AVX2 + FMA) when its pick is an older core than the CPU can run; never when the user set
// OPENBLAS_CORETYPE (user_set).
std::string better_core(const CpuFeatures& cpu, std::string_view openblas_core, bool user_set);
// OpenBLAS is loaded by the first call that needs it (gemm, core_description), not with the
// program: most runs never call it. Loading it switches it to better_core() when that names one
// (OPENBLAS_CORETYPE set while it picks again) and makes it single-threaded; a library that cannot
// be loaded is an Error.
bool openblas_loaded();
// Loads OpenBLAS now (an Error when it cannot be): for code about to call gemm inside a parallel
// region, from which an exception cannot leave.
void load_openblas();
// The core in use and why, for --verbose and --version: "SkylakeX (chosen for this CPU; OpenBLAS
// picked Prescott)", "Cooperlake (OpenBLAS's pick)", "Haswell (OPENBLAS_CORETYPE=Haswell)".
std::string core_description();

// At most this many threads (more is refused by --threads and capped from the environment): an
// OpenMP team of 100000 threads crashed inside the runtime.
constexpr int max_threads = 1024;
// Threads for the library's parallel loops and products; n <= 0 means default_threads(). The
// OpenMP team starts (and is pinned, see blas.cpp) with start_threads(), or else with the first
// threads() called outside a parallel region.
void set_threads(int n);
// Starts the team now: a tool calls it while it waits anyway (for the input preflight's child,
// h5guard.hpp), since starting it costs a few ms on a virtual machine whose other CPU is idle.
void start_threads();
// OMP_NUM_THREADS (its first entry) when set, else OPENBLAS_NUM_THREADS (OpenBLAS itself always
// runs on one thread inside ours), else the CPUs this process may run on.
int default_threads();
int threads();

// C (m, n) = alpha * op(A) op(B) + beta * C, all row-major with leading dimensions lda, ldb, ldc.
// A is (m, k), or (k, m) with trans_a; B is (k, n), or (n, k) with trans_b. Split over the threads
// when large and not already inside a parallel region.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// y (rows, out) = x (rows, in) W^T + bias, with W (out, in) as in PyTorch's nn.Linear; bias (out)
// may be null. Not OpenBLAS (src/kernels/linear.cpp): every element is the chain acc = fma(x[r][k], W[j][k],
// acc) over k = 0, 1, ..., in - 1, then + bias[j], so a row's bits are the same whatever the number
// of rows in the call, its place among them, the threads, or the instruction set below.
void linear(float* y, const float* x, const float* w, const float* bias, std::int64_t rows, std::int64_t in,
            std::int64_t out);

// The instruction sets linear has tiles for; scalar is the plain reference loop (std::fma).
enum class Isa { scalar, avx2, avx512 };
const char* isa_name(Isa isa);
bool isa_available(Isa isa); // built in and run by this CPU
// The widest available; ATTN_LINEAR_ISA=scalar|avx2 in the environment narrows it (same bits).
Isa linear_isa();
// linear on the given instruction set (scalar when unavailable) and number of threads.
void linear_with(Isa isa, float* y, const float* x, const float* w, const float* bias, std::int64_t rows,
                 std::int64_t in, std::int64_t out, int threads);

// y (rows, w.count) = x (rows, in) W'^T + bias for rows [w.first, w.first + w.count) of a weight in
// any format (linear_weight.hpp):
//  - float32 and float16: the chain above over W's values (float16 widened exactly), so a float16
//    weight gives the bits of the float32 file of its values; float16 is read in place up to 128
//    rows of x (2 bytes per weight), widened into packed panels past that (16-bit rows held in
//    place, LinearWeight::half_rows_in_place: transposed and widened in registers, 64 values of 16
//    rows a step, up to 128 rows); float32 in column tiles is read in place up to tile_rows()
//    rows, copied into packed panels past that;
//  - int8 (Q with scales S per block of B along k): the int8 product. Each row of x is quantized
//    on the fly in the weight's blocks (as llama.cpp's Q8_0 quantizes activations for Q8_0
//    weights, B = 32 by default): per block b, a_b = max_{k in b} |x_k|, x_k ~ xs_b q_k with
//    xs_b = a_b / 127 and q_k = x_k * (127 / a_b) rounded to nearest even (in [-127, 127]). Then,
//    per output j, with exact integer dot products over each block:  acc = 0;
//    acc = fma(float(sum_{k in b} q_k Q[j][k]) * xs_b, S[j][b], acc) for b = 0, 1, ...;
//    y_j = acc (+ bias_j). Computed with the CPU's int8 dot products (AVX-512 VNNI, or AVX2's
//    pairwise products), whose integer sums are exact, so the bits are the same on every
//    instruction set, thread count, number of rows and layout (tiles or rows in place). A row
//    with a value that is not finite takes the float chain over W' instead. Its error against
//    float32 is the weights' plus that of quantizing x (half a step of a_b / 127 per value: one
//    outlier costs only its block).
void linear(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows);
void linear_with(Isa isa, float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                 int threads);

// A float32 weight's rows as linear packs them for many rows of x (the panels its W-packed tiles
// read), kept by a caller that multiplies by the same rows again and again (mha-run's groups of
// items), so that they are packed once instead of on every call. linear(..., keep) packs into it
// when it holds nothing or other rows (another address, shape or instruction set) and reuses it
// otherwise; the bits are the same as without. The weight's values must not change while kept.
// Other formats, and products of few rows, do not use it.
struct PackedWeight {
  Buffer<float> panels;
  const float* source = nullptr; // the rows packed, their shape, and the tiles' table
  std::int64_t in = 0, out = 0;
  const void* kernels = nullptr;
};
void linear(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows, PackedWeight* keep);

// Where linear_blocks writes y: in blocks of `cols` columns, each block's rows together, block b
// at y + b * stride: output j of row r at y + (j / cols) * stride + r * cols + j % cols. Attention's
// heads each as one (rows, dh) matrix: their rows are then one after another, not a projection's
// width apart.
struct ColumnBlocks {
  std::int64_t cols = 0, stride = 0;
};
// linear with y in column blocks: the same bits. The W-packed tiles write the blocks directly when
// `cols` is a multiple of their panel (2L columns); other products are copied into them.
void linear_blocks(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                   ColumnBlocks blocks, PackedWeight* keep = nullptr);
void linear_blocks_with(Isa isa, float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                        ColumnBlocks blocks, PackedWeight* keep, int threads);

// linear, then y = y > 0 ? y : 0 (ReLU) for each output: applied by the W-packed tiles as they store
// y (no pass of its own over y), else in a pass after the product; the same bits either way.
void linear_relu(float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows);
void linear_relu_with(Isa isa, float* y, const float* x, const WeightRows& w, const float* bias, std::int64_t rows,
                      int threads);
// y = y > 0 ? y : 0 for n values, over `threads` from 2^15 values (linear_relu's pass, and
// activate's ReLU).
void relu_in_place(float* y, std::int64_t n, int threads);

// Rows of x up to which linear reads a float32 weight in column tiles in place (at the memory's
// rate), on linear_isa(); past them it packs the weight per call, as for float32 rows.
std::int64_t tile_rows();
// tile[k * 16 + c] = rows[c * in + k], c < 16, k < in: 16 rows of a float32 weight as their column
// tile (LinearWeight::to_tiles), by transposes in registers on linear_isa() (or `isa`).
void rows_to_tile(float* tile, const float* rows, std::int64_t in);
void rows_to_tile_with(Isa isa, float* tile, const float* rows, std::int64_t in);
// tile[k * 16 + c] = rows[c * ldr + k] for c < cols (<= 16; 0 for the others), k < in: 16-bit
// rows (their bits) as their column tile (LinearWeight::half_rows), the same way.
void half_rows_to_tile(std::uint16_t* tile, const std::uint16_t* rows, std::int64_t ldr, int cols, std::int64_t in);
void half_rows_to_tile_with(Isa isa, std::uint16_t* tile, const std::uint16_t* rows, std::int64_t ldr, int cols,
                            std::int64_t in);
// The int8 product's kernel on `isa` ("avx512-vnni", "avx2", "scalar"; on a CPU with AMX-INT8,
// "avx512-vnni, amx-int8 for 32 rows or more"), for --verbose.
const char* int8_kernel_name(Isa isa);
// Rows from which the int8 product runs on AMX-INT8's tiles where the CPU (and the OS: amx_granted)
// has them (32: at 16 they ran as fast as VNNI's, at 64 1.15x): the same bits as VNNI's (exact
// integer sums, the same float steps).
std::int64_t amx_int8_rows();
// Tests and benches: VNNI's tiles even where AMX-INT8's are there (false: the best again).
void prefer_vnni_int8(bool yes);
// Whether linear_isa()'s int8 product reads an int8 weight of this shape and block in place, as
// rows (LinearWeight::int8_rows): steps of up to 4 rows at the memory's rate, more rows laid out in
// tiles by each call. Else a loader lays the weight out in tiles once (LinearWeight::int8).
bool int8_rows_in_place(const Shape& shape, std::int64_t block);
// Whether steps of `rows` rows read int8 weights in place as rows (where int8_rows_in_place) at
// about the tiles' rate, so that a generation leaves them where they are mapped rather than laying
// them out first: rows up to the kernel's max_rows_in_place (4 with VNNI). Measured on a Xeon with
// AMX (2 threads; the bench's int8 LLaMA-shaped model, 16 + 128 tokens, alternated): the 128
// steps 0.55-0.60 s against 0.53-0.55 s in tiles, the whole process 0.65-0.72 s against 0.94-1.01
// s (the layout's pass and its fresh pages gone).
bool int8_steps_in_place(std::int64_t rows);
// Whether `steps` generation steps of `rows` rows read a float32 weight borrowed from a mapped file
// where it is (the transposing tile over its rows) rather than laid out in column tiles first: for
// steps the transposing tile takes (tile_rows) up to 256 of them. Laying 400 MB out writes as much
// fresh memory, 0.15 s when the process reuses its own and 0.9 s on a guest that has handed its
// free memory back to the host (a Xeon with AMX, the bench's float32 LLaMA-shaped model); the rows
// then stream at 0.8-0.9x the tiles' rate, 3 ms more a step. Its 16 + 128 tokens: 2.15-2.22 s in
// place against 2.55-2.65 s tiled after another program ran, 1.84-1.91 s tiled right after a tiled
// run; the same tokens. No second copy of the weights either.
bool f32_steps_in_place(std::int64_t rows, std::int64_t steps);
// Whether a loader leaves a 16-bit weight of this kind and shape (out, in) in rows where it is
// mapped (LinearWeight::half_rows_in_place) rather than in column tiles: always when the run's
// steps are not to use tiles (`steps_use_tiles`, WeightGroup::set_linear_tiles); else where
// generation's steps (batch 1) read the rows near the tiles' rate: bfloat16 rows of at most 1024
// values and at least 512 outputs, with AVX-512. Measured on a Zen 4, 2 threads, from memory, against the tiles in one
// process: bf16 (2048, 768) 0.92x, (32000, 768) 0.99x, but (256, 768) 0.68x, (768, 2048) 0.51x;
// float16 (2048, 768) 0.83x (its widening costs more). The bench's bf16 LLaMA-shaped model: its
// 128 tokens as fast either way, its whole process 1.17-1.26 -> 0.87-1.03 s.
bool keep_half_rows(HalfKind kind, const Shape& shape, bool steps_use_tiles);
// The precision of linear's products over many rows (a prompt's, an encoder's), for the whole run.
// f32, the default: every output the float32 chain above. bf16 (opt-in, a tool's --matmul-precision):
// on a CPU with AVX512-BF16, products of more rows than a generation step's round x and W to
// bfloat16 (to nearest, even) and add the pairs' products into float32 sums (AMX-BF16's tdpbf16ps
// where the CPU has it, else vdpbf16ps; both take denormal inputs and outputs as 0); int8 weights
// and steps of few rows stay as they are. Products of (4096, 512..2048) rows: 1.8-1.9x the float32
// tiles on a Zen 4 (vdpbf16ps), 2.3-3.1x on a Xeon with AMX (vdpbf16ps there: 0.64x). Elsewhere bf16 computes as f32
// (as PyTorch's "medium" float32 matmul precision does where it has no bfloat16 units).
enum class MatmulPrecision { f32, bf16 };
void set_matmul_precision(MatmulPrecision p);
MatmulPrecision matmul_precision();
// Whether this CPU (and build) computes MatmulPrecision::bf16 in bfloat16.
bool bf16_products_available();
// The tiles it computes them on: "amx-bf16" (AMX-BF16, where the CPU and OS have it), else
// "avx512-bf16" (vdpbf16ps); "" where bf16_products_available() is false.
const char* bf16_tiles();
// Tests and benches: the vdpbf16ps tiles even where AMX-BF16's are there (false: the best again).
void prefer_vdpbf16ps(bool yes);

// The int8 values q (out, in), in a multiple of 4, laid out in column tiles (linear_weight.hpp,
// blocks that divide `in` into multiples of 4 values: no padding) at `tiles`, by transposes in
// registers on the BLAS threads (LinearWeight::int8).
void int8_rows_to_tiles(std::int8_t* tiles, const std::int8_t* q, std::int64_t out, std::int64_t in);

} // namespace attn::blas
