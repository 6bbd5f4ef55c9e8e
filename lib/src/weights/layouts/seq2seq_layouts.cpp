// T5 and BART by their own names: each side of the model loaded into the generic stacks
// (seq2seq_layouts.hpp).
#include "attn/weights/layouts/seq2seq_layouts.hpp"

#include "weights/layouts/config_values.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

#include <cmath>

namespace attn {

namespace {

// --- T5 ------------------------------------------------------------------------------------------

struct T5Sizes {
  std::int64_t V = 0, E = 0, H = 0, dkv = 0;
  std::string table; // the token table's dataset: shared/weight, else a side's embed_tokens/weight
};

T5Sizes t5_sizes(const WeightGroup& g, const char* side) {
  T5Sizes s;
  s.table = g.has("shared/weight") ? "shared/weight" : fmt::format("{}/embed_tokens/weight", side);
  if (!g.has(s.table))
    throw Error(fmt::format("{} (T5's token embeddings (vocab_size, d_model))", g.missing("shared/weight")));
  const Shape es = g.shape(s.table);
  if (es.size() != 2) throw Error(fmt::format("{}: expected (V, E), got {}", g.label(s.table), shape_str(es)));
  s.V = es[0], s.E = es[1];
  check_config(g, "d_model", s.E, s.table);
  check_config(g, "vocab_size", s.V, s.table);
  // T5Config's defaults: 8 heads of 64
  s.H = g.attr_positive("num_heads").value_or(8);
  s.dkv = g.attr_positive("d_kv").value_or(64);
  const std::string q = fmt::format("{}/block/0/layer/0/SelfAttention/q/weight", side);
  if (g.has(q)) {
    const Shape qs = g.shape(q);
    if (qs.size() == 2 && qs[0] != s.H * s.dkv)
      throw Error(fmt::format("{}: {} rows, but num_heads {} x d_kv {} = {} ({}, {})", g.label(q), qs[0], s.H, s.dkv,
                              s.H * s.dkv, g.attr_label("num_heads"), g.attr_label("d_kv")));
  }
  return s;
}

// feed_forward_proj: an ACT2FN name ("relu", T5 v1.0's), or "gated-" and one: gated-gelu is GELU's
// tanh form (T5Config maps it to gelu_new), gated-silu SwiGLU's.
Activation t5_activation(const WeightGroup& g) {
  const std::string proj = g.attr_string("feed_forward_proj").value_or("relu");
  if (proj.rfind("gated-", 0) != 0) return hf_activation(g, "feed_forward_proj", "relu");
  const std::string act = proj.substr(6);
  if (act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh") return Activation::GegluTanh;
  if (act == "silu") return Activation::Swiglu;
  throw Error(fmt::format("{} = '{}': the gated forms computed are gated-gelu (GELU's tanh form) and gated-silu",
                          g.attr_label("feed_forward_proj"), proj));
}

LayerOptions t5_options(const WeightGroup& g) {
  LayerOptions opt;
  opt.norm_first = true;
  opt.norm = NormKind::Rms;
  opt.eps = g.attr_positive_real("layer_norm_epsilon").value_or(1e-6);
  opt.activation = t5_activation(g);
  opt.positions = LayerPositions::Relative;
  return opt;
}

// block/0's relative_attention_bias (buckets, H) with the config's rule.
std::shared_ptr<const RelativeBias> t5_relative_bias(const WeightGroup& g, const std::string& side, const T5Sizes& s,
                                                     bool bidirectional) {
  RelativeBuckets rule;
  rule.buckets = g.attr_positive("relative_attention_num_buckets").value_or(32);
  rule.max_distance = g.attr_positive("relative_attention_max_distance").value_or(128);
  rule.bidirectional = bidirectional;
  check_relative_buckets(rule, g.attr_label("relative_attention_num_buckets"));
  const std::string ds = side + "/block/0/layer/0/SelfAttention/relative_attention_bias/weight";
  const Tensor t = g.read(ds, {rule.buckets, s.H},
                          fmt::format("relative_attention_num_buckets {}, num_heads {}", rule.buckets, s.H));
  return std::make_shared<const RelativeBias>(rule, s.H, std::vector<float>(t.data(), t.data() + t.size()),
                                              g.label(ds));
}

// q, k, v (H d_kv, E) and o (E, H d_kv), no biases; scores q.k unscaled.
MhaWeights t5_attention(const WeightGroup& a, const T5Sizes& s) {
  const std::int64_t E = s.E, Q = s.H * s.dkv;
  const std::string why = fmt::format("d_model {}, num_heads {} of d_kv {}", E, s.H, s.dkv);
  MhaWeights w;
  w.shape = {E, s.H, s.H, E, E};
  if (Q != E) w.shape.dh = s.dkv;
  w.shape.scale = 1.0;
  w.q_proj_weight = a.read_linear("q/weight", {Q, E}, why);
  w.k_proj_weight = a.read_linear("k/weight", {Q, E}, why);
  w.v_proj_weight = a.read_linear("v/weight", {Q, E}, why);
  w.out_proj_weight = a.read_linear("o/weight", {E, Q}, why);
  return w;
}

// DenseReluDense: wi (F, E) and wo (E, F), or gated wi_0 (the gate), wi_1 and wo.
FeedForward t5_feed_forward(const WeightGroup& f, std::int64_t E, Activation act) {
  const std::string up = gated(act) ? "wi_1/weight" : "wi/weight";
  const Shape us = f.has(up) ? f.shape(up) : Shape{};
  const std::int64_t F = us.size() == 2 ? us[0] : E;
  const std::string why = fmt::format("d_model {}, d_ff {}", E, F);
  FeedForward ffn;
  ffn.w1 = f.read_linear(up, {F, E}, why);
  if (gated(act)) ffn.wg = f.read_linear("wi_0/weight", {F, E}, why);
  ffn.w2 = f.read_linear("wo/weight", {E, F}, why);
  return ffn;
}

TokenEmbedding t5_embedding(const WeightGroup& g, const T5Sizes& s, const char* side) {
  TokenEmbedding e;
  g.read_table(s.table, {s.V, s.E}, e.table, e.compact_table);
  e.label = g.label(s.table);
  e.scaled = false;
  e.pe = PeKind::None;
  // the side's embed_tokens, when the export holds it beside shared, is the same tensor
  const std::string own = fmt::format("{}/embed_tokens/weight", side);
  if (own != s.table && g.has(own)) g.read(own, {s.V, s.E});
  return e;
}

// A stack's layer count: the blocks present, which the config's count (when given) must match.
std::int64_t count_blocks(const WeightGroup& g, const std::string& prefix, const char* attr) {
  std::int64_t n = 0;
  while (g.has_group(fmt::format("{}/{}", prefix, n))) ++n;
  if (n == 0) throw Error(fmt::format("{} (the first block)", g.missing_group(prefix + "/0")));
  if (const auto v = g.attr_positive(attr); v && *v != n)
    throw Error(
        fmt::format("{} = {} contradicts the datasets: {} holds {}", g.attr_label(attr), *v, g.label(prefix), n));
  return n;
}

} // namespace

EncoderLm load_t5_encoder(const WeightGroup& g) {
  const T5Sizes s = t5_sizes(g, "encoder");
  EncoderLm m;
  m.enc.opt = t5_options(g);
  m.enc.opt.relative = t5_relative_bias(g, "encoder", s, true);
  const std::int64_t n = count_blocks(g, "encoder/block", "num_layers");
  const std::string why = fmt::format("d_model {}", s.E);
  for (std::int64_t i = 0; i < n; ++i) {
    const WeightGroup b = g.child(fmt::format("encoder/block/{}", i));
    EncoderLayer layer;
    layer.self_attn = t5_attention(b.child("layer/0/SelfAttention"), s);
    layer.norm1 = {b.read("layer/0/layer_norm/weight", {s.E}, why), Tensor()};
    layer.ffn = t5_feed_forward(b.child("layer/1/DenseReluDense"), s.E, m.enc.opt.activation);
    layer.norm2 = {b.read("layer/1/layer_norm/weight", {s.E}, why), Tensor()};
    if (i > 0 && layer.ffn.w1.dim(0) != m.enc.ffn_dim())
      throw Error(fmt::format("{}: d_ff {}; block 0 has {}", b.label("layer/1/DenseReluDense"), layer.ffn.w1.dim(0),
                              m.enc.ffn_dim()));
    m.enc.layers.push_back(std::move(layer));
  }
  check_config(g, "d_ff", m.enc.ffn_dim(), "encoder/block/0/layer/1/DenseReluDense");
  m.enc.has_final_norm = true;
  m.enc.norm = {g.read("encoder/final_layer_norm/weight", {s.E}, why), Tensor()};
  m.embed = t5_embedding(g, s, "encoder");
  return m;
}

Seq2SeqDecoder load_t5_decoder(const WeightGroup& g) {
  const T5Sizes s = t5_sizes(g, "decoder");
  Seq2SeqDecoder m;
  m.dec.opt = t5_options(g);
  m.dec.opt.relative = t5_relative_bias(g, "decoder", s, false);
  m.dec.has_cross = true;
  // num_decoder_layers defaults to num_layers
  const std::int64_t n =
      count_blocks(g, "decoder/block", g.attr_positive("num_decoder_layers") ? "num_decoder_layers" : "num_layers");
  const std::string why = fmt::format("d_model {}", s.E);
  for (std::int64_t i = 0; i < n; ++i) {
    const WeightGroup b = g.child(fmt::format("decoder/block/{}", i));
    DecoderLayer layer;
    layer.self_attn = t5_attention(b.child("layer/0/SelfAttention"), s);
    layer.norm1 = {b.read("layer/0/layer_norm/weight", {s.E}, why), Tensor()};
    layer.cross_attn = t5_attention(b.child("layer/1/EncDecAttention"), s);
    layer.norm2 = {b.read("layer/1/layer_norm/weight", {s.E}, why), Tensor()};
    layer.ffn = t5_feed_forward(b.child("layer/2/DenseReluDense"), s.E, m.dec.opt.activation);
    layer.norm3 = {b.read("layer/2/layer_norm/weight", {s.E}, why), Tensor()};
    if (i > 0 && layer.ffn.w1.dim(0) != m.dec.ffn_dim())
      throw Error(fmt::format("{}: d_ff {}; block 0 has {}", b.label("layer/2/DenseReluDense"), layer.ffn.w1.dim(0),
                              m.dec.ffn_dim()));
    m.dec.layers.push_back(std::move(layer));
  }
  check_config(g, "d_ff", m.dec.ffn_dim(), "decoder/block/0/layer/2/DenseReluDense");
  m.dec.has_final_norm = true;
  m.dec.norm = {g.read("decoder/final_layer_norm/weight", {s.E}, why), Tensor()};
  m.embed = t5_embedding(g, s, "decoder");

  Generator gen;
  const auto tied = g.attr_flag("tie_word_embeddings").value_or(true);
  if (!tied) {
    gen.weight = g.read_linear("lm_head/weight", {s.V, s.E}, fmt::format("vocab_size {}, d_model {}", s.V, s.E));
  } else {
    gen.weight = tied_generator(m.embed);
    gen.input_scale = static_cast<float>(std::pow(static_cast<double>(s.E), -0.5));
    if (g.has("lm_head/weight")) g.read("lm_head/weight", {s.V, s.E}); // the same tensor, in some exports
  }
  m.gen = std::move(gen);
  m.known = {"encoder"};
  m.group = "decoder", m.first_layer = "decoder/block/0";
  return m;
}

namespace {

// --- BART ----------------------------------------------------------------------------------------

// BartForConditionalGeneration keeps the model under model/ (lm_head and final_logits_bias beside
// it); BartModel at the root.
WeightGroup bart_model(const WeightGroup& g) {
  return g.has_group("model/encoder") || g.has_group("model/decoder") ? g.child("model") : g;
}

struct BartSizes {
  std::int64_t V = 0, E = 0;
  std::string table;
};

BartSizes bart_sizes(const WeightGroup& m, const char* side) {
  BartSizes s;
  s.table = m.has("shared/weight") ? "shared/weight" : fmt::format("{}/embed_tokens/weight", side);
  if (!m.has(s.table))
    throw Error(fmt::format("{} (BART's token embeddings (vocab_size, d_model))", m.missing("shared/weight")));
  const Shape es = m.shape(s.table);
  if (es.size() != 2) throw Error(fmt::format("{}: expected (V, E), got {}", m.label(s.table), shape_str(es)));
  s.V = es[0], s.E = es[1];
  check_config(m, "d_model", s.E, s.table);
  check_config(m, "vocab_size", s.V, s.table);
  return s;
}

LayerOptions bart_options(const WeightGroup& g) {
  LayerOptions opt;
  opt.norm_first = false;
  opt.norm = NormKind::Layer;
  opt.eps = 1e-5; // nn.LayerNorm's default, which BART's layers keep
  opt.activation = hf_activation(g, "activation_function", "gelu");
  return opt;
}

// self_attn or encoder_attn: q/k/v/out_proj, each with its bias.
MhaWeights bart_attention(const WeightGroup& a, std::int64_t E, std::int64_t H) {
  const std::string why = fmt::format("d_model {}, {} heads", E, H);
  MhaWeights w;
  w.shape = {E, H, H, E, E};
  read_separate_qkv(w, a, {"q_proj", "k_proj", "v_proj"}, E, E, E, false, why);
  w.out_proj_weight = a.read_linear("out_proj/weight", {E, E}, why);
  w.out_proj_bias = a.read("out_proj/bias", {E}, why);
  return w;
}

LayerNorm bart_norm(const WeightGroup& l, const std::string& name, std::int64_t E) {
  const std::string why = fmt::format("d_model {}", E);
  return {l.read(name + "/weight", {E}, why), l.read(name + "/bias", {E}, why)};
}

FeedForward bart_feed_forward(const WeightGroup& l, std::int64_t E) {
  const Shape fs = l.has("fc1/weight") ? l.shape("fc1/weight") : Shape{};
  const std::int64_t F = fs.size() == 2 ? fs[0] : E;
  const std::string why = fmt::format("d_model {}, ffn dim {}", E, F);
  FeedForward f;
  f.w1 = l.read_linear("fc1/weight", {F, E}, why);
  f.b1 = l.read("fc1/bias", {F}, why);
  f.w2 = l.read_linear("fc2/weight", {E, F}, why);
  f.b2 = l.read("fc2/bias", {E}, why);
  return f;
}

// The side's heads (`attr`, BartConfig's default 16), dividing d_model.
std::int64_t bart_heads(const WeightGroup& m, const std::string& attr, std::int64_t E) {
  const std::int64_t H = m.attr_positive(attr).value_or(16);
  if (E % H != 0) throw Error(fmt::format("{} = {} does not divide d_model {}", m.attr_label(attr), H, E));
  return H;
}

// The side's token embeddings: the shared table (times sqrt(d_model) with scale_embedding), its
// learned positions from row 2 of embed_positions (BartLearnedPositionalEmbedding's offset), then
// layernorm_embedding.
TokenEmbedding bart_embedding(const WeightGroup& m, const BartSizes& s, const std::string& side) {
  TokenEmbedding e;
  m.read_table(s.table, {s.V, s.E}, e.table, e.compact_table);
  e.label = m.label(s.table);
  const std::string own = side + "/embed_tokens/weight";
  if (own != s.table && m.has(own)) m.read(own, {s.V, s.E}); // the same tensor as shared
  e.scaled = m.attr_flag("scale_embedding").value_or(false);
  e.pe = PeKind::Learned;
  const std::string pos = side + "/embed_positions/weight";
  const Shape ps = m.has(pos) ? m.shape(pos) : Shape{};
  const std::int64_t rows = ps.size() == 2 ? ps[0] : 3;
  if (rows < 3)
    throw Error(
        fmt::format("{}: {} rows; BART's positions start at row 2 (shape {})", m.label(pos), rows, shape_str(ps)));
  const Tensor table = m.read(pos, {rows, s.E}, fmt::format("max_position_embeddings + 2 rows of d_model {}", s.E));
  check_config(m, "max_position_embeddings", rows - 2, pos);
  e.pos_table = Tensor(Shape{rows - 2, s.E}, Uninitialized{});
  std::copy_n(table.data() + 2 * s.E, (rows - 2) * s.E, e.pos_table.data());
  e.pos_label = m.label(pos) + " (from row 2)";
  const LayerNorm ln = bart_norm(m, side + "/layernorm_embedding", s.E);
  e.norm_weight = ln.weight, e.norm_bias = ln.bias;
  e.norm_eps = 1e-5;
  return e;
}

} // namespace

EncoderLm load_bart_encoder(const WeightGroup& g) {
  const WeightGroup m = bart_model(g);
  const BartSizes s = bart_sizes(m, "encoder");
  const std::int64_t H = bart_heads(m, "encoder_attention_heads", s.E);
  EncoderLm r;
  r.enc.opt = bart_options(m);
  const std::int64_t n = count_blocks(m, "encoder/layers", "encoder_layers");
  for (std::int64_t i = 0; i < n; ++i) {
    const WeightGroup l = m.child(fmt::format("encoder/layers/{}", i));
    EncoderLayer layer;
    layer.self_attn = bart_attention(l.child("self_attn"), s.E, H);
    layer.norm1 = bart_norm(l, "self_attn_layer_norm", s.E);
    layer.ffn = bart_feed_forward(l, s.E);
    layer.norm2 = bart_norm(l, "final_layer_norm", s.E);
    if (i > 0 && layer.ffn.w1.dim(0) != r.enc.ffn_dim())
      throw Error(
          fmt::format("{}: ffn dim {}; layer 0 has {}", l.label("fc1/weight"), layer.ffn.w1.dim(0), r.enc.ffn_dim()));
    r.enc.layers.push_back(std::move(layer));
  }
  check_config(m, "encoder_ffn_dim", r.enc.ffn_dim(), "encoder/layers/0/fc1/weight");
  r.embed = bart_embedding(m, s, "encoder");
  return r;
}

Seq2SeqDecoder load_bart_decoder(const WeightGroup& g) {
  const WeightGroup m = bart_model(g);
  const BartSizes s = bart_sizes(m, "decoder");
  const std::int64_t H = bart_heads(m, "decoder_attention_heads", s.E);
  Seq2SeqDecoder r;
  r.dec.opt = bart_options(m);
  r.dec.has_cross = true;
  const std::int64_t n = count_blocks(m, "decoder/layers", "decoder_layers");
  for (std::int64_t i = 0; i < n; ++i) {
    const WeightGroup l = m.child(fmt::format("decoder/layers/{}", i));
    DecoderLayer layer;
    layer.self_attn = bart_attention(l.child("self_attn"), s.E, H);
    layer.norm1 = bart_norm(l, "self_attn_layer_norm", s.E);
    layer.cross_attn = bart_attention(l.child("encoder_attn"), s.E, H);
    layer.norm2 = bart_norm(l, "encoder_attn_layer_norm", s.E);
    layer.ffn = bart_feed_forward(l, s.E);
    layer.norm3 = bart_norm(l, "final_layer_norm", s.E);
    if (i > 0 && layer.ffn.w1.dim(0) != r.dec.ffn_dim())
      throw Error(
          fmt::format("{}: ffn dim {}; layer 0 has {}", l.label("fc1/weight"), layer.ffn.w1.dim(0), r.dec.ffn_dim()));
    r.dec.layers.push_back(std::move(layer));
  }
  check_config(m, "decoder_ffn_dim", r.dec.ffn_dim(), "decoder/layers/0/fc1/weight");
  r.embed = bart_embedding(m, s, "decoder");

  // The LM head of BartForConditionalGeneration (BartModel has none): lm_head, or the shared table
  // it is tied to, plus final_logits_bias.
  if (g.has("lm_head/weight") || g.has("final_logits_bias")) {
    Generator gen;
    const std::string why = fmt::format("vocab_size {}, d_model {}", s.V, s.E);
    const bool tied = g.attr_flag("tie_word_embeddings").value_or(true);
    if (!tied) {
      gen.weight = g.read_linear("lm_head/weight", {s.V, s.E}, why);
    } else {
      gen.weight = tied_generator(r.embed);
      if (g.has("lm_head/weight")) g.read("lm_head/weight", {s.V, s.E}); // the same tensor as shared
    }
    if (g.has("final_logits_bias")) {
      gen.bias = g.read("final_logits_bias", {1, s.V}, why);
      gen.bias.reshape(Shape{s.V});
    }
    r.gen = std::move(gen);
  }
  for (const char* attr : {"forced_bos_token_id", "forced_eos_token_id"})
    if (const auto id = g.attr_int(attr)) {
      if (*id < 0 || *id >= s.V)
        throw Error(fmt::format("{} = {} is outside the vocabulary 0..{}", g.attr_label(attr), *id, s.V - 1));
      (std::string(attr) == "forced_bos_token_id" ? r.forced_bos : r.forced_eos) = *id;
    }
  const std::string prefix = m.path() == g.path() ? "" : "model/";
  r.known = {prefix + "encoder"};
  r.group = prefix + "decoder", r.first_layer = prefix + "decoder/layers/0";
  return r;
}

std::vector<std::string> seq2seq_encoder_known(Layout layout, const WeightGroup& g) {
  if (layout == Layout::T5) return {"decoder", "lm_head"};
  const bool nested = bart_model(g).path() != g.path();
  return {nested ? "model/decoder" : "decoder", "lm_head", "final_logits_bias"};
}

} // namespace attn
