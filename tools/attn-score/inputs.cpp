// attn-score's inputs and outputs, shared by every form: q, k and v opened and checked, the mask,
// each rank's items, the outputs written.
#include "attn_score.hpp"

#include "attn/core/error.hpp"
#include "attn/core/mpi.hpp"
#include "attn/inputs/mask_files.hpp"
#include "attn/inputs/qkv.hpp"

#include <algorithm>

namespace attn_score {

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
  attn::check_qkv(in.q, in.k, in.v ? &*in.v : nullptr, o.q, o.k, o.v);
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

void check_emit(const Options& o) {
  for (const std::string& e : o.emit)
    if (e != "weights" && e != "scores")
      throw attn::UsageError(fmt::format("--emit: unknown output '{}' (weights, scores)", e));
}

} // namespace attn_score
