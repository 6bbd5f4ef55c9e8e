// mem_bandwidth [MIB] [THREADS]: GB/s of reading a MIB-MiB buffer (default 512, far beyond the
// caches) once, split over the threads, best of 5: the rate at which generation can stream weights.
// Four independent vector sums with the widest loads the CPU has, so loads, not add latency, set
// the pace (a plain loop measured 20% less than blas::linear itself streams).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

__attribute__((target("avx512f"))) float sum_avx512(const float* p, long n) {
  __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
  for (long i = 0; i + 64 <= n; i += 64) {
    a = _mm512_add_ps(a, _mm512_loadu_ps(p + i));
    b = _mm512_add_ps(b, _mm512_loadu_ps(p + i + 16));
    c = _mm512_add_ps(c, _mm512_loadu_ps(p + i + 32));
    d = _mm512_add_ps(d, _mm512_loadu_ps(p + i + 48));
  }
  alignas(64) float s[16];
  _mm512_store_ps(s, _mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
  float t = 0;
  for (float v : s) t += v;
  return t;
}

__attribute__((target("avx2"))) float sum_avx2(const float* p, long n) {
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  for (long i = 0; i + 32 <= n; i += 32) {
    a = _mm256_add_ps(a, _mm256_loadu_ps(p + i));
    b = _mm256_add_ps(b, _mm256_loadu_ps(p + i + 8));
    c = _mm256_add_ps(c, _mm256_loadu_ps(p + i + 16));
    d = _mm256_add_ps(d, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float s[8];
  _mm256_store_ps(s, _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

float sum_plain(const float* p, long n) {
  float s[8] = {};
  for (long i = 0; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) s[l] += p[i + l];
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

} // namespace

int main(int argc, char** argv) {
  const long n = (argc > 1 ? std::atol(argv[1]) : 512) * (1L << 20) / long(sizeof(float));
  const int threads = argc > 2 ? std::atoi(argv[2]) : omp_get_max_threads();
  auto sum = __builtin_cpu_supports("avx512f") ? sum_avx512 : __builtin_cpu_supports("avx2") ? sum_avx2 : sum_plain;
  std::vector<float> a(static_cast<std::size_t>(n), 1.0f);
  double best = 1e9, sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    double total = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
    for (long part = 0; part < threads; ++part) {
      const long lo = n * part / threads, hi = n * (part + 1) / threads;
      total += sum(a.data() + lo, hi - lo);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    sink += total;
  }
  std::printf("%.1f\n", double(n) * sizeof(float) / best / 1e9);
  return sink == 0; // keep the sums
}
