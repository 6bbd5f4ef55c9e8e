// Unit tests of lib/src/model/vision.cpp: patches in the convolution's order, the class token and
// positions, bicubic position grids; the numbers against PyTorch are tests/cli/test_vit.sh's.
#include "attn/core/error.hpp"
#include "attn/model/vision.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace attn;

namespace {
// 1 channel, patches of 2, E = 1: the projection sums a patch's 4 pixels times 1, 10, 100, 1000.
PatchEmbedding sum_patches(std::int64_t grid) {
  PatchEmbedding pe;
  pe.channels = 1, pe.patch = 2, pe.grid_h = pe.grid_w = grid;
  Tensor w(Shape{1, 4});
  w.data()[0] = 1, w.data()[1] = 10, w.data()[2] = 100, w.data()[3] = 1000;
  pe.projection = LinearWeight(w);
  pe.bias = Tensor(Shape{1});
  pe.cls = Tensor(Shape{1});
  pe.cls.data()[0] = 7;
  pe.positions = Tensor(Shape{1 + grid * grid, 1}); // zeros
  pe.label = "proj";
  return pe;
}
} // namespace

TEST_CASE("patches: the class token first, then patch (r, c) row by row, each in (kh, kw) order") {
  const PatchEmbedding pe = sum_patches(2);
  Tensor pixels(Shape{1, 1, 4, 4}); // pixel (y, x) = 4 y + x
  for (std::int64_t i = 0; i < 16; ++i) pixels.data()[i] = static_cast<float>(i);
  Tensor x(Shape{1, 5, 1});
  embed_patches(x.data(), pixels.data(), 1, 1, 4, 4, pe, "px");
  CHECK(x.data()[0] == 7);
  // patch (0, 1): pixels 2, 3, 6, 7
  CHECK(x.data()[2] == 2 + 30 + 600 + 7000);
  // patch (1, 0): pixels 8, 9, 12, 13
  CHECK(x.data()[3] == 8 + 90 + 1200 + 13000);
  CHECK_THROWS_WITH_AS(embed_patches(x.data(), pixels.data(), 1, 1, 4, 3, pe, "px"),
                       doctest::Contains("px: an image 3 wide and 4 high does not cut into 2 x 2 patches"), Error);
  CHECK_THROWS_WITH_AS(embed_patches(x.data(), pixels.data(), 1, 3, 4, 4, pe, "px"),
                       doctest::Contains("px: 3 channels; the model takes 1 (proj)"), Error);
}

TEST_CASE("position grids: the model's own as they are; another size bicubically, constants kept") {
  PatchEmbedding pe = sum_patches(3);
  for (std::int64_t i = 0; i < 10; ++i) pe.positions.data()[i] = i == 0 ? -1.0f : 2.5f;
  const Tensor same = grid_positions(pe, 3, 3);
  CHECK(test::max_abs_diff(same.span(), pe.positions.span()) == 0.0);
  const Tensor grown = grid_positions(pe, 5, 4);
  REQUIRE(grown.shape() == Shape{21, 1});
  CHECK(grown.data()[0] == -1.0f);
  for (std::int64_t i = 1; i < 21; ++i) CHECK(std::abs(grown.data()[i] - 2.5f) < 1e-6);
}
