// A Hugging Face config's values as the layouts by their own names read them (model_layouts.cpp,
// seq2seq_layouts.cpp): activations, heads, and hyperparameters the datasets also tell.
#pragma once

#include "attn/model/transformer.hpp"
#include "attn/weights/weights.hpp"

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

} // namespace attn
