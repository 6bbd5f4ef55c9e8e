// attn-score: single-head attention scoring (CONTRACT.md sections 2 and 5): scaled dot product,
// dot, Luong general, Bahdanau additive; masks; window, stride, global and top-k sparsity; the
// linear-time forms (linear, performer, linformer); and monotonic attention.
#include "cli.hpp"

#include "attn/core/mpi.hpp"
#include "attn/weights/attention_weights.hpp"

#include "attn/attention/attention.hpp"
#include "attn/attention/linear_attention.hpp"
#include "attn/attention/location_attention.hpp"
#include "attn/attention/monotonic_attention.hpp"
#include "attn/attention/score.hpp"
#include "attn/core/error.hpp"
#include "attn/inputs/mask_files.hpp"

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
  std::string attention = "softmax";
  std::int64_t features = 256, proj_dim = 0;
  bool orthogonal = false;
  bool hard = false;
  double energy_bias = 0.0;
  std::int64_t filters = 10, filter_width = 201;
};

using attn::h5::SequenceReader;

attn::ScoreParams load_params(const Options& o, attn::cli::Tool& tool, attn::ScoreKind kind, std::int64_t dq,
                              std::int64_t dk, std::int64_t m) {
  if (!o.init.empty()) return attn::xavier_score_params(kind, dq, dk, o.hidden, m, tool.seed());
  if (o.params.empty()) return {}; // dot and scaled dot take none
  const attn::WeightGroup g = attn::WeightGroup::open(tool.inputs(), tool.input_ref(o.params));
  attn::ScoreParams p = attn::load_score_params(g, kind, dq, dk, m);
  attn::check_all_weights_used(g, {}, tool.ignore_unknown_weights());
  return p;
}

// The parameters as an uncommitted output: committed only once the main output is.
std::unique_ptr<attn::h5::OutputFile> save_params(const Options& o, attn::cli::Tool& tool, attn::ScoreKind kind,
                                                  const attn::ScoreParams& p) {
  const char* primary = kind == attn::ScoreKind::General ? "W" : kind == attn::ScoreKind::Location ? "W_a" : "W_q";
  auto out = tool.open_group_output(o.save_params, primary);
  if (kind == attn::ScoreKind::General) out->write("W", p.W, attn::h5::OutType::F32);
  if (kind == attn::ScoreKind::Location) out->write("W_a", p.W_a, attn::h5::OutType::F32);
  if (kind == attn::ScoreKind::Additive) {
    out->write("W_q", p.W_q, attn::h5::OutType::F32);
    out->write("W_k", p.W_k, attn::h5::OutType::F32);
    out->write("v", p.v, attn::h5::OutType::F32);
  }
  return out;
}

void check_emit(const Options& o) {
  for (const std::string& e : o.emit)
    if (e != "weights" && e != "scores")
      throw attn::UsageError(fmt::format("--emit: unknown output '{}' (weights, scores)", e));
}

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

// Location-aware attention takes the queries in order, with its own parameters.
void check_location_aware_flags(const Options& o, const attn::cli::Tool& tool) {
  const std::string ctx = "--score location-aware";
  if (o.attention != "softmax")
    throw attn::UsageError(fmt::format("{} is a softmax attention: not with --attention {}", ctx, o.attention));
  tool.forbid(ctx, {"--scale", "--top-k"});
  if (o.params.empty() == o.init.empty())
    throw attn::UsageError(fmt::format("{} needs exactly one of --params and --init", ctx));
  if (!o.init.empty()) tool.require(ctx + " --init", {"--hidden"});
  if (!o.params.empty()) tool.forbid(ctx + " --params", {"--hidden", "--seed", "--filters", "--filter-width"});
  check_emit(o);
}

// The inputs, opened and their shapes checked; read later (under MPI, each rank only its items).
struct Inputs {
  SequenceReader q, k;
  std::optional<SequenceReader> v;
  std::int64_t b, n, dq, m, dk, dv;
};

Inputs open_inputs(const Options& o, attn::cli::Tool& tool, bool same_dims, const std::string& what) {
  Inputs in{SequenceReader(tool.open_input(o.q), tool.allow_nonfinite(), "queries"),
            SequenceReader(tool.open_input(o.k), tool.allow_nonfinite(), "keys"),
            std::nullopt,
            0,
            0,
            0,
            0,
            0,
            0};
  if (!o.v.empty()) in.v.emplace(tool.open_input(o.v), tool.allow_nonfinite(), "values");
  in.b = in.q.items(), in.n = in.q.len(), in.dq = in.q.features(), in.m = in.k.len(), in.dk = in.k.features();
  in.dv = in.v ? in.v->features() : 0;
  if (in.k.items() != in.b)
    throw attn::Error(fmt::format("batch sizes differ: {} has {}, {} has {}", o.q, in.b, o.k, in.k.items()));
  if (in.v && in.v->items() != in.b)
    throw attn::Error(fmt::format("batch sizes differ: {} has {}, {} has {}", o.q, in.b, o.v, in.v->items()));
  if (in.v && in.v->len() != in.m)
    throw attn::Error(
        fmt::format("keys and values differ in length: {} has {} positions, {} has {}", o.k, in.m, o.v, in.v->len()));
  if (same_dims && in.dq != in.dk)
    throw attn::Error(
        fmt::format("{} needs d_q == d_k, got {} ({}) and {} ({}){}", what, in.dq, o.q, in.dk, o.k,
                    o.attention == "softmax" || o.attention == "monotonic" ? "; use --score general or additive" : ""));
  return in;
}

// The mask of sections 2 and 5 over all items: files, causal, the sparse patterns.
attn::Mask load_mask(const Options& o, attn::cli::Tool& tool, const Inputs& in) {
  if (o.top_k > in.m) throw attn::Error(fmt::format("--top-k {} exceeds the {} keys of {}", o.top_k, in.m, o.k));
  for (std::int64_t g : o.global)
    if (g >= in.m) throw attn::Error(fmt::format("--global position {} is outside the {} keys of {}", g, in.m, o.k));
  const attn::MaskFiles files = tool.mask_inputs(o.masks);
  if (!o.params.empty()) tool.input_ref(o.params);
  tool.check_outputs({o.save_params});
  attn::Mask mask = attn::load_mask(tool.inputs(), files, in.b, 1, in.n, in.m);
  mask.window = o.window;
  mask.stride = o.stride;
  mask.top_k = o.top_k;
  if (!o.global.empty()) {
    mask.global.assign(static_cast<std::size_t>(in.m), 0);
    for (std::int64_t g : o.global) mask.global[static_cast<std::size_t>(g)] = 1;
  }
  return mask;
}

// What a rank computes: its items of the inputs, and the outputs it fills.
struct Work {
  std::int64_t first = 0, count = 0;
  Tensor q, k;
  std::optional<Tensor> v;
  Tensor out, weights, scores;
};

Work read_work(const Inputs& in, bool want_weights, bool want_scores) {
  // Under MPI this rank's items (all of them otherwise); every item's bytes are the same either way.
  const attn::mpi::Items mine = attn::mpi::items(in.b, 1);
  Work w;
  w.first = mine.first, w.count = mine.count();
  const auto read_mine = [&](const SequenceReader& r) {
    return w.count > 0 ? r.read_mapped(w.first, w.count) : Tensor();
  };
  w.q = read_mine(in.q), w.k = read_mine(in.k);
  if (in.v) w.v = read_mine(*in.v);
  const std::int64_t rows = std::max<std::int64_t>(w.count, 1); // a rank without items: no 0-size tensor
  if (in.v) w.out = Tensor(Shape{rows, in.n, in.dv}, attn::Uninitialized{});
  if (want_weights) w.weights = Tensor(Shape{rows, in.n, in.m}, attn::Uninitialized{});
  if (want_scores) w.scores = Tensor(Shape{rows, in.n, in.m}, attn::Uninitialized{});
  return w;
}

void write_outputs(attn::cli::Tool& tool, const Inputs& in, const Work& w) {
  auto file = tool.open_output(in.v ? "output" : "weights");
  const attn::h5::OutType type = tool.out_type();
  const bool batched = in.q.batched();
  if (in.v)
    file->create_items("output", {in.b, in.n, in.dv}, type, batched).write_items(w.first, w.count, w.out.data());
  if (w.weights.size())
    file->create_items("weights", {in.b, in.n, in.m}, type, batched).write_items(w.first, w.count, w.weights.data());
  if (w.scores.size())
    file->create_items("scores", {in.b, in.n, in.m}, type, batched).write_items(w.first, w.count, w.scores.data());
  file->commit();
}

bool emits(const Options& o, const char* what) { return std::find(o.emit.begin(), o.emit.end(), what) != o.emit.end(); }

// Softmax attention, or monotonic attention over the same energies.
void run_scored(const Options& o, attn::cli::Tool& tool) {
  const attn::ScoreKind kind = attn::parse_score_kind(o.score);
  check_flags(o, tool, kind);
  const bool dot = kind == attn::ScoreKind::ScaledDot || kind == attn::ScoreKind::Dot;
  const Inputs in = open_inputs(o, tool, dot, "--score " + o.score);
  const attn::Mask mask = load_mask(o, tool, in);

  const attn::ScoreParams params = load_params(o, tool, kind, in.dq, in.dk, in.m);
  std::unique_ptr<attn::h5::OutputFile> params_file;
  if (!o.save_params.empty()) params_file = save_params(o, tool, kind, params);
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

void run_location_aware(const Options& o, attn::cli::Tool& tool) {
  check_location_aware_flags(o, tool);
  const Inputs in = open_inputs(o, tool, false, "--score location-aware");
  const attn::Mask mask = load_mask(o, tool, in);
  attn::LocationAwareParams params;
  if (!o.init.empty()) {
    params = attn::xavier_location_aware(in.dq, in.dk, o.hidden, o.filters, o.filter_width, tool.seed());
  } else {
    const attn::WeightGroup g = attn::WeightGroup::open(tool.inputs(), tool.input_ref(o.params));
    params = attn::load_location_aware(g, in.dq, in.dk);
    attn::check_all_weights_used(g, {}, tool.ignore_unknown_weights());
  }
  std::unique_ptr<attn::h5::OutputFile> params_file;
  if (!o.save_params.empty()) {
    params_file = tool.open_group_output(o.save_params, "W_q");
    for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"W_q", &params.W_q},
                                  {"W_k", &params.W_k},
                                  {"v", &params.v},
                                  {"U", &params.U},
                                  {"F", &params.F},
                                  {"b", &params.b}})
      params_file->write(name, *t, attn::h5::OutType::F32);
  }
  Work w = read_work(in, !in.v || emits(o, "weights"), in.v && emits(o, "scores"));
  const attn::Mask my_mask = attn::mask_items(mask, w.first, w.count, 1, in.n);
  attn::LocationAware a;
  a.batch = w.count, a.n = in.n, a.m = in.m, a.d_q = in.dq, a.d_k = in.dk, a.dv = in.dv;
  a.q = w.q.data(), a.k = w.k.data();
  if (w.v) a.v = w.v->data(), a.out = w.out.data();
  a.params = &params;
  a.mask = &my_mask;
  if (w.weights.size()) a.weights = w.weights.data();
  if (w.scores.size()) a.scores = w.scores.data();
  tool.log("location-aware attention: b={} n={} m={} d_q={} d_k={} d_v={} hidden={} filters={} width={}", in.b, in.n,
           in.m, in.dq, in.dk, in.dv, params.hidden(), params.filters(), params.width());
  const attn::cli::Stopwatch clock;
  if (w.count > 0) attn::location_aware_attention(a);
  tool.log("attention: {:.4f} s", clock.seconds());
  write_outputs(tool, in, w);
  if (params_file) params_file->commit();
}

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
    if (favor) params_file->write("features", features, attn::h5::OutType::F32);
    if (!favor) {
      params_file->write("E", proj.E, attn::h5::OutType::F32);
      params_file->write("F", proj.F, attn::h5::OutType::F32);
    }
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

void run(const Options& o, attn::cli::Tool& tool) {
  tool.preflight_inputs({o.q, o.k, o.v, o.params, o.masks.key_padding, o.masks.lengths, o.masks.attn_mask});
  if (o.score == "location-aware") return run_location_aware(o, tool);
  if (o.attention == "softmax" || o.attention == "monotonic") return run_scored(o, tool);
  run_linear(o, tool);
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
  app.add_option("--score", o.score,
                 "scaled-dot, dot, general (q^T W k), additive (v^T tanh(W_q q + W_k k)), location (W_a q: "
                 "Luong's location-based, one score per key position, the keys' values unused) or location-aware "
                 "(Chorowski's: additive plus U (F * previous alignment) + b, query after query)")
      ->check(CLI::IsMember({"scaled-dot", "dot", "general", "additive", "location", "location-aware"}))
      ->capture_default_str();
  app.add_option("--scale", o.scale, "Scale of scaled-dot (default 1/sqrt(d_k))")->check(attn::cli::finite());
  app.add_option("--params", o.params,
                 "Parameters of general (W), additive (W_q, W_k, v), location (W_a), location-aware (W_q, W_k, v, U, "
                 "F, b), performer (features) or linformer (E, F)")
      ->type_name("FILE[:GROUP]");
  app.add_option("--init", o.init,
                 "Initialise the parameters instead (xavier; general, additive, location, location-aware, linformer)")
      ->check(CLI::IsMember({"xavier"}));
  app.add_option("--hidden", o.hidden, "Hidden size h of additive and location-aware scoring with --init")
      ->check(attn::cli::positive());
  app.add_option("--filters", o.filters, "Location-aware: convolution filters K with --init")
      ->check(attn::cli::positive())
      ->capture_default_str();
  app.add_option("--filter-width", o.filter_width, "Location-aware: filter width r (odd) with --init")
      ->check(attn::cli::positive())
      ->capture_default_str();
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
  app.add_option("--attention", o.attention,
                 "softmax; a linear-time form: linear (elu + 1 features), performer (FAVOR+ random features), "
                 "linformer (keys and values projected along the sequence); or monotonic (Raffel et al.: "
                 "alignments that move forward, over --score's energies)")
      ->check(CLI::IsMember({"softmax", "linear", "performer", "linformer", "monotonic"}))
      ->capture_default_str();
  app.add_flag("--hard", o.hard, "Monotonic: the hard alignment of inference (default: the soft, expected one)");
  app.add_option("--energy-bias", o.energy_bias, "Monotonic: r in p = sigmoid(score + r)")
      ->check(attn::cli::finite())
      ->capture_default_str();
  app.add_option("--features", o.features, "Random features M of performer")
      ->check(attn::cli::positive())
      ->capture_default_str();
  app.add_flag("--orthogonal", o.orthogonal, "Performer's features in orthogonal blocks");
  app.add_option("--proj-dim", o.proj_dim, "Projected length k of linformer with --init")->check(attn::cli::positive());
  tool.add_seed();
  tool.add_dtype();
  tool.add_allow_nonfinite();
  return tool.run(argc, argv, [&] { run(o, tool); });
}
