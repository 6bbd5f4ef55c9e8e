// Reading token embeddings and the output layer (weights/embedding_weights.hpp).
#include "attn/weights/embedding_weights.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

namespace attn {

TokenEmbedding load_embedding(const WeightGroup& g, const std::string& name, std::int64_t embed_dim,
                              std::string_view stack) {
  TokenEmbedding emb;
  const std::string ds = name + "/weight";
  if (!g.has(ds)) throw Error(fmt::format("{} (token embeddings (V, E), needed for token ids)", g.missing(ds)));
  const Shape s = g.shape(ds);
  if (s.size() != 2) throw Error(fmt::format("{}: expected (V, E), got shape {}", g.label(ds), shape_str(s)));
  emb.table = g.read(ds, s);
  emb.label = g.label(ds);
  const std::string pe = g.attr_string("pe").value_or("sinusoidal");
  if (pe == "sinusoidal") {
    emb.pe = PeKind::Sinusoidal;
  } else if (pe == "none" || pe == "rope" || pe == "alibi") { // rope, alibi: inside the stack's layers
    emb.pe = PeKind::None;
  } else if (pe == "learned") {
    emb.pe = PeKind::Learned;
    if (!g.has("pos_embed/weight"))
      throw Error(fmt::format("{} (the learned position table (positions, E = {}) that {} = "
                              "'learned' needs)",
                              g.missing("pos_embed/weight"), s[1], g.attr_label("pe")));
    const Shape ps = g.shape("pos_embed/weight");
    emb.pos_table = g.read("pos_embed/weight", {ps.size() == 2 ? ps[0] : 1, s[1]},
                           fmt::format("one row per position, of E = {}", s[1]));
    emb.pos_label = g.label("pos_embed/weight");
  } else {
    throw Error(fmt::format("{} = '{}': expected sinusoidal, learned, rope, alibi or none", g.attr_label("pe"), pe));
  }
  if (s[1] != embed_dim)
    throw Error(fmt::format("{}: embedding size {} differs from the {}'s E = {}", emb.label, s[1], stack, embed_dim));
  return emb;
}

std::optional<Generator> load_generator(const WeightGroup& g, std::int64_t embed_dim) {
  if (!g.has("generator/weight")) return std::nullopt;
  const Shape s = g.shape("generator/weight");
  const std::int64_t V = s.size() == 2 ? s[0] : 1;
  const std::string why = fmt::format("E = {}", embed_dim);
  Generator gen;
  gen.weight = g.read_linear("generator/weight", {V, embed_dim}, why);
  gen.bias = g.read_optional("generator/bias", {V}, why);
  return gen;
}

std::vector<std::string> known_model_parts(const WeightGroup& g, std::vector<std::string> parts) {
  if (g.attr_string("pe") == "learned") parts.emplace_back("pos_embed");
  return parts;
}

} // namespace attn
