// Loading, initialising and saving nn.MultiheadAttention's parameters (weights/mha_weights.hpp).
#include "attn/weights/mha_weights.hpp"

#include "attn/weights/attention_weights.hpp"

#include "attn/core/error.hpp"
#include "attn/core/init.hpp"
#include "attn/core/random.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace attn {

namespace {

// The input size (columns) of a projection matrix, or `fallback` when the dataset is absent.
std::int64_t columns_of(const WeightGroup& g, const char* name, std::int64_t fallback) {
  if (!g.has(name)) return fallback;
  const Shape s = g.shape(name);
  if (s.size() != 2)
    throw Error(fmt::format("{}: expected a matrix (out, in), got shape {}", g.label(name), shape_str(s)));
  return s[1];
}

// add_bias_kv's bias_k and bias_v (1, 1, G dh), a pair, and the add_zero_attn attribute.
void load_extra_keys(const WeightGroup& g, MhaWeights& w, const std::string& why) {
  const std::int64_t kv = w.shape.kv_dim();
  if (g.has("bias_k") != g.has("bias_v"))
    throw Error(fmt::format("{} (bias_k and bias_v of add_bias_kv=True come as a pair)",
                            g.missing(g.has("bias_k") ? "bias_v" : "bias_k")));
  w.bias_k = g.read_optional("bias_k", {1, 1, kv}, why);
  w.bias_v = g.read_optional("bias_v", {1, 1, kv}, why);
  if (const auto declared = g.attr_flag("add_bias_kv"); declared && *declared != (w.bias_k.size() > 0))
    throw Error(fmt::format("{} = {} contradicts the datasets: {} {}", g.attr_label("add_bias_kv"), *declared ? 1 : 0,
                            g.label("bias_k"), w.bias_k.size() ? "is there" : "is missing"));
  w.add_zero_attn = g.attr_flag("add_zero_attn").value_or(false);
}

// The `attention` attribute and the parameters of a linear form.
void load_linear(const WeightGroup& g, MhaWeights& w) {
  const auto name = g.attr_string("attention");
  if (!name || *name == "softmax") return;
  try {
    w.linear = parse_linear_kind(*name);
  } catch (const UsageError&) {
    throw Error(
        fmt::format("{} = '{}': expected softmax, linear, performer or linformer", g.attr_label("attention"), *name));
  }
  if (w.extra_keys())
    throw Error(fmt::format("{} = '{}' is not defined with the extra keys of {} (bias_k, add_zero_attn)",
                            g.attr_label("attention"), *name, g.label()));
  w.linear_source = g.attr_label("attention");
  const MhaShape& s = w.shape;
  if (*w.linear == LinearKind::Favor)
    w.features = load_favor_features(g, s.head_dim(),
                                     fmt::format("the head dim (E = {} / num_heads = {})", s.embed_dim, s.heads));
  if (*w.linear == LinearKind::Linformer) w.linformer = load_linformer(g, -1);
}

} // namespace

MhaWeights load_mha(const WeightGroup& g) {
  MhaWeights w;
  MhaShape& s = w.shape;
  const auto heads = g.attr_positive("num_heads");
  if (!heads) throw Error(fmt::format("{}: no num_heads attribute on the group or an ancestor", g.label()));
  const bool packed = g.has("in_proj_weight");
  if (!packed && !g.has("q_proj_weight"))
    throw Error(fmt::format("{} (or q_proj_weight, k_proj_weight and v_proj_weight)", g.missing("in_proj_weight")));
  const char* q_name = packed ? "in_proj_weight" : "q_proj_weight";
  // E from out_proj/weight (E, E), the one square matrix; else from the query projection's columns.
  // Every other shape is then checked against it, so a wrong in_proj_weight is reported as itself.
  std::string e_from = g.label(q_name);
  s.embed_dim = columns_of(g, q_name, 0);
  if (g.has("out_proj/weight") && g.shape("out_proj/weight").size() == 2) {
    s.embed_dim = g.shape("out_proj/weight")[0];
    e_from = g.label("out_proj/weight");
  }
  s.heads = *heads;
  if (s.embed_dim % s.heads != 0)
    throw Error(fmt::format("{} = {} does not divide the embed dim {} of {}", g.attr_label("num_heads"), s.heads,
                            s.embed_dim, e_from));
  s.kv_heads = g.attr_positive("num_kv_heads").value_or(s.heads);
  if (s.kv_heads <= 0 || s.heads % s.kv_heads != 0)
    throw Error(
        fmt::format("{} = {} does not divide num_heads = {}", g.attr_label("num_kv_heads"), s.kv_heads, s.heads));
  const std::int64_t E = s.embed_dim, kv = s.kv_dim();
  const std::string why = s.kv_heads == s.heads
                              ? fmt::format("E = {}, num_heads = {}", E, s.heads)
                              : fmt::format("E = {}, num_heads = {}, num_kv_heads = {}", E, s.heads, s.kv_heads);
  if (packed) {
    w.in_proj_weight = g.read_linear("in_proj_weight", {E + 2 * kv, E}, why);
    s.kdim = s.vdim = E;
  } else {
    s.kdim = columns_of(g, "k_proj_weight", E);
    s.vdim = columns_of(g, "v_proj_weight", E);
    w.q_proj_weight = g.read_linear("q_proj_weight", {E, E}, why);
    w.k_proj_weight = g.read_linear("k_proj_weight", {kv, s.kdim}, why);
    w.v_proj_weight = g.read_linear("v_proj_weight", {kv, s.vdim}, why);
  }
  w.in_proj_bias = g.read_optional("in_proj_bias", {E + 2 * kv}, why);
  w.out_proj_weight = g.read_linear("out_proj/weight", {E, E}, why);
  w.out_proj_bias = g.read_optional("out_proj/bias", {E}, why);
  load_extra_keys(g, w, why);
  load_linear(g, w);
  return w;
}

MhaWeights init_mha(const MhaShape& shape, bool bias, std::uint64_t seed) {
  Rng rng(seed);
  return init_mha(shape, bias, rng);
}

MhaWeights init_mha(const MhaShape& shape, bool bias, Rng& rng) {
  const MhaShape& s = shape;
  if (s.embed_dim <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.kdim <= 0 || s.vdim <= 0)
    throw UsageError("multi-head attention sizes must be positive");
  if (s.embed_dim % s.heads != 0)
    throw UsageError(fmt::format("embed dim {} is not divisible by {} heads", s.embed_dim, s.heads));
  if (s.heads % s.kv_heads != 0)
    throw UsageError(fmt::format("{} key/value heads do not divide {} heads", s.kv_heads, s.heads));
  MhaWeights w;
  w.shape = s;
  const std::int64_t E = s.embed_dim, kv = s.kv_dim();
  if (s.kdim == E && s.vdim == E && s.kv_heads == s.heads) {
    w.in_proj_weight = xavier_uniform(3 * E, E, rng);
  } else {
    w.q_proj_weight = xavier_uniform(E, E, rng);
    w.k_proj_weight = xavier_uniform(kv, s.kdim, rng);
    w.v_proj_weight = xavier_uniform(kv, s.vdim, rng);
  }
  w.out_proj_weight = linear_weight_init(E, E, rng); // nn.Linear's default; PyTorch keeps it
  if (bias) {
    w.in_proj_bias = Tensor(Shape{E + 2 * kv});
    w.out_proj_bias = Tensor(Shape{E});
  }
  return w;
}

void init_linear(MhaWeights& w, std::optional<LinearKind> kind, const LinearInit& init, Rng& rng) {
  w.linear = kind;
  w.features = Tensor();
  w.linformer = {};
  if (!kind) return;
  if (w.extra_keys())
    throw UsageError(fmt::format("--attention {} is not defined with the extra keys of bias_k or add_zero_attn",
                                 linear_kind_name(*kind)));
  if (*kind == LinearKind::Favor) {
    if (init.features <= 0) throw UsageError("--features must be positive");
    w.features = favor_features(init.features, w.shape.head_dim(), init.orthogonal, rng);
  }
  if (*kind == LinearKind::Linformer) {
    if (init.proj_dim <= 0) throw UsageError("--attention linformer needs --proj-dim k (the projected length)");
    if (init.proj_dim > init.keys)
      throw Error(fmt::format("--proj-dim {} exceeds the {} keys of {} (Linformer projects them onto fewer)",
                              init.proj_dim, init.keys, init.keys_label));
    w.linformer = xavier_linformer(init.proj_dim, init.keys, rng);
  }
}

void save_mha(const WeightWriter& w, const MhaWeights& m) {
  w.write("in_proj_weight", m.in_proj_weight);
  w.write("q_proj_weight", m.q_proj_weight);
  w.write("k_proj_weight", m.k_proj_weight);
  w.write("v_proj_weight", m.v_proj_weight);
  w.write("in_proj_bias", m.in_proj_bias);
  w.child("out_proj").write("weight", m.out_proj_weight);
  w.child("out_proj").write("bias", m.out_proj_bias);
  w.write("bias_k", m.bias_k);
  w.write("bias_v", m.bias_v);
  w.attr("num_heads", m.shape.heads);
  if (m.shape.kv_heads != m.shape.heads) w.attr("num_kv_heads", m.shape.kv_heads);
  if (m.add_zero_attn) w.attr("add_zero_attn", std::int64_t{1});
  if (m.linear) {
    w.attr("attention", std::string(linear_kind_name(*m.linear)));
    w.write("features", m.features);
    w.write("E", m.linformer.E);
    w.write("F", m.linformer.F);
  }
}

} // namespace attn
