// The Vision Transformer by its own names (issue 57): ViTModel (at the root) and
// ViTForImageClassification (under vit/, with classifier), loaded into the generic encoder stack
// with its patch embedding and heads (vision.hpp).
#pragma once

#include "attn/model/transformer.hpp"
#include "attn/model/vision.hpp"
#include "attn/weights/weights.hpp"

namespace attn {

struct VisionModel {
  Encoder enc;
  PatchEmbedding patches;
  VisionHead head;
};

// True when the group holds (vit/)embeddings/patch_embeddings/projection/weight.
bool is_vit(const WeightGroup& g);

// embeddings/cls_token (1, 1, E), embeddings/position_embeddings (1, 1 + (image_size / patch_size)^2,
// E), embeddings/patch_embeddings/projection/{weight (E, num_channels, P, P), bias}; per layer
// encoder/layer/{i}/layernorm_before, attention/attention/{query,key,value} (biases with
// qkv_bias, the default), attention/output/dense, layernorm_after, intermediate/dense,
// output/dense: pre-norm; layernorm after the stack; pooler/dense (ViTModel) and classifier
// (ViTForImageClassification, beside vit/). Attributes: num_attention_heads (12), hidden_size,
// intermediate_size, num_hidden_layers, image_size, patch_size, num_channels (checked against the
// datasets), layer_norm_eps (1e-12), hidden_act (gelu).
VisionModel load_vit(const WeightGroup& g);

} // namespace attn
