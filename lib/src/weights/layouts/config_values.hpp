// What the layouts by their own names share (model_layouts.cpp, seq2seq_layouts.cpp,
// vit_layout.cpp): a Hugging Face config's activations, heads and hyperparameters the datasets also
// tell, and attention's separate query, key and value projections.
#pragma once

#include "attn/model/mha.hpp"
#include "attn/model/transformer.hpp"
#include "attn/weights/weights.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace attn {

// The activation config attribute `attr` names (`fallback` when absent; transformers' ACT2FN
// names: "gelu" is erf's, "gelu_new", "gelu_pytorch_tanh" and "gelu_fast" the tanh form), or an
// Error naming it.
Activation hf_activation(const WeightGroup& g, const std::string& attr, const char* fallback);

// A hyperparameter of the config that the datasets also tell: when present, it must agree.
void check_config(const WeightGroup& g, const std::string& attr, std::int64_t from_data, const std::string& dataset);

// The config's number of heads (`attr`, required), dividing the width E (the config's `width`).
std::int64_t config_heads(const WeightGroup& g, const std::string& attr, const std::string& width, std::int64_t E,
                          const std::string& model, bool divides = true);

// The separate projections q, k, v of attention group `a` (names[i] + "/weight", (rows, in): q_rows
// for q, kv_rows for k and v) into w's q/k/v_proj_weight, and their biases (names[i] + "/bias")
// concatenated into w.in_proj_bias: required, or (optional_biases) all three or none, an Error
// naming the group otherwise.
void read_separate_qkv(MhaWeights& w, const WeightGroup& a, const std::array<std::string, 3>& names,
                       std::int64_t q_rows, std::int64_t kv_rows, std::int64_t in, bool optional_biases,
                       const std::string& why);

} // namespace attn
