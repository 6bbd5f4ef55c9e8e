// A probed run from its flags (CONTRACT.md section 6.3: --emit-activations, --emit-layers,
// --ablate-heads, --ablate-cross-heads, --ablate-with, --patch, --patch-positions, --patch-heads,
// --steer, --steer-scale): the flags parsed and checked against the model and the run's shape, the
// patch, steer and mean files read and checked, the /activations datasets created and written as
// the batch chunks stream (model/probe.hpp does the work inside the layers).
#pragma once

#include "attn/h5/h5io.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/mha.hpp"
#include "attn/model/probe.hpp"
#include "attn/model/transformer.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attn {

struct ProbeFlags {
  std::vector<std::string> emit;                // names, each may hold several separated by commas
  std::string emit_layers;                      // "0,2-5"; empty: every layer
  std::string ablate_heads, ablate_cross_heads; // "L.H,L.H"
  std::string ablate_with;                      // "mean:FILE[:DATASET]"; empty: zero
  std::vector<std::string> patch;               // "NAME@L=FILE[:DATASET]"
  std::string patch_positions, patch_heads;     // "I,J"
  std::vector<std::string> steer;               // "NAME@L=FILE[:DATASET]"
  double steer_scale = 1.0;
  bool any() const {
    return !emit.empty() || !ablate_heads.empty() || !ablate_cross_heads.empty() || !patch.empty() || !steer.empty();
  }
  // Usage errors that need no model: malformed specs, unknown names, a steer on a name it does not
  // take, --ablate-with without an ablation, --patch-positions or --patch-heads without --patch.
  void check() const;
  // The files the flags read (FILE[:DATASET] arguments, as given), for the tool's input checks.
  std::vector<std::string> input_args() const;
};

// "0,2-5" -> {0, 2, 3, 4, 5} (sorted, each once); a malformed list is a UsageError naming `flag`.
std::vector<std::int64_t> parse_index_list(const std::string& spec, const std::string& flag);

// What a probe needs to know of a stack: each layer's attention shapes, forms and widths.
struct ProbeModel {
  std::string label; // the weights, for messages
  std::int64_t E = 0;
  struct Layer {
    MhaShape self, cross;                         // cross: heads 0 without cross-attention
    std::int64_t self_extra = 0, cross_extra = 0; // bias_k / add_zero_attn keys
    bool self_linear = false, cross_linear = false;
    std::int64_t ffn = 0; // F
  };
  std::vector<Layer> layers;
  bool has_cross = false, parallel_residual = false;
};
ProbeModel probe_model(const Encoder& enc, const std::string& label);
ProbeModel probe_model(const Decoder& dec, const std::string& label);

// The run's probe: checked and read by the constructor, before anything is written; chunk() for
// each batch chunk before its forward pass.
class ProbeRun {
public:
  // b items of n positions (s: the memory's, 0 without one). n = 0: not known yet (generation, whose
  // final length is known at the end: set_length), and sources may then have any number of
  // positions (those they lack are left as computed).
  ProbeRun(const ProbeFlags& flags, const ProbeModel& model, h5::InputFiles& inputs, std::int64_t b, std::int64_t n,
           std::int64_t s, bool batched, bool allow_nonfinite);
  ProbeRun(const ProbeRun&) = delete; // its probe's sink refers to it
  ProbeRun& operator=(const ProbeRun&) = delete;
  // Creates the /activations datasets of the emitted names in `out` (type `type`).
  void create_outputs(h5::OutputFile& out, h5::OutType type);
  // The probe for items [b0, b0 + count) (their activations written there); null when the flags
  // ask nothing.
  // In generation: rows_per_item the beam, and no captures (the steps only intervene).
  const Probe* chunk(std::int64_t b0, std::int64_t rows_per_item = 1, bool capturing = true);
  void set_length(std::int64_t n) { n_ = n; }
  // Whether the flags change the run (ablations, patches, steers), or only look.
  bool changes() const { return changes_; }
  bool emits() const { return !emitted_.empty(); }
  // Items per batch chunk with these captures: `items` (the run's choice), fewer when an item's
  // scores or pattern of one layer pass 16 MiB over all items (each is held twice: computed and
  // captured), so the captures keep memory near the plain run's.
  std::int64_t chunk_items(std::int64_t items) const;
  // The seconds spent writing activations so far (a run's time in its layers leaves them out).
  double write_seconds() const { return write_seconds_; }
  // Captures (layer, a) for another observer too (decode --lens): `extra` is called with them
  // after any writing.
  void observe(std::size_t layer, Act a);
  void set_observer(ActivationSink extra) { observer_ = std::move(extra); }
  // Whether the probe does anything: emits, changes or observes.
  bool active() const { return !emitted_.empty() || changes_ || !observed_.empty(); }
  // The emitted shape of (layer, a), with the batch axis b.
  Shape shape(std::size_t layer, Act a) const;

private:
  void add_emits(const ProbeFlags& flags);
  void add_ablations(const ProbeFlags& flags, h5::InputFiles& inputs, bool allow_nonfinite);
  void add_patches(const ProbeFlags& flags, h5::InputFiles& inputs, bool allow_nonfinite);
  void add_steers(const ProbeFlags& flags, h5::InputFiles& inputs, bool allow_nonfinite);
  // The layer's name `a` checked to mean something for the model (Error naming both).
  void check_meaning(std::size_t layer, Act a, const std::string& flag) const;
  std::size_t check_layer(std::int64_t layer, const std::string& flag) const;
  // A source's shape against the emitted one (any length along the positions before set_length).
  bool same_shape(const Shape& got, const Shape& want, Act a) const;

  ProbeModel model_;
  std::int64_t b_, n_, s_;
  bool batched_;
  Probe probe_;
  bool changes_ = false;
  std::vector<std::pair<std::size_t, Act>> emitted_;
  std::map<std::pair<std::size_t, int>, h5::DatasetWriter> writers_;
  std::map<std::pair<std::size_t, bool>, Tensor> means_; // (layer, cross) -> (H, dh)
  std::vector<std::pair<std::size_t, Act>> observed_;
  ActivationSink observer_;
  std::int64_t b0_ = 0;
  double write_seconds_ = 0;
};

// decode --lens K over a probed run: each layer's stream as the probe hands it over, through the
// final norm and the unembedding (model/lens.hpp), written as /lens/ids and /lens/logprobs
// (b, L + 1, n, K) chunk by chunk.
class LensRun {
public:
  // Checks K against the vocabulary (Error naming `label`, the model) and asks `run` for the streams.
  LensRun(ProbeRun& run, const Decoder& dec, const Generator& gen, std::int64_t K, const std::string& label);
  void create_outputs(h5::OutputFile& out, h5::OutType type, std::int64_t b, std::int64_t n, bool batched);
  // Before a chunk of `count` items of n positions, padded as `padding` (which must outlive the chunk).
  void start_chunk(std::int64_t count, std::int64_t n, const Mask& padding);
  void finish_chunk(std::int64_t b0);

private:
  ProbeRun& run_;
  const Decoder& dec_;
  const Generator& gen_;
  std::int64_t K_, L_;
  std::optional<h5::DatasetWriter> ids_out_, logprobs_out_;
  TensorI ids_;
  Tensor logprobs_;
  std::int64_t count_ = 0;
};

} // namespace attn
