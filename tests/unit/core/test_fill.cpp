// Unit tests of lib/src/core/fill.cpp.
#include "attn/core/error.hpp"
#include "attn/core/fill.hpp"
#include "attn/core/random.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <vector>

using namespace attn;

TEST_CASE("the same seed gives the same numbers, another seed others") {
  std::vector<float> a(1000), b(1000), c(1000);
  FillSpec spec{.kind = Fill::Normal, .seed = 42};
  fill(std::span(a), spec);
  fill(std::span(b), spec);
  spec.seed = 43;
  fill(std::span(c), spec);
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("the random stream is fixed across platforms (xoshiro256** reference values)") {
  // First outputs for seed 0 after splitmix64 seeding; a change here changes every seeded output.
  Rng rng(0);
  const std::uint64_t first = rng.next();
  Rng again(0);
  CHECK(again.next() == first);
  CHECK(first == 0x99ec5f36cb75f2b4ULL); // independently computed in Python
  CHECK(rng.next() == 0xbf6e1f784956452aULL);
}

TEST_CASE("normal and uniform fills have the requested moments and bounds") {
  std::vector<double> x(200000);
  fill(std::span(x), FillSpec{.kind = Fill::Normal, .mean = 2.0, .std = 3.0, .seed = 1});
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  CHECK(mean == doctest::Approx(2.0).epsilon(0.01));
  CHECK(std::sqrt(var) == doctest::Approx(3.0).epsilon(0.01));

  fill(std::span(x), FillSpec{.kind = Fill::Uniform, .low = -1, .high = 0.5, .seed = 2});
  for (double v : x) REQUIRE((v >= -1 && v < 0.5));

  std::vector<std::int64_t> ids(10000);
  fill(std::span(ids), FillSpec{.kind = Fill::Uniform, .low = 3, .high = 7, .seed = 3});
  std::vector<int> seen(7, 0);
  for (auto v : ids) {
    REQUIRE((v >= 3 && v < 7));
    ++seen[static_cast<std::size_t>(v)];
  }
  for (int k = 3; k < 7; ++k) CHECK(seen[static_cast<std::size_t>(k)] > 2000);
  CHECK_THROWS_AS(fill(std::span(ids), FillSpec{.kind = Fill::Normal}), UsageError);
}

TEST_CASE("constant and arange fills") {
  std::vector<float> x(5);
  fill(std::span(x), FillSpec{.kind = Fill::Arange});
  CHECK(x == std::vector<float>{0, 1, 2, 3, 4});
  fill(std::span(x), FillSpec{.kind = Fill::Ones});
  CHECK(x == std::vector<float>(5, 1.0f));
  CHECK_THROWS_AS(parse_fill("gaussian"), UsageError);
}

TEST_CASE("numbers from text, with the bad token named") {
  std::istringstream ok(" 1 2.5\n-3e2\tnan ");
  auto v = parse_numbers(ok, "t.txt");
  REQUIRE(v.size() == 4);
  CHECK(v[2] == -300.0);
  CHECK(std::isnan(v[3]));
  std::istringstream bad("1 2 x3");
  CHECK_THROWS_WITH_AS(parse_numbers(bad, "t.txt"), "t.txt: token 3 'x3' is not a number", Error);
  std::istringstream ints("4 -5 6.0");
  CHECK_THROWS_WITH_AS(parse_integers(ints, "ids"), "ids: token 3 '6.0' is not a 64-bit integer", Error);
  std::istringstream huge("99999999999999999999");
  CHECK_THROWS_AS(parse_integers(huge, "ids"), Error);
}
