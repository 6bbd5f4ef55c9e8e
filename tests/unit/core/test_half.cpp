// 16-bit floats: rounding float64 to float16 against NumPy's conversion and to bfloat16 against the
// generator's bit-exact reference (testdata/half.h5: ties, subnormals, overflow, infinities, NaN,
// signed zeros, random values), exact widening back, HDF5's reading of both types (as the tools
// read inputs), and what the writer stores.
#include "attn/core/half.hpp"

#include "attn/h5/h5io.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace attn;
using namespace attn::h5;

namespace {

bool same_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

} // namespace

TEST_CASE("rounding to float16 and bfloat16, and back, as the references") {
  InputFiles in;
  const std::string f = test::testdata("half.h5");
  const TensorD values = in.open({f, "values"}).read_floats<double>(true);
  for (const auto& [kind, name] :
       {std::pair{HalfKind::F16, std::string("f16")}, {HalfKind::BF16, std::string("bf16")}}) {
    const TensorI bits = in.open({f, name + "_bits"}).read_ints();
    const TensorD widened = in.open({f, name + "_values"}).read_floats<double>(true);
    // the reference type, as the tools read an input of it (HDF5's conversion)
    const TensorD read = in.open({f, name + "_h5py"}).read_floats<double>(true);
    REQUIRE(bits.size() == values.size());
    int wrong = 0;
    for (std::int64_t i = 0; i < values.size(); ++i) {
      CAPTURE(name);
      CAPTURE(i);
      CAPTURE(values[i]);
      const std::uint16_t b = to_half(values[i], kind);
      // NaN: any NaN bits (quiet, same sign)
      if (std::isnan(values[i])) {
        CHECK(std::isnan(from_half(b, kind)));
      } else if (b != static_cast<std::uint16_t>(bits[i])) {
        ++wrong;
        CHECK(b == static_cast<std::uint16_t>(bits[i]));
      }
      CHECK(same_value(from_half(static_cast<std::uint16_t>(bits[i]), kind), widened[i]));
      CHECK(same_value(read[i], widened[i]));
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("the writer stores f16 and bf16 as 2-byte floats, rounded once from float32 or float64") {
  test::TempDir dir;
  const std::string path = dir.file("h.h5");
  const std::vector<double> x = {1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40), -0.0, 1e-40, 70000.0};
  {
    OutputFile out({path, ""}, "a", {"test", "test"});
    const Tensor xf(Shape{4}, std::vector<float>(x.begin(), x.end()));
    const TensorD xd(Shape{4}, x);
    out.write("a", xd, OutType::BF16);
    out.write("b", xf, OutType::BF16);
    out.write("c", xd, OutType::F16);
    out.commit();
  }
  InputFiles in;
  const Dataset a = in.open({path, "a"}), c = in.open({path, "c"});
  CHECK(a.type_name() == "bfloat16");
  CHECK(c.type_name() == "float16");
  const TensorD ra = a.read_floats<double>(true), rb = in.open({path, "b"}).read_floats<double>(true),
                rc = c.read_floats<double>(true);
  // from float64, 1 + 2^-8 + 2^-40 is above the tie and rounds up; its float32 value is the tie
  // itself, which rounds to even (down)
  CHECK(ra[0] == 1 + std::ldexp(1.0, -7));
  CHECK(rb[0] == 1.0);
  CHECK((ra[1] == 0.0 && std::signbit(ra[1])));
  CHECK(ra[2] == from_half(to_half(1e-40, HalfKind::BF16), HalfKind::BF16));
  CHECK(ra[2] > 0); // a bfloat16 subnormal
  CHECK(ra[3] == 70144.0);
  CHECK(std::isinf(rc[3])); // beyond float16's 65504
}

TEST_CASE("f16_to_float and bf16_to_float are from_half's values for every bit pattern") {
  int differ = 0;
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    differ += !same_value(f16_to_float(bits), from_half(bits, HalfKind::F16));
    differ += !same_value(bf16_to_float(bits), from_half(bits, HalfKind::BF16));
  }
  CHECK(differ == 0);
}

TEST_CASE("floats_to_f16 gives to_half's bits: ties, subnormals, overflow, infinities, NaN, every length") {
  // Each float16 value, the midpoints between neighbours (ties to even) and a float either side of
  // them, so every rounding case of every exponent is met; NaNs among them in groups of 8 and not.
  std::vector<float> x;
  for (std::uint32_t b = 0; b < 0x7c00u; ++b) {
    const double v = from_half(static_cast<std::uint16_t>(b), HalfKind::F16);
    const double next = from_half(static_cast<std::uint16_t>(b + 1), HalfKind::F16);
    const auto mid = static_cast<float>((v + next) / 2); // exact in float
    for (const float f : {static_cast<float>(v), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)})
      x.push_back(f), x.push_back(-f);
  }
  for (const float f : {65504.0f, 65519.99f, 65520.0f, 1e9f, std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()})
    x.push_back(f), x.push_back(-f);
  std::vector<std::uint16_t> got(x.size());
  floats_to_f16(got.data(), x.data(), static_cast<std::int64_t>(x.size()));
  int differ = 0;
  for (std::size_t i = 0; i < x.size(); ++i) differ += got[i] != to_half(x[i], HalfKind::F16);
  CHECK(differ == 0);
  for (std::int64_t n = 0; n < 20; ++n) { // the tail after the groups of 8, and nothing past n written
    std::vector<std::uint16_t> h(static_cast<std::size_t>(n) + 1, 0xabcdu);
    floats_to_f16(h.data(), x.data() + 3, n);
    for (std::int64_t i = 0; i < n; ++i)
      differ += h[static_cast<std::size_t>(i)] != to_half(x[static_cast<std::size_t>(i) + 3], HalfKind::F16);
    differ += h.back() != 0xabcdu;
  }
  CHECK(differ == 0);
}

TEST_CASE("f16_to_floats gives f16_to_float's values for every bit pattern, at every length") {
  std::vector<std::uint16_t> h(0x10000);
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) h[b] = static_cast<std::uint16_t>(b);
  std::vector<float> x(h.size() + 1, 7.0f);
  f16_to_floats(x.data(), h.data(), static_cast<std::int64_t>(h.size()));
  int differ = 0;
  for (std::size_t i = 0; i < h.size(); ++i) differ += !same_value(x[i], f16_to_float(h[i]));
  CHECK(differ == 0);
  for (std::int64_t n = 0; n < 20; ++n) { // the tail after the groups of 8, and nothing past n written
    std::vector<float> y(static_cast<std::size_t>(n) + 1, 7.0f);
    f16_to_floats(y.data(), h.data() + 0x3c00, n); // 1.0 and up
    for (std::int64_t i = 0; i < n; ++i)
      differ += y[static_cast<std::size_t>(i)] != f16_to_float(static_cast<std::uint16_t>(0x3c00 + i));
    differ += y.back() != 7.0f;
  }
  CHECK(differ == 0);
}
