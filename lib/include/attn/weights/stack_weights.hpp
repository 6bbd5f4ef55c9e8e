// The encoder and decoder stacks' weight files (CONTRACT.md section 3): reading, PyTorch's
// initialisation, saving.
#pragma once

#include "attn/model/transformer.hpp"
#include "attn/weights/weights.hpp"

#include <cstdint>
#include <string>

namespace attn {

// Reads layers/0, layers/1, ... (as many as the file has; at least one) with num_heads,
// norm_first, activation, norm_type, layer_norm_eps, and the positions inside the layers (pe =
// rope with rope_theta, rope_style and rotary_dim; pe = alibi) and sliding_window from the
// attributes, and the feed-forward's convolution (ffn_conv_kernel, ffn_conv/weight and bias). Every
// layer must have the same
// sizes; a missing or odd-shaped dataset is an Error naming it.
// The stack `name` ("encoder" or "decoder") of the --weights group: the group itself, or, when it
// is a sequence-to-sequence model (no layers of its own), its child `name` (CONTRACT.md section 3).
WeightGroup stack_group(const WeightGroup& g, const std::string& name);

Encoder load_encoder(const WeightGroup& g);
// The same for a decoder: layers/{i}/self_attn, multihead_attn, linear1, linear2, norm1..norm3.
Decoder load_decoder(const WeightGroup& g);

struct EncoderShape {
  std::int64_t layers = 1, embed_dim = 0, heads = 0, ffn_dim = 0;
  bool norm_first = false, final_norm = false;
  Activation activation = Activation::Relu;
  NormKind norm = NormKind::Layer;
  std::int64_t kv_heads = 0; // grouped key/value heads dividing heads; 0: heads
  LayerPositions positions = LayerPositions::None;
  Rope rope;
  std::int64_t sliding_window = 0;
  bool parallel_residual = false;
  std::int64_t ffn_conv = 0; // the FFN's depthwise convolution's kernel (odd); 0: none
};
// PyTorch's initialisation: each layer's attention as init_mha, linear1/linear2 from nn.Linear's
// default (weights and biases U(+-1/sqrt(in))), LayerNorms 1 and 0. One seeded stream.
Encoder init_encoder(const EncoderShape& shape, std::uint64_t seed);
void save_encoder(const WeightWriter& w, const Encoder& enc);

} // namespace attn
