// mha-run: multi-head attention as nn.MultiheadAttention, from its own weights or a fresh
// initialisation (CONTRACT.md sections 2, 3 and 5).
#include "mha_run.hpp"

#include "attn/core/error.hpp"
#include "attn/core/mpi.hpp"
#include "attn/inputs/mask_files.hpp"
#include "attn/model/mha.hpp"
#include "attn/model/transformer.hpp"
#include "attn/weights/mha_weights.hpp"

#include <optional>

namespace mha_run {
namespace {

using attn::Shape;
using attn::Tensor;

void check_flags(const Options& o, const attn::cli::Tool& tool) {
  if (o.weights.empty() == o.init.empty()) throw attn::UsageError("give exactly one of --weights and --init");
  if (!o.weights.empty()) tool.forbid("--weights", {"--embed-dim", "--heads", "--kv-heads"});
  if (!o.init.empty()) {
    tool.require("--init", {"--embed-dim", "--heads"});
    if (o.embed_dim % o.heads != 0)
      throw attn::UsageError(fmt::format("--embed-dim {} is not divisible by --heads {}", o.embed_dim, o.heads));
    if (tool.given("--kv-heads") && o.heads % o.kv_heads != 0)
      throw attn::UsageError(fmt::format("--kv-heads {} does not divide --heads {}", o.kv_heads, o.heads));
    if (!o.rope.empty() && (o.embed_dim / o.heads) % 2 != 0)
      throw attn::UsageError(fmt::format("--rope needs an even head dim, got --embed-dim {} / --heads {} = {}",
                                         o.embed_dim, o.heads, o.embed_dim / o.heads));
  }
  if (o.rope.empty()) tool.forbid("attention without --rope", {"--rope-base"});
  if (!o.v.empty() && o.k.empty()) throw attn::UsageError("-v needs -k (cross-attention)");
}

// Under MPI this rank's items (all of them otherwise), in groups that reuse one set of buffers;
// every item's bytes are the same either way. By default about 1024 positions' worth, and at most
// half the items, so that later groups run in the first one's buffers. Measured (--chunk B, paired
// runs of the computation): (8, 512) 2 items 1.07x 1 item (the weights are packed once per 1024
// rows instead of 512), 8 items 0.92x; (16, 256) 4 items 1.08x 2; (4, 256) 4 items 0.96x 2;
// (2, 512) 2 items 0.98x 1. Peak memory of (8, 512, 512): 36 MiB instead of 30.
std::int64_t group_size(const Options& o, const attn::mpi::Items& mine, std::int64_t n, std::int64_t m) {
  const std::int64_t items = std::max<std::int64_t>(mine.count(), 1);
  const std::int64_t most = o.chunk > 0 ? items : (items + 1) / 2;
  return std::min(attn::batch_chunk(std::max(n, m), o.chunk, 1024), most);
}

// The module over the items in groups: /output, and /weights (per head or averaged) when asked;
// committed.
void attend_groups(const Options& o, attn::cli::Tool& tool, const Inputs& in, const attn::MhaWeights& w,
                   const attn::Mask& mask) {
  const std::int64_t b = in.xq.items(), n = in.xq.len(), m = in.xk().len();
  const attn::MhaShape& s = w.shape;
  // The weights, (b, H, n, m) or averaged (b, n, m), go to the file as groups of items finish: a
  // run never holds the whole tensor (b = 8, n = m = 4096, H = 8 would be 4 GiB). bias_k and
  // add_zero_attn's keys are columns m.. of them, as in PyTorch.
  auto file = tool.open_output("output");
  attn::h5::DatasetWriter out_writer =
      file->create_items("output", {b, n, s.embed_dim}, tool.out_type(), in.xq.batched());
  std::optional<attn::h5::DatasetWriter> weights_writer;
  const std::int64_t mx = m + w.extra_keys();
  if (o.need_weights || o.average_weights)
    weights_writer = file->create_items("weights", o.average_weights ? Shape{b, n, mx} : Shape{b, s.heads, n, mx},
                                        tool.out_type(), in.xq.batched());

  const attn::mpi::Items mine = attn::mpi::items(b, 1);
  const std::int64_t group = group_size(o, mine, n, m);
  tool.log("{}-attention: b={} n={} m={} E={} heads={} kv_heads={} kdim={} vdim={} attention={}{}; {} per group",
           in.self ? "self" : "cross", b, n, m, s.embed_dim, s.heads, s.kv_heads, s.kdim, s.vdim,
           w.linear ? attn::linear_kind_name(*w.linear) : "softmax",
           w.linear == attn::LinearKind::Favor       ? fmt::format(" features M={}", w.features.dim(0))
           : w.linear == attn::LinearKind::Linformer ? fmt::format(" k={}", w.linformer.E.dim(0))
                                                     : "",
           group);
  Tensor out(Shape{group, n, s.embed_dim}, attn::Uninitialized{});
  // the group's inputs: mapped from their files, or read into one buffer each (fresh pages cost a
  // fault each)
  attn::h5::GroupReader q_in(in.xq, group);
  std::optional<attn::h5::GroupReader> k_in, v_in;
  if (in.xk_r) k_in.emplace(*in.xk_r, group);
  if (in.xv_r) v_in.emplace(*in.xv_r, group);
  attn::MhaScratch scratch;
  scratch.keep_weights = true;  // one module for every group: its weights packed once
  double secs = 0, writing = 0; // the attention's seconds, and those spent writing its weights
  attn::MhaCall call;           // what every group shares; its items, inputs and mask are set per group
  call.n = n, call.m = m;
  call.self_attention = in.self;
  if (!o.rope.empty()) call.rope = attn::Rope{attn::parse_rope_style(o.rope), o.rope_base, 0, {}};
  call.out = out.data();
  call.scratch = &scratch;
  std::int64_t g0 = mine.first; // the group's first item
  if (weights_writer) {
    call.sink_averaged = o.average_weights;
    call.weights_sink = [&](std::int64_t first, std::int64_t items, const float* wts) {
      const attn::cli::Stopwatch write_clock;
      weights_writer->write_items(g0 + first, items, wts);
      writing += write_clock.seconds();
    };
  }
  attn::cli::for_each_chunk(tool, mine, group, [&](std::int64_t first, std::int64_t count) {
    g0 = first;
    const attn::Mask group_mask = attn::mask_items(mask, g0, count, 1, n);
    call.batch = count;
    call.x_q = q_in.read(g0, count);
    call.x_k = k_in ? k_in->read(g0, count) : call.x_q;
    call.x_v = v_in ? v_in->read(g0, count) : call.x_k;
    call.mask = &group_mask;
    const attn::cli::Stopwatch clock;
    attn::multi_head_attention(w, call);
    secs += clock.seconds();
    out_writer.write_items(g0, count, out.data());
  });
  secs -= writing;
  // (the softmax form's: a linear form's rate is only comparable with it)
  const double flops = 2.0 * static_cast<double>(mine.count()) *
                       (static_cast<double>(n) * s.embed_dim * 2 * s.embed_dim +
                        static_cast<double>(m) * s.kv_dim() * (s.kdim + s.vdim) +
                        2.0 * static_cast<double>(n) * static_cast<double>(m) * s.embed_dim);
  if (weights_writer)
    tool.log("multi-head attention: {:.4f} s, {:.1f} GFLOP/s (and {:.4f} s writing the weights as they finished)", secs,
             secs > 0 ? flops / secs / 1e9 : 0.0, writing);
  else
    tool.log("multi-head attention: {:.4f} s, {:.1f} GFLOP/s", secs, secs > 0 ? flops / secs / 1e9 : 0.0);

  file->commit();
}

void run(const Options& o, attn::cli::Tool& tool) {
  check_flags(o, tool);
  tool.preflight_inputs({o.q, o.k, o.v, o.weights, o.masks.key_padding, o.masks.lengths, o.masks.attn_mask});
  const Inputs in = open_inputs(o, tool);
  const std::int64_t b = in.xq.items(), n = in.xq.len(), m = in.xk().len();
  const attn::MaskFiles files = tool.mask_inputs(o.masks);
  std::optional<attn::h5::TensorRef> weights_ref;
  if (!o.weights.empty()) weights_ref = tool.input_ref(o.weights);
  tool.check_outputs({o.save_weights});

  const attn::MhaWeights w = module_weights(o, tool, in, weights_ref);
  const attn::MhaShape& s = w.shape;
  attn::Mask mask = attn::load_mask(tool.inputs(), files, b, s.heads, n, m);
  if (w.linear) attn::check_linear_mask(mask, *w.linear, w.linear_source);
  std::unique_ptr<attn::h5::OutputFile> weights_file;
  if (!o.save_weights.empty()) {
    weights_file = tool.open_group_output(o.save_weights, w.packed() ? "in_proj_weight" : "q_proj_weight");
    attn::save_mha(attn::WeightWriter(*weights_file), w);
  }
  attend_groups(o, tool, in, w, mask);
  if (weights_file) weights_file->commit();
}

} // namespace
} // namespace mha_run

int main(int argc, char** argv) {
  using mha_run::Options;
  attn::cli::Tool tool("mha-run", "Multi-head attention (nn.MultiheadAttention): self-attention with -q alone, "
                                  "cross-attention with -k [-v].");
  tool.split_batch_over_ranks();
  Options o;
  auto& app = tool.app();
  app.add_option("-q,--query", o.q, "Queries (b, n, E) or (n, E); alone: self-attention")->required()->type_name("X");
  app.add_option("-k,--key", o.k, "Keys (b, m, kdim); alone: values too")->type_name("K");
  app.add_option("-v,--value", o.v, "Values (b, m, vdim)")->type_name("V");
  app.add_option("--weights", o.weights,
                 "nn.MultiheadAttention weights (CONTRACT.md section 3), or a .safetensors file or model directory "
                 "(section 6.1)")
      ->type_name("FILE[:GROUP]|DIR[:PREFIX]");
  app.add_option("--init", o.init, "Initialise the weights instead, as PyTorch does (xavier)")
      ->check(CLI::IsMember({"xavier"}));
  app.add_option("--embed-dim", o.embed_dim, "E, with --init")->check(attn::cli::positive());
  app.add_option("--heads", o.heads, "H, with --init")->check(attn::cli::positive());
  app.add_option("--kv-heads", o.kv_heads, "G key/value heads dividing H, with --init (default H)")
      ->check(attn::cli::positive());
  app.add_option("--save-weights", o.save_weights, "Write the weights used, for --weights")->type_name("FILE[:GROUP]");
  tool.add_mask_options(o.masks, "(n, m), (b, n, m) or (b, H, n, m)");
  app.add_option("--rope", o.rope, "Rotary embeddings on queries and keys per head: half or interleaved")
      ->check(CLI::IsMember({"half", "interleaved"}));
  app.add_option("--rope-base", o.rope_base, "Base of the rotary angles")
      ->check(attn::cli::positive())
      ->capture_default_str();
  app.add_flag("--need-weights", o.need_weights, "Also write per-head /weights (b, H, n, m)");
  app.add_flag("--average-weights", o.average_weights, "Write /weights averaged over heads (b, n, m)");
  app.add_option("--attention", o.attention,
                 "softmax, or a linear-time form: linear, performer, linformer (default: the --weights file's, "
                 "else softmax)")
      ->check(CLI::IsMember({"softmax", "linear", "performer", "linformer"}));
  app.add_option("--features", o.features, "Random features M per head of performer, drawn from --seed")
      ->check(attn::cli::positive())
      ->capture_default_str();
  app.add_flag("--orthogonal", o.orthogonal, "Performer's features in orthogonal blocks");
  app.add_option("--proj-dim", o.proj_dim, "Projected length k of linformer (E, F drawn from --seed)")
      ->check(attn::cli::positive());
  app.add_option("--chunk", o.chunk,
                 "Sequences per group (default: about 1024 positions' worth, at most half the sequences)")
      ->check(attn::cli::positive());
  tool.add_seed();
  tool.add_dtype();
  tool.add_allow_nonfinite();
  tool.add_matmul_precision();
  tool.add_ignore_unknown_weights();
  return tool.run(argc, argv, [&] { mha_run::run(o, tool); });
}
