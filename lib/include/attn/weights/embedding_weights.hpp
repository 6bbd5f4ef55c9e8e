// A model's token embeddings and output layer, read from its weight group (CONTRACT.md section 3).
#pragma once

#include "attn/model/embedding.hpp"
#include "attn/model/generate.hpp"
#include "attn/weights/weights.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// Reads `name`/weight ("src_embed" or "tgt_embed") of model group `g` and the `pe` attribute; the
// embedding size must be `embed_dim`, the E of the stack it feeds (`stack`: "encoder", "decoder").
TokenEmbedding load_embedding(const WeightGroup& g, const std::string& name, std::int64_t embed_dim,
                              std::string_view stack);

// generator/weight (and bias) of model group `g`, when it has one; E must be `embed_dim`.
std::optional<Generator> load_generator(const WeightGroup& g, std::int64_t embed_dim);

// The groups of a sequence-to-sequence file a run knows (check_all_weights_used): `parts`, and
// pos_embed only when the model's `pe` attribute is learned: unused, it is an unknown weight.
std::vector<std::string> known_model_parts(const WeightGroup& g, std::vector<std::string> parts);

} // namespace attn
