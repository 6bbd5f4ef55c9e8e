// encode's parts: its options, and its stack: --init's flags and shape, or --weights (stack.cpp).
#pragma once

#include "cli.hpp"

#include "attn/h5/h5io.hpp"
#include "attn/model/embedding.hpp"
#include "attn/model/vision.hpp"
#include "attn/weights/stack_weights.hpp"
#include "attn/weights/weights.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace encode {

struct Options {
  std::string input, tokens, pixels;
  std::vector<std::string> images; // --image: PNG files, made pixel_values by `image_processor`
  std::string image_processor;
  std::string weights, init, save_weights;
  std::int64_t layers = 0, embed_dim = 0, heads = 0, ffn_dim = 0;
  bool norm_first = false, final_norm = false;
  std::string activation = "relu", norm = "layer_norm";
  std::int64_t kv_heads = 0, rotary_dim = 0, sliding_window = 0, ffn_conv = 0;
  std::string rope;
  double rope_base = 10000.0;
  bool alibi = false, parallel_residual = false;
  bool causal = false;
  std::string key_padding, lengths, attention_mask, token_types;
  bool emit_weights = false, no_pad_mask = false;
  std::int64_t chunk = 0;
  std::vector<std::string> text; // --text: sequences as text, tokenized by `tokenizer`
  std::string tokenizer;
  attn::ProbeFlags probe; // --emit-activations and the interventions
};

// The flags, checked together (--init's describe the stack; --weights excludes them).
void check_flags(const Options& o, const attn::cli::Tool& tool);
// The shape of the stack --init draws.
attn::EncoderShape init_shape(const Options& o);

// The stack: read from --weights (with BERT's embeddings when the file is BERT's, a ViT's patch
// embedding and heads when it is a ViT's) or drawn by --init.
struct Stack {
  attn::Encoder enc;
  std::optional<attn::WeightGroup> model;
  std::optional<attn::TokenEmbedding> embed;
  std::optional<attn::PatchEmbedding> patches;
  attn::VisionHead head;
  std::string e_source = "--embed-dim"; // what fixes E, for messages
};
Stack open_stack(const Options& o, attn::cli::Tool& tool, const std::optional<attn::h5::TensorRef>& weights_ref);

} // namespace encode
