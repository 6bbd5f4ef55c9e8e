// sgemm_rate [N] [THREADS]: "GFLOP/s core": OpenBLAS sgemm on N x N matrices (default 2048), best
// of 5, through lib/'s BLAS layer, at the core the tools choose (the one that fits the CPU, unless
// OPENBLAS_CORETYPE says otherwise; chosen as lib/ loads OpenBLAS): the ceiling the benchmarks compare against.
#include "attn/kernels/blas.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 2048;
  attn::blas::set_threads(argc > 2 ? std::atoi(argv[2]) : 0);
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  double best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    attn::blas::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const std::string core = attn::blas::core_description();
  std::printf("%.1f %s\n", 2.0 * n * n * n / best / 1e9, core.substr(0, core.find(' ')).c_str());
}
