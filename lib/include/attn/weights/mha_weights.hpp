// nn.MultiheadAttention's parameters: read from a weight group, drawn as PyTorch initialises them,
// written back in the same layout (CONTRACT.md section 3).
#pragma once

#include "attn/core/random.hpp"
#include "attn/model/mha.hpp"
#include "attn/weights/weights.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace attn {

// Reads the module in group `g`: num_heads (and num_kv_heads, add_zero_attn) from its attributes,
// the sizes from the datasets, every shape checked; bias_k and bias_v come as a pair (an
// add_bias_kv attribute, when present, must agree). Throws Error naming the dataset or attribute
// at fault.
MhaWeights load_mha(const WeightGroup& g);

// PyTorch's initialisation of nn.MultiheadAttention: Xavier-uniform in_proj_weight (the packed
// (3E, E) matrix as one, or each separate projection), out_proj.weight from nn.Linear's default
// U(-1/sqrt(E), 1/sqrt(E)), zero biases. Packed when kdim = vdim = E and G = H. Drawn from one
// seeded stream (same seed, same bytes). Throws UsageError for sizes that do not fit together.
MhaWeights init_mha(const MhaShape& shape, bool bias, std::uint64_t seed);
// The same, drawing from `rng` (for modules that initialise several parts from one stream).
MhaWeights init_mha(const MhaShape& shape, bool bias, Rng& rng);

// How init_linear draws a linear form's parameters.
struct LinearInit {
  std::int64_t features = 256; // Performer's M
  bool orthogonal = false;     // Performer's features in orthogonal blocks
  std::int64_t proj_dim = 0;   // Linformer's k
  std::int64_t keys = 0;       // Linformer's m: the keys of every call
  std::string keys_label;      // the input they come from, for messages
};
// Gives `w` the attention `kind` (none: softmax), its parameters drawn from `rng`: Performer's
// features as favor_features, Linformer's E and F as xavier_linformer. Throws UsageError when the
// form does not fit the module (extra keys; k not in 1..m).
void init_linear(MhaWeights& w, std::optional<LinearKind> kind, const LinearInit& init, Rng& rng);

// Writes the module in the layout load_mha reads (and nn.MultiheadAttention.load_state_dict
// takes after renaming '/' to '.'), with its num_heads (and num_kv_heads when G < H,
// add_zero_attn when set, attention and its parameters for a linear form) attributes.
void save_mha(const WeightWriter& w, const MhaWeights& m);

} // namespace attn
