// Reading the masks of CONTRACT.md section 2 from tensor files, checked against the attention's
// sizes, into an attn::Mask.
#pragma once

#include "attn/attention.hpp"
#include "attn/h5io.hpp"

#include <optional>

namespace attn {

struct MaskFiles {
  bool causal = false;
  std::optional<h5::TensorRef> key_padding; // (batch, m) bool/int, nonzero = padding
  std::optional<h5::TensorRef> lengths;     // (batch,) int, valid keys
  std::optional<h5::TensorRef> attn_mask;   // bool/int blocked, or float additive; rank 2, 3 or 4
};

// Throws Error naming the file and dataset when a mask has the wrong type or shape, a length is
// outside 0..m, or an additive mask holds NaN or +Inf (-inf blocks, as the contract says).
Mask load_mask(h5::InputFiles& in, const MaskFiles& files, std::int64_t batch, std::int64_t heads, std::int64_t n,
               std::int64_t m);

// Items [first, first + count) of `mask`, each repeated `repeat` times (beams), for n queries: a
// batch chunk's mask, or an MPI rank's items. Every part is carried (a mask tensor without a batch
// axis stays whole); only causal, lengths and key padding may repeat, any other part then is a
// logic error.
Mask mask_items(const Mask& mask, std::int64_t first, std::int64_t count, std::int64_t repeat, std::int64_t n);

} // namespace attn
