// attn-score's parts: its options, the inputs and outputs every form shares (inputs.cpp), and a
// run per form (scored.cpp: softmax and monotonic; linear.cpp: the linear-time forms;
// location_aware.cpp).
#pragma once

#include "cli.hpp"

#include "attn/attention/mask.hpp"
#include "attn/core/tensor.hpp"
#include "attn/h5/h5io.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attn_score {

using attn::Shape;
using attn::Tensor;
using attn::h5::SequenceReader;

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

// The inputs, opened and their shapes checked; read later (under MPI, each rank only its items).
struct Inputs {
  SequenceReader q, k;
  std::optional<SequenceReader> v;
  std::int64_t b, n, dq, m, dk, dv;
};

// Opens q, k and v and checks they go together; with same_dims, d_q == d_k (`what` needs it).
Inputs open_inputs(const Options& o, attn::cli::Tool& tool, bool same_dims, const std::string& what);

// The mask of sections 2 and 5 over all items: files, causal, the sparse patterns.
attn::Mask load_mask(const Options& o, attn::cli::Tool& tool, const Inputs& in);

// What a rank computes: its items of the inputs, and the outputs it fills.
struct Work {
  std::int64_t first = 0, count = 0;
  Tensor q, k;
  std::optional<Tensor> v;
  Tensor out, weights, scores;
};

// This rank's items of the inputs, and the outputs it fills (weights, scores when wanted).
Work read_work(const Inputs& in, bool want_weights, bool want_scores);
// /output, /weights and /scores of every item, written by every rank.
void write_outputs(attn::cli::Tool& tool, const Inputs& in, const Work& w);
// Whether --emit names `what`; --emit's names checked.
bool emits(const Options& o, const char* what);
void check_emit(const Options& o);

// The three runs.
void run_scored(const Options& o, attn::cli::Tool& tool);
void run_location_aware(const Options& o, attn::cli::Tool& tool);
void run_linear(const Options& o, attn::cli::Tool& tool);

} // namespace attn_score
