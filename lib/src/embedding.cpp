#include "attn/embedding.hpp"

#include "attn/transformer.hpp"

#include "attn/blas.hpp"
#include "attn/error.hpp"
#include "attn/parallel.hpp"
#include "attn/posenc.hpp"

#include <fmt/format.h>

#include <cmath>

namespace attn {

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
  } else if (pe == "none" || pe == "rope" || pe == "alibi") { // rope, alibi: inside the stack's layers
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
    throw Error(fmt::format("{} = '{}': expected sinusoidal, learned, rope, alibi or none", g.attr_label("pe"), pe));
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
  embed_tokens(x.data(), ids_.data() + first * n_, count, n_, *emb_, 0, label_, first,
               types_.size() ? types_.data() + first * n_ : nullptr);
  return x;
}

void embed_tokens(float* x, const std::int64_t* ids, std::int64_t batch, std::int64_t n, const TokenEmbedding& emb,
                  std::int64_t offset, const std::string& ids_label, std::int64_t first_item,
                  const std::int64_t* types) {
  const std::int64_t V = emb.table.dim(0), E = emb.table.dim(1);
  for (std::int64_t i = 0; i < batch * n; ++i)
    if (ids[i] < 0 || ids[i] >= V)
      throw Error(fmt::format("{}: token id {} at index [{}, {}] is outside the vocabulary 0..{} of {}", ids_label,
                              ids[i], first_item + i / n, i % n, V - 1, emb.label));
  const float scale = emb.scaled ? std::sqrt(static_cast<float>(E)) : 1.0f;
  parallel_for(batch * n, threads_if(batch * n * E >= (1 << 15)), [&](std::int64_t i) {
    const float* row = emb.table.data() + ids[i] * E;
    for (std::int64_t e = 0; e < E; ++e) x[i * E + e] = row[e] * scale;
  });
  if (emb.pe == PeKind::Sinusoidal) add_sinusoidal(x, batch, n, E, 10000.0, offset, PeLayout::Interleaved);
  if (emb.pe == PeKind::Learned)
    add_learned(x, batch, n, E, emb.pos_table.data(), emb.pos_table.dim(0), offset, emb.pos_label);
  if (emb.type_table.size()) { // BERT: + type embedding, then LayerNorm
    for (std::int64_t i = 0; i < batch * n; ++i) {
      const float* row = emb.type_table.data() + (types ? types[i] : 0) * E;
      for (std::int64_t e = 0; e < E; ++e) x[i * E + e] += row[e];
    }
    layer_norm(x, batch * n, LayerNorm{emb.norm_weight, emb.norm_bias}, emb.norm_eps);
  }
}

void StackInput::set_token_types(const h5::Dataset& types) {
  types.require_rank(1, 2, "token types (b, n) or (n,)");
  types_ = types.read_ints();
  if (types_.rank() == 1) types_.reshape({1, types_.dim(0)});
  if (types_.shape() != ids_.shape())
    throw Error(fmt::format("{}: token types must have the token ids' shape {} ({}), got {}", types.label(),
                            shape_str(ids_.shape()), label_, shape_str(types_.shape())));
  const std::int64_t T = emb_ && emb_->type_table.size() ? emb_->type_table.dim(0) : 0;
  if (T == 0) throw Error(fmt::format("{}: the model has no token type embeddings ({})", types.label(), emb_->label));
  for (std::int64_t i = 0; i < types_.size(); ++i)
    if (types_[i] < 0 || types_[i] >= T)
      throw Error(fmt::format("{}: token type {} at index [{}, {}] is outside 0..{} of {}", types.label(), types_[i],
                              i / n_, i % n_, T - 1, emb_->type_label));
}

} // namespace attn
