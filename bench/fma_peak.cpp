// fma_peak [THREADS]: "GFLOP/s ISA": the rate of the CPU's fused multiply-adds alone on THREADS
// threads (default all), best of 5: 16 independent chains of the widest FMA the CPU has, no loads,
// so nothing but the FMA units sets the pace. What no product can beat; OpenBLAS's sgemm (the
// benches' "sgemm ceiling") reaches ~82% of it on 2 threads of a Zen 4, blas::linear ~92%.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr long steps = 20'000'000; // per thread and run: ~0.1 s at 100 GFLOP/s a core
constexpr int chains = 16;         // enough to cover the FMA latency on both FMA units

__attribute__((target("avx512f"))) float chains_avx512() {
  __m512 a[chains];
  for (int i = 0; i < chains; ++i) a[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.9999f), y = _mm512_set1_ps(0.0001f);
  for (long s = 0; s < steps; ++s) {
#pragma GCC unroll 16
    for (int i = 0; i < chains; ++i) a[i] = _mm512_fmadd_ps(a[i], x, y);
  }
  alignas(64) float v[16];
  __m512 t = a[0];
  for (int i = 1; i < chains; ++i) t = _mm512_add_ps(t, a[i]);
  _mm512_store_ps(v, t);
  float sum = 0;
  for (float e : v) sum += e;
  return sum;
}

__attribute__((target("avx2,fma"))) float chains_avx2() {
  __m256 a[chains];
  for (int i = 0; i < chains; ++i) a[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.9999f), y = _mm256_set1_ps(0.0001f);
  for (long s = 0; s < steps; ++s) {
#pragma GCC unroll 16
    for (int i = 0; i < chains; ++i) a[i] = _mm256_fmadd_ps(a[i], x, y);
  }
  alignas(32) float v[8];
  __m256 t = a[0];
  for (int i = 1; i < chains; ++i) t = _mm256_add_ps(t, a[i]);
  _mm256_store_ps(v, t);
  float sum = 0;
  for (float e : v) sum += e;
  return sum;
}

} // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : omp_get_max_threads();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    std::printf("0 none\n"); // no FMA instructions: no peak to measure
    return 0;
  }
  const int lanes = avx512 ? 16 : 8;
  double best = 1e9, sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    double total = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
    for (int part = 0; part < threads; ++part) total += avx512 ? chains_avx512() : chains_avx2();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    sink += total;
  }
  const double flops = 2.0 * lanes * chains * double(steps) * threads;
  std::printf("%.1f %s\n", flops / best / 1e9, avx512 ? "avx512" : "avx2");
  return sink == 0; // keep the sums
}
