// The mask (lib/mask): which keys a query sees, broadcast mask tensors, the keys appended for
// add_bias_kv and add_zero_attn, a batch part's mask, and the zeroing of padded rows.
#include "attn/attention/mask.hpp"
#include "attn/core/error.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <stdexcept>

using namespace attn;

TEST_CASE("masks: alignment of queries to the end of the keys, patterns, broadcasting") {
  Mask mk;
  mk.n = 2, mk.m = 5, mk.causal = true; // query 0 stands at key 3, query 1 at key 4
  CHECK(mk.allowed(0, 0, 0, 3));
  CHECK_FALSE(mk.allowed(0, 0, 0, 4));
  CHECK(mk.allowed(0, 0, 1, 4));
  mk.causal = false;
  mk.window = 1;
  CHECK(mk.allowed(0, 0, 0, 2));
  CHECK(mk.allowed(0, 0, 0, 4));
  CHECK_FALSE(mk.allowed(0, 0, 0, 1));
  std::int64_t lo, hi;
  mk.key_range(0, 0, 1, lo, hi);
  CHECK(lo == 2);
  CHECK(hi == 5);
  mk.window = -1, mk.stride = 2;
  CHECK(mk.allowed(0, 0, 0, 1));
  CHECK_FALSE(mk.allowed(0, 0, 0, 2));
  CHECK_THROWS_WITH_AS(broadcast_mask(std::vector<float>(6), {2, 3}, 1, 1, 2, 5, "m.h5:/mask"),
                       "m.h5:/mask: shape (2, 3) does not broadcast to (batch, heads, n, m) = (1, 1, 2, 5)", Error);
  auto bm = broadcast_mask(std::vector<float>{1, 2, 3, 4, 5}, {1, 5}, 3, 2, 2, 5, "m");
  CHECK(bm->at(2, 1, 1, 4) == 5.0f);
  CHECK_THROWS_AS(broadcast_mask(std::vector<float>(5), {5}, 1, 1, 1, 5, "m"), Error);
}

TEST_CASE("with_extra_keys: the keys appended for add_bias_kv and add_zero_attn are seen by every query") {
  Mask mk; // 2 items, 3 queries at keys 1..3 of 4, causal, item 1 of length 2, a per-head bias
  mk.n = 3, mk.m = 4, mk.causal = true;
  mk.lengths = {4, 2};
  mk.bias = broadcast_mask({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24},
                           {1, 2, 3, 4}, 2, 2, 3, 4, "bias");
  const Mask x = with_extra_keys(mk, 2, 2, 3, 2);
  CHECK(x.m == 6);
  CHECK_FALSE(x.causal);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t i = 0; i < 3; ++i) {
        for (std::int64_t j = 0; j < 4; ++j) {
          CHECK(x.allowed(b, h, i, j) == mk.allowed(b, h, i, j));
          CHECK(x.bias->at(b, h, i, j) == mk.bias->at(b, h, i, j));
        }
        for (std::int64_t j = 4; j < 6; ++j) {
          CHECK(x.allowed(b, h, i, j));
          CHECK(x.bias->at(b, h, i, j) == 0.0f);
        }
      }
  CHECK(x.padding(1, 2)); // beyond item 1's length, as before
  CHECK_FALSE(x.padding(1, 4));
  CHECK_FALSE(x.padding(1, 5));
  CHECK(x.key_padding.size() == 12);
  Mask plain; // no mask at all stays none: the kernel's fast path
  plain.n = 3, plain.m = 4;
  const Mask y = with_extra_keys(plain, 2, 2, 3, 1);
  CHECK(y.m == 5);
  CHECK_FALSE(y.blocked);
  CHECK_FALSE(y.bias);
  CHECK(y.key_padding.empty());
  plain.window = 1;
  CHECK_THROWS_AS(with_extra_keys(plain, 2, 2, 3, 1), std::logic_error);
}

TEST_CASE("mask_items: a batch part carries every part of the mask, broadcast tensors sliced or shared") {
  Mask mk;
  mk.n = 2, mk.m = 3, mk.causal = true, mk.window = 1, mk.top_k = 2;
  mk.lengths = {3, 1, 2};
  // a per-item blocked mask (3, 1, 2, 3): item b blocks key b of query 0; an additive bias for all
  std::vector<float> blocked(18, 0.0f);
  for (int b = 0; b < 3; ++b) blocked[static_cast<std::size_t>(b * 6 + b)] = 1.0f;
  mk.blocked = broadcast_mask(blocked, {3, 1, 2, 3}, 3, 1, 2, 3, "blocked");
  mk.bias = broadcast_mask({0.5f, 1.5f, 2.5f}, {1, 3}, 3, 1, 2, 3, "bias");
  const Mask part = mask_items(mk, 1, 2, 1, 2);
  CHECK(part.causal);
  CHECK(part.window == 1);
  CHECK(part.top_k == 2);
  CHECK(part.lengths == std::vector<std::int64_t>{1, 2});
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 3; ++j) {
        CHECK(part.allowed(b, 0, i, j) == mk.allowed(b + 1, 0, i, j));
        CHECK(part.bias->at(b, 0, i, j) == mk.bias->at(b + 1, 0, i, j));
      }
  CHECK_THROWS_AS(mask_items(mk, 0, 1, 2, 2), std::logic_error); // only padding repeats for beams
}

TEST_CASE("zero_padding and zero_padding_rows: padded positions are exactly 0") {
  Mask mk;
  mk.n = mk.m = 3;
  mk.lengths = {3, 2};
  std::vector<float> x(2 * 3 * 4, 1.0f);
  zero_padding(x.data(), 2, 3, 4, mk);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == (i >= 20 ? 0.0f : 1.0f)); // item 1, position 2
  std::vector<float> w(1 * 2 * 3 * 3, 1.0f); // item 1 of the mask: (1, H = 2, 3, 3)
  zero_padding_rows(w.data(), 1, 2, 3, 3, mk, 1);
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 3; ++j)
        CHECK(w[static_cast<std::size_t>((h * 3 + i) * 3 + j)] == (i == 2 ? 0.0f : 1.0f));
}
