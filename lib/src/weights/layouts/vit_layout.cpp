// ViT by its own names: the patch embedding, the pre-norm encoder, the pooler and the classifier
// (vit_layout.hpp).
#include "attn/weights/layouts/vit_layout.hpp"

#include "weights/layouts/config_values.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

#include <cmath>

namespace attn {

namespace {
constexpr const char* projection = "embeddings/patch_embeddings/projection/weight";

// ViTForImageClassification keeps the model under vit/.
WeightGroup vit_model(const WeightGroup& g) { return g.has(projection) ? g : g.child("vit"); }

LayerNorm read_norm(const WeightGroup& g, const std::string& name, std::int64_t E) {
  const std::string why = fmt::format("hidden_size {}", E);
  return {g.read(name + "/weight", {E}, why), g.read(name + "/bias", {E}, why)};
}

PatchEmbedding read_patches(const WeightGroup& m) {
  const Shape ws = m.shape(projection);
  if (ws.size() != 4 || ws[2] != ws[3])
    throw Error(fmt::format("{}: expected (hidden_size, num_channels, patch_size, patch_size), got {}",
                            m.label(projection), shape_str(ws)));
  PatchEmbedding pe;
  const std::int64_t E = ws[0], C = ws[1], P = ws[2];
  check_config(m, "hidden_size", E, projection);
  check_config(m, "num_channels", C, projection);
  check_config(m, "patch_size", P, projection);
  pe.channels = C, pe.patch = P;
  const std::string why = fmt::format("hidden_size {}, {} channels, patches of {}", E, C, P);
  Tensor w = m.read(projection, ws, why);
  w.reshape(Shape{E, C * P * P});
  pe.projection = LinearWeight(w);
  pe.bias = m.read("embeddings/patch_embeddings/projection/bias", {E}, why);
  pe.cls = m.read("embeddings/cls_token", {1, 1, E}, why);
  pe.cls.reshape(Shape{E});
  pe.label = m.label(projection);
  // the grid: image_size / patch_size a side, as the position table's rows say
  const std::string pos = "embeddings/position_embeddings";
  const Shape ps = m.has(pos) ? m.shape(pos) : Shape{};
  const std::int64_t rows = ps.size() == 3 ? ps[1] : 0,
                     side = static_cast<std::int64_t>(std::llround(std::sqrt(rows - 1.0)));
  if (rows < 2 || side * side != rows - 1)
    throw Error(fmt::format("{}: expected (1, 1 + a square number of patches, {}), got {}", m.label(pos), E,
                            ps.empty() ? "nothing" : shape_str(ps)));
  check_config(m, "image_size", side * P, pos);
  pe.grid_h = pe.grid_w = side;
  pe.positions = m.read(pos, {1, rows, E}, why);
  pe.positions.reshape(Shape{rows, E});
  return pe;
}

} // namespace

bool is_vit(const WeightGroup& g) { return g.has(projection) || g.has(std::string("vit/") + projection); }

VisionModel load_vit(const WeightGroup& g) {
  const WeightGroup m = vit_model(g);
  VisionModel r;
  r.patches = read_patches(m);
  const std::int64_t E = r.patches.width();
  const std::int64_t H = m.attr_positive("num_attention_heads").value_or(12);
  if (E % H != 0)
    throw Error(fmt::format("{} = {} does not divide hidden_size {}", m.attr_label("num_attention_heads"), H, E));
  LayerOptions& opt = r.enc.opt;
  opt.norm_first = true;
  opt.norm = NormKind::Layer;
  opt.eps = m.attr_positive_real("layer_norm_eps").value_or(1e-12);
  opt.activation = hf_activation(m, "hidden_act", "gelu");
  for (std::int64_t i = 0; m.has_group(fmt::format("encoder/layer/{}", i)); ++i) {
    const WeightGroup l = m.child(fmt::format("encoder/layer/{}", i));
    const Shape up = l.has("intermediate/dense/weight") ? l.shape("intermediate/dense/weight") : Shape{};
    const std::int64_t F = up.size() == 2 ? up[0] : 4 * E;
    if (i == 0) check_config(m, "intermediate_size", F, "encoder/layer/0/intermediate/dense/weight");
    const std::string why = fmt::format("hidden_size {}, intermediate_size {}", E, F);
    EncoderLayer layer;
    MhaWeights& a = layer.self_attn;
    a.shape = {E, H, H, E, E};
    read_separate_qkv(a, l, {"attention/attention/query", "attention/attention/key", "attention/attention/value"}, E, E,
                      E, true, why);
    a.out_proj_weight = l.read_linear("attention/output/dense/weight", {E, E}, why);
    a.out_proj_bias = l.read("attention/output/dense/bias", {E}, why);
    layer.norm1 = read_norm(l, "layernorm_before", E);
    layer.norm2 = read_norm(l, "layernorm_after", E);
    layer.ffn.w1 = l.read_linear("intermediate/dense/weight", {F, E}, why);
    layer.ffn.b1 = l.read("intermediate/dense/bias", {F}, why);
    layer.ffn.w2 = l.read_linear("output/dense/weight", {E, F}, why);
    layer.ffn.b2 = l.read("output/dense/bias", {E}, why);
    if (i > 0 && F != r.enc.ffn_dim())
      throw Error(fmt::format("{}: intermediate size {}; layer 0 has {}", l.label("intermediate/dense/weight"), F,
                              r.enc.ffn_dim()));
    r.enc.layers.push_back(std::move(layer));
  }
  if (r.enc.layers.empty()) throw Error(fmt::format("{} (the first layer)", m.missing_group("encoder/layer/0")));
  check_config(m, "num_hidden_layers", static_cast<std::int64_t>(r.enc.layers.size()),
               fmt::format("encoder/layer/{}", r.enc.layers.size() - 1));
  r.enc.has_final_norm = true;
  r.enc.norm = read_norm(m, "layernorm", E);
  const std::string why = fmt::format("hidden_size {}", E);
  if (m.has("pooler/dense/weight")) {
    r.head.pooler = m.read_linear("pooler/dense/weight", {E, E}, why);
    r.head.pooler_bias = m.read("pooler/dense/bias", {E}, why);
  }
  if (g.has("classifier/weight")) {
    const Shape cs = g.shape("classifier/weight");
    const std::int64_t labels = cs.size() == 2 ? cs[0] : 1;
    r.head.classifier = g.read_linear("classifier/weight", {labels, E}, why);
    r.head.classifier_bias = g.read("classifier/bias", {labels}, why);
  }
  return r;
}

} // namespace attn
