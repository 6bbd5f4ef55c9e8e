// Unit tests of lib/src/view/view.cpp.
#include "attn/core/error.hpp"
#include "attn/view/view.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>

using namespace attn;
using namespace attn::view;

namespace {

TensorD matrix(Shape shape, std::vector<double> v) { return TensorD(std::move(shape), v); }

std::size_t count(const std::string& s, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

constexpr double qnan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_ = std::numeric_limits<double>::infinity();

} // namespace

TEST_CASE("stats: min, max, mean over finite values; NaN/Inf counted with the first index") {
  StatsBuilder b({2, 3});
  const std::vector<double> v{1, qnan, -2, 4, inf_, 0};
  b.add(v.data(), 2, 3);
  const Stats s = b.finish();
  CHECK(s.count == 6);
  CHECK(s.finite == 4);
  CHECK(s.min == -2);
  CHECK(s.max == 4);
  CHECK(s.mean == doctest::Approx(0.75));
  CHECK(s.nan == 1);
  CHECK(s.inf == 1);
  CHECK(s.first_nonfinite == 1);
  CHECK_FALSE(s.distributions());
  const std::string text = stats_text("x.h5:/x", "float32", {2, 3}, "", s, nullptr);
  CHECK(text.find("1 NaN, 1 Inf (first at [0, 1])") != std::string::npos);
  CHECK(text.find("not shown: the rows are not probability distributions") != std::string::npos);
}

TEST_CASE("stats: row sums of attention weights, fully masked rows, entropy against ln m") {
  // Rows: uniform over 4 keys, one-hot, all zero (a fully masked query), and one summing to 0.9.
  const TensorD w = matrix({4, 4}, {0.25, 0.25, 0.25, 0.25, 0, 1, 0, 0, 0, 0, 0, 0, 0.3, 0.3, 0.3, 0});
  StatsBuilder b({4, 4});
  b.add(w.data(), 4, 4);
  const Stats s = b.finish();
  CHECK(s.rows == 4);
  CHECK(s.zero_rows == 1);
  CHECK(s.rows_off == 1);
  CHECK(s.worst_row == 3);
  CHECK(s.worst_sum_error == doctest::Approx(0.1));
  CHECK_FALSE(s.distributions());
  const auto h = row_entropy(w);
  CHECK(h[0] == doctest::Approx(std::log(4.0)));
  CHECK(h[1] == 0.0);
  CHECK(h[2] == 0.0);

  // Without the bad row the rows are distributions: entropy is reported.
  StatsBuilder good({3, 4});
  good.add(w.data(), 3, 4);
  const Stats g = good.finish();
  CHECK(g.distributions());
  CHECK(g.entropy_max == doctest::Approx(std::log(4.0)));
  CHECK(g.entropy_min == 0.0);
  const std::string text = stats_text("w.h5:/weights", "float32", {2, 3, 4}, "[1]", g, nullptr);
  CHECK(text.find("slice     [1] (3, 4)") != std::string::npos);
  CHECK(text.find("3 rows of 4: all sum to 1 within 0.0001") != std::string::npos);
  CHECK(text.find("1 all-zero rows (fully masked queries)") != std::string::npos);
  CHECK(text.find("uniform over 4 keys = 1.38629") != std::string::npos);
}

TEST_CASE("summarise and slice_index read a dataset slice by slice") {
  h5::InputFiles in;
  h5::Dataset f32 = in.open({test::testdata("h5py_inputs.h5"), "f32"}); // (2, 3, 4): -1 + 0.125 * flat
  const Stats s = summarise(f32);
  CHECK(s.count == 24);
  CHECK(s.rows == 6);
  CHECK(s.min == -1);
  CHECK(s.max == 1.875);
  CHECK(s.mean == doctest::Approx(0.4375));
  CHECK(slice_index(f32, std::nullopt) == Shape{0});
  CHECK(slice_index(f32, std::vector<std::int64_t>{-1}) == Shape{1});
  CHECK_THROWS_WITH_AS(slice_index(f32, std::vector<std::int64_t>{2}),
                       doctest::Contains("index 2 is out of range for axis 0"), Error);
  CHECK_THROWS_WITH_AS(slice_index(f32, std::vector<std::int64_t>{0, 1}), doctest::Contains("takes 1 index"), Error);
  h5::Dataset rank5 = in.open({test::testdata("h5py_inputs.h5"), "rank5"});
  CHECK(slice_index(rank5, std::nullopt) == Shape{0, 0, 0});
  CHECK(summarise(rank5).rows == 1);
}

TEST_CASE("viridis: matplotlib's end points and middle, monotone in lightness") {
  CHECK(viridis(0) == Rgb{68, 1, 84});
  CHECK(viridis(1) == Rgb{253, 231, 37});
  CHECK(viridis(128 / 255.0) == Rgb{33, 145, 140}); // entry 128 exactly
  CHECK(viridis(0.5) == Rgb{33, 145, 141});         // halfway between entries 127 {33, 144, 141} and 128
  CHECK(viridis(-3) == viridis(0));
  CHECK(viridis(qnan) == viridis(0));
  double last = -1;
  for (int i = 0; i <= 100; ++i) {
    const Rgb c = viridis(i / 100.0);
    const double luma = 0.299 * c.r + 0.587 * c.g + 0.114 * c.b;
    CHECK(luma >= last - 0.5);
    last = luma;
  }
}

TEST_CASE("range and pooling: finite values only; NaN blocks stay visible") {
  const TensorD m = matrix({2, 3}, {1, 2, qnan, 4, 5, 6});
  const Range r = finite_range(m);
  CHECK(r.lo == 1);
  CHECK(r.hi == 6);
  CHECK(r.position(3.5) == 0.5);
  CHECK(Range{2, 2}.position(2) == 0.5);
  const TensorD p = pool(m, 2);
  CHECK(p.shape() == Shape{1, 2});
  CHECK(p[0] == 3); // (1 + 2 + 4 + 5) / 4
  CHECK(std::isnan(p[1]));
  CHECK(fit_factor(512, 80) == 7);
  CHECK(fit_factor(80, 80) == 1);
}

TEST_CASE("heatmap text: half blocks in 24-bit colour, or plain characters; pooled to the width") {
  const TensorD m = matrix({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, qnan});
  const std::string colour = heatmap_text(m, "t", {true, 80});
  CHECK(count(colour, "\u2580") == 8);               // 2 lines of 4 columns for 3 rows
  CHECK(count(colour, "\x1b[38;2;68;1;84m") >= 1);   // 0: viridis(0)
  CHECK(count(colour, "\x1b[48;2;230;30;30m") >= 1); // NaN in the lower half: red
  const std::string plain = heatmap_text(m, "t", {false, 80});
  CHECK(plain.find('\x1b') == std::string::npos);
  CHECK(plain.find("\n  ..::--\n") != std::string::npos); // 0..3 of 0..10 on the ramp, 2 characters a cell
  CHECK(plain.find("!!") != std::string::npos);
  TensorD wide(Shape{2, 200});
  const std::string pooled = heatmap_text(wide, "t", {true, 80});
  CHECK(pooled.find("[shown as means of 3x3 blocks]") != std::string::npos);
  CHECK(count(pooled, "\u2580") == 67);
}

TEST_CASE("values text: numbers under labels, coloured cells only with colour") {
  const TensorD m = matrix({2, 2}, {0.5, 0.25, 1, 0});
  const std::string plain = values_text(m, {"the", "cat"}, {"q0", "q1"}, {false, 80});
  CHECK(plain.find("       the       cat\n") != std::string::npos);
  CHECK(plain.find("q0       0.5      0.25\n") != std::string::npos);
  CHECK(plain.find('\x1b') == std::string::npos);
  CHECK(values_text(m, {}, {}, {true, 80}).find("\x1b[48;2;253;231;37m") != std::string::npos);
}

TEST_CASE("labels: a comma-separated list or a file, one per line; the count must match") {
  CHECK(read_labels("a,b,,d", 4, "--labels-x") == std::vector<std::string>{"a", "b", "", "d"});
  test::TempDir dir;
  const std::string f = dir.file("tokens.txt");
  std::ofstream(f) << "<s>\nhello, world\nx\n";
  CHECK(read_labels(f, 3, "--labels-y") == std::vector<std::string>{"<s>", "hello, world", "x"});
  CHECK_THROWS_WITH_AS(read_labels(f, 4, "--labels-y"), doctest::Contains("gives 3 labels; the axis has 4"), Error);
  CHECK_THROWS_WITH_AS(read_labels("a,b", 3, "--labels-x"),
                       doctest::Contains("--labels-x gives 2 labels; the axis has 3"), Error);
}
