// blas::linear's tiles for AVX-512F (16 floats per vector). Built with -mavx512f -mfma; called only
// when the CPU has AVX-512F (linear.cpp).
#include "kernels/isa/linear_kernels.hpp"
#include "kernels/isa/simd_avx512.hpp"

namespace attn::linear_detail {

namespace {
constexpr KernelTable table = table_of<simd::V512>("avx512");
} // namespace

const KernelTable* avx512_table() { return &table; }

} // namespace attn::linear_detail
