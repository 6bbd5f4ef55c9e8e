// Transformer layers: LayerNorm and the activations against their formulas, PyTorch's inits
// (lib/init), and the encoder's save/load round trip. The stack itself is checked against
// nn.TransformerEncoder by tests/cli/test_encode.sh.
#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/core/init.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/model/embedding.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/kv_cache.hpp"
#include "attn/model/transformer.hpp"
#include "attn/weights/quantize.hpp"
#include "attn/weights/stack_weights.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

using namespace attn;

TEST_CASE("layer_norm normalises each row and applies weight and bias") {
  const std::int64_t E = 5;
  LayerNorm ln{Tensor(Shape{E}, std::vector<float>{1, 2, 1, 0.5f, 1}),
               Tensor(Shape{E}, std::vector<float>{0, 0, 1, 0, -1})};
  std::vector<float> x{1, 2, 3, 4, 5, -3, -3, -3, -3, -3};
  layer_norm(x.data(), 2, ln, 1e-5);
  const double sd = std::sqrt(2.0 + 1e-5); // mean 3, biased variance 2
  const double expect[5] = {-2 / sd * 1, -1 / sd * 2, 0 + 1, 1 / sd * 0.5, 2 / sd - 1};
  for (int e = 0; e < 5; ++e) CHECK(x[e] == doctest::Approx(expect[e]).epsilon(1e-6));
  // a constant row: (x - mean) = 0, so the output is the bias (eps keeps it finite)
  for (int e = 0; e < 5; ++e) CHECK(x[5 + e] == ln.bias[e]);
}

TEST_CASE("layer_norm and rms_norm: every row length, sums in double") {
  // lengths around the 8 interleaved partial sums; rows far from 0 with a small spread, where
  // float sums would lose the variance
  for (const std::int64_t E : {1, 3, 7, 8, 9, 15, 16, 37, 512, 515}) {
    CAPTURE(E);
    LayerNorm ln{Tensor(Shape{E}), Tensor(Shape{E})}, rms{Tensor(Shape{E}), Tensor()};
    std::vector<float> x(static_cast<std::size_t>(2 * E));
    for (std::int64_t e = 0; e < E; ++e) {
      ln.weight[e] = rms.weight[e] = 0.5f + 0.01f * static_cast<float>(e % 13);
      ln.bias[e] = 0.1f * static_cast<float>(e % 5) - 0.2f;
      x[static_cast<std::size_t>(e)] = 1000.0f + 0.003f * static_cast<float>((e * 7) % 11);
      x[static_cast<std::size_t>(E + e)] = -3.0f + 0.5f * static_cast<float>((e * 5) % 9);
    }
    std::vector<float> y = x, z = x;
    layer_norm(y.data(), 2, ln, 1e-5);
    rms_norm(z.data(), 2, rms, 1e-5);
    for (std::int64_t r = 0; r < 2; ++r) {
      const float* row = x.data() + r * E;
      long double sum = 0, sq = 0, sq0 = 0;
      for (std::int64_t e = 0; e < E; ++e) sum += row[e], sq0 += static_cast<long double>(row[e]) * row[e];
      const long double mean = sum / E;
      for (std::int64_t e = 0; e < E; ++e) sq += (row[e] - mean) * (row[e] - mean);
      const long double inv = 1 / std::sqrt(sq / E + 1e-5L), inv0 = 1 / std::sqrt(sq0 / E + 1e-5L);
      for (std::int64_t e = 0; e < E; ++e) {
        const auto i = static_cast<std::size_t>(r * E + e);
        CHECK(y[i] == doctest::Approx(double((row[e] - mean) * inv * ln.weight[e] + ln.bias[e])).epsilon(1e-6));
        CHECK(z[i] == doctest::Approx(double(row[e] * inv0 * rms.weight[e])).epsilon(1e-6));
      }
    }
  }
}

// The norms' formula in double, eight partial sums in a fixed order (transformer.cpp's row_sum),
// as the baseline instruction set computes it: this file is built without contraction too.
static double sum8(const std::vector<double>& v) {
  double s[8] = {};
  for (std::size_t e = 0; e < v.size(); ++e) s[e % 8] += v[e];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

TEST_CASE("layer_norm and rms_norm: the bits of the baseline's double formula, on the CPU's instruction set") {
  // Their rows run as AVX-512, AVX2 or baseline clones (target_clones), whichever this CPU takes;
  // each must give the bits of the same operations in the same order.
  Rng rng(7);
  for (const std::int64_t E : {1, 7, 8, 9, 37, 512, 515}) {
    CAPTURE(E);
    LayerNorm ln{Tensor(Shape{E}), Tensor(Shape{E})}, rms{Tensor(Shape{E}), Tensor()};
    std::vector<float> x(static_cast<std::size_t>(3 * E)), add(x.size());
    for (float& v : x) v = static_cast<float>(rng.normal()) * 3.0f + 0.5f;
    for (float& v : add) v = static_cast<float>(rng.normal());
    for (std::int64_t e = 0; e < E; ++e) {
      ln.weight[e] = rms.weight[e] = static_cast<float>(rng.normal());
      ln.bias[e] = static_cast<float>(rng.normal());
    }
    std::vector<float> y = x, z = x;
    layer_norm(y.data(), 3, ln, 1e-5, add.data());
    rms_norm(z.data(), 3, rms, 1e-6, add.data());
    for (std::int64_t r = 0; r < 3; ++r) {
      std::vector<float> row(static_cast<std::size_t>(E));
      for (std::int64_t e = 0; e < E; ++e) row[e] = x[r * E + e] + add[r * E + e];
      std::vector<double> v(row.begin(), row.end()), d(v.size()), sq(v.size());
      const double mean = sum8(v) / static_cast<double>(E);
      for (std::size_t e = 0; e < v.size(); ++e)
        d[e] = (row[e] - mean) * (row[e] - mean), sq[e] = double(row[e]) * row[e];
      const double inv = 1.0 / std::sqrt(sum8(d) / static_cast<double>(E) + 1e-5);
      const double inv0 = 1.0 / std::sqrt(sum8(sq) / static_cast<double>(E) + 1e-6);
      int differ = 0;
      for (std::int64_t e = 0; e < E; ++e) {
        differ += y[r * E + e] != static_cast<float>((row[e] - mean) * inv * ln.weight[e] + ln.bias[e]);
        differ += z[r * E + e] != static_cast<float>(row[e] * inv0 * rms.weight[e]);
      }
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("activations: ReLU, exact GELU and tanh GELU") {
  std::vector<float> r{-1, 0, 2}, g{-1, 0, 1, 3}, t{-1, 0, 1, 3};
  activate(r.data(), 3, Activation::Relu);
  CHECK(r == std::vector<float>{0, 0, 2});
  activate(g.data(), 4, Activation::Gelu);
  activate(t.data(), 4, Activation::GeluTanh);
  // torch.nn.functional.gelu(torch.tensor([-1., 0., 1., 3.])) and approximate='tanh'
  const double exact[4] = {-0.15865525393145702, 0.0, 0.841344746068543, 2.99595030590511};
  const double tanh_[4] = {-0.15880800939172324, 0.0, 0.8411919906082768, 2.996362607918227};
  for (int i = 0; i < 4; ++i) {
    CHECK(g[i] == doctest::Approx(exact[i]).epsilon(1e-6));
    CHECK(t[i] == doctest::Approx(tanh_[i]).epsilon(1e-6));
  }
  CHECK(parse_activation("gelu_tanh") == Activation::GeluTanh);
  CHECK_THROWS_AS(parse_activation("swish"), UsageError);
}

TEST_CASE("PyTorch's initialisations: bounds and seeding") {
  Rng rng(1);
  const Tensor w = linear_weight_init(64, 256, rng), b = linear_bias_init(64, 256, rng),
               x = xavier_uniform(30, 10, rng);
  double mw = 0, mb = 0, mx = 0;
  for (float v : w.span()) mw = std::max(mw, std::abs(double(v)));
  for (float v : b.span()) mb = std::max(mb, std::abs(double(v)));
  for (float v : x.span()) mx = std::max(mx, std::abs(double(v)));
  CHECK(mw <= 1.0 / 16);
  CHECK(mw > 0.99 / 16);
  CHECK(mb <= 1.0 / 16);
  CHECK(mx <= std::sqrt(6.0 / 40));
  CHECK(mx > 0.95 * std::sqrt(6.0 / 40));
  CHECK(w.shape() == Shape{64, 256});
  CHECK(b.shape() == Shape{64});
}

TEST_CASE("init_encoder, save_encoder, load_encoder round trip") {
  EncoderShape shape;
  shape.layers = 3, shape.embed_dim = 16, shape.heads = 4, shape.ffn_dim = 24;
  shape.norm_first = shape.final_norm = true, shape.activation = Activation::GeluTanh;
  const Encoder enc = init_encoder(shape, 5);
  REQUIRE(enc.layers.size() == 3);
  CHECK(enc.layers[2].ffn.w2.shape() == Shape{16, 24});
  for (float v : enc.layers[0].norm1.weight.span()) CHECK(v == 1.0f);
  test::TempDir dir;
  const std::string path = dir.file("enc.h5");
  {
    h5::OutputFile out({path, "/model/layers/0/self_attn/in_proj_weight"}, "layers/0/self_attn/in_proj_weight",
                       {"test", "test"});
    save_encoder(WeightWriter(out), enc);
    out.commit();
  }
  h5::InputFiles in;
  const Encoder r = load_encoder(WeightGroup::open(in, {path, "/model"}));
  CHECK(r.layers.size() == 3);
  CHECK(r.opt.norm_first);
  CHECK(r.has_final_norm);
  CHECK(r.opt.activation == Activation::GeluTanh);
  CHECK(r.opt.eps == 1e-5);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(test::max_abs_diff(r.layers[i].ffn.w1.span(), enc.layers[i].ffn.w1.span()) == 0.0);
    CHECK(test::max_abs_diff(r.layers[i].self_attn.in_proj_weight.span(),
                             enc.layers[i].self_attn.in_proj_weight.span()) == 0.0);
  }
  // the same input gives the same output through both
  Tensor a(Shape{2, 5, 16}), b(Shape{2, 5, 16});
  Rng rng(3);
  for (std::int64_t i = 0; i < a.size(); ++i) a[i] = b[i] = static_cast<float>(rng.normal());
  Mask mask;
  mask.n = mask.m = 5;
  mask.lengths = {5, 3};
  encoder_forward(enc, a.data(), 2, 5, mask);
  encoder_forward(r, b.data(), 2, 5, mask);
  CHECK(test::max_abs_diff(a.span(), b.span()) == 0.0);
  for (std::int64_t i = 3; i < 5; ++i)
    for (std::int64_t e = 0; e < 16; ++e) CHECK(a[(5 + i) * 16 + e] == 0.0f); // padded positions
}

TEST_CASE("embed_tokens: table[id] * sqrt(E) plus the positional encoding") {
  TokenEmbedding emb;
  emb.table = Tensor(Shape{3, 4}, std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  emb.label = "m.h5:/src_embed/weight";
  const std::int64_t ids[4] = {2, 0, 1, 1};
  std::vector<float> x(16);
  emb.pe = PeKind::None;
  embed_tokens(x.data(), ids, 2, 2, emb, 0, "ids.h5:/data");
  CHECK(x[0] == 16.0f); // table[2][0] * sqrt(4)
  CHECK(x[7] == 6.0f);  // table[0][3] * 2
  emb.pe = PeKind::Sinusoidal;
  embed_tokens(x.data(), ids, 2, 2, emb, 0, "ids.h5:/data");
  CHECK(x[4 + 0] == doctest::Approx(0.0 + std::sin(1.0)));         // position 1, column 0
  CHECK(x[4 + 1] == doctest::Approx(2.0 + std::cos(1.0)));         // column 1
  CHECK(x[12 + 2] == doctest::Approx(12.0 + std::sin(1.0 / 100))); // item 1, position 1, column 2
  emb.pe = PeKind::Learned;
  emb.pos_table = Tensor(Shape{2, 4}, std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1});
  embed_tokens(x.data(), ids, 2, 2, emb, 0, "ids.h5:/data");
  CHECK(x[5] == 3.0f);
  CHECK_THROWS_AS(embed_tokens(x.data(), ids, 2, 2, emb, 1, "ids.h5:/data"), Error); // positions 1, 2 of 2
  const std::int64_t bad[4] = {2, 0, 3, -1};
  CHECK_THROWS_WITH_AS(
      embed_tokens(x.data(), bad, 2, 2, emb, 0, "ids.h5:/data"),
      "ids.h5:/data: token id 3 at index [1, 0] is outside the vocabulary 0..2 of m.h5:/src_embed/weight", Error);
}

TEST_CASE("decoder_step over the KV cache equals the causal teacher-forced stack, position by position") {
  // pre-norm, 3 layers, final norm (testdata/decoder.h5, from nn.TransformerDecoder)
  h5::InputFiles in;
  const std::string path = test::testdata("decoder.h5");
  const Decoder dec = load_decoder(WeightGroup::open(in, {path, "/w/pre_gelu_3_norm"}));
  REQUIRE(dec.layers.size() == 3);
  CHECK(dec.memory_dim() == 16);
  const std::int64_t B = 3, t = 6, s = 5, E = 16;
  Tensor x(Shape{B, t, E}), memory(Shape{B, s, E});
  Rng rng(9);
  for (float& v : x.span()) v = static_cast<float>(rng.normal());
  for (float& v : memory.span()) v = static_cast<float>(rng.normal());
  Mask causal, mem_mask;
  causal.n = causal.m = t, causal.causal = true;
  mem_mask.n = t, mem_mask.m = s, mem_mask.lengths = {5, 2, 4};
  Tensor full = x;
  decoder_forward(dec, full.data(), B, t, memory.data(), s, causal, mem_mask);

  for (int threads : {1, 2}) {
    blas::set_threads(threads);
    DecoderCache cache = start_decoder_cache(dec, memory.data(), B, s, t);
    Mask step_mask;
    step_mask.n = 1, step_mask.m = s, step_mask.lengths = mem_mask.lengths;
    double worst = 0;
    for (std::int64_t i = 0; i < t; ++i) {
      Tensor xi(Shape{B, E});
      for (std::int64_t b = 0; b < B; ++b) std::copy_n(x.data() + (b * t + i) * E, E, xi.data() + b * E);
      decoder_step(dec, cache, xi.data(), step_mask);
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t e = 0; e < E; ++e)
          worst = std::max(worst, std::abs(double(xi[b * E + e]) - full[(b * t + i) * E + e]));
    }
    CHECK(cache.len == t);
    CHECK(worst < 2e-5); // float32 sums in a different order; activations are O(1) after LayerNorm
    CHECK_THROWS_AS(decoder_step(dec, cache, x.data(), step_mask), Error); // full
  }
  blas::set_threads(0);
}

namespace {

// Decoding steps' inputs for decoder.h5's 16-wide models: x (2, t, 16) and a memory (2, 21, 16) of
// normal values, and the memory's lengths 21 and 17 (a partial second tile of 16 keys).
struct StepInputs {
  Tensor x, memory;
  Mask mem_mask;
};
StepInputs step_inputs(std::int64_t t, std::uint64_t seed) {
  StepInputs in{Tensor(Shape{2, t, 16}), Tensor(Shape{2, 21, 16}), Mask{}};
  Rng rng(seed);
  for (float& v : in.x.span()) v = static_cast<float>(rng.normal());
  for (float& v : in.memory.span()) v = static_cast<float>(rng.normal());
  in.mem_mask.n = 1, in.mem_mask.m = 21, in.mem_mask.lengths = {21, 17};
  return in;
}

} // namespace

TEST_CASE("tile_for_steps and the cross keys in tiles: decoding steps give the same bits") {
  h5::InputFiles in;
  const WeightGroup g = WeightGroup::open(in, {test::testdata("decoder.h5"), "/w/pre_gelu_3_norm"});
  const Decoder dec = load_decoder(g);
  const std::int64_t B = 2, t = 5, s = 21, E = 16, V = 11; // s: a partial second tile of keys
  Generator gen;
  gen.weight = LinearWeight(test::random_tensor({V, E}, 3));
  const auto [x, memory, mem_mask] = step_inputs(t, 4);
  // each step's outputs and logits, on the decoder and generator as given
  const auto run = [&](const Decoder& d, const Generator& gn, bool key_tiles) {
    std::vector<float> out;
    DecoderCache cache = start_decoder_cache(d, memory.data(), B, s, t, key_tiles ? StepKV::tiles : StepKV::rows);
    CHECK(cache.cross_kt.size() == (key_tiles ? 3 * B * key_tiles_floats(s, E / 2, cache.key_width) * 2 : 0));
    CHECK(cache.key_width == (key_tiles ? key_tile_width(false) : 16)); // 3 layers of 2 heads of 8
    for (std::int64_t i = 0; i < t; ++i) {
      Tensor xi(Shape{B, E}), logits(Shape{B, V});
      for (std::int64_t b = 0; b < B; ++b) std::copy_n(x.data() + (b * t + i) * E, E, xi.data() + b * E);
      decoder_step(d, cache, xi.data(), mem_mask);
      generator_logits(logits.data(), xi.data(), gn, B);
      out.insert(out.end(), xi.span().begin(), xi.span().end());
      out.insert(out.end(), logits.span().begin(), logits.span().end());
    }
    return out;
  };
  const std::vector<float> want = run(dec, gen, false);
  Decoder tiled = dec;
  Generator tiled_gen = gen;
  CHECK(tile_for_steps(tiled, tiled_gen, B, 3) == 0); // too few steps to repay the copy: left as rows
  CHECK(tiled.layers[0].ffn.w1.format() == LinearWeight::Format::f32);
  CHECK(tile_for_steps(tiled, tiled_gen, blas::tile_rows() + 1, 64) == 0); // rows that pack the weight anyway
  CHECK(tiled_gen.weight.format() == LinearWeight::Format::f32);
  CHECK(tile_for_steps(tiled, tiled_gen, B, 64) == 3 * 6 + 1); // per layer: 2 in_proj, 2 out_proj, w1, w2
  for (const DecoderLayer& l : tiled.layers)
    for (const LinearWeight* w : {&l.self_attn.in_proj_weight, &l.self_attn.out_proj_weight,
                                  &l.cross_attn.in_proj_weight, &l.cross_attn.out_proj_weight, &l.ffn.w1, &l.ffn.w2})
      CHECK(w->format() == LinearWeight::Format::f32_tiles);
  CHECK(tiled_gen.weight.format() == LinearWeight::Format::f32_tiles);
  for (int threads : {1, 2}) {
    blas::set_threads(threads);
    for (bool key_tiles : {false, true}) {
      const std::vector<float> got = run(tiled, tiled_gen, key_tiles);
      REQUIRE(got.size() == want.size());
      CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    }
  }
  blas::set_threads(0);
}

TEST_CASE("a float16 cache of the memory's keys and values: steps give the bits of float32 rounded to float16; "
          "caches without the float32 rows, their bits") {
  h5::InputFiles in;
  const Decoder dec = load_decoder(WeightGroup::open(in, {test::testdata("decoder.h5"), "/w/pre_gelu_3_norm"}));
  const std::int64_t B = 2, t = 4, s = 21, E = 16;
  const auto [x, memory, mem_mask] = step_inputs(t, 6);
  const auto steps = [&](DecoderCache& cache) {
    std::vector<float> out;
    for (std::int64_t i = 0; i < t; ++i) {
      Tensor xi(Shape{B, E});
      for (std::int64_t b = 0; b < B; ++b) std::copy_n(x.data() + (b * t + i) * E, E, xi.data() + b * E);
      decoder_step(dec, cache, xi.data(), mem_mask);
      out.insert(out.end(), xi.span().begin(), xi.span().end());
    }
    return out;
  };
  const auto round = [](float* p, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) p[i] = f16_to_float(to_half(p[i], HalfKind::F16));
  };
  DecoderCache half = start_decoder_cache(dec, memory.data(), B, s, t, StepKV::f16);
  CHECK(half.cross_kt.size() == 0);
  const std::int64_t G = 2, dh = E / G; // 3 layers of 2 heads of 8
  CHECK(half.key_width == key_tile_width(true));
  CHECK(half.cross_kt16.size() == static_cast<std::size_t>(3 * B * G * key_tiles_floats(s, dh, half.key_width)));
  CHECK(half.cross_v16.size() == static_cast<std::size_t>(half.cross_v.size()));
  // The float32 cache in tiles with its keys and values rounded to float16 in place.
  DecoderCache rounded = start_decoder_cache(dec, memory.data(), B, s, t, StepKV::tiles);
  round(rounded.cross_k.data(), rounded.cross_k.size());
  round(rounded.cross_v.data(), rounded.cross_v.size());
  round(rounded.cross_kt.data(), rounded.cross_kt.size());
  // key j's value c of each layer, row and head, in each cache's blocks of keys
  const auto at = [&](std::int64_t width, std::int64_t lrg, std::int64_t j, std::int64_t c) {
    return static_cast<std::size_t>(lrg * key_tiles_floats(s, dh, width) + ((j / width) * dh + c) * width + j % width);
  };
  for (std::int64_t lrg = 0; lrg < 3 * B * G; ++lrg)
    for (std::int64_t j = 0; j < s; ++j)
      for (std::int64_t c = 0; c < dh; ++c)
        REQUIRE(f16_to_float(half.cross_kt16[at(half.key_width, lrg, j, c)]) ==
                rounded.cross_kt.data()[at(rounded.key_width, lrg, j, c)]);
  DecoderCache exact = start_decoder_cache(dec, memory.data(), B, s, t, StepKV::tiles);
  // Without the float32 rows (steps of few positions only): the same float16 copies, the same bits.
  const DecoderCache lean = start_decoder_cache(dec, memory.data(), B, s, t, StepKV::f16, false);
  const DecoderCache lean_tiles = start_decoder_cache(dec, memory.data(), B, s, t, StepKV::tiles, false);
  CHECK(half.cross_rows);
  CHECK_FALSE(lean.cross_rows);
  CHECK_FALSE(lean_tiles.cross_rows);
  CHECK(start_decoder_cache(dec, memory.data(), B, s, t, StepKV::rows, false).cross_rows); // rows are all it has
  CHECK(std::memcmp(lean_tiles.cross_kt.data(), exact.cross_kt.data(), exact.cross_kt.size() * sizeof(float)) == 0);
  CHECK(lean.cross_kt16 == half.cross_kt16);
  CHECK(lean.cross_v16 == half.cross_v16);
  for (StepKV kind : {StepKV::f16, StepKV::tiles}) {
    DecoderCache c = start_decoder_cache(dec, memory.data(), B, s, few_query_rows, kind, false);
    Tensor xs(Shape{B, few_query_rows, E});
    CHECK_THROWS_AS(decoder_steps(dec, c, xs.data(), few_query_rows, mem_mask), std::logic_error);
  }
  for (int threads : {1, 2}) {
    blas::set_threads(threads);
    DecoderCache h = half, r = rounded, e = exact, hl = lean, el = lean_tiles;
    const std::vector<float> got = steps(h), want = steps(r), unrounded = steps(e), got_lean = steps(hl),
                             unrounded_lean = steps(el);
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(got_lean.data(), want.data(), want.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(unrounded_lean.data(), unrounded.data(), unrounded.size() * sizeof(float)) == 0);
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - unrounded[i]));
    CHECK(worst > 0);    // the float16 copies were read
    CHECK(worst < 1e-2); // float16's rounding (2^-11) of O(1) keys and values, through 3 layers
    MESSAGE("float16 cache against float32: max |difference| " << worst);
  }
  blas::set_threads(0);
}

TEST_CASE("top_tokens: the K largest logits in order, the lower token first among equal ones") {
  const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f, 3.0f, 0.5f, -INFINITY, 2.0f};
  std::vector<std::int64_t> best;
  top_tokens(logits, 8, 1, best);
  CHECK(best == std::vector<std::int64_t>{4});
  top_tokens(logits, 8, 3, best);
  CHECK(best == std::vector<std::int64_t>{4, 1, 3});
  top_tokens(logits, 8, 5, best);
  CHECK(best == std::vector<std::int64_t>{4, 1, 3, 7, 0});
  top_tokens(logits, 8, 10, best); // more than V: all of them, -inf last
  CHECK(best == std::vector<std::int64_t>{4, 1, 3, 7, 0, 5, 2, 6});
  // against a stable sort of every token, over random rows with many ties
  Rng rng(5);
  std::vector<float> row(300);
  for (int trial = 0; trial < 20; ++trial) {
    for (float& v : row) v = static_cast<float>(std::floor(rng.normal() * 3));
    std::vector<std::int64_t> all(row.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
    std::stable_sort(all.begin(), all.end(), [&](std::int64_t a, std::int64_t b) { return row[a] > row[b]; });
    for (std::int64_t K : {1, 2, 4, 7}) {
      top_tokens(row.data(), 300, K, best);
      CHECK(best == std::vector<std::int64_t>(all.begin(), all.begin() + K));
    }
  }
}

TEST_CASE("reorder_decoder_cache moves each row's cached positions with it") {
  h5::InputFiles in;
  const Decoder dec = load_decoder(WeightGroup::open(in, {test::testdata("decoder.h5"), "/w/post_relu_1"}));
  const std::int64_t R = 3, s = 2, E = 16;
  Tensor memory(Shape{R, s, E});
  Rng rng(4);
  for (float& v : memory.span()) v = static_cast<float>(rng.normal());
  DecoderCache c = start_decoder_cache(dec, memory.data(), R, s, 4);
  for (std::int64_t i = 0; i < c.self_k.size(); ++i) c.self_k[i] = static_cast<float>(i), c.self_v[i] = -float(i);
  c.len = 2;
  const Tensor before = c.self_k;
  reorder_decoder_cache(c, {2, 2, 0});
  const std::int64_t row = 4 * 16; // capacity x kv
  for (std::int64_t j = 0; j < 2 * 16; ++j) {
    CHECK(c.self_k[0 * row + j] == before[2 * row + j]);
    CHECK(c.self_k[1 * row + j] == before[2 * row + j]);
    CHECK(c.self_k[2 * row + j] == before[0 * row + j]);
    CHECK(c.self_v[2 * row + j] == -before[0 * row + j]);
  }
}

TEST_CASE("the feed-forward's depthwise convolution: centred, causal, padded, and causal in chunks with a state") {
  const std::int64_t B = 2, n = 9, F = 3, k = 5;
  Rng rng(4);
  Tensor h(Shape{B, n, F}), w(Shape{F, k}), bias(Shape{F});
  for (auto& x : h.span()) x = static_cast<float>(rng.normal());
  for (auto& x : w.span()) x = static_cast<float>(rng.normal());
  for (auto& x : bias.span()) x = static_cast<float>(rng.normal());
  Mask mask;
  mask.n = mask.m = n, mask.lengths = {n, 6};
  // y_t,c = bias_c + sum_s w_c,s h_{t + s - before},c over positions inside the item and not padded
  const auto direct = [&](bool causal, std::int64_t b, std::int64_t t, std::int64_t c) {
    const std::int64_t before = causal ? k - 1 : (k - 1) / 2;
    double y = bias.data()[c];
    for (std::int64_t s = 0; s < k; ++s) {
      const std::int64_t p = t + s - before;
      if (p >= 0 && p < n && p < mask.lengths[static_cast<std::size_t>(b)])
        y += double(w.data()[c * k + s]) * h.data()[(b * n + p) * F + c];
    }
    return y;
  };
  for (bool causal : {false, true}) {
    Tensor y = h;
    depthwise_conv(y.data(), F, w, bias, {B, n, causal, &mask});
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < n; ++t)
        for (std::int64_t c = 0; c < F; ++c)
          CHECK(std::abs(y.data()[(b * n + t) * F + c] - direct(causal, b, t, c)) < 1e-5);
  }
  // causal, unpadded: 4 positions then 5 with the state between gives the bits of 9 at once
  Tensor whole = h;
  depthwise_conv(whole.data(), F, w, bias, {B, n, true});
  Tensor state(Shape{B, k - 1, F});
  Tensor first(Shape{B, 4, F}), second(Shape{B, 5, F});
  for (std::int64_t b = 0; b < B; ++b) {
    std::copy_n(h.data() + b * n * F, 4 * F, first.data() + b * 4 * F);
    std::copy_n(h.data() + (b * n + 4) * F, 5 * F, second.data() + b * 5 * F);
  }
  depthwise_conv(first.data(), F, w, bias, {B, 4, true, nullptr, state.data()});
  depthwise_conv(second.data(), F, w, bias, {B, 5, true, nullptr, state.data()});
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t x = 0; x < 4 * F; ++x) CHECK(first.data()[b * 4 * F + x] == whole.data()[b * n * F + x]);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t x = 0; x < 5 * F; ++x) CHECK(second.data()[b * 5 * F + x] == whole.data()[(b * n + 4) * F + x]);
}

TEST_CASE("feed_forward over int8 weights by passes of ffn_rows: each row's bits as alone, plain and gated") {
  const std::int64_t E = 24, F = 40, rows = 2 * ffn_rows + 37;
  const auto int8_weight = [](std::int64_t out, std::int64_t in, std::uint64_t seed) {
    const Int8Weight q = quantize_int8(test::random_tensor({out, in}, seed), 32);
    return LinearWeight::int8(q.q, q.scale, 32);
  };
  FeedForward f;
  f.w1 = int8_weight(F, E, 1), f.w2 = int8_weight(E, F, 2), f.wg = int8_weight(F, E, 3);
  f.b1 = test::random_tensor({F}, 4), f.b2 = test::random_tensor({E}, 5), f.bg = test::random_tensor({F}, 6);
  const Tensor x = test::random_tensor({rows, E}, 7);
  for (Activation act : {Activation::Relu, Activation::Swiglu}) {
    Tensor y(Shape{rows, E}), hidden, gate;
    feed_forward(y.data(), x.data(), f, act, rows, hidden, gate);
    CHECK(hidden.size() == ffn_rows * F); // scratch for one pass, not all rows
    for (std::int64_t r : {std::int64_t{0}, ffn_rows - 1, ffn_rows, 2 * ffn_rows, rows - 1}) {
      Tensor one(Shape{1, E}), h1, g1;
      feed_forward(one.data(), x.data() + r * E, f, act, 1, h1, g1);
      INFO("row " << r);
      CHECK(std::memcmp(one.data(), y.data() + r * E, E * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("activations: each within a few 1e-7 of its float64 definition over [-20, 20], and exact limits") {
  std::vector<float> xs;
  for (int i = -40000; i <= 40000; ++i) xs.push_back(static_cast<float>(i) / 2000.0f);
  xs.insert(xs.end(), {-100.0f, -88.0f, 88.0f, 100.0f, 1e-30f, -1e-30f});
  const auto ref = [](Activation a, double v) {
    const double sig = 1.0 / (1.0 + std::exp(-v));
    switch (a) {
    case Activation::Gelu: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case Activation::GeluTanh: return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case Activation::Glu: return sig;
    default: return v * sig; // SiLU
    }
  };
  for (Activation a : {Activation::Gelu, Activation::GeluTanh, Activation::Glu, Activation::Silu}) {
    CAPTURE(activation_name(a));
    std::vector<float> y = xs;
    activate(y.data(), static_cast<std::int64_t>(y.size()), a);
    double worst = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      REQUIRE(std::isfinite(y[i]));
      worst = std::max(worst, std::abs(y[i] - ref(a, xs[i])) / std::max(1.0, std::abs(static_cast<double>(xs[i]))));
    }
    CHECK(worst < 6e-7);
    // one element at a time (the loops' scalar remainder) gives the vector lanes' bits
    bool same = true;
    for (std::size_t i = 0; i < xs.size(); i += 7) {
      float one = xs[i];
      activate(&one, 1, a);
      same = same && std::memcmp(&one, &y[i], sizeof one) == 0;
    }
    CHECK(same);
  }
  // the limits: GELU and SiLU of a very negative input are 0, of a large one the input itself
  std::vector<float> lim{-100.0f, 100.0f};
  activate(lim.data(), 2, Activation::Gelu);
  CHECK(lim[0] == 0.0f);
  CHECK(lim[1] == 100.0f);
}
