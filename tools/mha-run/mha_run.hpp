// mha-run's parts: its options, and its inputs and module (module.cpp).
#pragma once

#include "cli.hpp"

#include "attn/h5/h5io.hpp"
#include "attn/model/mha.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace mha_run {

using attn::h5::SequenceReader;

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

// The inputs, read later item by item (under MPI, each rank only its own items): queries, and keys
// and values (the queries themselves in self-attention, the keys when -v is not given).
struct Inputs {
  bool self;
  SequenceReader xq;
  std::optional<SequenceReader> xk_r, xv_r;
  const SequenceReader& xk() const { return xk_r ? *xk_r : xq; }
  const SequenceReader& xv() const { return xv_r ? *xv_r : xk(); }
};

// q, k and v opened and checked to go together.
Inputs open_inputs(const Options& o, attn::cli::Tool& tool);

// The module: read from --weights (checked against the inputs and --rope) or drawn by --init, then
// given the attention form of the run (--attention), from one seeded stream.
attn::MhaWeights module_weights(const Options& o, attn::cli::Tool& tool, const Inputs& in,
                                const std::optional<attn::h5::TensorRef>& weights_ref);

} // namespace mha_run
