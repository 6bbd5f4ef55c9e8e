// The blocked and row-block kernels against the float64 reference, over grids of odd shapes
// (1, 7, 63, 130; n != m), every mask kind, causal, window and the other sparse patterns.
#include "attn/attention/attention.hpp"
#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/blas.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>

using namespace attn;
using test::random_tensor;

namespace {

struct Problem {
  std::int64_t b, h, n, m, d, dv;
  Tensor q, k, v;
  Problem(std::int64_t b_, std::int64_t h_, std::int64_t n_, std::int64_t m_, std::int64_t d_, std::int64_t dv_)
      : b(b_), h(h_), n(n_), m(m_), d(d_), dv(dv_), q(random_tensor({b_, h_, n_, d_}, 1)),
        k(random_tensor({b_, h_, m_, d_}, 2)), v(random_tensor({b_, h_, m_, dv_}, 3)) {}

  // Runs `kernel`; returns out, weights (when asked) and scores (when asked).
  std::tuple<Tensor, Tensor, Tensor> run(const std::function<void(const Attention&)>& kernel, const Mask& mask,
                                         bool want_weights, KeyTiles tiles = {}, HalfView v16 = {}) const {
    DotScorer scorer({q.data(), h * n * d, n * d, d}, {k.data(), h * m * d, m * d, d}, d, 1,
                     1.0f / std::sqrt(static_cast<float>(d)), tiles);
    Tensor out(Shape{b, h, n, dv}), w(Shape{b, h, n, m}), s(Shape{b, h, n, m});
    Attention a;
    a.batch = b, a.heads = h, a.n = n, a.m = m, a.dv = dv;
    a.scorer = &scorer;
    a.v = {v.data(), h * m * dv, m * dv, dv};
    a.v_f16 = v16;
    a.mask = &mask;
    a.out = {out.data(), h * n * dv, n * dv, dv};
    if (want_weights) {
      a.weights = {w.data(), h * n * m, n * m, m};
      a.scores = {s.data(), h * n * m, n * m, m};
    }
    kernel(a);
    return {std::move(out), std::move(w), std::move(s)};
  }
};

Mask make_mask(const Problem& p, const std::string& kind) {
  Mask mk;
  mk.n = p.n, mk.m = p.m;
  Rng rng(99);
  if (kind == "causal") mk.causal = true;
  if (kind == "lengths") {
    for (std::int64_t bi = 0; bi < p.b; ++bi)
      mk.lengths.push_back(bi == 0 ? 0 : std::max<std::int64_t>(1, p.m / 2 + bi));
  }
  if (kind == "padding") {
    for (std::int64_t i = 0; i < p.b * p.m; ++i) mk.key_padding.push_back(rng.uniform() < 0.3);
  }
  if (kind == "bool") { // (n, m), with the first query fully blocked
    std::vector<float> v(static_cast<std::size_t>(p.n * p.m));
    for (std::int64_t i = 0; i < p.n * p.m; ++i) v[static_cast<std::size_t>(i)] = i < p.m || rng.uniform() < 0.4;
    mk.blocked = broadcast_mask(std::move(v), {p.n, p.m}, p.b, p.h, p.n, p.m, "mask");
  }
  if (kind == "bias") { // (b, 1, n, m) additive, with some -inf
    std::vector<float> v(static_cast<std::size_t>(p.b * p.n * p.m));
    for (auto& x : v) x = rng.uniform() < 0.1 ? -INFINITY : static_cast<float>(rng.normal());
    mk.bias = broadcast_mask(std::move(v), {p.b, 1, p.n, p.m}, p.b, p.h, p.n, p.m, "bias");
  }
  if (kind == "relative+causal") { // T5's bias, causal buckets, one table per head
    std::vector<float> table;
    for (std::int64_t i = 0; i < 8 * p.h; ++i) table.push_back(static_cast<float>(rng.normal()));
    mk.relative = std::make_shared<const RelativeBias>(RelativeBuckets{8, 20, false}, p.h, std::move(table), "t");
    mk.causal = true;
  }
  if (kind == "window") mk.window = 5;
  if (kind == "window+causal") mk.window = 3, mk.causal = true;
  if (kind == "window 27") mk.window = 27; // m = 300, one query: keys from 272, inside a block of 32 or more
  if (kind == "stride+causal") mk.stride = 4, mk.causal = true;
  if (kind == "global+window") {
    mk.window = 1;
    mk.global.assign(static_cast<std::size_t>(p.m), 0);
    mk.global[0] = 1;
    mk.global[static_cast<std::size_t>(p.m / 2)] = 1;
  }
  if (kind == "top-k") mk.top_k = std::min<std::int64_t>(3, p.m);
  if (kind == "top-k+causal") mk.top_k = 2, mk.causal = true;
  return mk;
}

} // namespace

TEST_CASE("fast kernels agree with the float64 reference over shapes and masks") {
  struct Size {
    std::int64_t b, h, n, m, d, dv;
  };
  for (int threads : {1, 2}) {
    blas::set_threads(threads);
    for (Size sz : {Size{1, 1, 1, 1, 4, 3}, Size{2, 1, 7, 7, 8, 5}, Size{1, 2, 63, 130, 16, 7},
                    Size{2, 1, 130, 63, 5, 9}, Size{1, 1, 130, 300, 32, 16}, Size{1, 1, 300, 300, 8, 8}})
      for (const char* kind : {"none", "causal", "lengths", "padding", "bool", "bias", "relative+causal", "window",
                               "window+causal", "stride+causal", "global+window", "top-k", "top-k+causal"}) {
        const Problem p(sz.b, sz.h, sz.n, sz.m, sz.d, sz.dv);
        const Mask mk = make_mask(p, kind);
        INFO("kind=" << kind << " b=" << sz.b << " h=" << sz.h << " n=" << sz.n << " m=" << sz.m
                     << " threads=" << threads);
        auto [ref_out, ref_w, ref_s] = p.run(attention_reference, mk, true);
        auto [rows_out, rows_w, rows_s] = p.run(attention_rows, mk, true);
        CHECK(test::max_abs_diff(rows_out.span(), ref_out.span()) < 2e-5);
        CHECK(test::max_abs_diff(rows_w.span(), ref_w.span()) < 2e-6);
        CHECK(test::max_abs_diff(rows_s.span(), ref_s.span()) < 2e-5);
        if (mk.top_k == 0) {
          auto [blk_out, unused_w, unused_s] = p.run(attention_blocked, mk, false);
          CHECK(test::max_abs_diff(blk_out.span(), ref_out.span()) < 2e-5);
        }
        for (float x : rows_out.span()) REQUIRE(std::isfinite(x));
      }
  }
  blas::set_threads(0);
}

TEST_CASE("a relative bias gives the bits of the same bias as a mask tensor") {
  const Problem p(2, 3, 9, 40, 8, 4);
  Rng rng(5);
  std::vector<float> table;
  for (std::int64_t i = 0; i < 16 * p.h; ++i) table.push_back(static_cast<float>(rng.normal()));
  const auto rb = std::make_shared<const RelativeBias>(RelativeBuckets{16, 24, true}, p.h, std::move(table), "t");
  Mask relative, tensor;
  relative.n = tensor.n = p.n, relative.m = tensor.m = p.m;
  relative.relative = rb;
  std::vector<float> bias(static_cast<std::size_t>(p.h * p.n * p.m));
  relative_bias(bias.data(), *rb, p.n, p.m);
  tensor.bias = broadcast_mask(std::move(bias), {1, p.h, p.n, p.m}, p.b, p.h, p.n, p.m, "bias");
  for (auto kernel : {attention_rows, attention_blocked, attention_reference}) {
    auto [a_out, a_w, a_s] = p.run(kernel, relative, kernel != attention_blocked);
    auto [b_out, b_w, b_s] = p.run(kernel, tensor, kernel != attention_blocked);
    CHECK(test::max_abs_diff(a_out.span(), b_out.span()) == 0.0);
    CHECK(test::max_abs_diff(a_w.span(), b_w.span()) == 0.0);
  }
  // and it changes the result
  Mask none;
  none.n = p.n, none.m = p.m;
  auto [r_out, r_w, r_s] = p.run(attention_rows, relative, false);
  auto [n_out, n_w, n_s] = p.run(attention_rows, none, false);
  CHECK(test::max_abs_diff(r_out.span(), n_out.span()) > 1e-3);
}

TEST_CASE("the dot-product kernels: the same bits on every instruction set and in any lane of a block") {
  struct Size {
    std::int64_t b, h, n, m, d, dv;
  };
  // n >= 16: the fused kernel (and n = 130, 300 also few-query blocks); n < 16: few_scores and few_values
  for (Size sz :
       {Size{1, 1, 16, 1, 1, 1}, Size{1, 2, 17, 65, 5, 9}, Size{2, 1, 130, 200, 64, 64}, Size{1, 1, 300, 129, 80, 3},
        Size{1, 1, 40, 7, 12, 12}, Size{2, 1, 1, 300, 64, 64}, Size{1, 2, 15, 33, 17, 70}, Size{1, 1, 9, 1, 3, 1}})
    for (const char* kind : {"none", "causal", "lengths", "bias", "window+causal"}) {
      const Problem p(sz.b, sz.h, sz.n, sz.m, sz.d, sz.dv);
      const Mask mk = make_mask(p, kind);
      INFO("kind=" << kind << " b=" << sz.b << " h=" << sz.h << " n=" << sz.n << " m=" << sz.m << " d=" << sz.d
                   << " dv=" << sz.dv);
      auto on = [&](blas::Isa isa) {
        return std::get<0>(p.run([isa](const Attention& a) { attention_blocked_on(isa, a); }, mk, false));
      };
      const Tensor scalar = on(blas::Isa::scalar);
      auto [ref_out, ref_w, ref_s] = p.run(attention_reference, mk, false);
      CHECK(test::max_abs_diff(scalar.span(), ref_out.span()) < 2e-5);
      for (blas::Isa isa : {blas::Isa::avx2, blas::Isa::avx512}) {
        if (!blas::isa_available(isa)) continue; // this CPU cannot run it; the others still must agree
        INFO(blas::isa_name(isa));
        const Tensor out = on(isa);
        CHECK(test::max_abs_diff(out.span(), scalar.span()) == 0.0);
      }
    }
  // Query 5 of a block of 20 and of a block of 128 (n = 130): the same bits.
  const Problem wide(1, 1, 130, 100, 24, 8);
  Problem narrow(1, 1, 20, 100, 24, 8);
  std::copy_n(wide.q.data(), 20 * 24, narrow.q.data());
  Mask mk_wide, mk_narrow;
  mk_wide.n = 130, mk_narrow.n = 20, mk_wide.m = mk_narrow.m = 100;
  const Tensor a = std::get<0>(wide.run(attention_blocked, mk_wide, false));
  const Tensor b = std::get<0>(narrow.run(attention_blocked, mk_narrow, false));
  for (std::int64_t c = 0; c < 8; ++c) CHECK(a[5 * 8 + c] == b[5 * 8 + c]);
}

namespace {

// Few queries (under 16: the steps' path) over odd sizes: one query over a partial last tile of
// keys, dk and dv off the vector width (dv 70: a partial fifth vector), a single key.
struct FewSize {
  std::int64_t b, h, n, m, d, dv;
};
const FewSize few_sizes[] = {{2, 2, 1, 300, 64, 64}, {1, 3, 9, 37, 17, 5}, {1, 1, 15, 1, 3, 2}, {2, 1, 4, 16, 8, 70}};

// The blocks of keys KeyTiles may have: one tile, those the kernels read at once, and wider.
const std::int64_t key_widths[] = {16, 32, 64, 128};

// f(problem, mask, kind, width) for every few-query size, mask kind ("window 27": one query's keys
// start inside a block of 32 or more) and key tile width.
template <class F> void each_few_case(const F& f) {
  for (const FewSize& sz : few_sizes)
    for (const std::string kind : {"none", "lengths", "bias", "window+causal", "window 27"})
      for (const std::int64_t width : key_widths) {
        const Problem p(sz.b, sz.h, sz.n, sz.m, sz.d, sz.dv);
        INFO("kind=" << kind << " b=" << sz.b << " h=" << sz.h << " n=" << sz.n << " m=" << sz.m << " d=" << sz.d
                     << " width=" << width);
        f(p, make_mask(p, kind), kind, width);
      }
}

} // namespace

TEST_CASE("key tiles: key j's value c in blocks of `width` keys, zero past the last key") {
  const std::int64_t m = 37, d = 3, ldk = 5;
  std::vector<float> k(static_cast<std::size_t>(m * ldk));
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i + 1);
  for (const std::int64_t width : key_widths) {
    CAPTURE(width);
    const std::int64_t per = key_tiles_floats(m, d, width);
    CHECK(per == (m + width - 1) / width * width * d);
    std::vector<float> t(static_cast<std::size_t>(per), -1.0f);
    to_key_tiles(t.data(), k.data(), 1, m, ldk, 1, d, width);
    for (std::int64_t j = 0; j < per / d; ++j)
      for (std::int64_t c = 0; c < d; ++c)
        CHECK(t[static_cast<std::size_t>(((j / width) * d + c) * width + j % width)] ==
              (j < m ? k[static_cast<std::size_t>(j * ldk + c)] : 0.0f));
  }
  CHECK(key_tile_width(false) % 16 == 0);
  CHECK(key_tile_width(true) % 16 == 0);
}

TEST_CASE("few queries over keys in column tiles: the bits of the keys' rows, on every instruction set") {
  each_few_case([](const Problem& p, const Mask& mk, const std::string&, std::int64_t width) {
    const std::int64_t per = key_tiles_floats(p.m, p.d, width);
    std::vector<float> tiles(static_cast<std::size_t>(p.b * p.h * per), -1.0f);
    to_key_tiles(tiles.data(), p.k.data(), p.b * p.h, p.m, p.d, 1, p.d, width); // each head an item of one head
    for (blas::Isa isa : {blas::Isa::scalar, blas::Isa::avx2, blas::Isa::avx512}) {
      if (!blas::isa_available(isa)) continue;
      INFO(blas::isa_name(isa));
      const auto on = [&](KeyTiles kt) {
        return std::get<0>(p.run([isa](const Attention& a) { attention_blocked_on(isa, a); }, mk, false, kt));
      };
      const Tensor rows = on({}), tiled = on({tiles.data(), nullptr, p.h * per, per, width});
      CHECK(test::max_abs_diff(tiled.span(), rows.span()) == 0.0);
    }
  });
}

TEST_CASE("few queries over float16 key tiles and values: the bits of float32 rows of the rounded values") {
  const auto rounded = [](const Tensor& t) {
    Tensor r = t;
    for (float& x : r.span()) x = f16_to_float(to_half(x, HalfKind::F16));
    return r;
  };
  each_few_case([&](const Problem& p, const Mask& mk, const std::string& kind, std::int64_t width) {
    const std::int64_t per = key_tiles_floats(p.m, p.d, width);
    std::vector<std::uint16_t> tiles(static_cast<std::size_t>(p.b * p.h * per), 0xffffu);
    to_key_tiles(tiles.data(), p.k.data(), p.b * p.h, p.m, p.d, 1, p.d, width); // rounds
    std::vector<std::uint16_t> v16(static_cast<std::size_t>(p.v.size()));
    floats_to_f16(v16.data(), p.v.data(), p.v.size());
    // Expected: float32 rows of the rounded keys and values. Given: float32 values unrounded, so
    // only the float16 copy gives the expected values; keys unrounded too except under a window
    // (whose first key is not a tile's: those scores come from the float32 rows).
    Problem expect = p, given = p;
    expect.k = rounded(p.k), expect.v = rounded(p.v);
    if (kind.rfind("window", 0) == 0) given.k = expect.k;
    for (blas::Isa isa : {blas::Isa::scalar, blas::Isa::avx2, blas::Isa::avx512}) {
      if (!blas::isa_available(isa)) continue;
      INFO(blas::isa_name(isa));
      const auto kernel = [isa](const Attention& a) { attention_blocked_on(isa, a); };
      const Tensor want = std::get<0>(expect.run(kernel, mk, false));
      const Tensor got = std::get<0>(given.run(kernel, mk, false, {nullptr, tiles.data(), p.h * per, per, width},
                                               {v16.data(), p.h * p.m * p.dv, p.m * p.dv, p.dv}));
      CHECK(test::max_abs_diff(got.span(), want.span()) == 0.0);
      const Tensor unrounded = std::get<0>(p.run(kernel, mk, false));
      const bool all_masked = std::all_of(want.span().begin(), want.span().end(), [](float o) { return o == 0; });
      if (!all_masked) CHECK(test::max_abs_diff(got.span(), unrounded.span()) > 0.0); // the copies were read
    }
  });
}

TEST_CASE("a query that sees no key gets zero weights and a zero result") {
  const Problem p(2, 1, 5, 6, 4, 3);
  Mask mk = make_mask(p, "lengths"); // batch item 0 has no valid key
  for (auto kernel : {attention_reference, attention_rows, attention_blocked}) {
    auto [out, w, s] = p.run(kernel, mk, kernel != attention_blocked);
    for (std::int64_t i = 0; i < 5 * 3; ++i) CHECK(out[i] == 0.0f);
    if (kernel != attention_blocked)
      for (std::int64_t i = 0; i < 5 * 6; ++i) CHECK(w[i] == 0.0f);
  }
}

TEST_CASE("softmax is accurate to a few ulp over the whole exponent range, and exactly 0 below it") {
  // One query over m keys with scores 0, -0.1, ..., -99.9 (q = 1, k_j = score, d = 1, scale 1).
  const std::int64_t m = 1000;
  Tensor q(Shape{1, 1, 1}, std::vector<float>{1.0f}), k(Shape{1, m, 1}), v(Shape{1, m, 1});
  for (std::int64_t j = 0; j < m; ++j) k[j] = v[j] = -0.1f * static_cast<float>(j);
  std::vector<double> ref(static_cast<std::size_t>(m));
  double sum = 0, expect_out = 0;
  for (std::int64_t j = 0; j < m; ++j) sum += ref[static_cast<std::size_t>(j)] = std::exp(static_cast<double>(k[j]));
  for (std::int64_t j = 0; j < m; ++j) expect_out += (ref[static_cast<std::size_t>(j)] /= sum) * v[j];
  DotScorer scorer({q.data(), 1, 0, 1}, {k.data(), m, 0, 1}, 1, 1, 1.0f);
  Mask mask;
  mask.n = 1, mask.m = m;
  Tensor w(Shape{1, 1, m}), out(Shape{1, 1, 1}), out_blocked(Shape{1, 1, 1});
  Attention a;
  a.n = 1, a.m = m, a.dv = 1, a.scorer = &scorer, a.mask = &mask;
  a.v = {v.data(), m, 0, 1};
  a.out = {out.data(), 1, 0, 1};
  a.weights = {w.data(), m, 0, m};
  attention_rows(a);
  for (std::int64_t j = 0; j < m; ++j) {
    const double r = ref[static_cast<std::size_t>(j)];
    CAPTURE(j);
    if (k[j] < -87.3f)
      CHECK(w[j] == 0.0f); // e^x below FLT_MIN relative to the largest term
    else
      CHECK(std::abs(w[j] - r) <= 4 * 6e-8 * r + 1e-44); // 4 ulp, or a few subnormal steps
  }
  a.weights = {};
  a.out = {out_blocked.data(), 1, 0, 1};
  attention_blocked(a);
  CHECK(out[0] == doctest::Approx(expect_out).epsilon(1e-6));
  CHECK(out_blocked[0] == doctest::Approx(expect_out).epsilon(1e-6));
  // 16 queries: the fused kernel, whose exponential is the same polynomial
  Tensor q16(Shape{16, 1}), out16(Shape{16, 1});
  for (auto& x : q16.span()) x = 1.0f;
  DotScorer scorer16({q16.data(), 16, 0, 1}, {k.data(), m, 0, 1}, 1, 1, 1.0f);
  Mask mask16;
  mask16.n = 16, mask16.m = m;
  a.n = 16, a.scorer = &scorer16, a.mask = &mask16;
  a.out = {out16.data(), 16, 0, 1};
  attention_blocked(a);
  for (float x : out16.span()) CHECK(x == doctest::Approx(expect_out).epsilon(1e-6));
}
