// The LLaMA, GPT-2 and BERT layouts by their own names: detection, loading into the generic stack,
// special ids (model_layouts.hpp).
#include "attn/weights/layouts/model_layouts.hpp"

#include "weights/layouts/config_values.hpp"

#include "attn/core/error.hpp"
#include "attn/core/names.hpp"

#include <fmt/format.h>

#include <cmath>

namespace attn {

Layout detect_layout(const WeightGroup& g) {
  if (g.has("model/layers/0/self_attn/q_proj/weight")) return Layout::Llama;
  if (g.has("transformer/h/0/attn/c_attn/weight")) return Layout::Gpt2;
  if (g.has("embeddings/word_embeddings/weight") || g.has("bert/embeddings/word_embeddings/weight"))
    return Layout::Bert;
  for (const char* side : {"encoder", "decoder"}) {
    if (g.has(fmt::format("{}/block/0/layer/0/SelfAttention/q/weight", side))) return Layout::T5;
    if (g.has(fmt::format("model/{}/layers/0/fc1/weight", side)) || g.has(fmt::format("{}/layers/0/fc1/weight", side)))
      return Layout::Bart;
  }
  return Layout::Toolkit;
}

std::vector<std::string> layout_buffers(Layout layout, const Decoder& dec) {
  std::vector<std::string> known;
  if (layout == Layout::Bert) // position_ids (and token_type_ids) buffers; the pooler and heads, unused
    return {"embeddings/position_ids",
            "embeddings/token_type_ids",
            "pooler",
            "bert/embeddings/position_ids",
            "bert/embeddings/token_type_ids",
            "bert/pooler",
            "cls",
            "classifier",
            "qa_outputs"};
  for (std::size_t i = 0; i < dec.layers.size(); ++i) {
    if (layout == Layout::Llama) known.push_back(fmt::format("model/layers/{}/self_attn/rotary_emb", i));
    if (layout == Layout::Gpt2) { // the causal mask buffers of older exports
      known.push_back(fmt::format("transformer/h/{}/attn/bias", i));
      known.push_back(fmt::format("transformer/h/{}/attn/masked_bias", i));
    }
  }
  return known;
}

// Hugging Face's activation names (transformers' ACT2FN) the stack computes: "gelu" is erf's,
// "gelu_new", "gelu_pytorch_tanh" and "gelu_fast" the tanh approximation.
namespace {
constexpr Named<Activation> hf_activations[] = {{"gelu", Activation::Gelu},
                                                {"gelu_new", Activation::GeluTanh},
                                                {"gelu_pytorch_tanh", Activation::GeluTanh},
                                                {"gelu_fast", Activation::GeluTanh},
                                                {"relu", Activation::Relu},
                                                {"silu", Activation::Silu}};
} // namespace

Activation hf_activation(const WeightGroup& g, const std::string& attr, const char* fallback) {
  const std::string act = g.attr_string(attr).value_or(fallback);
  if (const Named<Activation>* n = find_named(act, hf_activations)) return n->value;
  throw Error(fmt::format("{} = '{}': expected {}", g.attr_label(attr), act, names_of(hf_activations)));
}

void check_config(const WeightGroup& g, const std::string& attr, std::int64_t from_data, const std::string& dataset) {
  if (const auto v = g.attr_positive(attr); v && *v != from_data)
    throw Error(fmt::format("{} = {} contradicts the datasets: {} gives {}", g.attr_label(attr), *v, g.label(dataset),
                            from_data));
}

std::int64_t config_heads(const WeightGroup& g, const std::string& attr, const std::string& width, std::int64_t E,
                          const std::string& model, bool divides) {
  const auto H = g.attr_positive(attr);
  if (!H)
    throw Error(fmt::format("{}: no {} attribute on the group or an ancestor (the config's; a {} export needs its "
                            "config's scalars as attributes)",
                            g.label(), attr, model));
  if (divides && E % *H != 0)
    throw Error(fmt::format("{} = {} does not divide {} {}", g.attr_label(attr), *H, width, E));
  return *H;
}

void read_separate_qkv(MhaWeights& w, const WeightGroup& a, const std::array<std::string, 3>& names,
                       std::int64_t q_rows, std::int64_t kv_rows, std::int64_t in, bool optional_biases,
                       const std::string& why) {
  const std::int64_t rows[3] = {q_rows, kv_rows, kv_rows};
  w.q_proj_weight = a.read_linear(names[0] + "/weight", {rows[0], in}, why);
  w.k_proj_weight = a.read_linear(names[1] + "/weight", {rows[1], in}, why);
  w.v_proj_weight = a.read_linear(names[2] + "/weight", {rows[2], in}, why);
  const int present = a.has(names[0] + "/bias") + a.has(names[1] + "/bias") + a.has(names[2] + "/bias");
  if (optional_biases && present == 0) return;
  if (optional_biases && present != 3)
    throw Error(fmt::format("{}: {}, {} and {} have biases all three or none; found {} of them", a.label(), names[0],
                            names[1], names[2], present));
  w.in_proj_bias = Tensor(Shape{q_rows + 2 * kv_rows}, Uninitialized{});
  std::int64_t at = 0;
  for (int k = 0; k < 3; ++k) {
    const Tensor b = a.read(names[static_cast<std::size_t>(k)] + "/bias", {rows[k]}, why);
    std::copy_n(b.data(), rows[k], w.in_proj_bias.data() + at);
    at += rows[k];
  }
}

namespace {

// The config's RoPE frequency scaling: rope_scaling (with rope_type, or type as older configs
// write it), or transformers v5's rope_parameters (which holds rope_theta too). Each key named in
// the errors; a type the toolkit does not compute is refused, never run unscaled.
RopeScaling rope_scaling(const WeightGroup& g, double& base) {
  RopeScaling s;
  std::string group = "rope_scaling";
  if (g.attr_string("rope_parameters.rope_type") || g.attr_real("rope_parameters.rope_theta")) {
    group = "rope_parameters";
    base = g.attr_positive_real("rope_parameters.rope_theta").value_or(base);
  }
  auto type = g.attr_string(group + ".rope_type");
  if (!type) type = g.attr_string(group + ".type");
  if (!type || *type == "default") return s;
  const std::string key = group + (g.attr_string(group + ".rope_type") ? ".rope_type" : ".type");
  static constexpr Named<RopeScalingKind> kinds[] = {{"linear", RopeScalingKind::Linear},
                                                     {"dynamic", RopeScalingKind::Dynamic},
                                                     {"llama3", RopeScalingKind::Llama3},
                                                     {"yarn", RopeScalingKind::Yarn}};
  const Named<RopeScalingKind>* kind = find_named(*type, kinds);
  if (!kind)
    throw Error(fmt::format("{} = '{}': the toolkit computes default, {}", g.attr_label(key), *type, names_of(kinds)));
  s.kind = kind->value;
  const auto factor = g.attr_positive_real(group + ".factor");
  if (!factor) throw Error(fmt::format("{}: no {}.factor (the {} scaling's factor)", g.attr_label(key), group, *type));
  s.factor = *factor;
  const auto max_positions = [&] {
    const auto v = g.attr_positive("max_position_embeddings");
    if (!v) throw Error(fmt::format("{}: no max_position_embeddings, which {} scaling needs", g.label(), *type));
    return *v;
  };
  switch (s.kind) {
  case RopeScalingKind::Dynamic: s.max_positions = max_positions(); break;
  case RopeScalingKind::Llama3:
    s.low_freq_factor = g.attr_positive_real(group + ".low_freq_factor").value_or(1.0);
    s.high_freq_factor = g.attr_positive_real(group + ".high_freq_factor").value_or(4.0);
    s.original_max_positions = g.attr_positive(group + ".original_max_position_embeddings").value_or(8192);
    if (s.high_freq_factor <= s.low_freq_factor)
      throw Error(fmt::format("{} = {} must exceed {}.low_freq_factor = {}", g.attr_label(group + ".high_freq_factor"),
                              s.high_freq_factor, group, s.low_freq_factor));
    break;
  case RopeScalingKind::Yarn:
    s.max_positions = max_positions();
    s.beta_fast = g.attr_positive_real(group + ".beta_fast").value_or(32.0);
    s.beta_slow = g.attr_positive_real(group + ".beta_slow").value_or(1.0);
    s.attention_factor = g.attr_positive_real(group + ".attention_factor").value_or(0.1 * std::log(s.factor) + 1.0);
    break;
  default: break;
  }
  return s;
}

// model/layers/{i}/self_attn: q, k, v, o projections as MhaWeights' separate ones; q, k and v
// biases all or none (Qwen2 has them), o's bias optional.
MhaWeights load_llama_attention(const WeightGroup& a, std::int64_t E, std::int64_t H, std::int64_t G, std::int64_t dh) {
  const std::int64_t q = H * dh, kv = G * dh;
  const std::string why = fmt::format("hidden_size {}, {} heads of {}, {} key/value heads", E, H, dh, G);
  MhaWeights w;
  w.shape = {E, H, G, E, E};
  if (dh != E / H || E % H != 0) w.shape.dh = dh;
  read_separate_qkv(w, a, {"q_proj", "k_proj", "v_proj"}, q, kv, E, true, why);
  w.out_proj_weight = a.read_linear("o_proj/weight", {E, q}, why);
  w.out_proj_bias = a.read_optional("o_proj/bias", {E}, why);
  return w;
}

} // namespace

CausalLm load_llama(const WeightGroup& g) {
  CausalLm lm;
  if (!g.has("model/embed_tokens/weight"))
    throw Error(fmt::format("{} (LlamaForCausalLM's token embeddings (vocab_size, hidden_size))",
                            g.missing("model/embed_tokens/weight")));
  const Shape es = g.shape("model/embed_tokens/weight");
  if (es.size() != 2)
    throw Error(fmt::format("{}: expected (V, E), got {}", g.label("model/embed_tokens/weight"), shape_str(es)));
  const std::int64_t V = es[0], E = es[1];
  check_config(g, "hidden_size", E, "model/embed_tokens/weight");
  check_config(g, "vocab_size", V, "model/embed_tokens/weight");
  // (with a head_dim of its own, the heads need not divide the width)
  const std::int64_t H = config_heads(g, "num_attention_heads", "hidden_size", E, "LlamaForCausalLM",
                                      !g.attr_positive("head_dim").has_value());
  const std::int64_t G = g.attr_positive("num_key_value_heads").value_or(H);
  if (H % G != 0)
    throw Error(
        fmt::format("{} = {} does not divide num_attention_heads = {}", g.attr_label("num_key_value_heads"), G, H));

  LayerOptions& opt = lm.dec.opt;
  opt.norm_first = true;
  opt.norm = NormKind::Rms;
  opt.eps = g.attr_positive_real("rms_norm_eps").value_or(1e-6);
  const std::string act = g.attr_string("hidden_act").value_or("silu");
  if (act == "silu")
    opt.activation = Activation::Swiglu;
  else if (act == "gelu")
    opt.activation = Activation::Geglu;
  else
    throw Error(fmt::format("{} = '{}': expected silu (SwiGLU) or gelu (GEGLU)", g.attr_label("hidden_act"), act));
  opt.positions = LayerPositions::Rope;
  opt.rope.style = RopeStyle::Half;
  opt.rope.base = g.attr_positive_real("rope_theta").value_or(10000.0);
  opt.rope.scaling = rope_scaling(g, opt.rope.base);
  // Qwen2's config keeps a sliding_window it does not use unless use_sliding_window says so
  // (transformers writes both); LLaMA's and Mistral's apply the one they have.
  if (g.attr_flag("use_sliding_window").value_or(true))
    opt.sliding_window = g.attr_positive("sliding_window").value_or(0);
  // head_dim: heads of another width than E / H (Mistral NeMo's 128 for 5120 / 32)
  const std::int64_t dh = g.attr_positive("head_dim").value_or(E / H);
  if (dh % 2 != 0) throw Error(fmt::format("{} = {}: RoPE needs an even head width", g.attr_label("head_dim"), dh));

  lm.dec.has_cross = false;
  for (std::int64_t i = 0; g.has_group(fmt::format("model/layers/{}", i)); ++i) {
    const WeightGroup lg = g.child(fmt::format("model/layers/{}", i));
    DecoderLayer layer;
    layer.self_attn = load_llama_attention(lg.child("self_attn"), E, H, G, dh);
    const Shape up = lg.has("mlp/up_proj/weight") ? lg.shape("mlp/up_proj/weight") : Shape{};
    const std::int64_t F = up.size() == 2 ? up[0] : E;
    if (i == 0) check_config(g, "intermediate_size", F, "model/layers/0/mlp/up_proj/weight");
    const std::string why = fmt::format("hidden_size {}, intermediate_size {}", E, F);
    layer.ffn.w1 = lg.read_linear("mlp/up_proj/weight", {F, E}, why);
    layer.ffn.wg = lg.read_linear("mlp/gate_proj/weight", {F, E}, why);
    layer.ffn.w2 = lg.read_linear("mlp/down_proj/weight", {E, F}, why);
    layer.ffn.b1 = lg.read_optional("mlp/up_proj/bias", {F}, why);
    layer.ffn.bg = lg.read_optional("mlp/gate_proj/bias", {F}, why);
    layer.ffn.b2 = lg.read_optional("mlp/down_proj/bias", {E}, why);
    if (i > 0 && F != lm.dec.ffn_dim())
      throw Error(
          fmt::format("{}: intermediate size {}; layer 0 has {}", lg.label("mlp/up_proj/weight"), F, lm.dec.ffn_dim()));
    layer.norm1 = {lg.read("input_layernorm/weight", {E}, why), Tensor()};
    layer.norm2 = {lg.read("post_attention_layernorm/weight", {E}, why), Tensor()};
    lm.dec.layers.push_back(std::move(layer));
  }
  if (lm.dec.layers.empty()) throw Error(fmt::format("{} (the first layer)", g.missing_group("model/layers/0")));
  lm.dec.has_final_norm = true;
  lm.dec.norm = {g.read("model/norm/weight", {E}, fmt::format("hidden_size {}", E)), Tensor()};

  g.read_table("model/embed_tokens/weight", {V, E}, lm.embed.table, lm.embed.compact_table);
  lm.embed.label = g.label("model/embed_tokens/weight");
  lm.embed.scaled = false;
  lm.embed.pe = PeKind::None;
  const auto tied = g.attr_flag("tie_word_embeddings");
  if (g.has("lm_head/weight") && !tied.value_or(false)) {
    lm.gen.weight = g.read_linear("lm_head/weight", {V, E}, fmt::format("vocab_size {}, hidden_size {}", V, E));
  } else if (!g.has("lm_head/weight") && tied == false) {
    throw Error(fmt::format("{} ({} = False: the output layer is not the embeddings)", g.missing("lm_head/weight"),
                            g.attr_label("tie_word_embeddings")));
  } else {
    // tied (an export may still hold lm_head/weight, the same tensor)
    lm.gen.weight = tied_generator(lm.embed);
    if (g.has("lm_head/weight")) g.read("lm_head/weight", {V, E});
  }
  lm.bos_attr = "bos_token_id", lm.eos_attr = "eos_token_id", lm.pad_attr = "pad_token_id";
  return lm;
}

namespace {

// A Conv1D weight (in, out), as GPT-2 stores its linear layers, read as (out, in) (16-bit kept).
LinearWeight read_conv1d(const WeightGroup& g, const std::string& name, std::int64_t in, std::int64_t out,
                         const std::string& why) {
  return g.read_linear_transposed(name, {in, out}, why + " (Conv1D: (in, out))");
}

} // namespace

CausalLm load_gpt2(const WeightGroup& g) {
  CausalLm lm;
  for (const char* ds : {"transformer/wte/weight", "transformer/wpe/weight"})
    if (!g.has(ds))
      throw Error(fmt::format("{} (GPT2LMHeadModel's {} embeddings)", g.missing(ds),
                              std::string(ds).find("wte") != std::string::npos ? "token" : "position"));
  const Shape es = g.shape("transformer/wte/weight"), ps = g.shape("transformer/wpe/weight");
  if (es.size() != 2)
    throw Error(fmt::format("{}: expected (V, E), got {}", g.label("transformer/wte/weight"), shape_str(es)));
  const std::int64_t V = es[0], E = es[1], P = ps.size() == 2 ? ps[0] : 1;
  check_config(g, "n_embd", E, "transformer/wte/weight");
  check_config(g, "vocab_size", V, "transformer/wte/weight");
  check_config(g, "n_positions", P, "transformer/wpe/weight");
  const std::int64_t H = config_heads(g, "n_head", "n_embd", E, "GPT2LMHeadModel");

  LayerOptions& opt = lm.dec.opt;
  opt.norm_first = true;
  opt.norm = NormKind::Layer;
  opt.eps = g.attr_positive_real("layer_norm_epsilon").value_or(1e-5);
  opt.activation = hf_activation(g, "activation_function", "gelu_new");

  lm.dec.has_cross = false;
  for (std::int64_t i = 0; g.has_group(fmt::format("transformer/h/{}", i)); ++i) {
    const WeightGroup b = g.child(fmt::format("transformer/h/{}", i));
    const Shape fc = b.has("mlp/c_fc/weight") ? b.shape("mlp/c_fc/weight") : Shape{};
    const std::int64_t F = fc.size() == 2 ? fc[1] : 4 * E;
    if (i == 0) check_config(g, "n_inner", F, "transformer/h/0/mlp/c_fc/weight");
    const std::string why = fmt::format("n_embd {}, inner size {}", E, F);
    DecoderLayer layer;
    MhaWeights& a = layer.self_attn;
    a.shape = {E, H, H, E, E};
    a.in_proj_weight = read_conv1d(b, "attn/c_attn/weight", E, 3 * E, why);
    a.in_proj_bias = b.read("attn/c_attn/bias", {3 * E}, why);
    a.out_proj_weight = read_conv1d(b, "attn/c_proj/weight", E, E, why);
    a.out_proj_bias = b.read("attn/c_proj/bias", {E}, why);
    layer.ffn.w1 = read_conv1d(b, "mlp/c_fc/weight", E, F, why);
    layer.ffn.b1 = b.read("mlp/c_fc/bias", {F}, why);
    layer.ffn.w2 = read_conv1d(b, "mlp/c_proj/weight", F, E, why);
    layer.ffn.b2 = b.read("mlp/c_proj/bias", {E}, why);
    if (i > 0 && F != lm.dec.ffn_dim())
      throw Error(fmt::format("{}: inner size {}; block 0 has {}", b.label("mlp/c_fc/weight"), F, lm.dec.ffn_dim()));
    layer.norm1 = {b.read("ln_1/weight", {E}, why), b.read("ln_1/bias", {E}, why)};
    layer.norm2 = {b.read("ln_2/weight", {E}, why), b.read("ln_2/bias", {E}, why)};
    lm.dec.layers.push_back(std::move(layer));
  }
  if (lm.dec.layers.empty()) throw Error(fmt::format("{} (the first block)", g.missing_group("transformer/h/0")));
  lm.dec.has_final_norm = true;
  const std::string why = fmt::format("n_embd {}", E);
  lm.dec.norm = {g.read("transformer/ln_f/weight", {E}, why), g.read("transformer/ln_f/bias", {E}, why)};

  g.read_table("transformer/wte/weight", {V, E}, lm.embed.table, lm.embed.compact_table);
  lm.embed.label = g.label("transformer/wte/weight");
  lm.embed.scaled = false;
  lm.embed.pe = PeKind::Learned;
  lm.embed.pos_table = g.read("transformer/wpe/weight", {P, E}, fmt::format("one row per position, of n_embd {}", E));
  lm.embed.pos_label = g.label("transformer/wpe/weight");
  const auto tied = g.attr_flag("tie_word_embeddings");
  if (g.has("lm_head/weight") && tied == false) {
    lm.gen.weight = g.read_linear("lm_head/weight", {V, E}, fmt::format("vocab_size {}, n_embd {}", V, E));
  } else {
    // GPT-2 ties them (its export still holds lm_head/weight, the same tensor)
    lm.gen.weight = tied_generator(lm.embed);
    if (g.has("lm_head/weight")) g.read("lm_head/weight", {V, E});
  }
  lm.bos_attr = "bos_token_id", lm.eos_attr = "eos_token_id", lm.pad_attr = "pad_token_id";
  return lm;
}

EncoderLm load_bert(const WeightGroup& root) {
  const WeightGroup g = root.has("embeddings/word_embeddings/weight") ? root : root.child("bert");
  EncoderLm m;
  const std::string word = "embeddings/word_embeddings/weight";
  const Shape es = g.shape(word);
  if (es.size() != 2) throw Error(fmt::format("{}: expected (V, E), got {}", g.label(word), shape_str(es)));
  const std::int64_t V = es[0], E = es[1];
  check_config(g, "hidden_size", E, word);
  check_config(g, "vocab_size", V, word);
  const std::int64_t H = config_heads(g, "num_attention_heads", "hidden_size", E, "BertModel");
  LayerOptions& opt = m.enc.opt;
  opt.norm_first = false;
  opt.norm = NormKind::Layer;
  opt.eps = g.attr_positive_real("layer_norm_eps").value_or(1e-12);
  opt.activation = hf_activation(g, "hidden_act", "gelu");

  for (std::int64_t i = 0; g.has_group(fmt::format("encoder/layer/{}", i)); ++i) {
    const WeightGroup lg = g.child(fmt::format("encoder/layer/{}", i));
    const Shape up = lg.has("intermediate/dense/weight") ? lg.shape("intermediate/dense/weight") : Shape{};
    const std::int64_t F = up.size() == 2 ? up[0] : 4 * E;
    if (i == 0) check_config(g, "intermediate_size", F, "encoder/layer/0/intermediate/dense/weight");
    const std::string why = fmt::format("hidden_size {}, intermediate_size {}", E, F);
    EncoderLayer layer;
    MhaWeights& a = layer.self_attn;
    a.shape = {E, H, H, E, E};
    read_separate_qkv(a, lg, {"attention/self/query", "attention/self/key", "attention/self/value"}, E, E, E, false,
                      why);
    a.out_proj_weight = lg.read_linear("attention/output/dense/weight", {E, E}, why);
    a.out_proj_bias = lg.read("attention/output/dense/bias", {E}, why);
    layer.norm1 = {lg.read("attention/output/LayerNorm/weight", {E}, why),
                   lg.read("attention/output/LayerNorm/bias", {E}, why)};
    layer.ffn.w1 = lg.read_linear("intermediate/dense/weight", {F, E}, why);
    layer.ffn.b1 = lg.read("intermediate/dense/bias", {F}, why);
    layer.ffn.w2 = lg.read_linear("output/dense/weight", {E, F}, why);
    layer.ffn.b2 = lg.read("output/dense/bias", {E}, why);
    layer.norm2 = {lg.read("output/LayerNorm/weight", {E}, why), lg.read("output/LayerNorm/bias", {E}, why)};
    if (i > 0 && F != m.enc.ffn_dim())
      throw Error(fmt::format("{}: intermediate size {}; layer 0 has {}", lg.label("intermediate/dense/weight"), F,
                              m.enc.ffn_dim()));
    m.enc.layers.push_back(std::move(layer));
  }
  if (m.enc.layers.empty()) throw Error(fmt::format("{} (the first layer)", g.missing_group("encoder/layer/0")));

  TokenEmbedding& e = m.embed;
  g.read_table(word, {V, E}, e.table, e.compact_table);
  e.label = g.label(word);
  e.scaled = false;
  e.pe = PeKind::Learned;
  const std::string pos = "embeddings/position_embeddings/weight", types = "embeddings/token_type_embeddings/weight";
  const Shape ps = g.has(pos) ? g.shape(pos) : Shape{}, ts = g.has(types) ? g.shape(types) : Shape{};
  const std::int64_t P = ps.size() == 2 ? ps[0] : 1, T = ts.size() == 2 ? ts[0] : 1;
  check_config(g, "max_position_embeddings", P, pos);
  check_config(g, "type_vocab_size", T, types);
  const std::string why = fmt::format("hidden_size {}", E);
  e.pos_table = g.read(pos, {P, E}, why);
  e.pos_label = g.label(pos);
  e.type_table = g.read(types, {T, E}, why);
  e.type_label = g.label(types);
  e.norm_weight = g.read("embeddings/LayerNorm/weight", {E}, why);
  e.norm_bias = g.read("embeddings/LayerNorm/bias", {E}, why);
  e.norm_eps = opt.eps;
  return m;
}

} // namespace attn
