// 16-bit floats as stored in files: IEEE 754 binary16 (float16: 1 sign, 5 exponent, 10 mantissa
// bits) and bfloat16 (1 sign, 8 exponent, 7 mantissa bits: float32's range, 3 significant
// digits). Rounding to them is round-to-nearest, ties to even, from the double value (so a
// float32 or float64 value is rounded once): subnormals are kept (gradual underflow), values
// beyond the largest finite number become infinities, NaN stays NaN (a quiet NaN of the same
// sign). Widening back is exact.
#pragma once

#include <cstdint>

namespace attn {

enum class HalfKind { F16, BF16 };

std::uint16_t to_half(double x, HalfKind kind);
double from_half(std::uint16_t bits, HalfKind kind);
// from_half(bits, F16) as a float, without the double (the widening of float16 weights as they
// are packed): the same value for every bit pattern, NaN for NaN.
float f16_to_float(std::uint16_t bits);
// from_half(bits, BF16) as a float: the bits are float32's upper half.
float bf16_to_float(std::uint16_t bits);
// h[i] = to_half(x[i], F16) for i < n (round to nearest, ties to even), by the CPU's conversion
// instruction where it has one (F16C): a decoder's float16 cache converts millions of values.
void floats_to_f16(std::uint16_t* h, const float* x, std::int64_t n);
// x[i] = bf16_to_float(h[i]) for i < n (a weight's bfloat16 values widened into a packed panel).
void bf16_to_floats(float* x, const std::uint16_t* h, std::int64_t n);
// x[i] = f16_to_float(h[i]) for i < n, by F16C where the CPU has it (the same values: widening is
// exact; a signalling NaN comes out quiet).
void f16_to_floats(float* x, const std::uint16_t* h, std::int64_t n);

} // namespace attn
