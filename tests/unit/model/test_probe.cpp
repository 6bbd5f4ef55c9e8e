// Unit tests of lib/src/model/probe.cpp: the names, and a probe's ablation, patch (positions,
// heads, broadcast), steer, capture (padded rows 0) and row edits on small views. The whole
// probed forward pass is checked against a float64 reference by tests/cli/test_probe.sh.
#include "attn/core/error.hpp"
#include "attn/model/probe.hpp"

#include <doctest/doctest.h>

#include <map>
#include <vector>

using namespace attn;

TEST_CASE("activation names: each parsed back, unknown ones a usage error") {
  for (int i = 0; i < act_count; ++i) {
    const Act a = static_cast<Act>(i);
    CHECK(parse_act(act_name(a)) == a);
  }
  CHECK_THROWS_AS(parse_act("attn_weights"), UsageError);
  CHECK(per_head(Act::CrossK));
  CHECK_FALSE(per_head(Act::MlpHidden));
  CHECK(key_rows(Act::CrossV));
  CHECK(steerable(Act::CrossAttnOut));
  CHECK_FALSE(steerable(Act::MlpHidden));
  CHECK(self_form(Act::CrossResidMid) == Act::ResidMid);
}

TEST_CASE("Probe::at: ablation, then a patch at some positions and heads, then the capture with padded rows 0") {
  // z (B 2, H 2, n 3, dh 2) stored as (B, n, H dh), as multi-head attention holds it
  std::vector<float> z(24);
  for (std::size_t i = 0; i < z.size(); ++i) z[i] = static_cast<float>(i + 1);
  const ActView v{z.data(), 2, 2, 3, 2, 12, 2, 4};
  Tensor patch(Shape{2, 3, 2}); // (H, n, dh): no batch axis, broadcast
  for (std::int64_t i = 0; i < patch.size(); ++i) patch.data()[i] = -static_cast<float>(i + 1);
  Probe p;
  p.ablate(0, false, 0);
  p.patch(0, Act::Z, patch, false);
  p.patch_positions = {2};
  p.patch_heads = {1};
  p.capture(0, Act::Z);
  std::map<int, Tensor> got;
  p.set_sink([&](std::size_t layer, Act a, const Tensor& t) {
    CHECK(layer == 0);
    got[static_cast<int>(a)] = t;
  });
  Mask pad;
  pad.n = pad.m = 3;
  pad.lengths = {3, 2};
  CHECK(p.changes(0, Act::Z));
  CHECK_FALSE(p.changes(0, Act::CrossZ));
  p.at(0, Act::Z, v, &pad);
  // head 0 zeroed everywhere; head 1 patched at position 2 only
  CHECK(v.at(1, 0, 1)[0] == 0.0f);
  CHECK(v.at(0, 1, 2)[0] == patch.data()[(1 * 3 + 2) * 2]);
  CHECK(v.at(0, 1, 1)[1] == 8.0f); // untouched: item 0, position 1, head 1, element 1
  const Tensor& t = got.at(static_cast<int>(Act::Z));
  REQUIRE(t.shape() == Shape{2, 2, 3, 2});
  CHECK(t.data()[((1 * 2 + 1) * 3 + 2) * 2] == 0.0f); // item 1's position 2 is padding
  CHECK(t.data()[((0 * 2 + 1) * 3 + 1) * 2 + 1] == 8.0f);
}

TEST_CASE("Probe::at: a steer adds scale x direction by position and item; a mean ablation puts the mean") {
  std::vector<float> x(2 * 2 * 3, 1.0f); // (B 2, n 2, E 3)
  Probe p;
  Tensor dir(Shape{2, 2, 3}); // (b, n, E)
  for (std::int64_t i = 0; i < dir.size(); ++i) dir.data()[i] = static_cast<float>(i);
  p.steer(1, Act::ResidPost, dir, 0.5);
  p.first_item = 0;
  p.at(1, Act::ResidPost, rows_view(x.data(), 2, 2, 3), nullptr);
  CHECK(x[0] == 1.0f);
  CHECK(x[11] == doctest::Approx(1.0 + 0.5 * 11));
  Tensor mean(Shape{2, 1}, std::vector<float>{7, 9}); // (H, dh)
  std::vector<float> z(2 * 2, 0.0f);                  // (B 1, n 2, H 2 x dh 1)
  p.ablate(3, true, 1, &mean);
  p.at(3, Act::CrossZ, {z.data(), 1, 2, 2, 1, 4, 1, 2}, nullptr);
  CHECK(z == std::vector<float>{0, 9, 0, 9});
}

TEST_CASE("Probe::edit_rows: a batched pattern patch for the chunk's items, only the chosen rows") {
  Tensor src(Shape{3, 1, 2, 2}); // (b_total 3, H 1, n 2, m 2)
  for (std::int64_t i = 0; i < src.size(); ++i) src.data()[i] = static_cast<float>(10 + i);
  Probe p;
  p.patch(0, Act::Pattern, src, true);
  p.patch_positions = {1};
  p.first_item = 2; // the chunk starts at item 2
  std::vector<float> rows(4, 0.0f);
  p.edit_rows(0, Act::Pattern, 0, 0, 0, 2, rows.data(), 2, 2);
  CHECK(rows == std::vector<float>{0, 0, 20, 21});
  p.edit_rows(0, Act::Scores, 0, 0, 0, 2, rows.data(), 2, 2); // nothing patches the scores
  CHECK(rows == std::vector<float>{0, 0, 20, 21});
}
