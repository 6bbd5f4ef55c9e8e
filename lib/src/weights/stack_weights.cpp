// The stacks' weight files: nn.Transformer encoders and decoders read, initialised and saved
// (stack_weights.hpp).
#include "attn/weights/stack_weights.hpp"
#include "attn/weights/mha_weights.hpp"

#include "attn/attention/posenc.hpp"
#include "attn/core/error.hpp"
#include "attn/core/init.hpp"

#include <fmt/format.h>

namespace attn {

namespace {

// name/weight and (LayerNorm only) name/bias; an RMSNorm's bias would be an unknown dataset.
LayerNorm load_norm(const WeightGroup& g, const std::string& name, std::int64_t E, NormKind kind) {
  const std::string why = fmt::format("E = {}", E);
  if (kind == NormKind::Rms) return {g.read(name + "/weight", {E}, why), Tensor()};
  return {g.read(name + "/weight", {E}, why), g.read(name + "/bias", {E}, why)};
}

LayerOptions load_layer_options(const WeightGroup& g) {
  LayerOptions opt;
  // Without these the file could be either of nn.TransformerEncoderLayer's configurations, and a
  // guess runs a pre-norm GELU model as post-norm ReLU (exit 0, output off by 3.3): refused.
  const auto missing = [&](const char* name, const char* what) {
    return Error(fmt::format("{}: no {} attribute on the group or an ancestor ({}); export the model with its "
                             "hyperparameters, as scripts/export_torch.py does",
                             g.label(), name, what));
  };
  const auto norm_first = g.attr_flag("norm_first");
  const bool layers = g.has_group("layers/0"); // else the missing layers are the error to report
  if (layers && !norm_first) throw missing("norm_first", "the layers' norm placement: 0 post-norm, 1 pre-norm");
  if (layers && !g.attr_string("activation")) throw missing("activation", "the feed-forward's: relu, gelu, ...");
  opt.norm_first = norm_first.value_or(false);
  if (auto a = g.attr_string("activation")) {
    try {
      opt.activation = parse_activation(*a);
    } catch (const UsageError& e) {
      throw Error(fmt::format("{}: {}", g.attr_label("activation"), e.what()));
    }
  }
  if (auto n = g.attr_string("norm_type")) {
    try {
      opt.norm = parse_norm_kind(*n);
    } catch (const UsageError& e) {
      throw Error(fmt::format("{}: {}", g.attr_label("norm_type"), e.what()));
    }
  }
  opt.eps = g.attr_positive_real("layer_norm_eps").value_or(1e-5);
  const std::string pe = g.attr_string("pe").value_or("sinusoidal");
  if (pe == "rope") {
    opt.positions = LayerPositions::Rope;
    opt.rope.base = g.attr_positive_real("rope_theta").value_or(10000.0);
    if (auto st = g.attr_string("rope_style")) {
      if (*st != "half" && *st != "interleaved")
        throw Error(fmt::format("{} = '{}': expected half or interleaved", g.attr_label("rope_style"), *st));
      opt.rope.style = parse_rope_style(*st);
    }
    opt.rope.dims = g.attr_positive("rotary_dim").value_or(0);
  } else if (pe == "alibi") {
    opt.positions = LayerPositions::Alibi;
  } else if (pe != "sinusoidal" && pe != "learned" && pe != "none") {
    throw Error(fmt::format("{} = '{}': expected sinusoidal, learned, rope, alibi or none", g.attr_label("pe"), pe));
  }
  opt.sliding_window = g.attr_positive("sliding_window").value_or(0);
  opt.ffn_conv = g.attr_positive("ffn_conv_kernel").value_or(0);
  opt.parallel_residual = g.attr_flag("parallel_residual").value_or(false);
  if (opt.parallel_residual && !opt.norm_first)
    throw Error(fmt::format("{} = 1 needs pre-norm layers (norm_first = 1): x + SelfAttn(LN1(x)) + FFN(LN2(x))",
                            g.attr_label("parallel_residual")));
  return opt;
}

// What the stack's positions and window need of its self-attention (layer 0's; the others match).
void check_positions(const WeightGroup& g, const LayerOptions& opt, const MhaWeights& self_attn) {
  const std::int64_t dh = self_attn.shape.head_dim();
  if (opt.positions == LayerPositions::Rope) {
    if (opt.rope.dims && (opt.rope.dims % 2 != 0 || opt.rope.dims > dh))
      throw Error(fmt::format("{} = {}: RoPE turns pairs of a head's {} elements: expected an even number at most {}",
                              g.attr_label("rotary_dim"), opt.rope.dims, dh, dh));
    if (!opt.rope.dims && dh % 2 != 0)
      throw Error(fmt::format("{} = 'rope': RoPE turns pairs of elements, and the head size {} is odd (rotary_dim "
                              "can turn fewer)",
                              g.attr_label("pe"), dh));
  }
  if (self_attn.extra_keys() && (opt.positions != LayerPositions::None || opt.sliding_window > 0))
    throw Error(fmt::format(
        "{}: bias_k or add_zero_attn with {}: the extra keys have no position", g.label("layers/0/self_attn"),
        opt.sliding_window > 0 ? "sliding_window"
                               : fmt::format("{} = '{}'", g.attr_label("pe"), *g.attr_string("pe"))));
}

// linear1 (F, E) and linear2 (E, F) of layer group `lg` (and linear_gate (F, E) for a gated
// activation, ffn_conv (F, 1, k) with ffn_conv_kernel k); F from the file, and equal to `F0`
// (layer 0's) when F0 > 0.
FeedForward load_ffn(const WeightGroup& lg, std::int64_t E, std::int64_t F0, const LayerOptions& opt) {
  const Activation act = opt.activation;
  const Shape w1 = lg.has("linear1/weight") ? lg.shape("linear1/weight") : Shape{};
  const std::int64_t F = w1.size() == 2 ? w1[0] : (F0 > 0 ? F0 : E);
  const std::string why = fmt::format("E = {}, F = {}", E, F);
  FeedForward f;
  f.w1 = lg.read_linear("linear1/weight", {F, E}, why);
  f.b1 = lg.read_optional("linear1/bias", {F}, why);
  f.w2 = lg.read_linear("linear2/weight", {E, F}, why);
  f.b2 = lg.read_optional("linear2/bias", {E}, why);
  if (gated(act)) {
    const std::string gate_why = fmt::format("E = {}, F = {}; activation {} is gated", E, F, activation_name(act));
    f.wg = lg.read_linear("linear_gate/weight", {F, E}, gate_why);
    f.bg = lg.read_optional("linear_gate/bias", {F}, gate_why);
  }
  if (opt.ffn_conv) { // nn.Conv1d(F, F, k, groups=F).weight (F, 1, k), kept as (F, k)
    const std::string conv_why = fmt::format("F = {}, ffn_conv_kernel = {}", F, opt.ffn_conv);
    f.conv_w = lg.read("ffn_conv/weight", {F, 1, opt.ffn_conv}, conv_why);
    f.conv_w.reshape({F, opt.ffn_conv});
    f.conv_b = lg.read_optional("ffn_conv/bias", {F}, conv_why);
  }
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
bool load_final_norm(const WeightGroup& g, std::int64_t E, NormKind kind, LayerNorm& norm) {
  if (!g.has_group("norm")) return false;
  norm = load_norm(g, "norm", E, kind);
  return true;
}

// Calls load(layer_group, i) for layers/0, layers/1, ... (at least one).
template <typename F> void for_each_layer(const WeightGroup& g, const char* what, F&& load) {
  if (!g.has_group("layers/0"))
    throw Error(
        fmt::format("{} ({}'s first layer); the group matches none of the layouts read by "
                    "name either: model/layers/0/self_attn/q_proj/weight (LLaMA), transformer/h/0/attn/c_attn/weight "
                    "(GPT-2), embeddings/word_embeddings/weight (BERT)",
                    g.missing_group("layers/0"), what));
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
  if (enc.opt.ffn_conv % 2 == 0 && enc.opt.ffn_conv > 0)
    throw Error(fmt::format("{} = {}: an encoder's convolution is centred on each position, so its kernel must be "
                            "odd",
                            g.attr_label("ffn_conv_kernel"), enc.opt.ffn_conv));
  for_each_layer(g, "an encoder", [&](const WeightGroup& lg, std::size_t i) {
    EncoderLayer layer;
    const EncoderLayer* first = i > 0 ? &enc.layers[0] : nullptr;
    layer.self_attn = load_layer_mha(lg, "self_attn", first ? &first->self_attn : nullptr);
    const std::int64_t E = layer.self_attn.shape.embed_dim;
    layer.ffn = load_ffn(lg, E, first ? enc.ffn_dim() : 0, enc.opt);
    layer.norm1 = load_norm(lg, "norm1", E, enc.opt.norm);
    layer.norm2 = load_norm(lg, "norm2", E, enc.opt.norm);
    enc.layers.push_back(std::move(layer));
  });
  enc.has_final_norm = load_final_norm(g, enc.embed_dim(), enc.opt.norm, enc.norm);
  check_d_model(g, enc.embed_dim());
  check_positions(g, enc.opt, enc.layers.front().self_attn);
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
    // layer 0 decides: with cross-attention (multihead_attn, norm3), or a decoder-only stack
    if (i == 0) dec.has_cross = lg.has_group("multihead_attn");
    if (dec.has_cross && !lg.has_group("multihead_attn"))
      throw Error(
          fmt::format("{} (a decoder layer's cross-attention; layer 0 has one)", lg.missing_group("multihead_attn")));
    if (!dec.has_cross && lg.has_group("multihead_attn"))
      throw Error(fmt::format("{}: layer {} has cross-attention and layer 0 has none (a decoder-only stack)",
                              lg.label("multihead_attn"), i));
    if (dec.has_cross) {
      layer.cross_attn = load_layer_mha(lg, "multihead_attn", first ? &first->cross_attn : nullptr);
      if (layer.cross_attn.shape.embed_dim != E)
        throw Error(fmt::format("{}: E = {} differs from self_attn's E = {}", lg.label("multihead_attn"),
                                layer.cross_attn.shape.embed_dim, E));
      if (layer.cross_attn.shape.kdim != layer.cross_attn.shape.vdim)
        throw Error(fmt::format("{}: kdim {} and vdim {} differ; the memory feeds both", lg.label("multihead_attn"),
                                layer.cross_attn.shape.kdim, layer.cross_attn.shape.vdim));
    }
    layer.ffn = load_ffn(lg, E, first ? dec.ffn_dim() : 0, dec.opt);
    layer.norm1 = load_norm(lg, "norm1", E, dec.opt.norm);
    layer.norm2 = load_norm(lg, "norm2", E, dec.opt.norm);
    if (dec.has_cross) layer.norm3 = load_norm(lg, "norm3", E, dec.opt.norm);
    dec.layers.push_back(std::move(layer));
  });
  dec.has_final_norm = load_final_norm(g, dec.embed_dim(), dec.opt.norm, dec.norm);
  check_d_model(g, dec.embed_dim());
  if (dec.opt.parallel_residual && dec.has_cross)
    throw Error(fmt::format("{} = 1 is for stacks of self-attention and feed-forward; {} has cross-attention",
                            g.attr_label("parallel_residual"), g.label("layers/0/multihead_attn")));
  check_positions(g, dec.opt, dec.layers.front().self_attn);
  return dec;
}

namespace {

// The attributes of a stack's positions and window, as load_layer_options reads them.
void save_positions(const WeightWriter& w, const LayerOptions& opt) {
  if (opt.positions == LayerPositions::Rope) {
    w.attr("pe", std::string("rope"));
    w.attr("rope_theta", opt.rope.base);
    w.attr("rope_style", std::string(opt.rope.style == RopeStyle::Half ? "half" : "interleaved"));
    if (opt.rope.dims) w.attr("rotary_dim", opt.rope.dims);
  } else if (opt.positions == LayerPositions::Alibi) {
    w.attr("pe", std::string("alibi"));
  }
  if (opt.sliding_window > 0) w.attr("sliding_window", opt.sliding_window);
  if (opt.ffn_conv > 0) w.attr("ffn_conv_kernel", opt.ffn_conv);
  if (opt.parallel_residual) w.attr("parallel_residual", std::int64_t{1});
}

} // namespace

Encoder init_encoder(const EncoderShape& shape, std::uint64_t seed) {
  const std::int64_t E = shape.embed_dim, F = shape.ffn_dim;
  if (shape.layers <= 0 || F <= 0) throw UsageError("encoder sizes must be positive");
  Rng rng(seed);
  Encoder enc;
  enc.opt.norm_first = shape.norm_first;
  enc.opt.activation = shape.activation;
  enc.opt.norm = shape.norm;
  enc.opt.positions = shape.positions;
  enc.opt.rope = shape.rope;
  enc.opt.sliding_window = shape.sliding_window;
  enc.opt.parallel_residual = shape.parallel_residual;
  enc.opt.ffn_conv = shape.ffn_conv;
  if (shape.ffn_conv % 2 == 0 && shape.ffn_conv > 0)
    throw UsageError(fmt::format("--ffn-conv {}: an encoder's convolution is centred on each position, so its kernel "
                                 "must be odd",
                                 shape.ffn_conv));
  auto ones_zeros = [&] { // an RMSNorm has no bias
    LayerNorm ln{Tensor(Shape{E}), shape.norm == NormKind::Rms ? Tensor() : Tensor(Shape{E})};
    std::fill(ln.weight.span().begin(), ln.weight.span().end(), 1.0f);
    return ln;
  };
  for (std::int64_t i = 0; i < shape.layers; ++i) {
    EncoderLayer layer;
    layer.self_attn = init_mha({E, shape.heads, shape.kv_heads ? shape.kv_heads : shape.heads, E, E}, true, rng);
    layer.ffn.w1 = linear_weight_init(F, E, rng);
    layer.ffn.b1 = linear_bias_init(F, E, rng);
    layer.ffn.w2 = linear_weight_init(E, F, rng);
    layer.ffn.b2 = linear_bias_init(E, F, rng);
    if (gated(shape.activation)) {
      layer.ffn.wg = linear_weight_init(F, E, rng);
      layer.ffn.bg = linear_bias_init(F, E, rng);
    }
    if (shape.ffn_conv) { // nn.Conv1d's default: U(+-1/sqrt(k)) for a depthwise kernel of k taps
      layer.ffn.conv_w = linear_weight_init(F, shape.ffn_conv, rng);
      layer.ffn.conv_b = linear_bias_init(F, shape.ffn_conv, rng);
    }
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
    lw.child("linear_gate").write("weight", layer.ffn.wg);
    lw.child("linear_gate").write("bias", layer.ffn.bg);
    if (layer.ffn.conv_kernel()) {
      Tensor w = layer.ffn.conv_w;
      w.reshape({w.dim(0), 1, w.dim(1)});
      lw.child("ffn_conv").write("weight", w);
      lw.child("ffn_conv").write("bias", layer.ffn.conv_b);
    }
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
  if (enc.opt.norm != NormKind::Layer) w.attr("norm_type", norm_kind_name(enc.opt.norm));
  save_positions(w, enc.opt);
}

} // namespace attn
