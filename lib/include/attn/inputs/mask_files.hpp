// Reading the masks of CONTRACT.md section 2 from tensor files, checked against the attention's
// sizes, into an attn::Mask (mask.hpp).
#pragma once

#include "attn/attention/mask.hpp"
#include "attn/h5/h5io.hpp"

#include <optional>

namespace attn {

struct MaskFiles {
  bool causal = false;
  std::optional<h5::TensorRef> key_padding; // (batch, m) bool/int, nonzero = padding
  std::optional<h5::TensorRef> lengths;     // (batch,) int, valid keys
  std::optional<h5::TensorRef> attn_mask;   // bool/int blocked, or float additive; rank 2, 3 or 4
  std::string keys = "m";                   // the keys' axis as the tool's help names it (n, t, s)
  bool keep_polarity = false; // key_padding is an attention_mask as BERT's users hold it: nonzero = attend
};

// Throws Error naming the file and dataset when a mask has the wrong type or shape, a length is
// outside 0..m, or an additive mask holds NaN or +Inf (-inf blocks, as the contract says).
Mask load_mask(h5::InputFiles& in, const MaskFiles& files, std::int64_t batch, std::int64_t heads, std::int64_t n,
               std::int64_t m);

} // namespace attn
