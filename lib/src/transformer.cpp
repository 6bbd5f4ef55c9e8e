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
  const bool par = count >= (1 << 15);
  // One loop per function, so that ReLU vectorises (a switch inside the loop kept it scalar:
  // 9% of an encoder's time).
  switch (act) {
  case Activation::Relu:
#pragma omp parallel for simd schedule(static) num_threads(blas::threads()) if (par)
    for (std::int64_t i = 0; i < count; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
    break;
  case Activation::Gelu:
#pragma omp parallel for schedule(static) num_threads(blas::threads()) if (par)
    for (std::int64_t i = 0; i < count; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * inv_sqrt2));
    break;
  case Activation::GeluTanh:
#pragma omp parallel for schedule(static) num_threads(blas::threads()) if (par)
    for (std::int64_t i = 0; i < count; ++i) {
      const float v = x[i];
      x[i] = 0.5f * v * (1.0f + std::tanh(sqrt_2_over_pi * (v + 0.044715f * v * v * v)));
    }
    break;
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
  MhaScratch mha;
  Scratch(std::int64_t rows, std::int64_t E, std::int64_t F)
      : normed(Shape{rows, E}, Uninitialized{}), sub(Shape{rows, E}, Uninitialized{}),
        hidden(Shape{rows, F}, Uninitialized{}) {}
};

// One sublayer around f(in, out) over x (rows, E), in place:
//   post-norm: x = LN(x + f(x));   pre-norm: x = x + f(LN(x)).
template <typename F>
void residual(const LayerOptions& opt, const LayerNorm& ln, float* x, std::int64_t rows, std::int64_t E, Scratch& s,
              F&& f) {
  if (opt.norm_first) {
    std::copy_n(x, rows * E, s.normed.data());
    layer_norm(s.normed.data(), rows, ln, opt.eps);
    f(s.normed.data(), s.sub.data());
    add_in_place(x, s.sub.data(), rows * E);
  } else {
    f(x, s.sub.data());
    add_in_place(x, s.sub.data(), rows * E);
    layer_norm(x, rows, ln, opt.eps);
  }
}

// Self-attention of x (B, n, E) under `mask` into out; `weights` (B, H, n, n) or null.
void self_attention(const MhaWeights& w, const float* x, float* out, std::int64_t B, std::int64_t n, const Mask& mask,
                    float* weights, MhaScratch& scratch) {
  MhaCall call;
  call.scratch = &scratch;
  call.batch = B, call.n = n, call.m = n;
  call.x_q = call.x_k = call.x_v = x;
  call.self_attention = true;
  call.mask = &mask;
  call.out = out;
  call.weights = weights;
  multi_head_attention(w, call);
}

// A layer's attention weights buffer `t`, (B, H, n, m + the module's extra keys); reallocated
// only when the shape changes from layer to layer.
float* weights_buffer(Tensor& t, const MhaWeights& w, std::int64_t B, std::int64_t n, std::int64_t m) {
  const Shape shape{B, w.shape.heads, n, m + w.extra_keys()};
  if (t.shape() != shape) t = Tensor(shape, Uninitialized{});
  return t.data();
}

} // namespace

std::int64_t batch_chunk(std::int64_t tokens, std::int64_t requested) {
  if (requested > 0) return requested;
  return std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(tokens, 1));
}

void encoder_forward(const Encoder& enc, float* x, std::int64_t batch, std::int64_t n, const Mask& mask,
                     const LayerWeightsSink& sink) {
  const std::int64_t E = enc.embed_dim(), rows = batch * n;
  Scratch s(rows, E, enc.ffn_dim());
  Tensor weights;
  for (std::size_t i = 0; i < enc.layers.size(); ++i) {
    const EncoderLayer& layer = enc.layers[i];
    residual(enc.opt, layer.norm1, x, rows, E, s, [&](const float* in, float* out) {
      self_attention(layer.self_attn, in, out, batch, n, mask,
                     sink ? weights_buffer(weights, layer.self_attn, batch, n, n) : nullptr, s.mha);
    });
    residual(enc.opt, layer.norm2, x, rows, E, s, [&](const float* in, float* out) {
      feed_forward(out, in, layer.ffn, enc.opt.activation, rows, s.hidden);
    });
    if (sink) sink(i, weights);
  }
  if (enc.has_final_norm) layer_norm(x, rows, enc.norm, enc.opt.eps);
  zero_padding(x, batch, n, E, mask);
}

void decoder_forward(const Decoder& dec, float* x, std::int64_t batch, std::int64_t t, const float* memory,
                     std::int64_t s, const Mask& self_mask, const Mask& memory_mask, const DecoderWeightsSink& sink) {
  const std::int64_t E = dec.embed_dim(), rows = batch * t;
  Scratch sc(rows, E, dec.ffn_dim());
  Tensor self_w, cross_w;
  for (std::size_t i = 0; i < dec.layers.size(); ++i) {
    const DecoderLayer& layer = dec.layers[i];
    residual(dec.opt, layer.norm1, x, rows, E, sc, [&](const float* in, float* out) {
      self_attention(layer.self_attn, in, out, batch, t, self_mask,
                     sink ? weights_buffer(self_w, layer.self_attn, batch, t, t) : nullptr, sc.mha);
    });
    residual(dec.opt, layer.norm2, x, rows, E, sc, [&](const float* in, float* out) {
      MhaCall call;
      call.batch = batch, call.n = t, call.m = s;
      call.x_q = in, call.x_k = call.x_v = memory;
      call.mask = &memory_mask;
      call.query_padding = &self_mask; // a padded target position's cross weights are 0 too
      call.out = out;
      call.weights = sink ? weights_buffer(cross_w, layer.cross_attn, batch, t, s) : nullptr;
      call.scratch = &sc.mha;
      multi_head_attention(layer.cross_attn, call);
    });
    residual(dec.opt, layer.norm3, x, rows, E, sc, [&](const float* in, float* out) {
      feed_forward(out, in, layer.ffn, dec.opt.activation, rows, sc.hidden);
    });
    if (sink) sink(i, self_w, cross_w);
  }
  if (dec.has_final_norm) layer_norm(x, rows, dec.norm, dec.opt.eps);
  zero_padding(x, batch, t, E, self_mask);
}

// --- incremental decoding ---------------------------------------------------------------------------

DecoderCache start_decoder_cache(const Decoder& dec, const float* memory, std::int64_t rows, std::int64_t s,
                                 std::int64_t capacity) {
  const auto L = static_cast<std::int64_t>(dec.layers.size());
  const std::int64_t kv = dec.layers.front().self_attn.shape.kv_dim(),
                     ckv = dec.layers.front().cross_attn.shape.kv_dim();
  DecoderCache c;
  c.rows = rows, c.capacity = capacity, c.s = s;
  c.self_k = Tensor(Shape{L, rows, capacity, kv}, Uninitialized{});
  c.self_v = Tensor(Shape{L, rows, capacity, kv}, Uninitialized{});
  c.cross_k = Tensor(Shape{L, rows, s, ckv}, Uninitialized{});
  c.cross_v = Tensor(Shape{L, rows, s, ckv}, Uninitialized{});
  for (std::int64_t l = 0; l < L; ++l)
    project_keys_values(dec.layers[static_cast<std::size_t>(l)].cross_attn, memory, memory, rows * s,
                        c.cross_k.data() + l * rows * s * ckv, c.cross_v.data() + l * rows * s * ckv);
  return c;
}

void reorder_decoder_cache(DecoderCache& c, const std::vector<std::int64_t>& parent) {
  const std::int64_t L = c.self_k.dim(0), kv = c.self_k.dim(3), row = c.capacity * kv, used = c.len * kv;
  Tensor k(c.self_k.shape(), Uninitialized{}), v(c.self_v.shape(), Uninitialized{});
  for (std::int64_t l = 0; l < L; ++l)
    for (std::int64_t r = 0; r < c.rows; ++r) {
      const std::int64_t from = (l * c.rows + parent[static_cast<std::size_t>(r)]) * row, to = (l * c.rows + r) * row;
      std::copy_n(c.self_k.data() + from, used, k.data() + to);
      std::copy_n(c.self_v.data() + from, used, v.data() + to);
    }
  c.self_k = std::move(k), c.self_v = std::move(v);
  // The cross keys and values depend only on the item, which a beam keeps: nothing to move.
}

void decoder_step(const Decoder& dec, DecoderCache& c, float* x, const Mask& memory_mask) {
  const std::int64_t E = dec.embed_dim(), R = c.rows, t = c.len;
  if (t >= c.capacity) throw Error(fmt::format("decoder cache full at {} positions", c.capacity));
  const std::int64_t kv = c.self_k.dim(3), ckv = c.cross_k.dim(3);
  Scratch sc(R, E, dec.ffn_dim());
  Tensor k_new(Shape{R, kv}, Uninitialized{}), v_new(Shape{R, kv}, Uninitialized{});
  for (std::size_t i = 0; i < dec.layers.size(); ++i) {
    const DecoderLayer& layer = dec.layers[i];
    const auto l = static_cast<std::int64_t>(i);
    float* self_k = c.self_k.data() + l * R * c.capacity * kv;
    float* self_v = c.self_v.data() + l * R * c.capacity * kv;
    residual(dec.opt, layer.norm1, x, R, E, sc, [&](const float* in, float* out) {
      // append position t's key and value, then attend over positions 0..t (causal by construction)
      project_keys_values(layer.self_attn, in, in, R, k_new.data(), v_new.data());
      for (std::int64_t r = 0; r < R; ++r) {
        std::copy_n(k_new.data() + r * kv, kv, self_k + (r * c.capacity + t) * kv);
        std::copy_n(v_new.data() + r * kv, kv, self_v + (r * c.capacity + t) * kv);
      }
      MhaCall call;
      call.batch = R, call.n = 1, call.m = t + 1;
      call.x_q = in;
      call.k_proj = self_k, call.v_proj = self_v, call.kv_batch = c.capacity * kv, call.kv_row = kv;
      call.out = out;
      call.scratch = &sc.mha;
      multi_head_attention(layer.self_attn, call);
    });
    residual(dec.opt, layer.norm2, x, R, E, sc, [&](const float* in, float* out) {
      MhaCall call;
      call.batch = R, call.n = 1, call.m = c.s;
      call.x_q = in;
      call.k_proj = c.cross_k.data() + l * R * c.s * ckv, call.v_proj = c.cross_v.data() + l * R * c.s * ckv;
      call.kv_batch = c.s * ckv, call.kv_row = ckv;
      call.mask = &memory_mask;
      call.out = out;
      call.scratch = &sc.mha;
      multi_head_attention(layer.cross_attn, call);
    });
    residual(dec.opt, layer.norm3, x, R, E, sc,
             [&](const float* in, float* out) { feed_forward(out, in, layer.ffn, dec.opt.activation, R, sc.hidden); });
  }
  if (dec.has_final_norm) layer_norm(x, R, dec.norm, dec.opt.eps);
  ++c.len;
}

// --- token embeddings ------------------------------------------------------------------------------

TokenEmbedding load_embedding(const WeightGroup& g, const std::string& name, std::int64_t embed_dim,
                              std::string_view stack) {
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
    if (!g.has("pos_embed/weight"))
      throw Error(fmt::format("{}: missing dataset {} (the learned position table (positions, E = {}) that {} = "
                              "'learned' needs)",
                              g.file_label(), g.object_path("pos_embed/weight"), s[1], g.attr_label("pe")));
    const Shape ps = g.shape("pos_embed/weight");
    emb.pos_table = g.read("pos_embed/weight", {ps.size() == 2 ? ps[0] : 1, s[1]},
                           fmt::format("one row per position, of E = {}", s[1]));
    emb.pos_label = g.label("pos_embed/weight");
  } else {
    throw Error(fmt::format("{} = '{}': expected sinusoidal, learned or none", g.attr_label("pe"), pe));
  }
  if (s[1] != embed_dim)
    throw Error(fmt::format("{}: embedding size {} differs from the {}'s E = {}", emb.label, s[1], stack, embed_dim));
  return emb;
}

StackInput::StackInput(h5::SequenceReader x)
    : x_(std::move(x)), items_(x_->items()), n_(x_->len()), batched_(x_->batched()), label_(x_->label()) {}

StackInput::StackInput(const h5::Dataset& ids, std::string_view layout, TokenEmbedding emb) : emb_(std::move(emb)) {
  ids.require_rank(1, 2, layout);
  ids_ = ids.read_ints();
  batched_ = ids_.rank() == 2;
  if (!batched_) ids_.reshape({1, ids_.dim(0)});
  items_ = ids_.dim(0), n_ = ids_.dim(1), label_ = ids.label();
}

std::vector<std::uint8_t> StackInput::pad_mask(std::int64_t pad) const {
  std::vector<std::uint8_t> m(static_cast<std::size_t>(ids_.size()));
  for (std::int64_t i = 0; i < ids_.size(); ++i) m[static_cast<std::size_t>(i)] = ids_[i] == pad;
  return m;
}

std::optional<std::int64_t> padding_token(const WeightGroup& model) {
  const auto pad = model.attr_int("pad_id");
  if (!pad || model.attr_int("bos_id") == pad || model.attr_int("eos_id") == pad) return std::nullopt;
  return pad;
}

std::optional<std::int64_t> mask_pad_tokens(Mask& mask, const StackInput& input, const WeightGroup& model) {
  if (!input.has_ids()) return std::nullopt;
  const auto pad = padding_token(model);
  if (pad) mask.key_padding = input.pad_mask(*pad);
  return pad;
}

Tensor StackInput::read(std::int64_t first, std::int64_t count) const {
  if (x_) return x_->read(first, count);
  Tensor x(Shape{count, n_, features()}, Uninitialized{});
  embed_tokens(x.data(), ids_.data() + first * n_, count, n_, *emb_, 0, label_, first);
  return x;
}

void embed_tokens(float* x, const std::int64_t* ids, std::int64_t batch, std::int64_t n, const TokenEmbedding& emb,
                  std::int64_t offset, const std::string& ids_label, std::int64_t first_item) {
  const std::int64_t V = emb.table.dim(0), E = emb.table.dim(1);
  for (std::int64_t i = 0; i < batch * n; ++i)
    if (ids[i] < 0 || ids[i] >= V)
      throw Error(fmt::format("{}: token id {} at index [{}, {}] is outside the vocabulary 0..{} of {}", ids_label,
                              ids[i], first_item + i / n, i % n, V - 1, emb.label));
  const float scale = std::sqrt(static_cast<float>(E));
#pragma omp parallel for schedule(static) num_threads(blas::threads()) if (batch * n * E >= (1 << 15))
  for (std::int64_t i = 0; i < batch * n; ++i) {
    const float* row = emb.table.data() + ids[i] * E;
    for (std::int64_t e = 0; e < E; ++e) x[i * E + e] = row[e] * scale;
  }
  if (emb.pe == PeKind::Sinusoidal) add_sinusoidal(x, batch, n, E, 10000.0, offset, PeLayout::Interleaved);
  if (emb.pe == PeKind::Learned)
    add_learned(x, batch, n, E, emb.pos_table.data(), emb.pos_table.dim(0), offset, emb.pos_label);
}

// --- weights -------------------------------------------------------------------------------------

namespace {

LayerNorm load_norm(const WeightGroup& g, const std::string& name, std::int64_t E) {
  const std::string why = fmt::format("E = {}", E);
  return {g.read(name + "/weight", {E}, why), g.read(name + "/bias", {E}, why)};
}

LayerOptions load_layer_options(const WeightGroup& g) {
  LayerOptions opt;
  opt.norm_first = g.attr_flag("norm_first").value_or(false);
  if (auto a = g.attr_string("activation")) {
    try {
      opt.activation = parse_activation(*a);
    } catch (const UsageError& e) {
      throw Error(fmt::format("{}: {}", g.attr_label("activation"), e.what()));
    }
  }
  opt.eps = g.attr_positive_real("layer_norm_eps").value_or(1e-5);
  return opt;
}

// linear1 (F, E) and linear2 (E, F) of layer group `lg`; F from the file, and equal to `F0` (layer
// 0's) when F0 > 0.
FeedForward load_ffn(const WeightGroup& lg, std::int64_t E, std::int64_t F0) {
  const Shape w1 = lg.has("linear1/weight") ? lg.shape("linear1/weight") : Shape{};
  const std::int64_t F = w1.size() == 2 ? w1[0] : (F0 > 0 ? F0 : E);
  const std::string why = fmt::format("E = {}, F = {}", E, F);
  FeedForward f;
  f.w1 = lg.read("linear1/weight", {F, E}, why);
  f.b1 = lg.read_optional("linear1/bias", {F}, why);
  f.w2 = lg.read("linear2/weight", {E, F}, why);
  f.b2 = lg.read_optional("linear2/bias", {E}, why);
  if (F0 > 0 && F != F0) throw Error(fmt::format("{}: F = {}; layer 0 has F = {}", lg.label("linear1/weight"), F, F0));
  return f;
}

// Attention module `name` of layer group `lg`, whose E and heads must be layer 0's (`first`).
MhaWeights load_layer_mha(const WeightGroup& lg, const char* name, const MhaWeights* first) {
  MhaWeights w = load_mha(lg.child(name));
  const MhaShape& s = w.shape;
  if (first && (s.embed_dim != first->shape.embed_dim || s.heads != first->shape.heads || s.kdim != first->shape.kdim))
    throw Error(fmt::format("{}: E = {}, {} heads, kdim {}; layer 0 has E = {}, {} heads, kdim {}", lg.label(name),
                            s.embed_dim, s.heads, s.kdim, first->shape.embed_dim, first->shape.heads,
                            first->shape.kdim));
  return w;
}

// The stack's optional final norm/{weight,bias} into `norm`; false when the file has none.
bool load_final_norm(const WeightGroup& g, std::int64_t E, LayerNorm& norm) {
  if (!g.has_group("norm")) return false;
  norm = load_norm(g, "norm", E);
  return true;
}

// Calls load(layer_group, i) for layers/0, layers/1, ... (at least one).
template <typename F> void for_each_layer(const WeightGroup& g, const char* what, F&& load) {
  if (!g.has_group("layers/0"))
    throw Error(
        fmt::format("{}: missing group {} ({}'s first layer)", g.file_label(), g.object_path("layers/0"), what));
  for (std::size_t i = 0; g.has_group(fmt::format("layers/{}", i)); ++i) load(g.child(fmt::format("layers/{}", i)), i);
}

} // namespace

WeightGroup stack_group(const WeightGroup& g, const std::string& name) {
  if (!g.has_group("layers") && g.has_group(name)) return g.child(name);
  return g;
}

namespace {

// d_model, when the file states it (a sequence-to-sequence root), must be the E the datasets have.
void check_d_model(const WeightGroup& g, std::int64_t E) {
  if (const auto d = g.attr_positive("d_model"); d && *d != E)
    throw Error(fmt::format("{} = {} contradicts the datasets: {} has E = {}", g.attr_label("d_model"), *d,
                            g.label("layers/0/self_attn"), E));
}

} // namespace

Encoder load_encoder(const WeightGroup& g) {
  Encoder enc;
  enc.opt = load_layer_options(g);
  for_each_layer(g, "an encoder", [&](const WeightGroup& lg, std::size_t i) {
    EncoderLayer layer;
    const EncoderLayer* first = i > 0 ? &enc.layers[0] : nullptr;
    layer.self_attn = load_layer_mha(lg, "self_attn", first ? &first->self_attn : nullptr);
    const std::int64_t E = layer.self_attn.shape.embed_dim;
    layer.ffn = load_ffn(lg, E, first ? enc.ffn_dim() : 0);
    layer.norm1 = load_norm(lg, "norm1", E);
    layer.norm2 = load_norm(lg, "norm2", E);
    enc.layers.push_back(std::move(layer));
  });
  enc.has_final_norm = load_final_norm(g, enc.embed_dim(), enc.norm);
  check_d_model(g, enc.embed_dim());
  return enc;
}

Decoder load_decoder(const WeightGroup& g) {
  Decoder dec;
  dec.opt = load_layer_options(g);
  for_each_layer(g, "a decoder", [&](const WeightGroup& lg, std::size_t i) {
    DecoderLayer layer;
    const DecoderLayer* first = i > 0 ? &dec.layers[0] : nullptr;
    layer.self_attn = load_layer_mha(lg, "self_attn", first ? &first->self_attn : nullptr);
    const std::int64_t E = layer.self_attn.shape.embed_dim;
    if (!lg.has_group("multihead_attn"))
      throw Error(fmt::format("{}: missing group {} (a decoder layer's cross-attention)", lg.file_label(),
                              lg.object_path("multihead_attn")));
    layer.cross_attn = load_layer_mha(lg, "multihead_attn", first ? &first->cross_attn : nullptr);
    if (layer.cross_attn.shape.embed_dim != E)
      throw Error(fmt::format("{}: E = {} differs from self_attn's E = {}", lg.label("multihead_attn"),
                              layer.cross_attn.shape.embed_dim, E));
    if (layer.cross_attn.shape.kdim != layer.cross_attn.shape.vdim)
      throw Error(fmt::format("{}: kdim {} and vdim {} differ; the memory feeds both", lg.label("multihead_attn"),
                              layer.cross_attn.shape.kdim, layer.cross_attn.shape.vdim));
    layer.ffn = load_ffn(lg, E, first ? dec.ffn_dim() : 0);
    layer.norm1 = load_norm(lg, "norm1", E);
    layer.norm2 = load_norm(lg, "norm2", E);
    layer.norm3 = load_norm(lg, "norm3", E);
    dec.layers.push_back(std::move(layer));
  });
  dec.has_final_norm = load_final_norm(g, dec.embed_dim(), dec.norm);
  check_d_model(g, dec.embed_dim());
  return dec;
}

Encoder init_encoder(const EncoderShape& shape, std::uint64_t seed) {
  const std::int64_t E = shape.embed_dim, F = shape.ffn_dim;
  if (shape.layers <= 0 || F <= 0) throw UsageError("encoder sizes must be positive");
  Rng rng(seed);
  Encoder enc;
  enc.opt.norm_first = shape.norm_first;
  enc.opt.activation = shape.activation;
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
  w.attr("norm_first", std::int64_t{enc.opt.norm_first ? 1 : 0});
  w.attr("activation", activation_name(enc.opt.activation));
  w.attr("layer_norm_eps", enc.opt.eps);
}

} // namespace attn
