// The command-line conventions of CONTRACT.md section 4, shared by every tool:
//   -h/--help, -V/--version, -o/--output PATH[:NAME] (default: standard output unless a terminal),
//   --verbose, --threads N, and where a tool asks for them --seed N, --dtype, --allow-nonfinite;
//   one catch ladder printing "TOOL: error: MESSAGE" with exit status 0 / 1 / 2.
//
// A tool's main() declares its own options on app(), then calls run() with a body that reads the
// inputs (through input()), checks the outputs (check_outputs()), computes and writes.
#pragma once

#include "attn/core/mpi.hpp"
#include "attn/h5/h5io.hpp"
#include "attn/inputs/mask_files.hpp"
#include "attn/inputs/probe_run.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace attn::cli {

// The mask flags' values (CONTRACT.md section 2); "" = not given.
struct MaskArgs {
  bool causal = false;
  std::string key_padding, lengths, attn_mask;
};

// Writes `text` to standard error, ignoring failures: a closed standard error (`--verbose 2>&1 |
// grep -q ...`) must neither fail a run nor, from a destructor or the final error line, abort it.
void to_stderr(const std::string& text) noexcept;

class Tool {
public:
  // `hdf5_output`: the tool writes HDF5 through -o (every tool but attn-view, which has no -o).
  Tool(std::string name, std::string description, bool hdf5_output = true);

  CLI::App& app() { return app_; }
  const std::string& name() const { return name_; }

  // Optional shared options, added by the tools that use them.
  void add_seed();
  // Default: the tools that compute in float32 (f64 only stores it).
  void add_dtype(std::vector<std::string> choices = {"f32", "f64", "f16", "bf16"},
                 const std::string& help = "Output element type: f64 only stores float64 (the computation is "
                                           "float32); f16 and bf16 round to nearest even");
  void add_allow_nonfinite();
  void add_ignore_unknown_weights(); // for the tools that take --weights
  // --matmul-precision f32|bf16: the precision of the products over many rows (blas::MatmulPrecision)
  void add_matmul_precision();
  // The tool splits its batch over MPI ranks (mpi.hpp); others refuse to run as several ranks.
  void split_batch_over_ranks() { splits_batch_ = true; }

  // Parses argv and runs body; returns the exit status. Never throws.
  int run(int argc, char** argv, const std::function<void()>& body) noexcept;

  // UsageError when any of `flags` was given: they do not apply to `context` ("--kind alibi").
  void forbid(const std::string& context, const std::vector<std::string>& flags) const;
  // UsageError unless each of `flags` was given.
  void require(const std::string& context, const std::vector<std::string>& flags) const;
  bool given(const std::string& flag) const { return app_.count(flag) > 0; }

  // --- for the body ---
  bool verbose() const { return verbose_; }
  int threads() const { return threads_; } // --threads (0: every CPU)
  // The run writes no HDF5 to -o (its output is another, as decode --text-out without -o).
  void no_hdf5_output() { output_.clear(); }
  std::uint64_t seed() const { return seed_; }
  bool allow_nonfinite() const { return allow_nonfinite_; }
  bool ignore_unknown_weights() const { return ignore_unknown_weights_; }
  h5::OutType out_type() const { return h5::parse_out_type(dtype_); }
  const std::string& dtype() const { return dtype_; }
  const std::string& output_arg() const { return output_; } // -o's value

  // Parses an input argument PATH[:NAME] and records it for the "output names an input" check.
  h5::TensorRef input_ref(const std::string& arg);
  // Opens an input dataset (recording it as above).
  h5::Dataset open_input(const std::string& arg);
  // Checks the HDF5 files the input arguments name ("" = not given) for damage side by side, before
  // they are opened one by one (InputFiles::preflight): one child reads them while this process
  // starts its threads (blas::start_threads).
  void preflight_inputs(const std::vector<std::string>& args);
  h5::InputFiles& inputs() { return inputs_; }
  // The masks of CONTRACT.md section 2 from their flags' values ("" = not given), recorded as
  // inputs.
  MaskFiles mask_inputs(bool causal, const std::string& key_padding, const std::string& lengths,
                        const std::string& attn_mask = "", const std::string& keys = "m");
  // The same from the flags add_mask_options() declared.
  MaskFiles mask_inputs(const MaskArgs& m) { return mask_inputs(m.causal, m.key_padding, m.lengths, m.attn_mask); }
  // Declares --causal, --key-padding-mask, --lengths and --attn-mask on keys, as the attention
  // tools (attn-score, mha-run) take them; `attn_mask_shapes` lists the shapes --attn-mask takes.
  void add_mask_options(MaskArgs& m, const std::string& attn_mask_shapes);
  // Declares --PREFIXkey-padding-mask (b, KEYS) and --PREFIXlengths (b,) for keys named KEYS ("n",
  // or decode's "t" and, with prefix "memory-", "s"): the padding flags of every tool, one wording.
  void add_padding_options(std::string& key_padding, std::string& lengths, const std::string& prefix,
                           const std::string& keys, const std::string& what);
  // Declares the flags of a probed run (CONTRACT.md section 6.3: --emit-activations, --emit-layers,
  // the ablations, patches and steers), as encode and decode take them; `cross`: with
  // --ablate-cross-heads.
  void add_probe_options(ProbeFlags& p, bool cross);

  // Checks -o and any further output arguments against the recorded inputs and the terminal,
  // before the work starts (CONTRACT.md sections 1 and 4). Empty arguments (an optional output
  // flag not given) are skipped.
  void check_outputs(const std::vector<std::string>& extra_outputs = {});
  // Checks a file output that is not HDF5 (attn-view --png FILE, `format` "PNG") the same way.
  void check_file_output(const std::string& path, std::string_view format);
  // Opens -o for writing; `primary` is the standard name of the run's primary dataset.
  std::unique_ptr<h5::OutputFile> open_output(const std::string& primary);
  // Writes `t` as the run's only dataset `name` to -o, in the --dtype type, and commits
  // (`batched` as OutputFile::write).
  template <typename T> void write_output(const std::string& name, const BasicTensor<T>& t, bool batched = true) {
    auto out = open_output(name);
    out->write(name, t, out_type(), batched);
    out->commit();
  }
  // Opens a further output argument (e.g. --save-weights) for writing.
  std::unique_ptr<h5::OutputFile> open_output(const std::string& arg, const std::string& primary);
  // Opens a further output FILE[:GROUP] that holds a module (--save-params, --save-weights): GROUP
  // names the group, so the primary dataset `primary` (which may be nested) lands at GROUP/primary
  // and the other standard names beside it under GROUP.
  std::unique_ptr<h5::OutputFile> open_group_output(const std::string& arg, const std::string& primary);

  // A line on standard error with --verbose.
  template <typename... Args> void log(fmt::format_string<Args...> f, Args&&... args) const {
    if (verbose_) to_stderr(fmt::format("{}: {}\n", name_, fmt::format(f, std::forward<Args>(args)...)));
  }

private:
  std::string name_;
  CLI::App app_;
  std::string output_ = "-";
  bool verbose_ = false;
  int threads_ = 0;
  std::uint64_t seed_ = 0;
  std::string dtype_ = "f32";
  std::string matmul_precision_ = "f32";
  bool allow_nonfinite_ = false;
  bool ignore_unknown_weights_ = false;
  bool splits_batch_ = false;
  std::string command_;
  std::vector<h5::TensorRef> input_refs_;
  h5::InputFiles inputs_;
};

// Wall-clock seconds since construction (the --verbose timings).
class Stopwatch {
public:
  Stopwatch();
  double seconds() const;

private:
  double start_;
};

// Progress of a long run on standard error (CONTRACT.md section 4): a bar redrawn in place when
// standard error is a terminal (from half a second in), otherwise with --verbose a line every few
// seconds and one at the end; silent otherwise.
class Progress {
public:
  Progress(const Tool& tool, std::string unit, std::int64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void update(std::int64_t done);

private:
  std::string tool_, unit_;
  std::int64_t total_;
  bool terminal_, verbose_, drawn_ = false;
  Stopwatch clock_;
  double last_ = -std::numeric_limits<double>::infinity(); // clock_ at the last report: none yet
};

// The batch loop of every streaming tool: this rank's share `mine` of the items (mpi::items; all
// of them without MPI) in chunks of `chunk`, body(first, count) for each, the progress shown as
// each ends.
template <class Body> void for_each_chunk(const Tool& tool, const mpi::Items& mine, std::int64_t chunk, Body&& body) {
  Progress progress(tool, "sequences", mine.count());
  for (std::int64_t first = mine.first; first < mine.last; first += chunk) {
    const std::int64_t count = std::min(chunk, mine.last - first);
    body(first, count);
    progress.update(first + count - mine.first);
  }
}

// Number validators with one-line messages ("--len: must be positive, got 0").
// Numeric flag checks; all three refuse NaN and infinities, so none reaches the computation.
CLI::Validator positive();
CLI::Validator non_negative();
// A finite number that float32 can hold (|v| <= 3.4e38): flags used in float arithmetic; with
// float32 false, any finite float64 (a flag whose bound depends on another, as tensor-gen's --dtype).
CLI::Validator finite(bool float32 = true);

// Every INT and UINT option of `app` refuses a decimal integer beyond 64 bits (and UINT a sign), with
// a message naming the option: Tool::run calls it before parsing.
void check_integer_ranges(CLI::App& app);

// The argument vector as one shell-quoted line (the `command` attribute of every output).
std::string shell_join(int argc, char** argv);

} // namespace attn::cli
