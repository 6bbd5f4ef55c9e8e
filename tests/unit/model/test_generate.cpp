// Unit tests of lib/src/model/generate.cpp's pieces (the whole generation is checked against
// PyTorch by the CLI goldens): the K best tokens of a row, and a batch's tokens gathered by chunk.
#include "attn/model/generate.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace attn;

TEST_CASE("top_tokens: the K largest logits, the lower token first among equals") {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 3.0f};
  std::vector<std::int64_t> best;
  top_tokens(logits.data(), 6, 3, best);
  CHECK(best == std::vector<std::int64_t>{5, 1, 3});
  top_tokens(logits.data(), 6, 1, best);
  CHECK(best == std::vector<std::int64_t>{5});
  top_tokens(logits.data(), 6, 6, best);
  CHECK(best == std::vector<std::int64_t>{5, 1, 3, 4, 0, 2});
}

TEST_CASE("GeneratedBatch: chunks of rows padded to max_len, trimmed to the longest row") {
  GeneratedBatch batch(3, 5, 0);
  Generated first; // items 0 and 1: rows of 2 tokens
  first.tokens = TensorI(Shape{2, 2}, std::vector<std::int64_t>{7, 2, 8, 2});
  first.scores = {-1.0, -2.0};
  batch.add(0, first);
  Generated second; // item 2: 3 tokens
  second.tokens = TensorI(Shape{1, 3}, std::vector<std::int64_t>{9, 9, 2});
  second.scores = {-3.5};
  batch.add(2, second);
  CHECK(batch.longest == 3);
  const TensorI out = batch.trimmed();
  REQUIRE(out.shape() == Shape{3, 3});
  CHECK(std::vector<std::int64_t>(out.data(), out.data() + 9) == std::vector<std::int64_t>{7, 2, 0, 8, 2, 0, 9, 9, 2});
  CHECK(batch.scores[0] == -1.0f);
  CHECK(batch.scores[2] == -3.5f);
  CHECK(batch.tokens[4] == 0); // row 0 padded to max_len
}

TEST_CASE("target_logits: x W^T + b per position, padded positions 0") {
  Generator gen;
  gen.weight = LinearWeight(Tensor(Shape{3, 2}, std::vector<float>{1, 0, 0, 1, 1, 1})); // (V, E)
  gen.bias = Tensor(Shape{3}, std::vector<float>{0.5f, 0, 0});
  const std::vector<float> x = {1, 2, 3, 4}; // (1, 2, 2)
  Mask mask;
  mask.n = mask.m = 2, mask.lengths = {1}; // position 1 is padding
  std::vector<float> logits(6, -1.0f);
  target_logits(logits.data(), x.data(), gen, 1, 2, mask);
  CHECK(logits == std::vector<float>{1.5f, 2, 3, 0, 0, 0});
}
