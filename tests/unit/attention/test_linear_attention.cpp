// The linear-time forms: the blocked causal sums against the masked quadratic form (the implied
// weights times V) over odd sizes, past the 64-row blocks and with n != m; the same bits whatever
// the threads; Performer's features; Linformer with identity projections against softmax attention.
#include "attn/attention/linear_attention.hpp"

#include "attn/attention/attention.hpp"
#include "attn/core/error.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/blas.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

using namespace attn;
using test::random_tensor;

namespace {

struct Case {
  std::int64_t b, n, m, d, dv;
  Tensor q, k, v;
  Case(std::int64_t b_, std::int64_t n_, std::int64_t m_, std::int64_t d_, std::int64_t dv_)
      : b(b_), n(n_), m(m_), d(d_), dv(dv_), q(random_tensor({b_, n_, d_}, 11, 0.6f)),
        k(random_tensor({b_, m_, d_}, 12, 0.6f)), v(random_tensor({b_, m_, dv_}, 13)) {}

  // out (b, n, dv) and the implied weights (b, n, m).
  std::pair<Tensor, Tensor> run(LinearKind kind, const Mask& mask, const Tensor* features = nullptr,
                                const LinformerProjections* proj = nullptr) const {
    Tensor out(Shape{b, n, dv}), w(Shape{b, n, m});
    LinearAttention a;
    a.kind = kind, a.batch = b, a.n = n, a.m = m, a.d = d, a.dv = dv;
    a.q = {q.data(), n * d, 0, d}, a.k = {k.data(), m * d, 0, d}, a.v = {v.data(), m * dv, 0, dv};
    a.mask = &mask;
    a.scale = 1.0f / std::sqrt(static_cast<float>(d));
    a.features = features, a.proj = proj;
    a.out = {out.data(), n * dv, 0, dv}, a.weights = {w.data(), n * m, 0, m};
    linear_attention(a);
    return {std::move(out), std::move(w)};
  }

  // The implied weights times V, in double.
  std::vector<double> weights_times_v(const Tensor& w) const {
    std::vector<double> o(static_cast<std::size_t>(b * n * dv), 0.0);
    for (std::int64_t bi = 0; bi < b; ++bi)
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < m; ++j)
          for (std::int64_t c = 0; c < dv; ++c)
            o[static_cast<std::size_t>((bi * n + i) * dv + c)] +=
                double(w.data()[(bi * n + i) * m + j]) * v.data()[(bi * m + j) * dv + c];
    return o;
  }
};

Mask make_mask(std::int64_t n, std::int64_t m, bool causal, std::vector<std::int64_t> lengths = {}) {
  Mask mask;
  mask.n = n, mask.m = m, mask.causal = causal, mask.lengths = std::move(lengths);
  return mask;
}

} // namespace

TEST_CASE("causal and bidirectional linear forms equal their implied weights times V") {
  const Tensor omega = favor_features(29, 7, false, 5);
  for (auto [n, m] : {std::pair<std::int64_t, std::int64_t>{131, 200}, {200, 131}, {1, 65}, {64, 64}, {70, 40}}) {
    const Case c(2, n, m, 7, 3);
    for (bool causal : {false, true})
      for (LinearKind kind : {LinearKind::Elu, LinearKind::Favor}) {
        const char* name = linear_kind_name(kind);
        CAPTURE(n);
        CAPTURE(m);
        CAPTURE(causal);
        CAPTURE(name);
        const Mask mask = make_mask(n, m, causal, {m, std::max<std::int64_t>(1, m / 3)});
        auto [out, w] = c.run(kind, mask, &omega);
        CHECK(test::max_abs_diff(out.span(), c.weights_times_v(w)) < 2e-5);
        // rows sum to 1 where a key is seen, else 0; nothing beyond the causal limit or the length
        for (std::int64_t bi = 0; bi < 2; ++bi)
          for (std::int64_t i = 0; i < n; ++i) {
            double s = 0, beyond = 0;
            for (std::int64_t j = 0; j < m; ++j) {
              const double x = w.data()[(bi * n + i) * m + j];
              s += x;
              if ((causal && j > i + m - n) || j >= mask.lengths[static_cast<std::size_t>(bi)]) beyond += std::abs(x);
            }
            const bool sees = !causal || i + m - n >= 0;
            CHECK(std::abs(s - (sees ? 1.0 : 0.0)) < 1e-5);
            CHECK(beyond == 0.0);
          }
      }
  }
}

TEST_CASE("linear attention: the same bits whatever the threads") {
  const Case c(1, 300, 300, 8, 5);
  const Mask mask = make_mask(300, 300, true);
  const Tensor omega = favor_features(33, 8, true, 2);
  for (LinearKind kind : {LinearKind::Elu, LinearKind::Favor}) {
    blas::set_threads(1);
    const Tensor one = c.run(kind, mask, &omega).first;
    blas::set_threads(3);
    const Tensor three = c.run(kind, mask, &omega).first;
    blas::set_threads(0);
    CHECK(std::memcmp(one.data(), three.data(), static_cast<std::size_t>(one.size()) * sizeof(float)) == 0);
  }
}

TEST_CASE("Performer's features: seeded, orthogonal blocks, and FAVOR+ approaches softmax as M grows") {
  const Tensor a = favor_features(10, 4, true, 7), b = favor_features(10, 4, true, 7),
               c = favor_features(10, 4, true, 8);
  CHECK(std::memcmp(a.data(), b.data(), 40 * sizeof(float)) == 0);
  CHECK(std::memcmp(a.data(), c.data(), 40 * sizeof(float)) != 0);
  for (std::int64_t blk : {0, 4}) // rows 0..3 and 4..7 are each orthogonal blocks
    for (std::int64_t i = blk; i < blk + 4; ++i)
      for (std::int64_t j = blk; j < i; ++j) {
        double dot = 0, ni = 0, nj = 0;
        for (std::int64_t x = 0; x < 4; ++x) {
          dot += double(a.data()[i * 4 + x]) * a.data()[j * 4 + x];
          ni += double(a.data()[i * 4 + x]) * a.data()[i * 4 + x];
          nj += double(a.data()[j * 4 + x]) * a.data()[j * 4 + x];
        }
        CHECK(std::abs(dot) < 1e-5 * std::sqrt(ni * nj));
      }

  // against exact softmax attention (the blocked kernel): the error falls as M grows
  const Case p(1, 40, 60, 6, 4);
  Tensor exact(Shape{1, 40, 4});
  {
    const DotScorer scorer({p.q.data(), 40 * 6, 0, 6}, {p.k.data(), 60 * 6, 0, 6}, 6, 1, 1.0f / std::sqrt(6.0f));
    Mask none = make_mask(40, 60, false);
    Attention att;
    att.n = 40, att.m = 60, att.dv = 4, att.scorer = &scorer, att.mask = &none;
    att.v = {p.v.data(), 60 * 4, 0, 4};
    att.out = {exact.data(), 40 * 4, 0, 4};
    attention(att);
  }
  const auto rms = [&](std::int64_t M) {
    const Tensor omega = favor_features(M, 6, true, 1);
    const Tensor out = p.run(LinearKind::Favor, make_mask(40, 60, false), &omega).first;
    double s = 0;
    for (std::int64_t i = 0; i < out.size(); ++i) s += std::pow(double(out.data()[i]) - exact.data()[i], 2);
    return std::sqrt(s / static_cast<double>(out.size()));
  };
  const double e8 = rms(8), e2048 = rms(2048);
  CAPTURE(e8);
  CAPTURE(e2048);
  CHECK(e2048 < e8 / 4);
}

TEST_CASE("Linformer with identity projections is softmax attention over the keys, padded keys as zero rows") {
  const std::int64_t n = 9, m = 11;
  const Case c(2, n, m, 5, 3);
  LinformerProjections id{Tensor(Shape{m, m}), Tensor(Shape{m, m})};
  for (std::int64_t i = 0; i < m; ++i) id.E.data()[i * m + i] = id.F.data()[i * m + i] = 1.0f;
  auto [out, w] = c.run(LinearKind::Linformer, make_mask(n, m, false), nullptr, &id);
  Tensor exact(Shape{2, n, 3});
  const DotScorer scorer({c.q.data(), n * 5, 0, 5}, {c.k.data(), m * 5, 0, 5}, 5, 1, 1.0f / std::sqrt(5.0f));
  Mask none = make_mask(n, m, false);
  Attention att;
  att.batch = 2, att.n = n, att.m = m, att.dv = 3, att.scorer = &scorer, att.mask = &none;
  att.v = {c.v.data(), m * 3, 0, 3};
  att.out = {exact.data(), n * 3, 0, 3};
  attention(att);
  CHECK(test::max_abs_diff(out.span(), exact.span()) < 1e-5);
  CHECK(test::max_abs_diff(out.span(), c.weights_times_v(w)) < 1e-5);
}

TEST_CASE("the linear forms refuse the masks they cannot apply") {
  Mask mask = make_mask(4, 4, true);
  CHECK_NOTHROW(check_linear_mask(mask, LinearKind::Elu));
  CHECK_THROWS_WITH_AS(check_linear_mask(mask, LinearKind::Linformer),
                       doctest::Contains("--attention linformer cannot be --causal"), UsageError);
  mask.window = 1;
  CHECK_THROWS_WITH_AS(check_linear_mask(mask, LinearKind::Favor), doctest::Contains("not --window"), UsageError);
  mask.window = -1;
  mask.top_k = 2;
  CHECK_THROWS_WITH_AS(check_linear_mask(mask, LinearKind::Elu), doctest::Contains("not --top-k"), UsageError);
  mask.top_k = 0;
  mask.alibi = {0.5};
  CHECK_THROWS_WITH_AS(check_linear_mask(mask, LinearKind::Elu), doctest::Contains("not ALiBi"), UsageError);
}

TEST_CASE("an overflow is an error, never NaN") {
  Case c(1, 3, 4, 2, 2);
  for (auto& x : c.v.span()) x = 3e38f;
  CHECK_THROWS_WITH_AS(c.run(LinearKind::Elu, make_mask(3, 4, false)), doctest::Contains("overflowed float32"), Error);
}

TEST_CASE("heads over strided views, with grouped KV heads and a mask offset, are each head run alone") {
  // q (B, n, H dh) and k, v (B, m, G dh) side by side as mha's projections; H = 4, G = 2.
  const std::int64_t B = 2, H = 4, G = 2, dh = 5, n = 70, m = 67;
  const Tensor q = random_tensor({B, n, H * dh}, 21, 0.6f), k = random_tensor({B, m, G * dh}, 22, 0.6f),
               v = random_tensor({B, m, G * dh}, 23);
  const Tensor omega = favor_features(17, dh, false, 3);
  LinformerProjections proj = xavier_linformer(9, m, 4);
  // The mask covers 3 items; the call is items 1 and 2 of it.
  Mask mask = make_mask(n, m, false, {m, 30, 50});
  for (LinearKind kind : {LinearKind::Elu, LinearKind::Favor, LinearKind::Linformer})
    for (bool causal : {false, true}) {
      if (kind == LinearKind::Linformer && causal) continue;
      CAPTURE(linear_kind_name(kind));
      CAPTURE(causal);
      mask.causal = causal;
      Tensor out(Shape{B, n, H * dh}), w(Shape{B, H, n, m});
      LinearAttention a;
      a.kind = kind, a.batch = B, a.heads = H, a.kv_group = H / G, a.n = n, a.m = m, a.d = dh, a.dv = dh;
      a.q = {q.data(), n * H * dh, dh, H * dh}, a.k = {k.data(), m * G * dh, dh, G * dh};
      a.v = {v.data(), m * G * dh, dh, G * dh};
      a.mask = &mask, a.mask_batch = 1;
      a.scale = 1.0f / std::sqrt(static_cast<float>(dh));
      a.features = &omega, a.proj = &proj;
      a.out = {out.data(), n * H * dh, dh, H * dh}, a.weights = {w.data(), H * n * m, n * m, m};
      linear_attention(a);
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < H; ++h) {
          // head h of item b alone, contiguous, with the mask's item b + 1
          Case one(1, n, m, dh, dh);
          for (std::int64_t i = 0; i < n; ++i)
            std::copy_n(q.data() + (b * n + i) * H * dh + h * dh, dh, one.q.data() + i * dh);
          for (std::int64_t j = 0; j < m; ++j) {
            std::copy_n(k.data() + (b * m + j) * G * dh + h / 2 * dh, dh, one.k.data() + j * dh);
            std::copy_n(v.data() + (b * m + j) * G * dh + h / 2 * dh, dh, one.v.data() + j * dh);
          }
          const Mask alone = make_mask(n, m, causal, {mask.lengths[static_cast<std::size_t>(b + 1)]});
          auto [o1, w1] = one.run(kind, alone, &omega, &proj);
          for (std::int64_t i = 0; i < n; ++i) {
            CHECK(std::memcmp(o1.data() + i * dh, out.data() + (b * n + i) * H * dh + h * dh, dh * sizeof(float)) == 0);
            CHECK(std::memcmp(w1.data() + i * m, w.data() + ((b * H + h) * n + i) * m, m * sizeof(float)) == 0);
          }
        }
    }
}
