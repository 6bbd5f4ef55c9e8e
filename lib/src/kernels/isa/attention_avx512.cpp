// The attention kernel's loops for AVX-512F (16 floats per vector). Built with -mavx512f -mfma
// -ffp-contract=off; called only when the CPU has AVX-512F (attention.cpp).
#include "kernels/isa/attention_kernels.hpp"
#include "kernels/isa/simd_avx512.hpp"

namespace attn::attention_detail {

namespace {
constexpr KernelTable table = table_of<simd::V512>("avx512");
} // namespace

const KernelTable* avx512_table() { return &table; }

} // namespace attn::attention_detail
