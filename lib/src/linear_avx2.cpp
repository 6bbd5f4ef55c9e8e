// blas::linear's tiles for AVX2 with FMA (8 floats per vector). Built with -mavx2 -mfma; called only
// when the CPU has both (linear.cpp).
#include "linear_kernels.hpp"
#include "simd_avx2.hpp"

namespace attn::linear_detail {

namespace {
constexpr KernelTable table = table_of<simd::V256>("avx2");
} // namespace

const KernelTable* avx2_table() { return &table; }

} // namespace attn::linear_detail
