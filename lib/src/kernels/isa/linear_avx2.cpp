// blas::linear's tiles for AVX2 with FMA (8 floats per vector). Built with -mavx2 -mfma -mf16c;
// called only when the CPU has all three (linear.cpp).
#include "kernels/isa/linear_kernels.hpp"
#include "kernels/isa/simd_avx2.hpp"

#include <cstring>

namespace attn::linear_detail {

namespace {

constexpr KernelTable table = table_of<simd::V256>("avx2");

// The int8 product on AVX2 (no int8 dot-product instruction): vpmaddubsw multiplies unsigned by
// signed bytes and adds pairs into int16, which saturates for w + 128; on |w| and x with w's sign
// the pairs stay within 2 * 128 * 127 < 2^15, so the sums are exact. |w| as an unsigned byte holds
// 128 for w = -128, and x (ours, quantized to -127..127) always has a negation: the other way round
// (|x| and w with x's sign) a weight of -128 could not be negated.
struct I256 : simd::V256 {
  using ivec = __m256i;
  static constexpr int i8_rows = 2, i8_chains = 2, i8_row_chains = 2; // 16 registers: 2 x 2 int and float accumulators
  static constexpr int weight_offset = 0;
  static ivec iload(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static ivec ibcast(int v) { return _mm256_set1_epi32(v); }
  static ivec weights(ivec w) { return w; }
  static ivec bcast4(const signed char* p) {
    int v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }
  static ivec dot(ivec d, ivec x, ivec w) {
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(d, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  static vec to_float(ivec d) { return _mm256_cvtepi32_ps(d); }
  // the first n of 8 integer-valued floats as bytes
  static void store_i8(signed char* p, vec v, int n) {
    alignas(32) int t[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), _mm256_cvtps_epi32(v));
    for (int i = 0; i < n; ++i) p[i] = static_cast<signed char>(t[i]);
  }
};

constexpr Int8Table int8_table = int8_table_of<I256>("avx2");

} // namespace

const KernelTable* avx2_table() { return &table; }
const Int8Table* avx2_int8_table() { return &int8_table; }

} // namespace attn::linear_detail
