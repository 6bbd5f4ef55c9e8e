// Multi-head attention against a float64 implementation written here from the definitions
// (projections, per-head softmax, grouped KV heads, RoPE, padding), PyTorch's initialisation, and
// the save/load round trip.
#include "attn/attention/posenc.hpp"
#include "attn/core/error.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/model/mha.hpp"
#include "attn/weights/mha_weights.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

using namespace attn;
using test::random_tensor;

namespace {

// Random weights (biases nonzero) of the given shape, packed or separate.
MhaWeights random_weights(const MhaShape& s, bool packed, std::uint64_t seed) {
  MhaWeights w;
  w.shape = s;
  const std::int64_t E = s.embed_dim, kv = s.kv_dim();
  if (packed) {
    w.in_proj_weight = random_tensor({E + 2 * kv, E}, seed, 0.3);
  } else {
    w.q_proj_weight = random_tensor({E, E}, seed, 0.3);
    w.k_proj_weight = random_tensor({kv, s.kdim}, seed + 1, 0.3);
    w.v_proj_weight = random_tensor({kv, s.vdim}, seed + 2, 0.3);
  }
  w.in_proj_bias = random_tensor({E + 2 * kv}, seed + 3, 0.3);
  w.out_proj_weight = random_tensor({E, E}, seed + 4, 0.3);
  w.out_proj_bias = random_tensor({E}, seed + 5, 0.3);
  return w;
}

// y (rows, out) = x W^T + b in double.
std::vector<double> linear_ref(const float* x, const float* w, const float* b, std::int64_t rows, std::int64_t in,
                               std::int64_t out) {
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < out; ++o) {
      double s = b ? b[o] : 0.0;
      for (std::int64_t i = 0; i < in; ++i) s += static_cast<double>(x[r * in + i]) * w[o * in + i];
      y[static_cast<std::size_t>(r * out + o)] = s;
    }
  return y;
}

// Rotate-half RoPE of x (rows, heads * dh) at positions offset + (row % n).
void rope_ref(std::vector<double>& x, std::int64_t rows, std::int64_t n, std::int64_t heads, std::int64_t dh,
              std::int64_t offset) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < dh / 2; ++i) {
        const double angle = static_cast<double>(offset + r % n) * std::pow(10000.0, -2.0 * i / dh);
        double& a = x[static_cast<std::size_t>(r * heads * dh + h * dh + i)];
        double& b = x[static_cast<std::size_t>(r * heads * dh + h * dh + i + dh / 2)];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(angle) - b0 * std::sin(angle);
        b = b0 * std::cos(angle) + a0 * std::sin(angle);
      }
}

struct Result {
  std::vector<double> out, weights; // (B, n, E), (B, H, n, m)
};

// The definitions, with causal masking and key lengths (which also pad queries in self-attention).
Result mha_ref(const MhaWeights& w, const Tensor& xq, const Tensor& xk, const Tensor& xv, bool self, bool causal,
               const std::vector<std::int64_t>& lengths, bool rope) {
  const MhaShape& s = w.shape;
  const std::int64_t B = xq.dim(0), n = xq.dim(1), m = xk.dim(1), E = s.embed_dim, H = s.heads, dh = s.head_dim(),
                     G = s.kv_heads, kv = s.kv_dim();
  auto q = linear_ref(xq.data(), w.w_q().data(), w.b_q(), B * n, E, E);
  auto k = linear_ref(xk.data(), w.w_k().data(), w.b_k(), B * m, s.kdim, kv);
  auto v = linear_ref(xv.data(), w.w_v().data(), w.b_v(), B * m, s.vdim, kv);
  if (rope) {
    rope_ref(q, B * n, n, H, dh, m - n);
    rope_ref(k, B * m, m, G, dh, 0);
  }
  std::vector<float> heads(static_cast<std::size_t>(B * n * E));
  Result r;
  r.weights.assign(static_cast<std::size_t>(B * H * n * m), 0.0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t g = h / (H / G), p = i + (m - n);
        std::vector<double> sc(static_cast<std::size_t>(m), -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < m; ++j) {
          if ((causal && j > p) || (!lengths.empty() && j >= lengths[static_cast<std::size_t>(b)])) continue;
          double d = 0;
          for (std::int64_t t = 0; t < dh; ++t)
            d += q[static_cast<std::size_t>((b * n + i) * E + h * dh + t)] *
                 k[static_cast<std::size_t>((b * m + j) * kv + g * dh + t)];
          sc[static_cast<std::size_t>(j)] = d / std::sqrt(static_cast<double>(dh));
          mx = std::max(mx, sc[static_cast<std::size_t>(j)]);
        }
        double sum = 0;
        for (auto& x : sc) sum += (x = std::isinf(mx) ? 0.0 : std::exp(x - mx));
        const bool padded = self && !lengths.empty() && i >= lengths[static_cast<std::size_t>(b)];
        for (std::int64_t j = 0; j < m; ++j)
          r.weights[static_cast<std::size_t>(((b * H + h) * n + i) * m + j)] =
              sum > 0 && !padded ? sc[static_cast<std::size_t>(j)] / sum : 0.0;
        for (std::int64_t t = 0; t < dh; ++t) {
          double o = 0;
          for (std::int64_t j = 0; j < m; ++j)
            if (sum > 0)
              o += sc[static_cast<std::size_t>(j)] / sum * v[static_cast<std::size_t>((b * m + j) * kv + g * dh + t)];
          heads[static_cast<std::size_t>((b * n + i) * E + h * dh + t)] = static_cast<float>(o);
        }
      }
  r.out = linear_ref(heads.data(), w.out_proj_weight.data(), w.b_o(), B * n, E, E);
  if (self && !lengths.empty())
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = lengths[static_cast<std::size_t>(b)]; i < n; ++i)
        for (std::int64_t e = 0; e < E; ++e) r.out[static_cast<std::size_t>((b * n + i) * E + e)] = 0.0;
  return r;
}

struct Case {
  const char* name;
  std::int64_t B, n, m, E, H, G, kdim, vdim;
  bool self, packed, causal, lengths, rope;
};

} // namespace

TEST_CASE("multi_head_attention agrees with the definitions") {
  const Case cases[] = {
      {"self packed", 2, 9, 9, 16, 4, 4, 16, 16, true, true, false, false, false},
      {"self causal lengths", 3, 140, 140, 24, 3, 3, 24, 24, true, true, true, true, false},
      {"self separate gqa rope", 2, 11, 11, 16, 4, 2, 16, 16, true, false, true, false, true},
      {"self packed gqa lengths", 2, 7, 7, 16, 4, 1, 16, 16, true, true, false, true, false},
      {"cross kdim vdim", 2, 5, 13, 8, 2, 2, 3, 5, false, false, false, true, false},
      {"cross causal rope gqa n>m", 1, 9, 4, 16, 4, 2, 16, 16, false, false, true, false, true},
      {"cross long keys", 1, 3, 300, 16, 2, 2, 16, 16, false, true, true, true, true},
  };
  for (const Case& c : cases)
    for (int threads : {1, 2}) {
      CAPTURE(c.name);
      CAPTURE(threads);
      blas::set_threads(threads);
      const MhaShape shape{c.E, c.H, c.G, c.kdim, c.vdim};
      const MhaWeights w = random_weights(shape, c.packed, 10);
      const Tensor xq = random_tensor({c.B, c.n, c.E}, 20);
      const Tensor xk = c.self ? xq : random_tensor({c.B, c.m, c.kdim}, 21);
      const Tensor xv = c.self ? xq : random_tensor({c.B, c.m, c.vdim}, 22);
      Mask mask;
      mask.n = c.n, mask.m = c.m, mask.causal = c.causal;
      if (c.lengths)
        for (std::int64_t b = 0; b < c.B; ++b)
          mask.lengths.push_back(b == 0 ? 0 : std::max<std::int64_t>(1, c.m - 2 * b));
      Tensor out(Shape{c.B, c.n, c.E}), weights(Shape{c.B, c.H, c.n, c.m}), avg(Shape{c.B, c.n, c.m}),
          out2(out.shape());
      MhaCall call;
      call.batch = c.B, call.n = c.n, call.m = c.m;
      call.x_q = xq.data(), call.x_k = xk.data(), call.x_v = xv.data();
      call.self_attention = c.self;
      call.mask = &mask;
      if (c.rope) call.rope = Rope{};
      call.out = out.data();
      call.weights = weights.data();
      multi_head_attention(w, call);
      const Result ref = mha_ref(w, xq, xk, xv, c.self, c.causal, mask.lengths, c.rope);
      CHECK(test::max_abs_diff(out.span(), ref.out) < 2e-5);
      CHECK(test::max_abs_diff(weights.span(), ref.weights) < 1e-6);
      // without weights (the blocked kernel)
      call.out = out2.data(), call.weights = nullptr;
      multi_head_attention(w, call);
      CHECK(test::max_abs_diff(out2.span(), ref.out) < 2e-5);
      // the average over heads, through a sink (all items at once at these sizes)
      call.weights_sink = [&](std::int64_t first, std::int64_t count, const float* w8) {
        std::copy_n(w8, count * c.n * c.m, avg.data() + first * c.n * c.m);
      };
      call.sink_averaged = true;
      multi_head_attention(w, call);
      double worst = 0;
      for (std::int64_t b = 0; b < c.B; ++b)
        for (std::int64_t ij = 0; ij < c.n * c.m; ++ij) {
          double mean = 0;
          for (std::int64_t h = 0; h < c.H; ++h)
            mean += ref.weights[static_cast<std::size_t>((b * c.H + h) * c.n * c.m + ij)];
          worst = std::max(worst, std::abs(mean / c.H - avg[b * c.n * c.m + ij]));
        }
      CHECK(worst < 1e-6);
      // through a sink, a group of items at a time: the same numbers, and every item once in order
      for (const std::int64_t items : {1, 2}) {
        for (const bool averaged : {false, true}) {
          CAPTURE(items);
          CAPTURE(averaged);
          Tensor got(averaged ? avg.shape() : weights.shape()), out3(out.shape());
          std::int64_t next = 0;
          const std::int64_t per_item = got.size() / c.B;
          call.out = out3.data();
          call.weights_sink = [&](std::int64_t first, std::int64_t count, const float* w8) {
            CHECK(first == next);
            CHECK(count == std::min(items, c.B - first));
            std::copy_n(w8, count * per_item, got.data() + first * per_item);
            next = first + count;
          };
          call.sink_averaged = averaged, call.sink_items = items;
          multi_head_attention(w, call);
          CHECK(next == c.B);
          CHECK(test::max_abs_diff(got.span(), (averaged ? avg : weights).span()) == 0.0);
          CHECK(test::max_abs_diff(out3.span(), out.span()) == 0.0);
        }
      }
      call.weights_sink = nullptr;
      if (c.lengths) // item 0 has no key: out_proj.bias (cross) or 0 (self, padded queries)
        for (std::int64_t e = 0; e < c.E; ++e) CHECK(out[e] == (c.self ? 0.0f : w.out_proj_bias[e]));
    }
  blas::set_threads(0);
}

TEST_CASE("packed and separate projections give the same attention, to the bit") {
  // One product for q | k | v (self-attention) or k | v (a decoder's memory) against one product
  // each, all head-major. Small products (copied into the heads) and ones whose W-packed tiles
  // write the heads directly (dh = 64, over 128 rows), grouped KV heads, self- and cross-attention.
  struct Case {
    MhaShape shape;
    std::int64_t n, m;
  };
  for (auto [shape, n, m] :
       {Case{{16, 4, 2, 16, 16}, 6, 5}, Case{{128, 2, 2, 128, 128}, 80, 72}, Case{{128, 2, 1, 128, 128}, 80, 72}})
    for (bool self : {true, false}) {
      const MhaWeights packed = random_weights(shape, true, 3);
      MhaWeights separate = packed;
      separate.in_proj_weight = Tensor();
      const std::int64_t E = shape.embed_dim, kv = shape.kv_dim(), mk = self ? n : m;
      separate.q_proj_weight =
          Tensor(Shape{E, E}, std::vector<float>(packed.w_q().data(), packed.w_q().data() + E * E));
      separate.k_proj_weight =
          Tensor(Shape{kv, E}, std::vector<float>(packed.w_k().data(), packed.w_k().data() + kv * E));
      separate.v_proj_weight =
          Tensor(Shape{kv, E}, std::vector<float>(packed.w_v().data(), packed.w_v().data() + kv * E));
      const Tensor x = random_tensor({2, n, E}, 4), memory = random_tensor({2, mk, E}, 5);
      Mask mask;
      mask.n = n, mask.m = mk;
      Tensor a(Shape{2, n, E}), b(Shape{2, n, E});
      MhaCall call;
      call.batch = 2, call.n = n, call.m = mk, call.x_q = x.data(), call.self_attention = self;
      call.x_k = call.x_v = self ? x.data() : memory.data();
      call.mask = &mask;
      call.out = a.data();
      multi_head_attention(packed, call);
      call.out = b.data();
      multi_head_attention(separate, call);
      INFO("E=" << E << " G=" << shape.kv_heads << " n=" << n << " self=" << self);
      CHECK(test::max_abs_diff(a.span(), b.span()) == 0.0);
    }
}

TEST_CASE("head-major projections give the bits of row-major ones, RoPE included") {
  // The same call twice: projected by multi_head_attention (each head's q, k, v one matrix, RoPE
  // on those), and with q, k and v projected (and rotated) here in rows, passed as MhaCall::projected.
  // Packed and separate weights, grouped KV heads, keys of another width, self and cross, both
  // RoPE styles and a partial rotation; products copied into the heads (few rows) and written
  // there by the W-packed tiles (dh = 64, over 128 rows).
  struct Case {
    MhaShape shape;
    std::int64_t n, m;
    bool packed, self;
  };
  for (auto [shape, n, m, packed, self] :
       {Case{{128, 2, 2, 128, 128}, 80, 80, true, true}, Case{{128, 2, 1, 128, 128}, 80, 80, false, true},
        Case{{128, 2, 2, 96, 96}, 80, 72, false, false}, Case{{128, 2, 2, 128, 128}, 70, 90, true, false},
        Case{{16, 4, 2, 16, 16}, 6, 5, true, false}})
    for (int rope = 0; rope < 3; ++rope) {
      const MhaWeights w = random_weights(shape, packed, 6);
      const std::int64_t E = shape.embed_dim, H = shape.heads, G = shape.kv_heads, dh = shape.head_dim(),
                         kv = shape.kv_dim(), B = 2, mk = self ? n : m;
      const Tensor x = random_tensor({B, n, E}, 7), memory = random_tensor({B, mk, shape.kdim}, 8);
      const float* xk = self ? x.data() : memory.data();
      std::optional<Rope> r;
      if (rope) r = Rope{rope == 1 ? RopeStyle::Half : RopeStyle::Interleaved, 10000.0, rope == 1 ? 0 : dh / 2, {}};
      Mask mask;
      mask.n = n, mask.m = mk;
      Tensor a(Shape{B, n, E}), b(Shape{B, n, E});
      MhaCall call;
      call.batch = B, call.n = n, call.m = mk, call.x_q = x.data(), call.x_k = call.x_v = xk;
      call.self_attention = self, call.mask = &mask, call.rope = r, call.out = a.data();
      multi_head_attention(w, call);

      Tensor q(Shape{B * n, E}), k(Shape{B * mk, kv}), v(Shape{B * mk, kv});
      blas::linear(q.data(), x.data(), w.w_q(), w.b_q(), B * n);
      blas::linear(k.data(), xk, w.w_k(), w.b_k(), B * mk);
      blas::linear(v.data(), xk, w.w_v(), w.b_v(), B * mk);
      if (r) {
        apply_rope(q.data(), B, n, H, dh, r->style, r->base, mk - n, E, r->dims);
        apply_rope(k.data(), B, mk, G, dh, r->style, r->base, 0, kv, r->dims);
      }
      MhaCall rows;
      rows.batch = B, rows.n = n, rows.m = mk, rows.mask = &mask, rows.self_attention = self, rows.out = b.data();
      ProjectedKV& given = rows.projected.emplace();
      given.q = q.data(), given.q_row = E;
      given.k = k.data(), given.v = v.data(), given.batch = mk * kv, given.row = kv;
      multi_head_attention(w, rows);
      INFO("E=" << E << " G=" << G << " n=" << n << " m=" << mk << " packed=" << packed << " self=" << self
                << " rope=" << rope);
      CHECK(test::max_abs_diff(a.span(), b.span()) == 0.0);
    }
}

TEST_CASE("init_mha follows PyTorch's initialisation") {
  SUBCASE("packed") {
    const MhaWeights w = init_mha({64, 8, 8, 64, 64}, true, 5);
    REQUIRE(w.packed());
    CHECK(w.in_proj_weight.shape() == Shape{192, 64});
    const double bound = std::sqrt(6.0 / (64 + 192)); // xavier over the whole (3E, E) matrix
    double mx = 0, sq = 0;
    for (float x : w.in_proj_weight.span()) mx = std::max(mx, std::abs(static_cast<double>(x))), sq += x * x;
    CHECK(mx <= bound);
    CHECK(mx > 0.99 * bound);
    CHECK(sq / w.in_proj_weight.size() == doctest::Approx(bound * bound / 3).epsilon(0.05)); // U(-a, a): a^2 / 3
    double omx = 0;
    for (float x : w.out_proj_weight.span()) omx = std::max(omx, std::abs(static_cast<double>(x)));
    CHECK(omx <= 1.0 / 8.0);
    CHECK(omx > 0.98 / 8.0);
    for (float x : w.in_proj_bias.span()) CHECK(x == 0.0f);
    for (float x : w.out_proj_bias.span()) CHECK(x == 0.0f);
  }
  SUBCASE("separate for grouped KV heads and kdim / vdim") {
    const MhaWeights w = init_mha({32, 8, 2, 5, 7}, true, 5);
    CHECK_FALSE(w.packed());
    CHECK(w.q_proj_weight.shape() == Shape{32, 32});
    CHECK(w.k_proj_weight.shape() == Shape{8, 5});
    CHECK(w.v_proj_weight.shape() == Shape{8, 7});
    CHECK(w.in_proj_bias.shape() == Shape{32 + 16});
    for (float x : w.k_proj_weight.span()) CHECK(std::abs(x) <= std::sqrt(6.0 / 13));
  }
  SUBCASE("seeded") {
    const MhaWeights a = init_mha({16, 4, 4, 16, 16}, true, 1), b = init_mha({16, 4, 4, 16, 16}, true, 1),
                     c = init_mha({16, 4, 4, 16, 16}, true, 2);
    CHECK(test::max_abs_diff(a.in_proj_weight.span(), b.in_proj_weight.span()) == 0.0);
    CHECK(test::max_abs_diff(a.in_proj_weight.span(), c.in_proj_weight.span()) > 0.0);
  }
  CHECK_THROWS_AS(init_mha({10, 3, 3, 10, 10}, true, 0), UsageError);
  CHECK_THROWS_AS(init_mha({12, 4, 3, 12, 12}, true, 0), UsageError);
}

TEST_CASE("save_mha then load_mha gives the same weights") {
  test::TempDir dir;
  for (const MhaShape& shape : {MhaShape{16, 4, 4, 16, 16}, MhaShape{16, 4, 2, 6, 10}}) {
    const MhaWeights w = init_mha(shape, true, 9);
    const std::string path = dir.file(fmt::format("w{}.h5", shape.kv_heads));
    {
      h5::OutputFile out({path, ""}, w.packed() ? "in_proj_weight" : "q_proj_weight", {"test", "test"});
      save_mha(WeightWriter(out), w);
      out.commit();
    }
    h5::InputFiles in;
    const MhaWeights r = load_mha(WeightGroup::open(in, {path, ""}));
    CHECK(r.shape.embed_dim == 16);
    CHECK(r.shape.heads == 4);
    CHECK(r.shape.kv_heads == shape.kv_heads);
    CHECK(r.shape.kdim == shape.kdim);
    CHECK(r.shape.vdim == shape.vdim);
    CHECK(r.packed() == w.packed());
    CHECK(test::max_abs_diff(r.out_proj_weight.span(), w.out_proj_weight.span()) == 0.0);
    CHECK(test::max_abs_diff(r.in_proj_bias.span(), w.in_proj_bias.span()) == 0.0);
    if (w.packed())
      CHECK(test::max_abs_diff(r.in_proj_weight.span(), w.in_proj_weight.span()) == 0.0);
    else
      CHECK(test::max_abs_diff(r.k_proj_weight.span(), w.k_proj_weight.span()) == 0.0);
  }
}
