// attn-score's softmax and monotonic attention over a score function's energies (scaled dot, dot,
// general, additive, location), with the masks and the sparse patterns.
#include "attn_score.hpp"

#include "attn/attention/attention.hpp"
#include "attn/attention/monotonic_attention.hpp"
#include "attn/attention/score.hpp"
#include "attn/core/error.hpp"
#include "attn/core/mpi.hpp"
#include "attn/weights/attention_weights.hpp"

#include <cmath>

namespace attn_score {
namespace {

void check_flags(const Options& o, const attn::cli::Tool& tool, attn::ScoreKind kind) {
  tool.forbid("--score " + o.score, {"--filters", "--filter-width"});
  const std::string form = "--attention " + o.attention;
  tool.forbid(form, {"--features", "--orthogonal", "--proj-dim"});
  if (o.attention == "monotonic")
    tool.forbid(form, {"--causal", "--attn-mask", "--window", "--stride", "--global", "--top-k"});
  else
    tool.forbid(form, {"--hard", "--energy-bias"});
  const bool needs_params = kind != attn::ScoreKind::ScaledDot && kind != attn::ScoreKind::Dot;
  const std::string ctx = "--score " + o.score;
  if (!needs_params) tool.forbid(ctx, {"--params", "--init", "--hidden", "--save-params", "--ignore-unknown-weights"});
  if (kind != attn::ScoreKind::ScaledDot) tool.forbid(ctx, {"--scale"});
  if (needs_params && o.params.empty() == o.init.empty())
    throw attn::UsageError(fmt::format("{} needs exactly one of --params and --init", ctx));
  if (!o.init.empty() && kind == attn::ScoreKind::Additive) tool.require(ctx + " --init", {"--hidden"});
  if (kind == attn::ScoreKind::General || kind == attn::ScoreKind::Location) tool.forbid(ctx, {"--hidden"});
  if (!o.params.empty()) tool.forbid("--params", {"--hidden", "--seed"});
  check_emit(o);
}

attn::ScoreParams load_params(const Options& o, attn::cli::Tool& tool, attn::ScoreKind kind, std::int64_t dq,
                              std::int64_t dk, std::int64_t m) {
  if (!o.init.empty()) return attn::xavier_score_params(kind, dq, dk, o.hidden, m, tool.seed());
  if (o.params.empty()) return {}; // dot and scaled dot take none
  const attn::WeightGroup g = attn::WeightGroup::open(tool.inputs(), tool.input_ref(o.params));
  attn::ScoreParams p = attn::load_score_params(g, kind, dq, dk, m);
  attn::check_all_weights_used(g, {}, tool.ignore_unknown_weights());
  return p;
}

} // namespace

// Softmax attention, or monotonic attention over the same energies.
void run_scored(const Options& o, attn::cli::Tool& tool) {
  const attn::ScoreKind kind = attn::parse_score_kind(o.score);
  check_flags(o, tool, kind);
  const bool dot = kind == attn::ScoreKind::ScaledDot || kind == attn::ScoreKind::Dot;
  const Inputs in = open_inputs(o, tool, dot, "--score " + o.score);
  const attn::Mask mask = load_mask(o, tool, in);

  const attn::ScoreParams params = load_params(o, tool, kind, in.dq, in.dk, in.m);
  std::unique_ptr<attn::h5::OutputFile> params_file;
  if (!o.save_params.empty()) {
    params_file = tool.open_group_output(o.save_params, attn::score_params_primary(kind));
    attn::save_score_params(attn::WeightWriter(*params_file), kind, params);
  }
  const float scale = o.scale ? static_cast<float>(*o.scale) : 1.0f / std::sqrt(static_cast<float>(in.dk));
  Work w = read_work(in, !in.v || emits(o, "weights"), in.v && emits(o, "scores"));
  // (with --allow-nonfinite, infinite scores are what the user asked for); the bound is over every
  // rank's items, so the decision and its message are the one-process run's
  if (dot && !tool.allow_nonfinite())
    attn::check_dot_scores_fit(attn::mpi::max_over_ranks(w.count > 0 ? attn::max_row_norm(w.q) : 0.0),
                               attn::mpi::max_over_ranks(w.count > 0 ? attn::max_row_norm(w.k) : 0.0),
                               kind == attn::ScoreKind::ScaledDot ? scale : 1.0f, o.q, o.k);
  const attn::Mask my_mask = attn::mask_items(mask, w.first, w.count, 1, in.n);
  attn::PreparedScorer prepared;
  if (w.count > 0)
    prepared = attn::prepare_scorer(kind, w.q, w.k, params, kind == attn::ScoreKind::ScaledDot ? scale : 1.0f);

  const std::int64_t n = in.n, m = in.m, dv = in.dv;
  attn::Attention a;
  a.batch = w.count, a.n = n, a.m = m, a.dv = dv;
  a.scorer = prepared.scorer.get();
  a.mask = &my_mask;
  if (w.v) {
    a.v = {w.v->data(), m * dv, 0, dv};
    a.out = {w.out.data(), n * dv, 0, dv};
  }
  if (w.weights.size()) a.weights = {w.weights.data(), n * m, 0, m};
  if (w.scores.size()) a.scores = {w.scores.data(), n * m, 0, m};
  tool.log("{} {} attention: b={} n={} m={} d_q={} d_k={} d_v={}", o.score, o.attention, in.b, n, m, in.dq, in.dk, dv);
  const attn::cli::Stopwatch clock;
  if (o.attention == "monotonic") {
    attn::MonotonicAttention ma;
    ma.hard = o.hard;
    ma.batch = w.count, ma.n = n, ma.m = m, ma.dv = dv;
    ma.scorer = a.scorer;
    ma.energy_bias = static_cast<float>(o.energy_bias);
    ma.mask = &my_mask;
    if (w.v) ma.v = w.v->data(), ma.out = w.out.data();
    if (w.weights.size()) ma.weights = w.weights.data();
    if (w.scores.size()) ma.scores = w.scores.data();
    if (w.count > 0) attn::monotonic_attention(ma);
  } else if (w.count > 0) {
    attn::attention(a);
  }
  const double secs = clock.seconds();
  tool.log("attention: {:.4f} s, {:.1f} GFLOP/s counting 2 b n m (d_k + d_v)", secs,
           2.0 * static_cast<double>(w.count * n) * static_cast<double>(m) * static_cast<double>(in.dk + dv) / secs /
               1e9);
  write_outputs(tool, in, w);
  if (params_file) params_file->commit();
}

} // namespace attn_score
