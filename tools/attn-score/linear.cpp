// attn-score's linear-time forms: linear (elu + 1), Performer and Linformer.
#include "attn_score.hpp"

#include "attn/attention/linear_attention.hpp"
#include "attn/core/error.hpp"
#include "attn/weights/attention_weights.hpp"

#include <algorithm>
#include <cmath>

namespace attn_score {
namespace {

// The linear variants take q.k scores alone, and their own parameters.
void check_linear_flags(const Options& o, const attn::cli::Tool& tool, attn::LinearKind kind) {
  const std::string ctx = "--attention " + o.attention;
  tool.forbid(ctx, {"--score", "--hidden", "--hard", "--energy-bias", "--filters", "--filter-width"});
  check_emit(o);
  if (std::find(o.emit.begin(), o.emit.end(), "scores") != o.emit.end())
    throw attn::UsageError(ctx + " has no (n, m) scores to emit (--emit weights writes its implied weights)");
  switch (kind) {
  case attn::LinearKind::Elu:
    tool.forbid(ctx, {"--scale", "--params", "--init", "--save-params", "--ignore-unknown-weights", "--seed",
                      "--features", "--orthogonal", "--proj-dim"});
    break;
  case attn::LinearKind::Favor:
    tool.forbid(ctx, {"--init", "--proj-dim"});
    if (!o.params.empty()) tool.forbid(ctx + " --params", {"--features", "--orthogonal", "--seed"});
    break;
  case attn::LinearKind::Linformer:
    tool.forbid(ctx, {"--features", "--orthogonal"});
    if (o.params.empty() == o.init.empty())
      throw attn::UsageError(fmt::format("{} needs exactly one of --params and --init", ctx));
    if (!o.init.empty()) tool.require(ctx + " --init", {"--proj-dim"});
    if (!o.params.empty()) tool.forbid(ctx + " --params", {"--proj-dim", "--seed"});
    break;
  }
}

} // namespace

void run_linear(const Options& o, attn::cli::Tool& tool) {
  const attn::LinearKind kind = attn::parse_linear_kind(o.attention);
  check_linear_flags(o, tool, kind);
  const Inputs in = open_inputs(o, tool, true, "--attention " + o.attention);
  const attn::Mask mask = load_mask(o, tool, in);
  attn::check_linear_mask(mask, kind);
  if (kind == attn::LinearKind::Linformer && o.proj_dim > in.m)
    throw attn::Error(fmt::format("--proj-dim {} exceeds the {} keys of {} (Linformer projects them onto fewer)",
                                  o.proj_dim, in.m, o.k));
  const bool want_weights = !in.v || emits(o, "weights");
  if (want_weights && in.b * in.n * in.m > attn::max_implied_weights)
    throw attn::UsageError(fmt::format(
        "--attention {}: the implied weights (b, n, m) = ({}, {}, {}) exceed {} elements; --emit weights (or no -v) "
        "is for small inputs",
        o.attention, in.b, in.n, in.m, attn::max_implied_weights));

  // Parameters: Performer's features, Linformer's projections (from --params, or drawn).
  Tensor features;
  attn::LinformerProjections proj;
  if (!o.params.empty()) {
    const attn::WeightGroup g = attn::WeightGroup::open(tool.inputs(), tool.input_ref(o.params));
    if (kind == attn::LinearKind::Favor) features = attn::load_favor_features(g, in.dq, "from the queries");
    if (kind == attn::LinearKind::Linformer) proj = attn::load_linformer(g, in.m);
    attn::check_all_weights_used(g, {}, tool.ignore_unknown_weights());
  } else if (kind == attn::LinearKind::Favor) {
    features = attn::favor_features(o.features, in.dq, o.orthogonal, tool.seed());
  } else if (kind == attn::LinearKind::Linformer) {
    proj = attn::xavier_linformer(o.proj_dim, in.m, tool.seed());
  }
  std::unique_ptr<attn::h5::OutputFile> params_file;
  if (!o.save_params.empty()) {
    const bool favor = kind == attn::LinearKind::Favor;
    params_file = tool.open_group_output(o.save_params, favor ? "features" : "E");
    if (favor) attn::save_favor_features(attn::WeightWriter(*params_file), features);
    if (!favor) attn::save_linformer(attn::WeightWriter(*params_file), proj);
  }

  Work w = read_work(in, want_weights, false);
  const attn::Mask my_mask = attn::mask_items(mask, w.first, w.count, 1, in.n);
  attn::LinearAttention a;
  a.kind = kind;
  a.batch = w.count, a.n = in.n, a.m = in.m, a.d = in.dq, a.dv = in.dv;
  a.q = {w.q.data(), in.n * in.dq, 0, in.dq};
  a.k = {w.k.data(), in.m * in.dq, 0, in.dq};
  if (w.v) a.v = {w.v->data(), in.m * in.dv, 0, in.dv};
  a.mask = &my_mask;
  a.scale = o.scale ? static_cast<float>(*o.scale) : 1.0f / std::sqrt(static_cast<float>(in.dk));
  a.features = &features;
  a.proj = &proj;
  if (w.v) a.out = {w.out.data(), in.n * in.dv, 0, in.dv};
  if (want_weights) a.weights = {w.weights.data(), in.n * in.m, 0, in.m};
  const std::int64_t r = kind == attn::LinearKind::Favor ? features.dim(0) : in.dq;
  tool.log("{} attention: b={} n={} m={} d={} d_v={}{}", o.attention, in.b, in.n, in.m, in.dq, in.dv,
           kind == attn::LinearKind::Favor       ? fmt::format(" features M={}", r)
           : kind == attn::LinearKind::Linformer ? fmt::format(" k={}", proj.E.dim(0))
                                                 : "");
  const attn::cli::Stopwatch clock;
  if (w.count > 0) attn::linear_attention(a);
  tool.log("attention: {:.4f} s", clock.seconds());
  write_outputs(tool, in, w);
  if (params_file) params_file->commit();
}

} // namespace attn_score
