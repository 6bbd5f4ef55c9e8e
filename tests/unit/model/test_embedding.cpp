// Unit tests of lib/src/model/embedding.cpp: table rows scaled by sqrt(E), positions added, ids
// outside the vocabulary named with their index.
#include "attn/core/error.hpp"
#include "attn/model/embedding.hpp"
#include "attn/weights/quantize.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

using namespace attn;

TEST_CASE("embed_tokens: rows of the table times sqrt(E), no positions; a bad id named") {
  TokenEmbedding emb;
  emb.table = Tensor(Shape{3, 4}, std::vector<float>{0, 0, 0, 0, 1, 2, 3, 4, -1, -2, -3, -4});
  emb.pe = PeKind::None;
  emb.label = "m.h5:/src_embed/weight";
  const std::vector<std::int64_t> ids = {2, 1};
  std::vector<float> x(8);
  embed_tokens(x.data(), ids.data(), 1, 2, emb, 0, "ids.h5:/data");
  CHECK(x == std::vector<float>{-2, -4, -6, -8, 2, 4, 6, 8}); // sqrt(4) = 2
  emb.scaled = false;
  embed_tokens(x.data(), ids.data(), 1, 2, emb, 0, "ids.h5:/data");
  CHECK(x[0] == -1.0f);
  const std::vector<std::int64_t> bad = {1, 3};
  CHECK_THROWS_WITH_AS(
      embed_tokens(x.data(), bad.data(), 1, 2, emb, 0, "ids.h5:/data", 4),
      "ids.h5:/data: token id 3 at index [4, 1] is outside the vocabulary 0..2 of m.h5:/src_embed/weight", Error);
}

TEST_CASE("embed_tokens: sinusoidal positions from the offset") {
  TokenEmbedding emb;
  emb.table = Tensor(Shape{1, 2}, std::vector<float>{0, 0});
  emb.scaled = false;
  const std::vector<std::int64_t> ids = {0};
  std::vector<float> x(2);
  embed_tokens(x.data(), ids.data(), 1, 1, emb, 3, "ids");
  CHECK(x[0] == doctest::Approx(std::sin(3.0)).epsilon(1e-6)); // PE(3, 0) = sin(3)
  CHECK(x[1] == doctest::Approx(std::cos(3.0)).epsilon(1e-6));
}

TEST_CASE("an int8 table kept int8: rows dequantized as looked up, the bits of its float32 table") {
  // (model/ tests may use the weights layer's quantizer: the file format's int8 values and scales)
  const Tensor w = test::random_tensor(Shape{7, 40}, 11); // a last block of 8 values
  const Int8Weight q = quantize_int8(w, 32);
  TokenEmbedding compact, plain;
  compact.compact_table = std::make_shared<const LinearWeight>(LinearWeight::int8(q.q, q.scale, 32));
  plain.table = dequantize_int8(q.q, q.scale, 32, "test");
  compact.label = plain.label = "m.h5:/model/embed_tokens/weight"; // sinusoidal positions: the default
  CHECK(compact.vocab() == 7);
  CHECK(compact.width() == 40);
  const std::vector<std::int64_t> ids = {6, 0, 3, 3};
  std::vector<float> a(4 * 40), b(4 * 40);
  embed_tokens(a.data(), ids.data(), 2, 2, compact, 5, "ids");
  embed_tokens(b.data(), ids.data(), 2, 2, plain, 5, "ids");
  CHECK(a == b);
  // a tied output layer over an int8 table computes over its float32 values
  const LinearWeight gen = tied_generator(compact);
  CHECK(gen.format() == LinearWeight::Format::f32);
  CHECK(std::equal(gen.data(), gen.data() + gen.size(), plain.table.data()));
}
