// Unit tests of lib/include/attn/kernels/parallel.hpp.
#include "attn/kernels/parallel.hpp"

#include <doctest/doctest.h>

#include <omp.h>

#include <cstdint>
#include <vector>

using namespace attn;

TEST_CASE("parallel loops: one thread runs outside OpenMP, a team covers every item once") {
  for (const std::int64_t n : {0, 1, 2, 7, 64, 1001}) {
    CAPTURE(n);
    SUBCASE("one thread: a plain loop, no region entered (not even a team of one)") {
      int levels = 0;
      std::vector<int> seen(static_cast<std::size_t>(n));
      parallel_for(n, 1, [&](std::int64_t i) { seen[static_cast<std::size_t>(i)]++, levels += omp_get_level(); });
      parallel_for_dynamic(n, 0,
                           [&](std::int64_t i) { seen[static_cast<std::size_t>(i)]++, levels += omp_get_level(); });
      int calls = 0;
      parallel_shares(n, 1, [&](std::int64_t a, std::int64_t b) {
        CHECK(a == 0);
        CHECK(b == n);
        ++calls, levels += omp_get_level();
      });
      CHECK(calls == 1);
      CHECK(levels == 0);
      for (int s : seen) CHECK(s == 2);
    }
    SUBCASE("a team of three") {
      std::vector<int> seen(static_cast<std::size_t>(n)), dyn(seen), shares(seen);
      parallel_for(n, 3, [&](std::int64_t i) { seen[static_cast<std::size_t>(i)]++; });
      parallel_for_dynamic(n, 3, [&](std::int64_t i) { dyn[static_cast<std::size_t>(i)]++; });
      int calls = 0;
      parallel_shares(n, 3, [&](std::int64_t a, std::int64_t b) {
        CHECK(omp_in_parallel());
        for (std::int64_t i = a; i < b; ++i) shares[static_cast<std::size_t>(i)]++;
#pragma omp atomic
        ++calls;
      });
      CHECK(calls == 3); // a share per thread
      for (std::size_t i = 0; i < seen.size(); ++i) {
        CHECK(seen[i] == 1);
        CHECK(dyn[i] == 1);
        CHECK(shares[i] == 1);
      }
    }
  }
}

TEST_CASE("threads_if: the library's threads for a wide loop, else 1") {
  CHECK(threads_if(false) == 1);
  CHECK(threads_if(true) == blas::threads());
}
