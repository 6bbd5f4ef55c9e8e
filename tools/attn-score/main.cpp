// attn-score: single-head attention scoring (CONTRACT.md sections 2 and 5): scaled dot product,
// dot, Luong general, Bahdanau additive; masks; window, stride, global and top-k sparsity; the
// linear-time forms (linear, performer, linformer); and monotonic attention.
#include "attn_score.hpp"

namespace attn_score {
namespace {

void run(const Options& o, attn::cli::Tool& tool) {
  tool.preflight_inputs({o.q, o.k, o.v, o.params, o.masks.key_padding, o.masks.lengths, o.masks.attn_mask});
  if (o.score == "location-aware") return run_location_aware(o, tool);
  if (o.attention == "softmax" || o.attention == "monotonic") return run_scored(o, tool);
  run_linear(o, tool);
}

} // namespace
} // namespace attn_score

int main(int argc, char** argv) {
  using attn_score::Options;
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
  return tool.run(argc, argv, [&] { attn_score::run(o, tool); });
}
