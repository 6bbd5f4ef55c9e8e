// int8 weights: quantize and dequantize over odd sizes (a last block shorter than the others, one
// row, whole-row scales, an all-zero block), the error bound of half a scale step, the scales'
// shape checked, and which datasets of a weight file get quantized.
#include "attn/weights/quantize.hpp"

#include "attn/core/error.hpp"
#include "attn/core/random.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace attn;

TEST_CASE("int8 quantization: within half a step of each block's scale, over odd sizes") {
  Rng rng(5);
  for (const auto& [rows, in, block] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{3, 37, 32},
                                        {1, 5, 32},
                                        {4, 64, 0},
                                        {2, 70, 7},
                                        {5, 1, 1}}) {
    CAPTURE(rows);
    CAPTURE(in);
    CAPTURE(block);
    Tensor w(Shape{rows, in});
    for (auto& x : w.span()) x = static_cast<float>(rng.normal() * (rng.uniform() < 0.05 ? 20 : 1)); // outliers
    if (in > 1) std::fill_n(w.data(), std::min<std::int64_t>(in, block > 0 ? block : in), 0.0f);     // a zero block
    const Int8Weight q = quantize_int8(w, block);
    const std::int64_t b = block > 0 ? block : in, blocks = (in + b - 1) / b;
    CHECK(q.scale.shape() == Shape{rows, blocks});
    const Tensor back = dequantize_int8(q.q, q.scale, block, "test");
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < in; ++j) {
        const std::int64_t v = q.q.data()[i * in + j];
        CHECK(v >= -127);
        CHECK(v <= 127);
        const float scale = q.scale.data()[i * blocks + j / b];
        CHECK(std::abs(back.data()[i * in + j] - w.data()[i * in + j]) <= 0.5f * scale * (1 + 1e-5f) + 1e-30f);
      }
    // each block's largest magnitude is exactly +-127 steps
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t k = 0; k < blocks; ++k) {
        std::int64_t top = 0;
        for (std::int64_t j = k * b; j < std::min(in, (k + 1) * b); ++j)
          top = std::max<std::int64_t>(top, std::abs(q.q.data()[i * in + j]));
        CHECK((top == 127 || q.scale.data()[i * blocks + k] == 0.0f));
      }
  }
  const Int8Weight q = quantize_int8(Tensor(Shape{2, 10}), 4);
  CHECK_THROWS_WITH_AS(dequantize_int8(q.q, Tensor(Shape{2, 2}), 4, "w.h5:/x_scale"),
                       doctest::Contains("w.h5:/x_scale: expected shape (2, 3)"), Error);
}

TEST_CASE("which datasets are quantized: Linear weights, not embeddings (unless all), never vectors") {
  CHECK(is_quantized_weight("layers/0/linear1/weight", {8, 4}, false));
  CHECK(is_quantized_weight("layers/0/self_attn/in_proj_weight", {12, 4}, false));
  CHECK(is_quantized_weight("transformer/h/0/attn/c_attn/weight", {4, 12}, false));
  CHECK(!is_quantized_weight("layers/0/norm1/weight", {4}, false));
  CHECK(!is_quantized_weight("layers/0/linear1/bias", {8}, false));
  CHECK(!is_quantized_weight("src_embed/weight", {10, 4}, false));
  CHECK(!is_quantized_weight("model/embed_tokens/weight", {10, 4}, false));
  CHECK(!is_quantized_weight("transformer/wte/weight", {10, 4}, false));
  CHECK(is_quantized_weight("src_embed/weight", {10, 4}, true));
  CHECK(!is_quantized_weight("layers/0/self_attn/features", {16, 4}, true));
}
