// Unit tests of lib/src/kernels/: gemm, the linear kernel on every format and instruction set, the
// thread team.
#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/weights/quantize.hpp"

#include "helpers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <string>
#include <string_view>
#include <vector>

using namespace attn;

namespace {

std::vector<float> random_matrix(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// The algorithmic reference: C = alpha op(A) op(B) + beta C in double, row-major.
void gemm_naive(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                float beta, float* c, int ldc) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p)
        s += double(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = static_cast<float>(alpha * s + beta * c[i * ldc + j]);
    }
}

double max_rel_err(const std::vector<float>& x, const std::vector<float>& ref) {
  double m = 0, scale = 1e-6;
  for (float r : ref) scale = std::max(scale, double(std::abs(r)));
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(double(x[i]) - ref[i]) / scale);
  return m;
}

} // namespace

TEST_CASE("loading OpenBLAS stops its own thread pool, which the products never use") {
  // The pthreads build of OpenBLAS (Debian's default) starts the pool when it loads and says
  // whether it runs in blas_server_avail; a serial build has neither.
  blas::set_threads(2);
  std::vector<float> a(64 * 64, 1.0f), c(64 * 64);
  blas::gemm(false, false, 64, 64, 64, 1.0f, a.data(), 64, a.data(), 64, 0.0f, c.data(), 64); // loads it
  CHECK(c[0] == 64.0f);
  CHECK(blas::openblas_loaded());
  void* handle = dlopen(ATTN_OPENBLAS_SONAME, RTLD_LAZY | RTLD_NOLOAD);
  REQUIRE(handle != nullptr);
  const auto* running = static_cast<const int*>(dlsym(handle, "blas_server_avail"));
  REQUIRE(running != nullptr);
  CHECK(*running == 0);
  blas::gemm(false, false, 64, 64, 64, 1.0f, a.data(), 64, a.data(), 64, 0.0f, c.data(), 64);
  CHECK(*running == 0); // and a product does not start it again
  dlclose(handle);
}

TEST_CASE("set_threads leaves the team to start_threads or the first threads(), which pins it a CPU a thread") {
  cpu_set_t all;
  REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) cpus.push_back(c);
  const bool pins = cpus.size() >= 2 && !std::getenv("OMP_PROC_BIND") && !std::getenv("OMP_PLACES");
  // the CPUs thread i of a 2-thread team may run on (an earlier test may have pinned the team)
  const auto team_cpus = [] {
    std::vector<cpu_set_t> sets(2);
#pragma omp parallel num_threads(2)
    pthread_getaffinity_np(pthread_self(), sizeof(cpu_set_t), &sets[static_cast<std::size_t>(omp_get_thread_num())]);
    return sets;
  };
  for (int started_by : {0, 1}) {
    REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof all, &all) == 0);
    blas::set_threads(2);
    cpu_set_t main_cpus;
    REQUIRE(pthread_getaffinity_np(pthread_self(), sizeof main_cpus, &main_cpus) == 0);
    CHECK(CPU_EQUAL(&main_cpus, &all)); // not pinned yet
    if (started_by == 0) {
      CHECK(blas::threads() == 2);
    } else {
      blas::start_threads();
      CHECK(blas::threads() == 2);
    }
    const std::vector<cpu_set_t> sets = team_cpus();
    if (pins) {
      for (int i = 0; i < 2; ++i) {
        CHECK(CPU_COUNT(&sets[static_cast<std::size_t>(i)]) == 1);
        CHECK(CPU_ISSET(cpus[static_cast<std::size_t>(i)], &sets[static_cast<std::size_t>(i)]));
      }
    } else {
      CHECK(CPU_EQUAL(&sets[0], &all)); // one CPU, or the user's binding: left alone
    }
  }
  REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof all, &all) == 0);
}

TEST_CASE("gemm matches the naive product for every transpose and odd sizes") {
  for (int threads : {1, 2}) {
    blas::set_threads(threads);
    CHECK(blas::threads() == threads);
    struct Size {
      int m, n, k;
    };
    // the last three are large enough to be split over the threads, by rows and by columns
    for (auto [m, n, k] : {Size{1, 1, 1}, Size{7, 5, 3}, Size{63, 130, 17}, Size{130, 7, 64}, Size{301, 150, 97},
                           Size{3, 1500, 600}, Size{20, 903, 211}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          auto a = random_matrix(std::size_t(m * k), 1), b = random_matrix(std::size_t(k * n), 2);
          auto c = random_matrix(std::size_t(m * n), 3), ref = c;
          const int lda = ta ? m : k, ldb = tb ? k : n;
          blas::gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, c.data(), n);
          gemm_naive(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, ref.data(), n);
          INFO("m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb);
          CHECK(max_rel_err(c, ref) < 1e-5);
        }
  }
}

TEST_CASE("linear is x W^T + b as nn.Linear, with and without bias") {
  // up to 8 vectors' lanes of rows take the x-packed tile, more the W-packed one
  int rows = 0, in = 0, out = 0;
  SUBCASE("W-packed") { rows = 170, in = 300, out = 37; }
  SUBCASE("x-packed, one row") { rows = 1, in = 7, out = 3; }
  SUBCASE("x-packed, two rows, split over threads") { rows = 2, in = 300, out = 500; }
  auto x = random_matrix(rows * in, 4), w = random_matrix(out * in, 5), b = random_matrix(out, 6);
  std::vector<float> y(rows * out), y0(rows * out, 123.0f);
  blas::linear(y.data(), x.data(), w.data(), b.data(), rows, in, out);
  blas::linear(y0.data(), x.data(), w.data(), nullptr, rows, in, out);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int i = 0; i < in; ++i) s += double(x[r * in + i]) * w[o * in + i];
      CHECK(y0[r * out + o] == doctest::Approx(s).epsilon(1e-5).scale(10));
      CHECK(y[r * out + o] == doctest::Approx(s + b[o]).epsilon(1e-5).scale(10));
    }
}

namespace {

// The chain linear promises, written out: acc = fma(x, w, acc) over k in order, then + bias.
std::vector<float> linear_chain(const std::vector<float>& x, const std::vector<float>& w, const float* bias, int rows,
                                int in, int out) {
  std::vector<float> y(std::size_t(rows * out));
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < out; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < in; ++k) acc = std::fma(x[std::size_t(r * in + k)], w[std::size_t(j * in + k)], acc);
      y[std::size_t(r * out + j)] = bias ? acc + bias[j] : acc;
    }
  return y;
}

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

} // namespace

TEST_CASE("linear: every instruction set computes the same FMA chain, to the bit") {
  // Sizes that exercise every tile, partial tiles and panels (out not a multiple of 12 or 32), k
  // block boundaries (KC = 512; the last block 8 or 18 long: x packed by L values of k, then one
  // by one), row groups of fewer than 12 at a block's end, and enough work for the threads.
  struct Size {
    int rows, in, out;
  };
  for (auto [rows, in, out] :
       {Size{1, 1, 1}, Size{3, 5, 7}, Size{17, 33, 45}, Size{32, 64, 100}, Size{33, 257, 31}, Size{97, 300, 70},
        Size{200, 520, 130}, Size{150, 530, 70}, Size{5, 700, 1030}, Size{200, 1024, 40}, Size{131, 2048, 21}})
    for (bool with_bias : {false, true}) {
      auto x = random_matrix(std::size_t(rows * in), 7), w = random_matrix(std::size_t(out * in), 8),
           b = random_matrix(std::size_t(out), 9);
      const float* bias = with_bias ? b.data() : nullptr;
      const auto want = linear_chain(x, w, bias, rows, in, out);
      for (blas::Isa isa : {blas::Isa::scalar, blas::Isa::avx2, blas::Isa::avx512}) {
        if (!blas::isa_available(isa)) continue; // this CPU cannot run it; the others still must agree
        for (int threads : {1, 2, 3}) {
          std::vector<float> y(want.size(), -1.0f);
          blas::linear_with(isa, y.data(), x.data(), w.data(), bias, rows, in, out, threads);
          INFO(blas::isa_name(isa) << " rows=" << rows << " in=" << in << " out=" << out << " threads=" << threads
                                   << " bias=" << with_bias);
          CHECK(same_bits(y.data(), want.data(), want.size()));
        }
      }
    }
}

TEST_CASE("linear: a row has the same bits whatever rows share the call and wherever it sits") {
  // What --chunk, --threads and a batch split over processes rely on: the rows of a 160-row call,
  // computed again in calls of 1..160 rows at every 7th offset (all three tiles: up to 8, up to 8L,
  // more rows).
  const int in = 96, out = 40, total = 160;
  auto x = random_matrix(std::size_t(total * in), 10), w = random_matrix(std::size_t(out * in), 11),
       b = random_matrix(std::size_t(out), 12);
  std::vector<float> all(std::size_t(total * out));
  blas::linear(all.data(), x.data(), w.data(), b.data(), total, in, out);
  int mismatches = 0, calls = 0;
  for (int rows = 1; rows <= total; ++rows)
    for (int first = 0; first + rows <= total; first += 7) {
      std::vector<float> y(std::size_t(rows * out));
      blas::linear(y.data(), x.data() + first * in, w.data(), b.data(), rows, in, out);
      mismatches += !same_bits(y.data(), all.data() + first * out, y.size());
      ++calls;
    }
  INFO(mismatches << " of " << calls << " calls differ");
  CHECK(mismatches == 0);
  CHECK(blas::isa_available(blas::linear_isa()));
}

TEST_CASE("better_core: an old OpenBLAS pick is replaced by the best core the CPU runs; a user's choice never") {
  const blas::CpuFeatures avx512{true, true, true, true}, avx2{true, true, false, false},
      avx2_no_fma{true, false, false, false}, sse{false, false, false};
  // OpenBLAS fell back (an unknown CPU)
  CHECK(blas::better_core(avx512, "Prescott", false) == "SkylakeX");
  CHECK(blas::better_core(avx2, "Prescott", false) == "Haswell");
  CHECK(blas::better_core(avx512, "Nehalem", false) == "SkylakeX");
  CHECK(blas::better_core(avx2, "Sandybridge", false) == "Haswell"); // AVX without AVX2
  CHECK(blas::better_core(avx2, "Bulldozer", false) == "Haswell");
  CHECK(blas::better_core(avx512, "", false) == "SkylakeX"); // no name at all
  // nothing faster to offer
  CHECK(blas::better_core(avx2_no_fma, "Prescott", false).empty());
  CHECK(blas::better_core(sse, "Prescott", false).empty());
  // OpenBLAS's pick already uses AVX2: kept, even where a wider one exists
  for (const char* pick : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator", "skylakex"}) {
    INFO(pick);
    CHECK(blas::better_core(avx512, pick, false).empty());
  }
  // the user's OPENBLAS_CORETYPE wins, whatever it is
  CHECK(blas::better_core(avx512, "Prescott", true).empty());
  CHECK(blas::better_core(avx2, "Prescott", true).empty());
}

TEST_CASE("default_threads: OMP_NUM_THREADS, else OPENBLAS_NUM_THREADS, else the CPUs allowed") {
  struct Restore {
    std::string omp, ob;
    bool had_omp = std::getenv("OMP_NUM_THREADS"), had_ob = std::getenv("OPENBLAS_NUM_THREADS");
    Restore() {
      if (had_omp) omp = std::getenv("OMP_NUM_THREADS");
      if (had_ob) ob = std::getenv("OPENBLAS_NUM_THREADS");
    }
    ~Restore() {
      had_omp ? setenv("OMP_NUM_THREADS", omp.c_str(), 1) : unsetenv("OMP_NUM_THREADS");
      had_ob ? setenv("OPENBLAS_NUM_THREADS", ob.c_str(), 1) : unsetenv("OPENBLAS_NUM_THREADS");
    }
  } restore;
  unsetenv("OMP_NUM_THREADS");
  unsetenv("OPENBLAS_NUM_THREADS");
  const int cpus = blas::default_threads();
  CHECK(cpus >= 1);
  setenv("OPENBLAS_NUM_THREADS", "3", 1);
  CHECK(blas::default_threads() == 3);
  setenv("OMP_NUM_THREADS", "5,2", 1);
  CHECK(blas::default_threads() == 5);
  setenv("OMP_NUM_THREADS", "none", 1); // not a number: ignored
  CHECK(blas::default_threads() == 3);
  setenv("OPENBLAS_NUM_THREADS", "0", 1);
  CHECK(blas::default_threads() == cpus);
  setenv("OMP_NUM_THREADS", "100000", 1); // capped: a team that size crashed the OpenMP runtime
  CHECK(blas::default_threads() == blas::max_threads);
}

namespace {

// The int8 product as blas.hpp defines it, written out one output at a time (int64 dot products).
std::vector<float> int8_product(const std::vector<float>& x, const Int8Weight& q, std::int64_t block, const float* bias,
                                int rows, int in, int first, int count) {
  const std::int64_t B = block > 0 ? block : std::max(in, 1), blocks = q.scale.dim(1);
  std::vector<float> y(std::size_t(rows * count));
  for (int r = 0; r < rows; ++r) {
    // x quantized per block of the weight's B values, each block with its own scale
    std::vector<std::int64_t> xq(static_cast<std::size_t>(in));
    std::vector<float> xs(static_cast<std::size_t>(blocks));
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t k1 = std::min<std::int64_t>(in, (b + 1) * B);
      float a = 0;
      for (std::int64_t k = b * B; k < k1; ++k) a = std::max(a, std::abs(x[std::size_t(r * in + k)]));
      const float inv = a > 0 ? 127.0f / a : 0.0f;
      xs[std::size_t(b)] = a / 127.0f;
      for (std::int64_t k = b * B; k < k1; ++k)
        xq[std::size_t(k)] =
            std::int64_t(std::min(127.0f, std::max(-127.0f, std::nearbyint(x[std::size_t(r * in + k)] * inv))));
    }
    for (int j = 0; j < count; ++j) {
      float acc = 0;
      for (std::int64_t b = 0; b < blocks; ++b) {
        std::int64_t d = 0;
        for (std::int64_t k = b * B; k < std::min<std::int64_t>(in, (b + 1) * B); ++k)
          d += xq[std::size_t(k)] * q.q.data()[(first + j) * in + k];
        acc = std::fma(float(d) * xs[std::size_t(b)], q.scale.data()[(first + j) * blocks + b], acc);
      }
      y[std::size_t(r * count + j)] = bias ? acc + bias[j] : acc;
    }
  }
  return y;
}

struct QSize {
  int rows, in, out;
};
// (2, 40, 12): a row range from inside the only tile, the end of a float32 tile buffer
constexpr QSize qsizes[] = {{1, 1, 1},     {1, 70, 45},  {3, 33, 17},   {9, 64, 16}, {17, 5, 40},    {129, 70, 33},
                            {200, 96, 50}, {2, 600, 70}, {300, 41, 20}, {2, 40, 12}, {150, 1024, 24}};
struct Range {
  int first, count;
};

} // namespace

// linear over a weight in column tiles against linear_chain over its values, rows and row ranges
// that start inside a tile, every instruction set and thread count.
static void check_tiled(const LinearWeight& lw, const std::vector<float>& w, int rows) {
  const int in = static_cast<int>(lw.in()), out = static_cast<int>(lw.out());
  auto x = random_matrix(std::size_t(rows * in), 21), b = random_matrix(std::size_t(out), 22);
  for (auto [first, count] : {Range{0, out}, Range{out / 3, out - out / 3}, Range{out / 2, (out + 3) / 4}}) {
    if (count == 0) continue;
    const std::vector<float> wr(w.begin() + first * in, w.begin() + (first + count) * in);
    const auto want = linear_chain(x, wr, b.data() + first, rows, in, count);
    for (blas::Isa isa : {blas::Isa::scalar, blas::Isa::avx2, blas::Isa::avx512}) {
      if (!blas::isa_available(isa)) continue;
      for (int threads : {1, 3}) {
        std::vector<float> y(want.size(), -1.0f);
        blas::linear_with(isa, y.data(), x.data(), WeightRows(lw, first, count), b.data() + first, rows, threads);
        INFO(std::string(blas::isa_name(isa)) << " rows=" << rows << " in=" << in << " out=" << out
                                              << " first=" << first << " count=" << count << " threads=" << threads);
        CHECK(same_bits(y.data(), want.data(), want.size()));
      }
    }
  }
}

TEST_CASE("linear over float16 weights: the float32 chain over their values, to the bit") {
  // Both paths (the column tiles up to 128 rows, packed panels past that), row ranges that start
  // inside a tile (a projection of a packed in_proj_weight), every instruction set and thread count.
  for (auto [rows, in, out] : qsizes) {
    const Tensor wf = test::random_tensor({out, in}, 20 + std::uint64_t(out));
    std::vector<std::uint16_t> bits;
    Tensor wd = wf;
    const float special[] = {1e-6f, -3e-5f, 6e4f, -0.0f, 6.1e-5f}; // subnormals, near the top, -0, the edge
    for (std::size_t i = 0; i < std::size(special) && i < std::size_t(wd.size()); ++i) wd.data()[i] = special[i];
    for (float& v : wd.span()) {
      bits.push_back(to_half(v, HalfKind::F16));
      v = static_cast<float>(from_half(bits.back(), HalfKind::F16));
    }
    const LinearWeight lw = LinearWeight::f16(bits, out, in);
    CHECK(lw.f16_bits() == bits);
    CHECK(same_bits(lw.to_float().data(), wd.data(), std::size_t(wd.size())));
    check_tiled(lw, std::vector<float>(wd.data(), wd.data() + wd.size()), rows);
  }
}

TEST_CASE("linear over bfloat16 weights: the float32 chain over their values, to the bit") {
  // As for float16: both paths, row ranges inside a tile, every instruction set and thread count;
  // the bits read from an odd address (a mapped safetensors file's: copied value by value) and an
  // even one (transposed in registers, blas::half_rows_to_tile, on each instruction set).
  for (auto [rows, in, out] : qsizes) {
    Tensor wd = test::random_tensor({out, in}, 40 + std::uint64_t(out));
    const float special[] = {1e-39f, -3e38f, -0.0f, 1.17549435e-38f}; // subnormal, near the top, -0, the edge
    for (std::size_t i = 0; i < std::size(special) && i < std::size_t(wd.size()); ++i) wd.data()[i] = special[i];
    std::vector<std::uint16_t> bits;
    for (float& v : wd.span()) {
      bits.push_back(to_half(v, HalfKind::BF16));
      v = bf16_to_float(bits.back());
    }
    std::vector<unsigned char> odd(bits.size() * 2 + 1);
    std::memcpy(odd.data() + 1, bits.data(), bits.size() * 2);
    const LinearWeight lw = LinearWeight::half_rows(HalfKind::BF16, odd.data() + 1, out, in);
    CHECK(lw.format() == LinearWeight::Format::bf16);
    CHECK(lw.quantized());
    CHECK(lw.f16_bits() == bits);
    CHECK(same_bits(lw.to_float().data(), wd.data(), std::size_t(wd.size())));
    check_tiled(lw, std::vector<float>(wd.data(), wd.data() + wd.size()), rows);
    CHECK(LinearWeight::half_rows(HalfKind::BF16, bits.data(), out, in).f16_bits() == bits);
    for (blas::Isa isa : {blas::Isa::scalar, blas::Isa::avx2, blas::Isa::avx512}) {
      if (!blas::isa_available(isa)) continue;
      const std::int64_t tiles = (out + 15) / 16;
      std::vector<std::uint16_t> tiled(static_cast<std::size_t>(tiles * 16 * in), 1), expect(tiled.size(), 0);
      for (std::int64_t t = 0; t < tiles; ++t) {
        const int cols = static_cast<int>(std::min<std::int64_t>(16, out - t * 16));
        blas::half_rows_to_tile_with(isa, tiled.data() + t * 16 * in, bits.data() + t * 16 * in, in, cols, in);
        for (std::int64_t k = 0; k < in; ++k)
          for (int c = 0; c < cols; ++c)
            expect[static_cast<std::size_t>((t * in + k) * 16 + c)] =
                bits[static_cast<std::size_t>((t * 16 + c) * in + k)];
      }
      CHECK_MESSAGE(tiled == expect, "isa " << blas::isa_name(isa) << " out " << out << " in " << in);
    }
  }
}

TEST_CASE("half_rows: every row reported laid out once, in blocks; NaN and Inf flagged for either kind") {
  for (std::int64_t out : {5, 16, 1030, 2100}) { // within a tile, one tile, past a block of 64 tiles
    const std::int64_t in = 3;
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(out * in), 0x3f80); // 1.0 in bfloat16
    std::vector<int> seen(static_cast<std::size_t>(out), 0);
    std::mutex m;
    bool bad = true;
    const LinearWeight w = LinearWeight::half_rows(
        HalfKind::BF16, bits.data(), out, in,
        [&](std::int64_t first, std::int64_t n) {
          const std::lock_guard<std::mutex> lock(m);
          for (std::int64_t r = first; r < first + n; ++r) ++seen[static_cast<std::size_t>(r)];
        },
        &bad);
    CHECK_FALSE(bad);
    CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    CHECK(w.at(out - 1, in - 1) == 1.0f);
    bits[static_cast<std::size_t>(out * in - 1)] = 0x7f80; // bfloat16 +Inf in the last row
    LinearWeight::half_rows(HalfKind::BF16, bits.data(), out, in, {}, &bad);
    CHECK(bad);
    bits.back() = 0x7c01; // a float16 NaN, finite as bfloat16
    LinearWeight::half_rows(HalfKind::F16, bits.data(), out, in, {}, &bad);
    CHECK(bad);
    LinearWeight::half_rows(HalfKind::BF16, bits.data(), out, in, {}, &bad);
    CHECK_FALSE(bad);
  }
}

TEST_CASE("16-bit weights read in place as rows: the float32 chain over their values, to the bit") {
  // Few rows (widened 16 outputs at a time into the transposing tile) and more than 128 (widened
  // into the packed panels), both kinds, row ranges inside a tile, every instruction set and
  // thread count; values read at an odd address; Inf and NaN flagged by the check of the values.
  for (auto [rows, in, out] : qsizes)
    for (HalfKind kind : {HalfKind::F16, HalfKind::BF16}) {
      Tensor wd = test::random_tensor({out, in}, 60 + std::uint64_t(out));
      auto bits = std::make_shared<std::vector<std::uint16_t>>();
      for (float& v : wd.span()) {
        bits->push_back(to_half(v, kind));
        v = static_cast<float>(from_half(bits->back(), kind));
      }
      const LinearWeight lw = LinearWeight::half_rows_in_place(bits, kind, bits->data(), out, in);
      CHECK(LinearWeight::half_all_finite(kind, bits->data(), out * in));
      CHECK(lw.in_rows());
      CHECK(lw.f16_bits() == *bits);
      CHECK(same_bits(lw.to_float().data(), wd.data(), std::size_t(wd.size())));
      check_tiled(lw, std::vector<float>(wd.data(), wd.data() + wd.size()), rows);
      (*bits)[bits->size() / 2] = kind == HalfKind::F16 ? 0x7c01 : 0xff80; // a NaN, -Inf
      CHECK_FALSE(LinearWeight::half_all_finite(kind, bits->data(), out * in));
    }
}

TEST_CASE("a deferred check of a weight's values: run once by the first product, again after it threw") {
  // LinearWeight::defer_check, as the loaders use it for values left in a mapped file: the first
  // blas::linear over any of the weight's rows runs it (before any output is computed), later
  // products do not; a check that threw runs again; tensor(), to_tiles() and the 16-bit bulk
  // reads run it too.
  const std::int64_t out = 32, in = 48;
  Tensor wd = test::random_tensor({out, in}, 5);
  auto bits = std::make_shared<std::vector<std::uint16_t>>();
  for (float v : wd.span()) bits->push_back(to_half(v, HalfKind::BF16));
  std::vector<float> x(static_cast<std::size_t>(2 * in), 0.5f), y(static_cast<std::size_t>(2 * out), -1.0f);
  {
    int runs = 0;
    bool fail = true;
    LinearWeight lw = LinearWeight::half_rows_in_place(bits, HalfKind::BF16, bits->data(), out, in);
    lw.defer_check([&] {
      ++runs;
      if (fail) throw Error("values not finite");
    });
    const LinearWeight copy = lw; // shares the check
    CHECK_THROWS_WITH_AS(blas::linear(y.data(), x.data(), WeightRows(lw, 16, 16), nullptr, 2), "values not finite",
                         Error);
    CHECK(y[0] == -1.0f); // nothing computed
    CHECK_THROWS_AS(copy.f16_bits(), Error);
    CHECK(runs == 2);
    fail = false;
    blas::linear(y.data(), x.data(), lw, nullptr, 2);
    blas::linear(y.data(), x.data(), copy, nullptr, 1);
    CHECK(lw.to_float().size() == out * in);
    CHECK(runs == 3);
  }
  {
    int runs = 0;
    LinearWeight lw(wd);
    lw.defer_check([&] { ++runs; });
    CHECK(runs == 0);
    CHECK(lw.to_tiles());
    CHECK(runs == 1);
    blas::linear(y.data(), x.data(), lw, nullptr, 2);
    CHECK(runs == 1);
  }
  {
    int runs = 0;
    const LinearWeight lw(wd);
    const_cast<LinearWeight&>(lw).defer_check([&] { ++runs; });
    CHECK(lw.tensor().size() == out * in);
    CHECK(runs == 1);
  }
  std::vector<std::uint16_t> ok = *bits;
  CHECK(LinearWeight::half_all_finite(HalfKind::BF16, ok.data(), out * in));
  ok[out * in - 1] = 0x7fc1; // a NaN, last
  CHECK_FALSE(LinearWeight::half_all_finite(HalfKind::BF16, ok.data(), out * in));
  ok[out * in - 1] = 0x7c00; // +Inf as float16, a finite bfloat16
  CHECK(LinearWeight::half_all_finite(HalfKind::BF16, ok.data(), out * in));
  CHECK_FALSE(LinearWeight::half_all_finite(HalfKind::F16, ok.data(), out * in));
}

TEST_CASE("16-bit rows in place, few rows: the transposing tile's groups, tails and shares, to the bit") {
  // The tile over rows where they are (1 to 8 rows of x at a time, up to 2 groups of 16 rows of W
  // at once, 64 values a step): rows of x past one chunk; weights of many tasks per thread (the
  // prefetch of the next task), a last task of fewer groups and a last group of fewer rows (copied
  // and padded); k a multiple of the step, one value past it, and shorter than one step; subnormal,
  // -0 and near-overflow values. Against the float32 chain, every instruction set and thread count.
  struct Size {
    int rows, in, out;
  };
  for (auto [rows, in, out] :
       {Size{1, 64, 256}, Size{1, 65, 200}, Size{2, 31, 97}, Size{3, 96, 130}, Size{4, 33, 80}, Size{5, 128, 67},
        Size{8, 2, 300}, Size{9, 70, 48}, Size{17, 200, 33}, Size{1, 2048, 40}})
    for (HalfKind kind : {HalfKind::F16, HalfKind::BF16}) {
      INFO("kind=" << (kind == HalfKind::F16 ? "f16" : "bf16"));
      Tensor wd = test::random_tensor({out, in}, 70 + std::uint64_t(out + in));
      const float f16_special[] = {1e-6f, -3e-5f, 6e4f, -0.0f, 6.1e-5f};
      const float bf16_special[] = {1e-39f, -3e38f, -0.0f, 1.17549435e-38f};
      const auto& special = kind == HalfKind::F16 ? f16_special : bf16_special;
      for (std::size_t i = 0; i < 4 && i < std::size_t(wd.size()); ++i) wd.data()[i * 7 % wd.size()] = special[i];
      auto bits = std::make_shared<std::vector<std::uint16_t>>();
      for (float& v : wd.span()) {
        bits->push_back(to_half(v, kind));
        v = static_cast<float>(from_half(bits->back(), kind));
      }
      const LinearWeight lw = LinearWeight::half_rows_in_place(bits, kind, bits->data(), out, in);
      check_tiled(lw, std::vector<float>(wd.data(), wd.data() + wd.size()), rows);
    }
}

TEST_CASE("which 16-bit weights generation's steps read in place: bfloat16, short rows, many of them, AVX-512") {
  const bool avx512 = blas::linear_isa() == blas::Isa::avx512;
  CHECK(blas::keep_half_rows(HalfKind::BF16, {2048, 768}, true) == avx512);
  CHECK(blas::keep_half_rows(HalfKind::BF16, {512, 1024}, true) == avx512);
  CHECK_FALSE(blas::keep_half_rows(HalfKind::BF16, {511, 768}, true));  // few outputs
  CHECK_FALSE(blas::keep_half_rows(HalfKind::BF16, {768, 1025}, true)); // long rows
  CHECK_FALSE(blas::keep_half_rows(HalfKind::F16, {2048, 768}, true));  // float16's widening costs more
  CHECK_FALSE(blas::keep_half_rows(HalfKind::BF16, {2048}, true));
  // a run whose steps do not use tiles keeps every one in rows
  CHECK(blas::keep_half_rows(HalfKind::F16, {2048, 768}, false));
  CHECK(blas::keep_half_rows(HalfKind::BF16, {768, 1025}, false));
}

TEST_CASE("linear over float32 weights in column tiles: the bits of the same weight in rows") {
  for (auto [rows, in, out] : qsizes) {
    const Tensor wf = test::random_tensor({out, in}, 30 + std::uint64_t(out));
    LinearWeight lw(wf);
    lw.to_tiles();
    CHECK(lw.format() == LinearWeight::Format::f32_tiles);
    CHECK_FALSE(lw.quantized());
    CHECK(same_bits(lw.to_float().data(), wf.data(), std::size_t(wf.size())));
    CHECK_THROWS_AS(lw.tensor(), Error);
    check_tiled(lw, std::vector<float>(wf.data(), wf.data() + wf.size()), rows);
    lw.to_tiles(); // again: no change
    CHECK(same_bits(lw.to_float().data(), wf.data(), std::size_t(wf.size())));
  }
}

TEST_CASE("a kept packing: packed on first use, reused for the same rows, repacked for others; the same bits") {
  const std::int64_t rows = 300, in = 70, out = 90; // many rows: the W-packed tiles; a panel padded
  const Tensor wf = test::random_tensor({out, in}, 61), x = test::random_tensor({rows, in}, 62);
  const Tensor bias = test::random_tensor({out}, 63);
  LinearWeight lw(wf);
  Tensor want(Shape{rows, 40}), got(Shape{rows, 40});
  blas::PackedWeight keep;
  const WeightRows upper(lw, 50, 40), lower(lw, 0, 40);
  blas::linear(want.data(), x.data(), upper, bias.data(), rows);
  blas::linear(got.data(), x.data(), upper, bias.data(), rows, &keep);
  CHECK(same_bits(got.data(), want.data(), std::size_t(got.size())));
  REQUIRE(keep.source == upper.data());
  // reused, not packed again: values changed in place (which a caller must not do) are not seen
  float* values = const_cast<float*>(upper.data());
  const float saved = values[0];
  values[0] += 1.0f;
  blas::linear(got.data(), x.data(), upper, bias.data(), rows, &keep);
  CHECK(same_bits(got.data(), want.data(), std::size_t(got.size())));
  CHECK(keep.source == upper.data());
  values[0] = saved;
  blas::linear(want.data(), x.data(), lower, nullptr, rows); // other rows: packed again
  blas::linear(got.data(), x.data(), lower, nullptr, rows, &keep);
  CHECK(same_bits(got.data(), want.data(), std::size_t(got.size())));
  CHECK(keep.source == lower.data());
  // a product of few rows neither uses nor changes it
  blas::linear(want.data(), x.data(), upper, bias.data(), 3);
  blas::linear(got.data(), x.data(), upper, bias.data(), 3, &keep);
  CHECK(same_bits(got.data(), want.data(), 3 * 40));
  CHECK(keep.source == lower.data());
}

TEST_CASE("linear_blocks: linear's bits, each block of columns one matrix; nothing else written") {
  // Rows for each product (the transposing tile, x read in place, the W-packed tiles), blocks the
  // W-packed tiles write directly (64 on both instruction sets, 48 with AVX2's panels of 16) or via
  // a copy (20; 48 with AVX-512's of 32), a last block cut short, a row range of the weight (a
  // packed in_proj_weight's k | v), every weight format, instruction set and thread count, a kept
  // packing; the gap after each block left as it was.
  const std::int64_t in = 70, out = 150, first = 10, count = 140;
  const Tensor wf = test::random_tensor({out, in}, 71), bias = test::random_tensor({count}, 72);
  LinearWeight rows32(wf), tiles32(wf);
  tiles32.to_tiles();
  std::vector<std::uint16_t> bits;
  for (float v : wf.span()) bits.push_back(to_half(v, HalfKind::F16));
  const LinearWeight half = LinearWeight::f16(bits, out, in);
  std::vector<std::uint16_t> bbits;
  for (float v : wf.span()) bbits.push_back(to_half(v, HalfKind::BF16));
  const LinearWeight bhalf = LinearWeight::half_rows(HalfKind::BF16, bbits.data(), out, in);
  const Int8Weight q8 = quantize_int8(wf, 32);
  const LinearWeight int8 = LinearWeight::int8(q8.q, q8.scale, 32);
  for (const LinearWeight* lw : std::initializer_list<const LinearWeight*>{&rows32, &tiles32, &half, &bhalf, &int8})
    for (std::int64_t rows : {3, 100, 300}) {
      const Tensor x = test::random_tensor({rows, in}, 73 + std::uint64_t(rows));
      const WeightRows w(*lw, first, count);
      Tensor plain(Shape{rows, count});
      blas::linear(plain.data(), x.data(), w, bias.data(), rows);
      for (std::int64_t cols : {64, 48, 20}) {
        const std::int64_t stride = rows * cols + 5, nblocks = (count + cols - 1) / cols;
        for (blas::Isa isa : {blas::Isa::scalar, blas::Isa::avx2, blas::Isa::avx512}) {
          if (!blas::isa_available(isa)) continue;
          for (int threads : {1, 3}) {
            std::vector<float> y(std::size_t(nblocks * stride), -7.0f);
            blas::PackedWeight keep;
            blas::linear_blocks_with(isa, y.data(), x.data(), w, bias.data(), rows, {cols, stride}, &keep, threads);
            std::vector<float> want(y.size(), -7.0f);
            for (std::int64_t r = 0; r < rows; ++r)
              for (std::int64_t j = 0; j < count; ++j)
                want[std::size_t(j / cols * stride + r * cols + j % cols)] = plain[r * count + j];
            INFO(std::string(blas::isa_name(isa))
                 << " format=" << int(lw->format()) << " rows=" << rows << " cols=" << cols << " threads=" << threads);
            CHECK(same_bits(y.data(), want.data(), want.size()));
          }
        }
      }
    }
  std::vector<float> y(16);
  const Tensor x = test::random_tensor({2, in}, 79);
  CHECK_THROWS_AS(blas::linear_blocks(y.data(), x.data(), WeightRows(rows32), nullptr, 2, {0, 0}), Error);
}

TEST_CASE("linear_relu: linear, then y > 0 ? y : 0, to the bit, in the tiles or after them") {
  // rows that take the W-packed tiles (which apply it as they store y; in = 1100: on the last k
  // block only) and rows that take the others (a pass after); a row of zeros gives the biases, one
  // with a NaN gives NaN outputs, which become 0 (the tiles' max must keep the pass's order).
  struct Size {
    int rows, in, out;
  };
  for (auto [rows, in, out] : {Size{300, 70, 45}, Size{5, 33, 17}, Size{140, 1100, 40}, Size{40, 64, 20}}) {
    const Tensor wf = test::random_tensor({out, in}, 71), bf = test::random_tensor({out}, 72);
    Tensor x = test::random_tensor({rows, in}, 73), bias = bf;
    bias.data()[0] = -0.0f;
    std::fill_n(x.data(), in, 0.0f);                            // row 0: zeros, y = bias
    x.data()[in + 1] = std::numeric_limits<float>::quiet_NaN(); // row 1: NaN
    std::vector<std::uint16_t> bits;
    for (float v : wf.span()) bits.push_back(to_half(v, HalfKind::F16));
    const Int8Weight q = quantize_int8(wf, 32);
    LinearWeight tiled(wf);
    tiled.to_tiles();
    std::vector<std::uint16_t> bbits;
    for (float v : wf.span()) bbits.push_back(to_half(v, HalfKind::BF16));
    const LinearWeight weights[] = {LinearWeight(wf), LinearWeight::f16(bits, out, in), tiled,
                                    LinearWeight::int8(q.q, q.scale, 32),
                                    LinearWeight::half_rows(HalfKind::BF16, bbits.data(), out, in)};
    for (const LinearWeight& lw : weights)
      for (blas::Isa isa : {blas::Isa::scalar, blas::Isa::avx2, blas::Isa::avx512}) {
        if (!blas::isa_available(isa)) continue;
        std::vector<float> want(std::size_t(rows * out)), got(want.size(), -1.0f);
        blas::linear_with(isa, want.data(), x.data(), lw, bias.data(), rows, 2);
        for (float& v : want) v = v > 0.0f ? v : 0.0f;
        blas::linear_relu_with(isa, got.data(), x.data(), lw, bias.data(), rows, 2);
        INFO(blas::isa_name(isa) << " rows=" << rows << " in=" << in << " format=" << int(lw.format()));
        CHECK(same_bits(got.data(), want.data(), want.size()));
        CHECK(got[std::size_t(out)] == 0.0f); // the NaN row
      }
  }
}

namespace {

// v rounded to bfloat16 (to nearest, ties to even), as a float: the value the bf16 products use.
float round_bf16(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&v, &u, 4);
  return v;
}

// Sets MatmulPrecision for a scope.
struct PrecisionScope {
  explicit PrecisionScope(blas::MatmulPrecision p, bool vdpbf16ps = false) {
    blas::set_matmul_precision(p);
    blas::prefer_vdpbf16ps(vdpbf16ps);
  }
  ~PrecisionScope() {
    blas::set_matmul_precision(blas::MatmulPrecision::f32);
    blas::prefer_vdpbf16ps(false);
  }
};

} // namespace

TEST_CASE("bfloat16 products: x and W rounded to bfloat16, float32 sums; the float32 chain where there are none") {
  // Rows that take the W-packed tiles, from every layout (float32 rows and column tiles, 16-bit
  // rows in place and in tiles), on each set of bfloat16 tiles the CPU has (AMX-BF16's: groups of 32
  // rows, chunks of 16 pairs of k, so rows and pairs past both); k odd, in one block and across blocks of 1024 (the
  // last one odd); columns past the last full panel; bias and ReLU; 1 and 3 threads. Against the product of the rounded
  // values in double: within float32's rounding of the sum, and (on a CPU with AVX512-BF16) as far from the float32
  // chain as rounded operands put it. Elsewhere, and on AVX2's tiles, the float32 chain's bits. Steps of few rows stay
  // float32 in any case.
  struct Size {
    int rows, in, out;
  };
  const bool bf16 = blas::bf16_products_available() && blas::linear_isa() == blas::Isa::avx512;
  // the best tiles (AMX-BF16's where the CPU has them), and then the vdpbf16ps tiles too when those differ
  const std::vector<bool> tile_sets =
      std::string_view(blas::bf16_tiles()) == "amx-bf16" ? std::vector<bool>{false, true} : std::vector<bool>{false};
  for (auto [rows, in, out] : {Size{200, 70, 45}, Size{150, 1025, 33}, Size{140, 2101, 70}, Size{130, 77, 100}}) {
    const Tensor wf = test::random_tensor({out, in}, 80 + std::uint64_t(in));
    const auto x = random_matrix(std::size_t(rows * in), 81), b = random_matrix(std::size_t(out), 82);
    std::vector<std::uint16_t> bbits, hbits;
    std::vector<float> wb(std::size_t(wf.size())), wh(wb.size()); // the values of the 16-bit copies
    for (std::size_t i = 0; i < wb.size(); ++i) {
      bbits.push_back(to_half(wf.data()[i], HalfKind::BF16));
      hbits.push_back(to_half(wf.data()[i], HalfKind::F16));
      wb[i] = static_cast<float>(from_half(bbits.back(), HalfKind::BF16));
      wh[i] = static_cast<float>(from_half(hbits.back(), HalfKind::F16));
    }
    LinearWeight tiled(wf);
    tiled.to_tiles();
    auto bshared = std::make_shared<std::vector<std::uint16_t>>(bbits);
    auto hshared = std::make_shared<std::vector<std::uint16_t>>(hbits);
    const std::vector<float> wv(wf.data(), wf.data() + wf.size());
    struct Case {
      LinearWeight lw;
      const std::vector<float>* values;
    };
    // (each after one whose panels differ: a panel's values left in the scratch by the case before
    // would otherwise hide one not written)
    const Case cases[] = {{LinearWeight::half_rows_in_place(bshared, HalfKind::BF16, bshared->data(), out, in), &wb},
                          {LinearWeight::half_rows_in_place(hshared, HalfKind::F16, hshared->data(), out, in), &wh},
                          {LinearWeight(wf), &wv},
                          {tiled, &wv},
                          {LinearWeight::half_rows(HalfKind::BF16, bbits.data(), out, in), &wb},
                          {LinearWeight::f16(hbits, out, in), &wh}};
    // per set of values: the float32 chain; the product of the rounded operands in double (bias
    // added in float32, as the tiles add it) and float32's bound on the rounding of that sum
    struct Reference {
      std::vector<float> chain;
      std::vector<double> want, bound;
    };
    std::map<const std::vector<float>*, Reference> refs;
    const auto reference = [&](const std::vector<float>* w) -> const Reference& {
      Reference& ref = refs[w];
      if (!ref.chain.empty()) return ref;
      ref.chain = linear_chain(x, *w, b.data(), rows, in, out);
      for (int r = 0; r < rows && bf16; ++r)
        for (int j = 0; j < out; ++j) {
          double sum = 0, size = 0;
          for (int k = 0; k < in; ++k) {
            const double t = double(round_bf16(x[std::size_t(r * in + k)])) * round_bf16((*w)[std::size_t(j * in + k)]);
            sum += t, size += std::abs(t);
          }
          ref.want.push_back(double(float(sum) + b[std::size_t(j)]));
          ref.bound.push_back((in + 2) * std::ldexp(size + std::abs(b[std::size_t(j)]), -23) + 1e-30);
        }
      return ref;
    };
    for (const Case& c : cases) {
      const Reference& ref = reference(c.values);
      for (const bool vdpbf16ps : tile_sets)
        for (bool relu : {false, true})
          for (int threads : {1, 3}) {
            INFO("rows=" << rows << " in=" << in << " out=" << out << " format=" << int(c.lw.format()) << " in_rows="
                         << c.lw.in_rows() << " relu=" << relu << " threads=" << threads << " vdpbf16ps=" << vdpbf16ps);
            std::vector<float> y(ref.chain.size(), -1.0f);
            {
              PrecisionScope scope(blas::MatmulPrecision::bf16, vdpbf16ps);
              if (relu)
                blas::linear_relu_with(blas::linear_isa(), y.data(), x.data(), c.lw, b.data(), rows, threads);
              else
                blas::linear_with(blas::linear_isa(), y.data(), x.data(), c.lw, b.data(), rows, threads);
            }
            const auto relu_of = [relu](double v) { return relu && !(v > 0) ? 0.0 : v; };
            if (!bf16) {
              std::vector<float> want = ref.chain;
              for (float& v : want) v = static_cast<float>(relu_of(v));
              CHECK(same_bits(y.data(), want.data(), want.size()));
              continue;
            }
            double worst = 0, apart = 0, scale = 0; // the error in units of its bound; the distance from float32
            for (std::size_t i = 0; i < y.size(); ++i) {
              worst = std::max(worst, std::abs(y[i] - relu_of(ref.want[i])) / ref.bound[i]);
              apart = std::max(apart, std::abs(double(y[i]) - relu_of(ref.chain[i])));
              scale = std::max(scale, std::abs(double(ref.chain[i])));
            }
            CHECK(worst <= 1.0);
            CHECK(apart > 1e-4 * scale); // the operands were rounded (float32 sums in any order: ~1e-6)
          }
    }
    // AVX2's tiles, and a step of few rows: the float32 chain
    PrecisionScope scope(blas::MatmulPrecision::bf16);
    for (blas::Isa isa : {blas::Isa::avx2, blas::linear_isa()}) {
      const int n = isa == blas::Isa::avx2 ? rows : 4;
      std::vector<float> y(std::size_t(n * out), -1.0f);
      blas::linear_with(isa, y.data(), x.data(), LinearWeight(wf), b.data(), n, 2);
      const auto want = linear_chain(std::vector<float>(x.begin(), x.begin() + n * in), wv, b.data(), n, in, out);
      INFO(blas::isa_name(isa) << " rows=" << n);
      CHECK(same_bits(y.data(), want.data(), want.size()));
    }
  }
  CHECK(blas::matmul_precision() == blas::MatmulPrecision::f32);
}

TEST_CASE("float32 weights borrowed from a mapped file go into tiles without being written") {
  for (std::int64_t out : {32, 40}) { // whole tiles, and a last one padded
    CAPTURE(out);
    const std::int64_t in = 24;
    const Tensor wf = test::random_tensor({out, in}, 50 + std::uint64_t(out));
    auto file = std::make_shared<std::vector<float>>(wf.data(), wf.data() + wf.size()); // as mapped pages
    LinearWeight borrowed(Tensor({out, in}, file->data(), file));
    LinearWeight owned(wf);
    CHECK(borrowed.to_tiles());
    CHECK(owned.to_tiles());
    CHECK(std::vector<float>(wf.data(), wf.data() + wf.size()) == *file); // the rows not written
    CHECK(same_bits(borrowed.f32_tiles(), owned.f32_tiles(), std::size_t(((out + 15) / 16) * 16 * in)));
    check_tiled(borrowed, *file, 3);
  }
}

TEST_CASE("rows_to_tile: 16 rows as their column tile on every instruction set") {
  for (int in : {1, 5, 8, 15, 16, 17, 33, 64, 100}) {
    const auto rows = random_matrix(std::size_t(16 * in), 40 + std::uint64_t(in));
    std::vector<float> want(rows.size());
    for (int k = 0; k < in; ++k)
      for (int c = 0; c < 16; ++c) want[std::size_t(k * 16 + c)] = rows[std::size_t(c * in + k)];
    for (blas::Isa isa : {blas::Isa::scalar, blas::Isa::avx2, blas::Isa::avx512}) {
      if (!blas::isa_available(isa)) continue;
      std::vector<float> tile(rows.size(), -1.0f);
      blas::rows_to_tile_with(isa, tile.data(), rows.data(), in);
      INFO(blas::isa_name(isa) << " in=" << in);
      CHECK(tile == want);
    }
  }
}

// Whether this CPU has AMX-INT8's tiles for the int8 product (from blas::amx_int8_rows() rows).
static bool amx_int8_here() {
  return std::string_view(blas::int8_kernel_name(blas::Isa::avx512)).find("amx-int8") != std::string_view::npos;
}

// linear over rows [first, first + count) of an int8 weight on every instruction set and thread
// count, and on AMX-INT8's tiles and VNNI's where the CPU has both, against `want`
// (int8_product's), to the bit.
static void check_int8_everywhere(const LinearWeight& lw, const std::vector<float>& x, const std::vector<float>& b,
                                  const std::vector<float>& want, int rows, int first, int count, int block) {
  for (bool vnni_only : amx_int8_here() ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
    blas::prefer_vnni_int8(vnni_only);
    for (blas::Isa isa : {blas::Isa::scalar, blas::Isa::avx2, blas::Isa::avx512}) {
      if (!blas::isa_available(isa)) continue;
      for (int threads : {1, 3}) {
        std::vector<float> y(want.size(), -1.0f);
        blas::linear_with(isa, y.data(), x.data(), WeightRows(lw, first, count), b.data() + first, rows, threads);
        INFO(std::string(blas::isa_name(isa))
             << " (" << std::string(blas::int8_kernel_name(isa)) << ") block=" << block << " rows=" << rows
             << " in=" << lw.in() << " out=" << lw.out() << " in_rows=" << lw.in_rows() << " first=" << first
             << " count=" << count << " threads=" << threads);
        CHECK(same_bits(y.data(), want.data(), want.size()));
      }
    }
  }
  blas::prefer_vnni_int8(false);
}

TEST_CASE("linear over int8 weights: the int8 product as defined, to the bit, on every instruction set") {
  // Blocks of 32, 5 (not a multiple of 4), 3 and a whole row, k not a multiple of the block, row
  // ranges inside a tile, a zero row, every instruction set (VNNI, AVX2, the reference) and thread
  // count; and the error against float32 over the dequantized weight.
  for (auto [rows, in, out] : qsizes)
    for (int block : {32, 5, 3, 0}) {
      const Tensor wf = test::random_tensor({out, in}, 20 + std::uint64_t(out));
      const Int8Weight q = quantize_int8(wf, block);
      const LinearWeight lw = LinearWeight::int8(q.q, q.scale, block);
      const TensorI values = lw.int8_values();
      CHECK(std::equal(values.span().begin(), values.span().end(), q.q.span().begin(), q.q.span().end()));
      CHECK(std::memcmp(lw.int8_scales().data(), q.scale.data(), q.scale.size() * sizeof(float)) == 0);
      const Tensor wd = dequantize_int8(q.q, q.scale, block, "test");
      CHECK(same_bits(lw.to_float().data(), wd.data(), std::size_t(wd.size())));
      auto x = random_matrix(std::size_t(rows * in), 21), b = random_matrix(std::size_t(out), 22);
      if (rows > 2)
        for (int k = 0; k < in; ++k) x[std::size_t(in + k)] = 0.0f; // row 1: zero, so y = bias
      for (auto [first, count] : {Range{0, out}, Range{out / 3, out - out / 3}, Range{out / 2, (out + 3) / 4}}) {
        if (count == 0) continue;
        const auto want = int8_product(x, q, block, b.data() + first, rows, in, first, count);
        const std::vector<float> wr(wd.data() + first * in, wd.data() + (first + count) * in);
        const auto exact = linear_chain(x, wr, b.data() + first, rows, in, count);
        CHECK(max_rel_err(want, exact) < 0.03); // quantizing x: half a step of max|x| / 127 per value
        check_int8_everywhere(lw, x, b, want, rows, first, count, block);
      }
    }
}

TEST_CASE("int8 weights read in place as rows: the int8 product as defined, to the bit, tiles laid out or not") {
  // Steps of 1 to 4 rows read the rows in place (AVX-512 VNNI); more rows, and the other
  // instruction sets, lay them out in tiles per call. k an odd number of 32-value units (the last
  // one alone), blocks of 32, 64 and a whole row, `out` not a multiple of 16 (a last tile of fewer
  // rows), row ranges inside a tile, -128 in the weights.
  for (auto [rows, in, out] : {QSize{1, 64, 16}, QSize{1, 96, 45}, QSize{2, 96, 17}, QSize{3, 160, 40},
                               QSize{4, 128, 33}, QSize{5, 192, 50}, QSize{40, 96, 20}, QSize{1, 2048, 24}})
    for (int block : {32, 64, 0}) {
      const std::int64_t B = block ? block : in;
      if (in % B != 0) continue;
      Int8Weight q = quantize_int8(test::random_tensor({out, in}, 50 + std::uint64_t(in)), block);
      q.q.data()[3] = -128;
      auto values = std::make_shared<std::vector<std::int8_t>>(q.q.span().begin(), q.q.span().end());
      REQUIRE(LinearWeight::int8_rows_fit({out, in}, B));
      const LinearWeight lw = LinearWeight::int8_rows(values, values->data(), {out, in}, q.scale, B);
      CHECK(lw.in_rows());
      const TensorI back = lw.int8_values();
      CHECK(std::equal(back.span().begin(), back.span().end(), q.q.span().begin(), q.q.span().end()));
      CHECK(std::memcmp(lw.int8_scales().data(), q.scale.data(), q.scale.size() * sizeof(float)) == 0);
      auto x = random_matrix(std::size_t(rows * in), 51), b = random_matrix(std::size_t(out), 52);
      for (auto [first, count] : {Range{0, out}, Range{out / 3, out - out / 3}, Range{out / 2, (out + 3) / 4}}) {
        if (count == 0) continue;
        const auto want = int8_product(x, q, block, b.data() + first, rows, in, first, count);
        check_int8_everywhere(lw, x, b, want, rows, first, count, block);
      }
    }
}

TEST_CASE("linear over int8 weights: -128 and 127 in the weights, +-127 in x, exact on every instruction set") {
  // A weight of -128 (a file another program wrote) has no int8 negation: AVX2's sign trick must
  // not need one. Every weight -128, 127 or -127 and every input at +-max|x|, so each pair of
  // products reaches 2 * 128 * 127, the most vpmaddubsw adds without saturating.
  for (auto [rows, in, out] : {QSize{1, 64, 16}, QSize{3, 70, 45}, QSize{17, 128, 40}, QSize{32, 100, 33}})
    for (int block : {32, 0}) {
      Int8Weight q = quantize_int8(test::random_tensor({out, in}, 40), block);
      for (std::int64_t i = 0; i < q.q.size(); ++i) q.q.data()[i] = i % 3 == 0 ? -128 : i % 3 == 1 ? 127 : -127;
      const LinearWeight lw = LinearWeight::int8(q.q, q.scale, block);
      std::vector<float> x(std::size_t(rows * in));
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i * 7 / 3) % 2 ? 2.5f : -2.5f;
      const auto want = int8_product(x, q, block, nullptr, rows, in, 0, out);
      for (bool vnni_only : amx_int8_here() ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
        blas::prefer_vnni_int8(vnni_only);
        for (blas::Isa isa : {blas::Isa::scalar, blas::Isa::avx2, blas::Isa::avx512}) {
          if (!blas::isa_available(isa)) continue;
          std::vector<float> y(want.size(), -1.0f);
          blas::linear_with(isa, y.data(), x.data(), WeightRows(lw), nullptr, rows, 1);
          INFO(std::string(blas::isa_name(isa)) << " (" << std::string(blas::int8_kernel_name(isa)) << ") rows=" << rows
                                                << " in=" << in << " block=" << block << " vnni_only=" << vnni_only);
          CHECK(same_bits(y.data(), want.data(), want.size()));
        }
      }
      blas::prefer_vnni_int8(false);
    }
}

TEST_CASE("linear over int8 weights: a row that is not finite takes the float chain") {
  const int in = 40, out = 20, rows = 3;
  const Int8Weight q = quantize_int8(test::random_tensor({out, in}, 30), 32);
  const LinearWeight lw = LinearWeight::int8(q.q, q.scale, 32);
  auto x = random_matrix(std::size_t(rows * in), 31);
  x[std::size_t(in + 7)] = INFINITY;
  std::vector<float> y(std::size_t(rows * out));
  blas::linear(y.data(), x.data(), lw, nullptr, rows);
  const Tensor wd = lw.to_float();
  const auto chain = linear_chain(x, std::vector<float>(wd.data(), wd.data() + wd.size()), nullptr, rows, in, out);
  CHECK(same_bits(y.data() + out, chain.data() + out, std::size_t(out))); // row 1: infinities and NaN as float32
  const auto want = int8_product(x, q, 32, nullptr, rows, in, 0, out);
  CHECK(same_bits(y.data(), want.data(), std::size_t(out))); // rows 0 and 2 as usual
  CHECK(same_bits(y.data() + 2 * out, want.data() + 2 * out, std::size_t(out)));
}
