// OpenBLAS's products (gemm) and the library's thread team (blas.hpp).
#include "attn/kernels/blas.hpp"

#include "kernels/openblas.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <vector>

namespace attn::blas {

namespace {

int g_threads = 0;                  // 0: not set yet
std::atomic<bool> g_started{false}; // the team of g_threads is started and pinned

// The CPUs this process may run on (its affinity mask: taskset, cgroups, an MPI launcher's binding).
int allowed_cpus() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) return std::max(1, CPU_COUNT(&allowed));
  unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

// A positive whole number from the environment (at most max_threads), else 0. OMP_NUM_THREADS may
// be a list ("4,2" for nested levels): its first entry counts.
int env_threads(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != v && n > 0 ? static_cast<int>(std::min<long>(n, max_threads)) : 0;
}

blasint as_blas(std::int64_t v) { return static_cast<blasint>(v); }

void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
           std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  openblas().sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, as_blas(m),
                   as_blas(n), as_blas(k), alpha, a, as_blas(lda), b, as_blas(ldb), beta, c, as_blas(ldc));
}

// Pins thread i of the OpenMP pool to the i-th CPU the process may use, as OMP_PROC_BIND=spread
// would, unless the user chose a binding (OMP_PROC_BIND, OMP_PLACES) or there are fewer CPUs than
// threads. Without it the scheduler here sometimes left both threads of a 2-thread run on one core
// for the first ~100 ms (mha-run's first projection took 2x as long in 2 of 10 runs).
// It starts the pool: ~2 ms per process (pe-gen --len 16: 10.0 ms unpinned, 12.3 ms pinned).
// Pinning just before the first large product was measured worse: mha-run (8, 512, 512) took
// 75-108 ms instead of 72-74 ms. The tools start it while their input preflight runs.
void pin_threads(int n) {
  if (n < 2 || std::getenv("OMP_PROC_BIND") || std::getenv("OMP_PLACES")) return;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (static_cast<int>(cpus.size()) < n) return;
#pragma omp parallel num_threads(n)
  {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<std::size_t>(omp_get_thread_num())], &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  }
}

// Below this many multiply-adds a product is not worth splitting.
constexpr double split_min_work = 1 << 21;

} // namespace

int default_threads() {
  for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"})
    if (int n = env_threads(var)) return n;
  return allowed_cpus();
}

void set_threads(int n) {
  g_threads = std::min(n > 0 ? n : default_threads(), max_threads);
  omp_set_num_threads(g_threads);
  g_started = false;
}

void start_threads() {
  if (g_threads == 0) set_threads(0);
  g_started = true;
  pin_threads(g_threads);
}

int threads() {
  if (!g_started) {
    if (omp_in_parallel()) return g_threads > 0 ? g_threads : default_threads(); // start it outside
    start_threads();
  }
  return g_threads;
}

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  const int t = threads();
  if (t == 1 || omp_in_parallel() || static_cast<double>(m) * n * k < split_min_work) {
    sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Panels of rows of C (rows of op(A)) when there are enough, else of columns (of op(B)).
  const bool by_rows = m >= 16 * t || m >= n;
  const std::int64_t extent = by_rows ? m : n;
#pragma omp parallel num_threads(t)
  {
    const std::int64_t parts = omp_get_num_threads(), p = omp_get_thread_num();
    const std::int64_t lo = extent * p / parts, hi = extent * (p + 1) / parts;
    if (hi > lo) {
      if (by_rows)
        sgemm(trans_a, trans_b, hi - lo, n, k, alpha, trans_a ? a + lo : a + lo * lda, lda, b, ldb, beta, c + lo * ldc,
              ldc);
      else
        sgemm(trans_a, trans_b, m, hi - lo, k, alpha, a, lda, trans_b ? b + lo * ldb : b + lo, ldb, beta, c + lo, ldc);
    }
  }
}

} // namespace attn::blas
