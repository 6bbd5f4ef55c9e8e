#include "attn/transformer.hpp"

#include "attn/blas.hpp"
#include "attn/error.hpp"
#include "attn/init.hpp"
#include "attn/posenc.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace attn {

Activation parse_activation(std::string_view s) {
  if (s == "relu") return Activation::Relu;
  if (s == "gelu") return Activation::Gelu;
  if (s == "gelu_tanh") return Activation::GeluTanh;
  throw UsageError(fmt::format("unknown activation '{}' (relu, gelu, gelu_tanh)", s));
}

std::string activation_name(Activation a) {
  switch (a) {
  case Activation::Relu: return "relu";
  case Activation::Gelu: return "gelu";
  case Activation::GeluTanh: return "gelu_tanh";
  }
  return "relu";
}

// --- the layers ----------------------------------------------------------------------------------

void layer_norm(float* x, std::int64_t rows, const LayerNorm& ln, double eps) {
  const std::int64_t E = ln.weight.size();
  const float* g = ln.weight.data();
  const float* b = ln.bias.data();
#pragma omp parallel for schedule(static) num_threads(blas::threads()) if (rows * E >= (1 << 15))
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x + r * E;
    double sum = 0, sq = 0;
    for (std::int64_t e = 0; e < E; ++e) sum += row[e];
    const double mean = sum / static_cast<double>(E);
    for (std::int64_t e = 0; e < E; ++e) sq += (row[e] - mean) * (row[e] - mean);
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(E) + eps);
    for (std::int64_t e = 0; e < E; ++e) row[e] = static_cast<float>((row[e] - mean) * inv * g[e] + b[e]);
  }
}

void activate(float* x, std::int64_t count, Activation act) {
  constexpr float inv_sqrt2 = 0.70710678118654752f, sqrt_2_over_pi = 0.79788456080286536f;
#pragma omp parallel for schedule(static) num_threads(blas::threads()) if (count >= (1 << 15))
  for (std::int64_t i = 0; i < count; ++i) {
    const float v = x[i];
    switch (act) {
    case Activation::Relu: x[i] = v > 0 ? v : 0.0f; break;
    case Activation::Gelu: x[i] = 0.5f * v * (1.0f + std::erf(v * inv_sqrt2)); break;
    case Activation::GeluTanh:
      x[i] = 0.5f * v * (1.0f + std::tanh(sqrt_2_over_pi * (v + 0.044715f * v * v * v)));
      break;
    }
  }
}

namespace {

// x (rows, E) += y (rows, E).
void add_in_place(float* x, const float* y, std::int64_t count) {
#pragma omp parallel for schedule(static) num_threads(blas::threads()) if (count >= (1 << 15))
  for (std::int64_t i = 0; i < count; ++i) x[i] += y[i];
}

// out (rows, E) = FFN(x) = act(x W1^T + b1) W2^T + b2; hidden (rows, F) is scratch.
void feed_forward(float* out, const float* x, const FeedForward& f, Activation act, std::int64_t rows, Tensor& hidden) {
  const std::int64_t F = f.w1.dim(0), E = f.w1.dim(1);
  blas::linear(hidden.data(), x, f.w1.data(), f.b1.size() ? f.b1.data() : nullptr, rows, E, F);
  activate(hidden.data(), rows * F, act);
  blas::linear(out, hidden.data(), f.w2.data(), f.b2.size() ? f.b2.data() : nullptr, rows, F, E);
}

// Scratch of one forward pass, sized once for all layers.
struct Scratch {
  Tensor normed, sub, hidden; // (rows, E), (rows, E), (rows, F)
  Scratch(std::int64_t rows, std::int64_t E, std::int64_t F)
      : normed(Shape{rows, E}, Uninitialized{}), sub(Shape{rows, E}, Uninitialized{}),
        hidden(Shape{rows, F}, Uninitialized{}) {}
};

// One layer over x (B, n, E), in place; `weights` (B, H, n, n) or null.
void encoder_layer(const Encoder& enc, const EncoderLayer& layer, float* x, std::int64_t B, std::int64_t n,
                   const Mask& mask, float* weights, Scratch& s) {
  const std::int64_t rows = B * n, E = enc.embed_dim();
  MhaCall call;
  call.batch = B, call.n = n, call.m = n;
  call.self_attention = true;
  call.mask = &mask;
  call.out = s.sub.data();
  call.weights = weights;
  if (enc.norm_first) { // x = x + SelfAttn(LN1(x)); x = x + FFN(LN2(x))
    std::copy_n(x, rows * E, s.normed.data());
    layer_norm(s.normed.data(), rows, layer.norm1, enc.eps);
    call.x_q = call.x_k = call.x_v = s.normed.data();
    multi_head_attention(layer.self_attn, call);
    add_in_place(x, s.sub.data(), rows * E);
    std::copy_n(x, rows * E, s.normed.data());
    layer_norm(s.normed.data(), rows, layer.norm2, enc.eps);
    feed_forward(s.sub.data(), s.normed.data(), layer.ffn, enc.activation, rows, s.hidden);
    add_in_place(x, s.sub.data(), rows * E);
  } else { // x = LN1(x + SelfAttn(x)); x = LN2(x + FFN(x))
    call.x_q = call.x_k = call.x_v = x;
    multi_head_attention(layer.self_attn, call);
    add_in_place(x, s.sub.data(), rows * E);
    layer_norm(x, rows, layer.norm1, enc.eps);
    feed_forward(s.sub.data(), x, layer.ffn, enc.activation, rows, s.hidden);
    add_in_place(x, s.sub.data(), rows * E);
    layer_norm(x, rows, layer.norm2, enc.eps);
  }
}

} // namespace

void encoder_forward(const Encoder& enc, float* x, std::int64_t batch, std::int64_t n, const Mask& mask,
                     const LayerWeightsSink& sink) {
  const std::int64_t E = enc.embed_dim(), H = enc.heads(), F = enc.layers.front().ffn.w1.dim(0);
  Scratch s(batch * n, E, F);
  Tensor weights;
  if (sink) weights = Tensor(Shape{batch, H, n, n}, Uninitialized{});
  for (std::size_t i = 0; i < enc.layers.size(); ++i) {
    encoder_layer(enc, enc.layers[i], x, batch, n, mask, sink ? weights.data() : nullptr, s);
    if (sink) sink(i, weights);
  }
  if (enc.has_final_norm) layer_norm(x, batch * n, enc.norm, enc.eps);
  // Padded positions are 0 in every output (CONTRACT.md section 2).
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < n; ++i)
      if (mask.padding(b, i)) std::fill_n(x + (b * n + i) * E, E, 0.0f);
}

// --- token embeddings ------------------------------------------------------------------------------

TokenEmbedding load_embedding(const WeightGroup& g, const std::string& name) {
  TokenEmbedding emb;
  const std::string ds = name + "/weight";
  if (!g.has(ds))
    throw Error(fmt::format("{}: missing dataset {} (token embeddings (V, E), needed for token ids)", g.file_label(),
                            g.object_path(ds)));
  const Shape s = g.shape(ds);
  if (s.size() != 2) throw Error(fmt::format("{}: expected (V, E), got shape {}", g.label(ds), shape_str(s)));
  emb.table = g.read(ds, s);
  emb.label = g.label(ds);
  const std::string pe = g.attr_string("pe").value_or("sinusoidal");
  if (pe == "sinusoidal") {
    emb.pe = PeKind::Sinusoidal;
  } else if (pe == "none") {
    emb.pe = PeKind::None;
  } else if (pe == "learned") {
    emb.pe = PeKind::Learned;
    const Shape ps = g.has("pos_embed/weight") ? g.shape("pos_embed/weight") : Shape{};
    emb.pos_table = g.read("pos_embed/weight", {ps.size() == 2 ? ps[0] : 1, s[1]}, fmt::format("E = {}", s[1]));
  } else {
    throw Error(fmt::format("{} = '{}': expected sinusoidal, learned or none", g.attr_label("pe"), pe));
  }
  return emb;
}

void embed_tokens(float* x, const std::int64_t* ids, std::int64_t batch, std::int64_t n, const TokenEmbedding& emb,
                  std::int64_t offset, const std::string& ids_label) {
  const std::int64_t V = emb.table.dim(0), E = emb.table.dim(1);
  for (std::int64_t i = 0; i < batch * n; ++i)
    if (ids[i] < 0 || ids[i] >= V)
      throw Error(fmt::format("{}: token id {} at index [{}, {}] is outside the vocabulary 0..{} of {}", ids_label,
                              ids[i], i / n, i % n, V - 1, emb.label));
  const float scale = std::sqrt(static_cast<float>(E));
#pragma omp parallel for schedule(static) num_threads(blas::threads()) if (batch * n * E >= (1 << 15))
  for (std::int64_t i = 0; i < batch * n; ++i) {
    const float* row = emb.table.data() + ids[i] * E;
    for (std::int64_t e = 0; e < E; ++e) x[i * E + e] = row[e] * scale;
  }
  if (emb.pe == PeKind::Sinusoidal) add_sinusoidal(x, batch, n, E, 10000.0, offset, PeLayout::Interleaved);
  if (emb.pe == PeKind::Learned) add_learned(x, batch, n, E, emb.pos_table.data(), emb.pos_table.dim(0), offset);
}

// --- weights -------------------------------------------------------------------------------------

namespace {

LayerNorm load_norm(const WeightGroup& g, const std::string& name, std::int64_t E) {
  const std::string why = fmt::format("E = {}", E);
  return {g.read(name + "/weight", {E}, why), g.read(name + "/bias", {E}, why)};
}

} // namespace

Encoder load_encoder(const WeightGroup& g) {
  Encoder enc;
  if (!g.has_group("layers/0"))
    throw Error(
        fmt::format("{}: missing group {} (an encoder's first layer)", g.file_label(), g.object_path("layers/0")));
  enc.norm_first = g.attr_int("norm_first").value_or(0) != 0;
  if (auto a = g.attr_string("activation")) {
    try {
      enc.activation = parse_activation(*a);
    } catch (const UsageError& e) {
      throw Error(fmt::format("{}: {}", g.attr_label("activation"), e.what()));
    }
  }
  enc.eps = g.attr_real("layer_norm_eps").value_or(1e-5);
  for (std::size_t i = 0; g.has_group(fmt::format("layers/{}", i)); ++i) {
    const WeightGroup lg = g.child(fmt::format("layers/{}", i));
    EncoderLayer layer;
    layer.self_attn = load_mha(lg.child("self_attn"));
    const MhaShape& s = layer.self_attn.shape;
    if (i > 0 && (s.embed_dim != enc.embed_dim() || s.heads != enc.heads()))
      throw Error(fmt::format("{}: layer {} has E = {}, {} heads; layer 0 has E = {}, {} heads", lg.label("self_attn"),
                              i, s.embed_dim, s.heads, enc.embed_dim(), enc.heads()));
    const std::int64_t E = s.embed_dim;
    const Shape w1 = lg.has("linear1/weight") ? lg.shape("linear1/weight") : Shape{};
    const std::int64_t F = w1.size() == 2 ? w1[0] : (i > 0 ? enc.layers[0].ffn.w1.dim(0) : E);
    const std::string why = fmt::format("E = {}, F = {}", E, F);
    layer.ffn.w1 = lg.read("linear1/weight", {F, E}, why);
    layer.ffn.b1 = lg.read_optional("linear1/bias", {F}, why);
    layer.ffn.w2 = lg.read("linear2/weight", {E, F}, why);
    layer.ffn.b2 = lg.read_optional("linear2/bias", {E}, why);
    if (i > 0 && F != enc.layers[0].ffn.w1.dim(0))
      throw Error(fmt::format("{}: layer {} has F = {}; layer 0 has F = {}", lg.label("linear1/weight"), i, F,
                              enc.layers[0].ffn.w1.dim(0)));
    layer.norm1 = load_norm(lg, "norm1", E);
    layer.norm2 = load_norm(lg, "norm2", E);
    enc.layers.push_back(std::move(layer));
  }
  if (g.has_group("norm")) {
    enc.has_final_norm = true;
    enc.norm = load_norm(g, "norm", enc.embed_dim());
  }
  return enc;
}

Encoder init_encoder(const EncoderShape& shape, std::uint64_t seed) {
  const std::int64_t E = shape.embed_dim, F = shape.ffn_dim;
  if (shape.layers <= 0 || F <= 0) throw UsageError("encoder sizes must be positive");
  Rng rng(seed);
  Encoder enc;
  enc.norm_first = shape.norm_first;
  enc.activation = shape.activation;
  auto ones_zeros = [&] {
    LayerNorm ln{Tensor(Shape{E}), Tensor(Shape{E})};
    std::fill(ln.weight.span().begin(), ln.weight.span().end(), 1.0f);
    return ln;
  };
  for (std::int64_t i = 0; i < shape.layers; ++i) {
    EncoderLayer layer;
    layer.self_attn = init_mha({E, shape.heads, shape.heads, E, E}, true, rng);
    layer.ffn.w1 = linear_weight_init(F, E, rng);
    layer.ffn.b1 = linear_bias_init(F, E, rng);
    layer.ffn.w2 = linear_weight_init(E, F, rng);
    layer.ffn.b2 = linear_bias_init(E, F, rng);
    layer.norm1 = ones_zeros();
    layer.norm2 = ones_zeros();
    enc.layers.push_back(std::move(layer));
  }
  enc.has_final_norm = shape.final_norm;
  if (enc.has_final_norm) enc.norm = ones_zeros();
  return enc;
}

void save_encoder(const WeightWriter& w, const Encoder& enc) {
  for (std::size_t i = 0; i < enc.layers.size(); ++i) {
    const EncoderLayer& layer = enc.layers[i];
    const WeightWriter lw = w.child("layers").child(std::to_string(i));
    save_mha(lw.child("self_attn"), layer.self_attn);
    lw.child("linear1").write("weight", layer.ffn.w1);
    lw.child("linear1").write("bias", layer.ffn.b1);
    lw.child("linear2").write("weight", layer.ffn.w2);
    lw.child("linear2").write("bias", layer.ffn.b2);
    lw.child("norm1").write("weight", layer.norm1.weight);
    lw.child("norm1").write("bias", layer.norm1.bias);
    lw.child("norm2").write("weight", layer.norm2.weight);
    lw.child("norm2").write("bias", layer.norm2.bias);
  }
  if (enc.has_final_norm) {
    w.child("norm").write("weight", enc.norm.weight);
    w.child("norm").write("bias", enc.norm.bias);
  }
  w.attr("num_heads", enc.heads());
  w.attr("norm_first", std::int64_t{enc.norm_first ? 1 : 0});
  w.attr("activation", activation_name(enc.activation));
  w.attr("layer_norm_eps", enc.eps);
}

} // namespace attn
