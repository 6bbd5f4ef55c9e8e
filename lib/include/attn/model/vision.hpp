// The Vision Transformer's input and heads (Dosovitskiy et al. 2021; transformers' ViTModel and
// ViTForImageClassification): an image cut into P x P patches, each flattened and projected (the
// strided convolution patch_embeddings.projection), the class token first, learned positions added
// (bicubically interpolated to another grid, as interpolate_pos_encoding does); the encoder is a
// pre-norm stack (transformer.hpp); the pooler and the classifier read the class token's output.
#pragma once

#include "attn/core/tensor.hpp"
#include "attn/kernels/linear_weight.hpp"

#include <cstdint>
#include <string>

namespace attn {

struct PatchEmbedding {
  LinearWeight projection; // (E, C P P): the convolution's weight (E, C, P, P), each filter flattened
  Tensor bias;             // (E)
  Tensor cls;              // (E): the class token
  Tensor positions;        // (1 + gh gw, E): the class token's, then the patches' row by row
  std::int64_t channels = 3, patch = 16, grid_h = 0, grid_w = 0;
  std::string label; // the projection's dataset, for messages
  std::int64_t width() const { return projection.dim(0); }
};

// The positions of a grid of gh x gw patches: the model's own grid's, or those bicubically
// interpolated to the new grid (PyTorch's upsample_bicubic2d, align_corners false, A = -0.75, edge
// pixels repeated), the class token's kept: (1 + gh gw, E).
Tensor grid_positions(const PatchEmbedding& pe, std::int64_t gh, std::int64_t gw);

// Throws Error naming `pixels_label` unless images of C channels, H x W pixels cut into the model's
// patches: C its channels, H and W multiples of P.
void check_pixels(std::int64_t C, std::int64_t H, std::int64_t W, const PatchEmbedding& pe,
                  const std::string& pixels_label);

// x (b, 1 + gh gw, E) from pixels (b, C, H, W), gh = H / P, gw = W / P: row 0 the class token, row
// 1 + r gw + c the projection of patch (r, c), each plus its position (check_pixels first).
void embed_patches(float* x, const float* pixels, std::int64_t b, std::int64_t C, std::int64_t H, std::int64_t W,
                   const PatchEmbedding& pe, const std::string& pixels_label);

// What reads the class token's output: ViTModel's pooler (tanh(x_0 W^T + b)) and
// ViTForImageClassification's classifier (x_0 W^T + b, on the final norm's output); either empty.
struct VisionHead {
  LinearWeight pooler;     // (E, E), or empty
  Tensor pooler_bias;      // (E)
  LinearWeight classifier; // (labels, E), or empty
  Tensor classifier_bias;  // (labels)
};
// out (b, E) = tanh(x[:, 0] W^T + bias); x (b, n, E).
void vision_pooled(float* out, const float* x, std::int64_t b, std::int64_t n, const VisionHead& head);
// out (b, labels) = x[:, 0] W^T + bias.
void vision_logits(float* out, const float* x, std::int64_t b, std::int64_t n, const VisionHead& head);

} // namespace attn
