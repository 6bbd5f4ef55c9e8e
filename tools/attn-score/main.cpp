// attn-score: single-head attention scoring (CONTRACT.md sections 2 and 5): scaled dot product,
// dot, Luong general, Bahdanau additive; masks; window, stride, global and top-k sparsity.
#include "cli.hpp"

#include "attn/mpi.hpp"

#include "attn/attention.hpp"
#include "attn/error.hpp"
#include "attn/mask_files.hpp"
#include "attn/score.hpp"

#include <cmath>
#include <optional>

namespace {

using attn::Shape;
using attn::Tensor;

struct Options {
  std::string q, k, v;
  std::string score = "scaled-dot";
  std::optional<double> scale;
  std::string params, init, save_params;
  std::int64_t hidden = 0;
  attn::cli::MaskArgs masks;
  std::int64_t window = -1, stride = 0, top_k = 0;
  std::vector<std::int64_t> global;
  std::vector<std::string> emit;
};

using attn::h5::SequenceReader;

attn::ScoreParams load_params(const Options& o, attn::cli::Tool& tool, attn::ScoreKind kind, std::int64_t dq,
                              std::int64_t dk) {
  if (!o.init.empty()) return attn::xavier_score_params(kind, dq, dk, o.hidden, tool.seed());
  if (o.params.empty()) return {}; // dot and scaled dot take none
  const attn::WeightGroup g = attn::WeightGroup::open(tool.inputs(), tool.input_ref(o.params));
  attn::ScoreParams p = attn::load_score_params(g, kind, dq, dk);
  attn::check_all_weights_used(g, {}, tool.ignore_unknown_weights());
  return p;
}

// The parameters as an uncommitted output: committed only once the main output is.
std::unique_ptr<attn::h5::OutputFile> save_params(const Options& o, attn::cli::Tool& tool, attn::ScoreKind kind,
                                                  const attn::ScoreParams& p) {
  auto out = tool.open_group_output(o.save_params, kind == attn::ScoreKind::General ? "W" : "W_q");
  if (kind == attn::ScoreKind::General) out->write("W", p.W, attn::h5::OutType::F32);
  if (kind == attn::ScoreKind::Additive) {
    out->write("W_q", p.W_q, attn::h5::OutType::F32);
    out->write("W_k", p.W_k, attn::h5::OutType::F32);
    out->write("v", p.v, attn::h5::OutType::F32);
  }
  return out;
}

void check_flags(const Options& o, const attn::cli::Tool& tool, attn::ScoreKind kind) {
  const bool needs_params = kind == attn::ScoreKind::General || kind == attn::ScoreKind::Additive;
  const std::string ctx = "--score " + o.score;
  if (!needs_params) tool.forbid(ctx, {"--params", "--init", "--hidden", "--save-params", "--ignore-unknown-weights"});
  if (kind != attn::ScoreKind::ScaledDot) tool.forbid(ctx, {"--scale"});
  if (needs_params && o.params.empty() == o.init.empty())
    throw attn::UsageError(fmt::format("{} needs exactly one of --params and --init", ctx));
  if (!o.init.empty() && kind == attn::ScoreKind::Additive) tool.require(ctx + " --init", {"--hidden"});
  if (kind == attn::ScoreKind::General) tool.forbid(ctx, {"--hidden"});
  if (!o.params.empty()) tool.forbid("--params", {"--hidden", "--seed"});
  for (const std::string& e : o.emit)
    if (e != "weights" && e != "scores")
      throw attn::UsageError(fmt::format("--emit: unknown output '{}' (weights, scores)", e));
}

void run(const Options& o, attn::cli::Tool& tool) {
  const attn::ScoreKind kind = attn::parse_score_kind(o.score);
  check_flags(o, tool, kind);
  // The inputs, read once the shapes agree (under MPI, each rank only its own items).
  const SequenceReader q_in(tool.open_input(o.q), tool.allow_nonfinite(), "queries");
  const SequenceReader k_in(tool.open_input(o.k), tool.allow_nonfinite(), "keys");
  std::optional<SequenceReader> v_in;
  if (!o.v.empty()) v_in.emplace(tool.open_input(o.v), tool.allow_nonfinite(), "values");
  const bool q_batched = q_in.batched();
  const std::int64_t b = q_in.items(), n = q_in.len(), dq = q_in.features(), m = k_in.len(), dk = k_in.features();
  if (k_in.items() != b)
    throw attn::Error(fmt::format("batch sizes differ: {} has {}, {} has {}", o.q, b, o.k, k_in.items()));
  if (v_in && v_in->items() != b)
    throw attn::Error(fmt::format("batch sizes differ: {} has {}, {} has {}", o.q, b, o.v, v_in->items()));
  if (v_in && v_in->len() != m)
    throw attn::Error(
        fmt::format("keys and values differ in length: {} has {} positions, {} has {}", o.k, m, o.v, v_in->len()));
  if ((kind == attn::ScoreKind::ScaledDot || kind == attn::ScoreKind::Dot) && dq != dk)
    throw attn::Error(
        fmt::format("--score {} needs d_q == d_k, got {} ({}) and {} ({}); use --score general or additive", o.score,
                    dq, o.q, dk, o.k));
  if (o.top_k > m) throw attn::Error(fmt::format("--top-k {} exceeds the {} keys of {}", o.top_k, m, o.k));
  for (std::int64_t g : o.global)
    if (g >= m) throw attn::Error(fmt::format("--global position {} is outside the {} keys of {}", g, m, o.k));

  const attn::MaskFiles files = tool.mask_inputs(o.masks);
  if (!o.params.empty()) tool.input_ref(o.params);
  tool.check_outputs({o.save_params});
  attn::Mask mask = attn::load_mask(tool.inputs(), files, b, 1, n, m);
  mask.window = o.window;
  mask.stride = o.stride;
  mask.top_k = o.top_k;
  if (!o.global.empty()) {
    mask.global.assign(static_cast<std::size_t>(m), 0);
    for (std::int64_t g : o.global) mask.global[static_cast<std::size_t>(g)] = 1;
  }

  const attn::ScoreParams params = load_params(o, tool, kind, dq, dk);
  std::unique_ptr<attn::h5::OutputFile> params_file;
  if (!o.save_params.empty()) params_file = save_params(o, tool, kind, params);
  const float scale = o.scale ? static_cast<float>(*o.scale) : 1.0f / std::sqrt(static_cast<float>(dk));
  // Under MPI this rank's items (all of them otherwise); every item's bytes are the same either way.
  const attn::mpi::Items mine = attn::mpi::items(b, 1);
  const std::int64_t first = mine.first, count = mine.count();
  const auto read_mine = [&](const SequenceReader& r) { return count > 0 ? r.read(first, count) : Tensor(); };
  const Tensor q = read_mine(q_in), k = read_mine(k_in);
  const std::optional<Tensor> v = v_in ? std::optional<Tensor>(read_mine(*v_in)) : std::nullopt;
  // (with --allow-nonfinite, infinite scores are what the user asked for); the bound is over every
  // rank's items, so the decision and its message are the one-process run's
  if ((kind == attn::ScoreKind::ScaledDot || kind == attn::ScoreKind::Dot) && !tool.allow_nonfinite())
    attn::check_dot_scores_fit(attn::mpi::max_over_ranks(count > 0 ? attn::max_row_norm(q) : 0.0),
                               attn::mpi::max_over_ranks(count > 0 ? attn::max_row_norm(k) : 0.0),
                               kind == attn::ScoreKind::ScaledDot ? scale : 1.0f, o.q, o.k);
  const attn::Mask my_mask = attn::mask_items(mask, first, count, 1, n);
  attn::PreparedScorer prepared;
  if (count > 0) prepared = attn::prepare_scorer(kind, q, k, params, kind == attn::ScoreKind::ScaledDot ? scale : 1.0f);

  const bool want_weights = !v || std::find(o.emit.begin(), o.emit.end(), "weights") != o.emit.end();
  const bool want_scores = v && std::find(o.emit.begin(), o.emit.end(), "scores") != o.emit.end();
  const std::int64_t dv = v_in ? v_in->features() : 0;
  Tensor out, weights, scores;
  const std::int64_t rows = std::max<std::int64_t>(count, 1); // a rank without items: no 0-size tensor
  attn::Attention a;
  a.batch = count, a.n = n, a.m = m, a.dv = dv;
  a.scorer = prepared.scorer.get();
  a.mask = &my_mask;
  if (v) {
    out = Tensor(Shape{rows, n, dv}, attn::Uninitialized{});
    a.v = {v->data(), m * dv, 0, dv};
    a.out = {out.data(), n * dv, 0, dv};
  }
  if (want_weights) {
    weights = Tensor(Shape{rows, n, m}, attn::Uninitialized{});
    a.weights = {weights.data(), n * m, 0, m};
  }
  if (want_scores) {
    scores = Tensor(Shape{rows, n, m}, attn::Uninitialized{});
    a.scores = {scores.data(), n * m, 0, m};
  }
  tool.log("{} attention: b={} n={} m={} d_q={} d_k={} d_v={}", o.score, b, n, m, dq, dk, dv);
  const attn::cli::Stopwatch clock;
  if (count > 0) attn::attention(a);
  const double secs = clock.seconds();
  tool.log("attention: {:.4f} s, {:.1f} GFLOP/s counting 2 b n m (d_k + d_v)", secs,
           2.0 * static_cast<double>(count * n) * static_cast<double>(m) * static_cast<double>(dk + dv) / secs / 1e9);

  auto file = tool.open_output(v ? "output" : "weights");
  const attn::h5::OutType type = tool.out_type();
  if (v) file->create_items("output", {b, n, dv}, type, q_batched).write_items(first, count, out.data());
  if (want_weights) file->create_items("weights", {b, n, m}, type, q_batched).write_items(first, count, weights.data());
  if (want_scores) file->create_items("scores", {b, n, m}, type, q_batched).write_items(first, count, scores.data());
  file->commit();
  if (params_file) params_file->commit();
}

} // namespace

int main(int argc, char** argv) {
  attn::cli::Tool tool("attn-score", "Single-head attention: softmax(score(q, k) + mask) v.");
  tool.split_batch_over_ranks();
  Options o;
  auto& app = tool.app();
  app.add_option("-q,--query", o.q, "Queries (b, n, d_q) or (n, d_q)")->required()->type_name("Q");
  app.add_option("-k,--key", o.k, "Keys (b, m, d_k)")->required()->type_name("K");
  app.add_option("-v,--value", o.v, "Values (b, m, d_v); without them only /weights is written")->type_name("V");
  app.add_option("--score", o.score, "scaled-dot, dot, general (q^T W k) or additive (v^T tanh(W_q q + W_k k))")
      ->check(CLI::IsMember({"scaled-dot", "dot", "general", "additive"}))
      ->capture_default_str();
  app.add_option("--scale", o.scale, "Scale of scaled-dot (default 1/sqrt(d_k))")->check(attn::cli::finite());
  app.add_option("--params", o.params, "Parameters of general (W) or additive (W_q, W_k, v)")
      ->type_name("FILE[:GROUP]");
  app.add_option("--init", o.init, "Initialise the parameters instead (xavier)")->check(CLI::IsMember({"xavier"}));
  app.add_option("--hidden", o.hidden, "Hidden size h of additive scoring with --init")->check(attn::cli::positive());
  app.add_option("--save-params", o.save_params, "Write the parameters used, for --params")->type_name("FILE[:GROUP]");
  tool.add_ignore_unknown_weights();
  tool.add_mask_options(o.masks, "(n, m), (b, n, m) or (b, 1, n, m)");
  app.add_option("--window", o.window, "Keys with |p - j| <= W")->check(attn::cli::non_negative());
  app.add_option("--stride", o.stride, "Keys with (p - j) mod S == 0")->check(attn::cli::positive());
  app.add_option("--global", o.global, "Global key positions I,J,...")
      ->delimiter(',')
      ->check(attn::cli::non_negative());
  app.add_option("--top-k", o.top_k, "Only the K best allowed keys per query")->check(attn::cli::positive());
  app.add_option("--emit", o.emit, "Further outputs: weights, scores")->delimiter(',');
  tool.add_seed();
  tool.add_dtype({"f32", "f64"}, "Output element type (f64 only stores float64: the computation is float32)");
  tool.add_allow_nonfinite();
  return tool.run(argc, argv, [&] { run(o, tool); });
}
