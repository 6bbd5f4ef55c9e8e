// mha-run: multi-head attention as nn.MultiheadAttention, from its own weights or a fresh
// initialisation (CONTRACT.md sections 2, 3 and 5).
#include "cli.hpp"

#include "attn/inputs/qkv.hpp"

#include "attn/core/error.hpp"
#include "attn/core/mpi.hpp"
#include "attn/inputs/mask_files.hpp"
#include "attn/model/mha.hpp"
#include "attn/model/transformer.hpp"
#include "attn/weights/mha_weights.hpp"

#include <optional>

namespace {

using attn::Shape;
using attn::Tensor;

struct Options {
  std::string q, k, v;
  std::string weights, init, save_weights;
  std::int64_t embed_dim = 0, heads = 0, kv_heads = 0;
  attn::cli::MaskArgs masks;
  std::string rope;
  double rope_base = 10000.0;
  bool need_weights = false, average_weights = false;
  std::string attention;
  std::int64_t features = 256, proj_dim = 0;
  std::int64_t chunk = 0;
  bool orthogonal = false;
};

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

using attn::h5::SequenceReader;

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

// The inputs, read later item by item (under MPI, each rank only its own items): queries, and keys
// and values (the queries themselves in self-attention, the keys when -v is not given).
struct Inputs {
  bool self;
  SequenceReader xq;
  std::optional<SequenceReader> xk_r, xv_r;
  const SequenceReader& xk() const { return xk_r ? *xk_r : xq; }
  const SequenceReader& xv() const { return xv_r ? *xv_r : xk(); }
};

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

// The module: read from --weights (checked against the inputs and --rope) or drawn by --init, then
// given the attention form of the run (choose_attention), from one seeded stream.
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
  if (!o.rope.empty()) call.rope = attn::Rope{attn::parse_rope_style(o.rope), o.rope_base};
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
  if (weights_file) weights_file->commit();
}

} // namespace

int main(int argc, char** argv) {
  attn::cli::Tool tool("mha-run", "Multi-head attention (nn.MultiheadAttention): self-attention with -q alone, "
                                  "cross-attention with -k [-v].");
  tool.split_batch_over_ranks();
  Options o;
  auto& app = tool.app();
  app.add_option("-q,--query", o.q, "Queries (b, n, E) or (n, E); alone: self-attention")->required()->type_name("X");
  app.add_option("-k,--key", o.k, "Keys (b, m, kdim); alone: values too")->type_name("K");
  app.add_option("-v,--value", o.v, "Values (b, m, vdim)")->type_name("V");
  app.add_option("--weights", o.weights, "nn.MultiheadAttention weights (CONTRACT.md section 3)")
      ->type_name("FILE[:GROUP]");
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
  tool.add_ignore_unknown_weights();
  return tool.run(argc, argv, [&] { run(o, tool); });
}
