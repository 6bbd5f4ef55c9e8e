// float16 and bfloat16 conversions, rounded to nearest even (half.hpp).
#include "attn/core/half.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>
#include <limits>

namespace attn {

namespace {

struct Layout {
  int exponent_bits, mantissa_bits;
};

Layout layout(HalfKind kind) { return kind == HalfKind::F16 ? Layout{5, 10} : Layout{8, 7}; }

} // namespace

std::uint16_t to_half(double x, HalfKind kind) {
  const auto [eb, mb] = layout(kind);
  const std::uint32_t sign = std::signbit(x) ? 0x8000u : 0u;
  const std::uint32_t exp_ones = (1u << eb) - 1;
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | exp_ones << mb | 1u << (mb - 1)); // quiet NaN
  const double a = std::fabs(x);
  if (std::isinf(a)) return static_cast<std::uint16_t>(sign | exp_ones << mb);
  if (a == 0) return static_cast<std::uint16_t>(sign);
  const int bias = (1 << (eb - 1)) - 1, emin = 1 - bias, emax = bias;
  int e = 0;
  std::frexp(a, &e); // a = f 2^e, f in [0.5, 1): the unbiased exponent is e - 1
  int E = e - 1;
  // The significand in units of the last place at E (or at emin for subnormals), rounded to the
  // nearest integer, ties to even (nearbyint in the default rounding mode). Scaling by a power of
  // two is exact in double.
  const bool subnormal = E < emin;
  double m = std::nearbyint(std::ldexp(a, (subnormal ? -emin : -E) + mb));
  if (subnormal) // m in [0, 2^mb]: 2^mb is the smallest normal, which the same bits encode
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(m));
  if (m == std::ldexp(1.0, mb + 1)) { // rounded up to the next power of two
    m /= 2;
    ++E;
  }
  if (E > emax) return static_cast<std::uint16_t>(sign | exp_ones << mb);
  return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(E + bias) << mb |
                                    (static_cast<std::uint32_t>(m) - (1u << mb)));
}

double from_half(std::uint16_t bits, HalfKind kind) {
  const auto [eb, mb] = layout(kind);
  const double sign = bits & 0x8000u ? -1.0 : 1.0;
  const std::uint32_t exp_field = (bits >> mb) & ((1u << eb) - 1), mant = bits & ((1u << mb) - 1);
  const int bias = (1 << (eb - 1)) - 1;
  if (exp_field == (1u << eb) - 1)
    return mant ? std::copysign(std::numeric_limits<double>::quiet_NaN(), sign)
                : sign * std::numeric_limits<double>::infinity();
  if (exp_field == 0) return sign * std::ldexp(static_cast<double>(mant), 1 - bias - mb);
  return sign * std::ldexp(static_cast<double>(mant | 1u << mb), static_cast<int>(exp_field) - bias - mb);
}

float f16_to_float(std::uint16_t h) {
  // The exponent field moved into float's place and rebiased by a multiplication by 2^(127 - 15),
  // which also makes subnormals normal; exact.
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16, em = h & 0x7fffu;
  std::uint32_t bits;
  if (em >= 0x7c00u) {
    bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13); // infinity, NaN
  } else {
    float f;
    const std::uint32_t shifted = em << 13;
    std::memcpy(&f, &shifted, 4);
    f *= 0x1p112f;
    std::memcpy(&bits, &f, 4);
    bits |= sign;
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

namespace {

#if defined(__x86_64__)
// 8 values a step by vcvtps2ph (ties to even, as to_half); a group holding a NaN goes through
// to_half, whose NaN keeps only the sign (the instruction keeps the payload's top bits).
__attribute__((target("avx,f16c"))) void floats_to_f16_f16c(std::uint16_t* h, const float* x, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
      for (std::int64_t j = i; j < i + 8; ++j) h[j] = to_half(x[j], HalfKind::F16);
    else
      _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) h[i] = to_half(x[i], HalfKind::F16);
}

__attribute__((target("avx,f16c"))) void f16_to_floats_f16c(float* x, const std::uint16_t* h, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) x[i] = f16_to_float(h[i]);
}
#endif

bool has_f16c() {
#if defined(__x86_64__)
  // F16C by CPUID (leaf 1, ECX bit 29): clang 14 knows no "f16c" for __builtin_cpu_supports
  unsigned a = 0, b = 0, c = 0, d = 0;
  static const bool f16c = __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
  return f16c;
#else
  return false;
#endif
}

} // namespace

void f16_to_floats(float* x, const std::uint16_t* h, std::int64_t n) {
#if defined(__x86_64__)
  if (has_f16c()) return f16_to_floats_f16c(x, h, n);
#endif
  for (std::int64_t i = 0; i < n; ++i) x[i] = f16_to_float(h[i]);
}

void floats_to_f16(std::uint16_t* h, const float* x, std::int64_t n) {
#if defined(__x86_64__)
  if (has_f16c()) return floats_to_f16_f16c(h, x, n);
#endif
  for (std::int64_t i = 0; i < n; ++i) h[i] = to_half(x[i], HalfKind::F16);
}

float bf16_to_float(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

void bf16_to_floats(float* x, const std::uint16_t* h, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) { // shifts the compiler vectorizes
    const std::uint32_t bits = static_cast<std::uint32_t>(h[i]) << 16;
    std::memcpy(x + i, &bits, 4);
  }
}

} // namespace attn
