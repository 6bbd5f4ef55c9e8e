// The attention kernel's loops for AVX2 with FMA (8 floats per vector). Built with -mavx2 -mfma
// -ffp-contract=off; called only when the CPU has both (attention.cpp).
#include "kernels/isa/attention_kernels.hpp"
#include "kernels/isa/simd_avx2.hpp"

namespace attn::attention_detail {

namespace {
constexpr KernelTable table = table_of<simd::V256>("avx2");
} // namespace

const KernelTable* avx2_table() { return &table; }

} // namespace attn::attention_detail
