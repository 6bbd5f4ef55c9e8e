// The Vision Transformer's patches, positions and heads (vision.hpp).
#include "attn/model/vision.hpp"

#include "attn/core/error.hpp"
#include "attn/kernels/blas.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace attn {

namespace {

// PyTorch's cubic convolution weights (A = -0.75) of the four taps around t in [0, 1).
void cubic_weights(double t, double w[4]) {
  constexpr double A = -0.75;
  const auto near = [](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };      // |x| <= 1
  const auto far = [](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }; // 1 < |x| < 2
  w[0] = far(t + 1), w[1] = near(t), w[2] = near(1 - t), w[3] = far(2 - t);
}

} // namespace

Tensor grid_positions(const PatchEmbedding& pe, std::int64_t gh, std::int64_t gw) {
  if (gh == pe.grid_h && gw == pe.grid_w) return pe.positions;
  const std::int64_t E = pe.positions.dim(1), ih = pe.grid_h, iw = pe.grid_w;
  Tensor out(Shape{1 + gh * gw, E});
  std::copy_n(pe.positions.data(), E, out.data()); // the class token's
  const float* grid = pe.positions.data() + E;     // (ih, iw, E)
  const double sy = static_cast<double>(ih) / static_cast<double>(gh),
               sx = static_cast<double>(iw) / static_cast<double>(gw);
  std::vector<double> acc(static_cast<std::size_t>(E));
  for (std::int64_t y = 0; y < gh; ++y) {
    const double ry = sy * (static_cast<double>(y) + 0.5) - 0.5, fy = std::floor(ry);
    double wy[4];
    cubic_weights(ry - fy, wy);
    for (std::int64_t x = 0; x < gw; ++x) {
      const double rx = sx * (static_cast<double>(x) + 0.5) - 0.5, fx = std::floor(rx);
      double wx[4];
      cubic_weights(rx - fx, wx);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int a = 0; a < 4; ++a) {
        const std::int64_t sy_i = std::clamp<std::int64_t>(static_cast<std::int64_t>(fy) - 1 + a, 0, ih - 1);
        for (int c = 0; c < 4; ++c) {
          const std::int64_t sx_i = std::clamp<std::int64_t>(static_cast<std::int64_t>(fx) - 1 + c, 0, iw - 1);
          const float* src = grid + (sy_i * iw + sx_i) * E;
          const double w = wy[a] * wx[c];
          for (std::int64_t e = 0; e < E; ++e) acc[static_cast<std::size_t>(e)] += w * src[e];
        }
      }
      float* dst = out.data() + (1 + y * gw + x) * E;
      for (std::int64_t e = 0; e < E; ++e) dst[e] = static_cast<float>(acc[static_cast<std::size_t>(e)]);
    }
  }
  return out;
}

void check_pixels(std::int64_t C, std::int64_t H, std::int64_t W, const PatchEmbedding& pe,
                  const std::string& pixels_label) {
  const std::int64_t P = pe.patch;
  if (C != pe.channels)
    throw Error(fmt::format("{}: {} channels; the model takes {} ({})", pixels_label, C, pe.channels, pe.label));
  if (H % P != 0 || W % P != 0 || H < P || W < P)
    throw Error(fmt::format("{}: an image {} wide and {} high does not cut into {} x {} patches ({})", pixels_label, W,
                            H, P, P, pe.label));
}

void embed_patches(float* x, const float* pixels, std::int64_t b, std::int64_t C, std::int64_t H, std::int64_t W,
                   const PatchEmbedding& pe, const std::string& pixels_label) {
  check_pixels(C, H, W, pe, pixels_label);
  const std::int64_t P = pe.patch, E = pe.width();
  const std::int64_t gh = H / P, gw = W / P, np = gh * gw, n = 1 + np, K = C * P * P;
  const Tensor positions = grid_positions(pe, gh, gw);
  // patches (b np, C P P): each patch's pixels in the filter's (c, kh, kw) order
  Tensor patches(Shape{b * np, K}, Uninitialized{});
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t r = 0; r < gh; ++r)
      for (std::int64_t q = 0; q < gw; ++q) {
        float* row = patches.data() + ((i * gh + r) * gw + q) * K;
        for (std::int64_t c = 0; c < C; ++c)
          for (std::int64_t kh = 0; kh < P; ++kh)
            std::copy_n(pixels + ((i * C + c) * H + r * P + kh) * W + q * P, P, row + (c * P + kh) * P);
      }
  Tensor projected(Shape{b * np, E}, Uninitialized{});
  blas::linear(projected.data(), patches.data(), pe.projection, pe.bias.data(), b * np);
  for (std::int64_t i = 0; i < b; ++i) {
    float* xi = x + i * n * E;
    for (std::int64_t e = 0; e < E; ++e) xi[e] = pe.cls.data()[e] + positions.data()[e];
    for (std::int64_t p = 0; p < np; ++p)
      for (std::int64_t e = 0; e < E; ++e)
        xi[(1 + p) * E + e] = projected.data()[(i * np + p) * E + e] + positions.data()[(1 + p) * E + e];
  }
}

namespace {

// rows (b, E): the class token's row of each item.
Tensor class_rows(const float* x, std::int64_t b, std::int64_t n, std::int64_t E) {
  Tensor rows(Shape{b, E}, Uninitialized{});
  for (std::int64_t i = 0; i < b; ++i) std::copy_n(x + i * n * E, E, rows.data() + i * E);
  return rows;
}

} // namespace

void vision_pooled(float* out, const float* x, std::int64_t b, std::int64_t n, const VisionHead& head) {
  const std::int64_t E = head.pooler.dim(1);
  const Tensor rows = class_rows(x, b, n, E);
  blas::linear(out, rows.data(), head.pooler, head.pooler_bias.data(), b);
  for (std::int64_t i = 0; i < b * head.pooler.dim(0); ++i) out[i] = std::tanh(out[i]);
}

void vision_logits(float* out, const float* x, std::int64_t b, std::int64_t n, const VisionHead& head) {
  const Tensor rows = class_rows(x, b, n, head.classifier.dim(1));
  blas::linear(out, rows.data(), head.classifier, head.classifier_bias.data(), b);
}

} // namespace attn
