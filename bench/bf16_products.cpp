// bf16_products ROWS OUT IN: blas::linear of (ROWS, IN) x (OUT, IN)^T + bias on 2 threads, float32
// against MatmulPrecision::bf16 (bfloat16 operands, float32 sums), alternated over 7 rounds in one
// process: both rates (GFLOP/s, best of the rounds), their ratio, and the bf16 outputs' largest
// distance from the product of the rounded operands in double (float32's rounding of the sums) and
// from the unrounded one (the rounding of the operands). On a CPU with AMX-BF16, whose tiles bf16
// takes, the vdpbf16ps tiles' rate too (blas::prefer_vdpbf16ps), in the same rounds. Built by
// bench/bench_transformer.sh.
#include "attn/kernels/blas.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

using namespace attn;

namespace {

// v rounded to bfloat16 (to nearest, ties to even), as a float.
float round_bf16(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&v, &u, 4);
  return v;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: bf16_products ROWS OUT IN\n");
    return 2;
  }
  const long rows = std::atol(argv[1]), out = std::atol(argv[2]), in = std::atol(argv[3]);
  blas::set_threads(2);
  std::mt19937 g(1);
  std::normal_distribution<float> d;
  std::vector<float> x(rows * in), w(out * in), b(out), y32(rows * out), y16(rows * out);
  for (auto& v : x) v = d(g);
  for (auto& v : w) v = 0.05f * d(g);
  for (auto& v : b) v = d(g);
  const auto seconds = [&](blas::MatmulPrecision p, std::vector<float>& y) {
    blas::set_matmul_precision(p);
    const auto t0 = std::chrono::steady_clock::now();
    blas::linear(y.data(), x.data(), w.data(), b.data(), rows, in, out);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const bool amx = std::strcmp(blas::bf16_tiles(), "amx-bf16") == 0;
  std::vector<float> yv(rows * out);
  double t32 = 1e9, t16 = 1e9, tv = 1e9;
  for (int round = 0; round < 7; ++round) {
    t32 = std::min(t32, seconds(blas::MatmulPrecision::f32, y32));
    t16 = std::min(t16, seconds(blas::MatmulPrecision::bf16, y16));
    if (amx) {
      blas::prefer_vdpbf16ps(true);
      tv = std::min(tv, seconds(blas::MatmulPrecision::bf16, yv));
      blas::prefer_vdpbf16ps(false);
    }
  }
  double rounded = 0, exact = 0; // every 7th row, every 3rd column
  for (long r = 0; r < rows; r += 7)
    for (long j = 0; j < out; j += 3) {
      double s = b[j], e = b[j];
      for (long k = 0; k < in; ++k) {
        s += double(round_bf16(x[r * in + k])) * round_bf16(w[j * in + k]);
        e += double(x[r * in + k]) * w[j * in + k];
      }
      rounded = std::max(rounded, std::abs(s - y16[r * out + j]));
      exact = std::max(exact, std::abs(e - y16[r * out + j]));
    }
  const double flops = 2.0 * rows * out * in;
  std::printf(
      "(%ld, %ld) x (%ld, %ld)^T%s: float32 %.0f GFLOP/s, bf16 (%s) %.0f GFLOP/s => %.2fx; bf16 outputs within %.2g "
      "of the rounded operands' product, %.2g of the exact one",
      rows, in, out, in, blas::bf16_products_available() ? "" : " (no AVX512-BF16: bf16 computes as float32)",
      flops / t32 / 1e9, blas::bf16_tiles(), flops / t16 / 1e9, t32 / t16, rounded, exact);
  if (amx) std::printf("; vdpbf16ps tiles %.0f GFLOP/s => %.2fx", flops / tv / 1e9, t32 / tv);
  std::printf("\n");
}
