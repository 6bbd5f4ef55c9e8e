// mha-run's inputs and module: q, k and v opened and checked; the module read or drawn, checked
// against them, and given the run's attention form.
#include "mha_run.hpp"

#include "attn/core/error.hpp"
#include "attn/core/random.hpp"
#include "attn/inputs/qkv.hpp"
#include "attn/weights/mha_weights.hpp"

namespace mha_run {
namespace {

// The attention form of the run: the weights file's (or softmax with --init), unless --attention
// names another, whose parameters are then drawn from `rng` (after --init's weights: one stream).
void choose_attention(const Options& o, const attn::cli::Tool& tool, attn::MhaWeights& w, std::int64_t m,
                      attn::Rng& rng) {
  const bool from_file = !o.weights.empty();
  const std::vector<std::string> params = {"--features", "--orthogonal", "--proj-dim"};
  if (!tool.given("--attention")) {
    tool.forbid("attention without --attention", params);
    if (from_file) tool.forbid("--weights", {"--seed"});
    return;
  }
  const std::string ctx = "--attention " + o.attention;
  std::optional<attn::LinearKind> kind;
  if (o.attention != "softmax") kind = attn::parse_linear_kind(o.attention);
  if (from_file && kind == w.linear) { // the file's own form, with its parameters
    tool.forbid(ctx + " (the form of the --weights file, with its parameters)", params);
    tool.forbid(ctx + " (the form of the --weights file, with its parameters)", {"--seed"});
    return;
  }
  if (!kind || *kind == attn::LinearKind::Elu) {
    tool.forbid(ctx, params);
    if (from_file) tool.forbid(ctx + " with --weights (no parameters to draw)", {"--seed"});
  }
  if (kind == attn::LinearKind::Favor) tool.forbid(ctx, {"--proj-dim"});
  if (kind == attn::LinearKind::Linformer) {
    tool.forbid(ctx, {"--features", "--orthogonal"});
    tool.require(ctx, {"--proj-dim"});
  }
  attn::init_linear(w, kind, attn::LinearInit{o.features, o.orthogonal, o.proj_dim, m, o.k.empty() ? o.q : o.k}, rng);
}

// The feature size of `x` must be `expect`, the size `what` of the weights.
void check_features(const SequenceReader& x, const std::string& arg, std::int64_t expect, const std::string& what) {
  if (x.features() != expect)
    throw attn::Error(fmt::format("{}: feature size {} differs from {} = {}", arg, x.features(), what, expect));
}

} // namespace

Inputs open_inputs(const Options& o, attn::cli::Tool& tool) {
  const bool self = o.k.empty();
  Inputs in{self, SequenceReader(tool.open_input(o.q), tool.allow_nonfinite(), self ? "inputs" : "queries"), {}, {}};
  if (!self) {
    in.xk_r.emplace(tool.open_input(o.k), tool.allow_nonfinite(), "keys");
    if (!o.v.empty()) in.xv_r.emplace(tool.open_input(o.v), tool.allow_nonfinite(), "values");
  }
  attn::check_qkv(in.xq, in.xk(), in.xv_r ? &*in.xv_r : nullptr, o.q, o.k, o.v);
  return in;
}

attn::MhaWeights module_weights(const Options& o, attn::cli::Tool& tool, const Inputs& in,
                                const std::optional<attn::h5::TensorRef>& weights_ref) {
  attn::MhaWeights w;
  attn::Rng rng(tool.seed());
  const std::int64_t m = in.xk().len();
  if (weights_ref) {
    const attn::WeightGroup g = attn::WeightGroup::open(tool.inputs(), *weights_ref);
    w = attn::load_mha(g);
    attn::check_all_weights_used(g, {}, tool.ignore_unknown_weights());
    const std::string e_source = "the embed dim of " + g.label(w.packed() ? "in_proj_weight" : "q_proj_weight");
    if (!o.rope.empty() && w.shape.head_dim() % 2 != 0)
      throw attn::Error(fmt::format("--rope needs an even head dim; {} has {} (E = {}, num_heads = {})", g.label(),
                                    w.shape.head_dim(), w.shape.embed_dim, w.shape.heads));
    if (!o.rope.empty() && w.extra_keys())
      throw attn::Error(fmt::format("--rope is not defined with the extra keys of {} (bias_k, add_zero_attn): they "
                                    "have no position",
                                    g.label()));
    check_features(in.xq, o.q, w.shape.embed_dim, e_source);
    check_features(in.xk(), in.self ? o.q : o.k, w.shape.kdim,
                   "kdim of " + g.label(w.packed() ? "in_proj_weight" : "k_proj_weight"));
    check_features(in.xv(), in.self ? o.q : (o.v.empty() ? o.k : o.v), w.shape.vdim,
                   "vdim of " + g.label(w.packed() ? "in_proj_weight" : "v_proj_weight"));
  } else {
    check_features(in.xq, o.q, o.embed_dim, "--embed-dim");
    attn::MhaShape shape{o.embed_dim, o.heads, o.kv_heads ? o.kv_heads : o.heads, in.xk().features(),
                         in.xv().features()};
    w = attn::init_mha(shape, true, rng);
  }
  choose_attention(o, tool, w, m, rng);
  if (w.linear == attn::LinearKind::Linformer && w.linformer.E.dim(1) != m)
    throw attn::Error(fmt::format("Linformer's E and F ({}, {}) of {} project {} keys; {} has m = {}",
                                  w.linformer.E.dim(0), w.linformer.E.dim(1), o.weights, w.linformer.E.dim(1),
                                  in.self ? o.q : o.k, m));
  return w;
}

} // namespace mha_run
