// Positional encodings against testdata/ goldens made by tests/golden/make_golden.py from the
// textbook formula (NumPy), GPT-NeoX/LLaMA RoPE (PyTorch, float64) and the ALiBi authors' code.
#include "attn/attention/posenc.hpp"
#include "attn/core/error.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace attn;
using test::testdata;

// Each test case below runs twice (doctest subcases): vector sin/cos, then scalar sincos.
#define GENERATE_VECTOR_MATH()                                                                                         \
  [] {                                                                                                                 \
    bool on = true;                                                                                                    \
    SUBCASE("vector sin/cos") { on = true; }                                                                           \
    SUBCASE("scalar sincos") { on = false; }                                                                           \
    return on;                                                                                                         \
  }()

namespace {

TensorD golden(const std::string& file, const std::string& name) {
  h5::InputFiles in;
  return in.open({testdata(file), name}).read_floats<double>(false);
}

// Largest distance in float32 ulps between our float table and the float64 reference rounded once.
int max_ulps(const Tensor& ours, const TensorD& ref) {
  int worst = 0;
  for (std::int64_t i = 0; i < ours.size(); ++i) {
    const float r = static_cast<float>(ref[i]);
    int ulps = 0;
    for (float v = ours[i]; v != r && ulps < 100; ++ulps) v = std::nextafter(v, r);
    worst = std::max(worst, ulps);
  }
  return worst;
}

} // namespace

TEST_CASE("sinusoidal tables equal the textbook formula rounded once to float32") {
  const bool vector_math = GENERATE_VECTOR_MATH();
  use_vector_math(vector_math);
  INFO("vector math: " << vector_math);
  struct Case {
    const char* name;
    std::int64_t n, d, offset;
    double base;
    PeLayout layout;
  };
  for (const Case& c : {Case{"n50_d64", 50, 64, 0, 10000, PeLayout::Interleaved},
                        Case{"n7_d9_odd", 7, 9, 0, 10000, PeLayout::Interleaved},
                        Case{"n6_d8_base500_offset5", 6, 8, 5, 500, PeLayout::Interleaved},
                        Case{"n5_d7_concat", 5, 7, 0, 10000, PeLayout::Concat},
                        Case{"n3_d4_offset100000", 3, 4, 100000, 10000, PeLayout::Interleaved}}) {
    INFO(std::string(c.name));
    const TensorD ref = golden("pe_sinusoidal.h5", c.name);
    REQUIRE(ref.shape() == Shape{c.n, c.d});
    Tensor pe(Shape{c.n, c.d});
    add_sinusoidal(pe.data(), 1, c.n, c.d, c.base, c.offset, c.layout);
    // Both sides compute in double with libm's sin/cos/pow; the rounded results agree exactly.
    CHECK(max_ulps(pe, ref) == 0);
    TensorD pe64(Shape{c.n, c.d});
    add_sinusoidal(pe64.data(), 1, c.n, c.d, c.base, c.offset, c.layout);
    // In float64 the two differ by a few ulps: NumPy's vectorised sin/cos are its own SIMD
    // routines, not glibc's (3.3e-16 apart already on the 50 x 64 table).
    CHECK(test::max_abs_diff(pe64.span(), ref.span()) <= 1e-14);
    // sinusoidal_table (store) and add_sinusoidal (add to zeros) give the same table.
    Tensor stored(Shape{c.n, c.d}, Uninitialized{});
    sinusoidal_table(stored.data(), c.n, c.d, c.base, c.offset, c.layout);
    CHECK(test::max_abs_diff(stored.span(), pe.span()) == 0.0);
  }
  use_vector_math(true);
}

TEST_CASE("adding the sinusoidal encoding to a batch") {
  Tensor x = [] {
    h5::InputFiles in;
    return in.open({testdata("pe_sinusoidal.h5"), "add_x"}).read_floats<float>(false);
  }();
  add_sinusoidal(x.data(), 2, 5, 6, 10000, 3, PeLayout::Interleaved);
  CHECK(max_ulps(x, golden("pe_sinusoidal.h5", "add_expected_offset3")) == 0);
}

TEST_CASE("learned tables are sliced from the offset") {
  const TensorD table(Shape{4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  TensorD x(Shape{1, 2, 2}, {0.5, 0.5, 0.5, 0.5});
  add_learned(x.data(), 1, 2, 2, table.data(), 4, 1, "t.h5:/pe");
  CHECK(std::vector<double>(x.span().begin(), x.span().end()) == std::vector<double>{10.5, 11.5, 20.5, 21.5});
  CHECK_THROWS_WITH_AS(add_learned(x.data(), 1, 2, 2, table.data(), 4, 3, "t.h5:/pe"),
                       doctest::Contains("t.h5:/pe: 2 positions from 3 are outside the learned table of 4 rows"),
                       Error);
  // an offset near 2^63 must not wrap around into the table (it read memory before it)
  CHECK_THROWS_WITH_AS(add_learned(x.data(), 1, 2, 2, table.data(), 4, INT64_MAX, "t.h5:/pe"),
                       doctest::Contains("outside the learned table"), Error);
  CHECK_THROWS_AS(add_learned(x.data(), 1, 2, 2, table.data(), 4, INT64_MAX - 1, "t.h5:/pe"), Error);
}

TEST_CASE("RoPE matches GPT-NeoX rotate-half and the LLaMA complex form") {
  const bool vector_math = GENERATE_VECTOR_MATH();
  use_vector_math(vector_math);
  INFO("vector math: " << vector_math);
  const TensorD x = golden("rope.h5", "x");
  struct Case {
    const char* name;
    std::int64_t heads, offset;
    double base;
    RopeStyle style;
  };
  for (const Case& c :
       {Case{"half_h2", 2, 0, 10000, RopeStyle::Half}, Case{"interleaved_h2", 2, 0, 10000, RopeStyle::Interleaved},
        Case{"half_h1_offset3_base500", 1, 3, 500, RopeStyle::Half},
        Case{"interleaved_h4_offset7", 4, 7, 10000, RopeStyle::Interleaved}}) {
    INFO(std::string(c.name));
    TensorD y = x;
    apply_rope(y.data(), 2, 5, c.heads, 16 / c.heads, c.style, c.base, c.offset);
    CHECK(test::max_abs_diff(y.span(), golden("rope.h5", c.name).span()) < 1e-13);
    Tensor yf(Shape{2, 5, 16});
    for (std::int64_t i = 0; i < x.size(); ++i) yf[i] = static_cast<float>(x[i]);
    apply_rope(yf.data(), 2, 5, c.heads, 16 / c.heads, c.style, c.base, c.offset);
    CHECK(test::max_abs_diff(yf.span(), golden("rope.h5", c.name).span()) < 1e-6);
  }
  TensorD cos(Shape{6, 4}), sin(Shape{6, 4});
  rope_tables(cos.data(), sin.data(), 6, 8, 10000, 2);
  CHECK(test::max_abs_diff(cos.span(), golden("rope.h5", "cos_n6_dh8_offset2").span()) < 1e-15);
  CHECK(test::max_abs_diff(sin.span(), golden("rope.h5", "sin_n6_dh8_offset2").span()) < 1e-15);
  use_vector_math(true);
}

TEST_CASE("ALiBi slopes follow the authors' get_slopes, power of two or not") {
  for (int h : {1, 2, 3, 5, 6, 8, 12, 16, 24}) {
    CAPTURE(h);
    const auto slopes = alibi_slopes(h);
    const TensorD ref = golden("alibi.h5", "slopes_h" + std::to_string(h));
    REQUIRE(static_cast<std::int64_t>(slopes.size()) == ref.size());
    CHECK(test::max_abs_diff(slopes, ref.span()) == 0.0); // same operations, same doubles
  }
  CHECK(alibi_slopes(8)[0] == 0.5);
  CHECK(alibi_slopes(8)[7] == 1.0 / 256);
}

TEST_CASE("ALiBi biases align queries to the end of the keys") {
  struct Case {
    const char* name;
    std::int64_t h, n, m;
  };
  for (auto [name, h, n, m] : {Case{"bias_h5_n3_m6", 5, 3, 6}, Case{"bias_h8_n4_m4", 8, 4, 4}}) {
    CAPTURE(name);
    TensorD bias(Shape{1, h, n, m});
    alibi_bias(bias.data(), h, n, m);
    CHECK(test::max_abs_diff(bias.span(), golden("alibi.h5", name).span()) == 0.0);
  }
}

TEST_CASE("T5's relative buckets at the rule's edges") {
  const RelativeBuckets bi{32, 128, true}, causal{32, 128, false};
  // bidirectional: 16 buckets a side, 8 exact distances; keys before the query in 0..15, after it 16..31
  CHECK(relative_bucket(0, bi) == 0);
  CHECK(relative_bucket(-1, bi) == 1);
  CHECK(relative_bucket(-7, bi) == 7);   // the last exact distance
  CHECK(relative_bucket(-8, bi) == 8);   // the first logarithmic one: 8 + trunc(log(1) ...) = 8
  CHECK(relative_bucket(-16, bi) == 10); // 8 + trunc(log 2 / log 16 * 8) = 8 + 2 exactly
  CHECK(relative_bucket(-127, bi) == 15);
  CHECK(relative_bucket(-128, bi) == 15); // max_distance and beyond: the last bucket
  CHECK(relative_bucket(-100000, bi) == 15);
  CHECK(relative_bucket(1, bi) == 17);
  CHECK(relative_bucket(8, bi) == 24);
  CHECK(relative_bucket(100000, bi) == 31);
  // causal: keys after the query share bucket 0; 16 exact distances before it
  CHECK(relative_bucket(5, causal) == 0);
  CHECK(relative_bucket(-15, causal) == 15);
  CHECK(relative_bucket(-16, causal) == 16);
  CHECK(relative_bucket(-128, causal) == 31);
  CHECK(relative_bucket(-(std::int64_t{1} << 62), causal) == 31);
  // buckets a rule cannot fill are refused, naming the source
  CHECK_THROWS_WITH_AS(check_relative_buckets({3, 10, true}, "cfg"), doctest::Contains("cfg: 3 relative buckets"),
                       Error);
  CHECK_THROWS_WITH_AS(check_relative_buckets({16, 4, true}, "cfg"), doctest::Contains("max_distance 4"), Error);
  CHECK_NOTHROW(check_relative_buckets({4, 2, true}, "cfg"));
}

TEST_CASE("T5's relative bias against PyTorch's, queries aligned to the end of the keys") {
  const TensorD table = golden("seq2seq.h5", "/relative/table"), want = golden("seq2seq.h5", "/relative/bias");
  const RelativeBias rb({8, 10, true}, 3, std::vector<float>(table.span().begin(), table.span().end()), "table");
  TensorD bias(Shape{1, 3, 5, 7});
  relative_bias(bias.data(), rb, 5, 7);
  CHECK(test::max_abs_diff(bias.span(), want.span()) == 0.0);
  // the values looked up at construction, against the bucket rule itself, far past max_distance
  for (std::int64_t r = -40; r <= 40; ++r)
    for (std::int64_t h = 0; h < 3; ++h)
      CHECK(rb.term(h, r) == static_cast<float>(table.data()[relative_bucket(r, rb.rule()) * 3 + h]));
  CHECK_THROWS_WITH_AS(RelativeBias({8, 2, true}, 3, std::vector<float>(24), "t.h5:/bias"),
                       doctest::Contains("t.h5:/bias: max_distance 2"), Error);
}
