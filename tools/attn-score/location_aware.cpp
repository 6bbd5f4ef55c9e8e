// attn-score's location-aware attention (--score location-aware).
#include "attn_score.hpp"

#include "attn/attention/location_attention.hpp"
#include "attn/core/error.hpp"
#include "attn/weights/attention_weights.hpp"

namespace attn_score {
namespace {

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

} // namespace

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
    attn::save_location_aware(attn::WeightWriter(*params_file), params);
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

} // namespace attn_score
