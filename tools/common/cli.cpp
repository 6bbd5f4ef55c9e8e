// The CLI conventions every tool shares: options, checks, inputs, outputs, the one catch of errors
// (cli.hpp).
#include "cli.hpp"

#include "attn/core/error.hpp"
#include "attn/core/mpi.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/version.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
#include <sys/resource.h>
#include <unistd.h>

namespace attn::cli {

Tool::Tool(std::string name, std::string description, bool hdf5_output)
    : name_(std::move(name)), app_(std::move(description), name_) {
  app_.set_version_flag("-V,--version", [this] {
    return fmt::format("{} {}\nBLAS: OpenBLAS core {}; linear kernels {}, int8 {}", name_, attn::version,
                       blas::core_description(), blas::isa_name(blas::linear_isa()),
                       blas::int8_kernel_name(blas::linear_isa()));
  });
  if (hdf5_output) {
    app_.add_option("-o,--output", output_,
                    "Output PATH[:NAME] ('-' = standard output, the default when it is not a terminal)")
        ->type_name("PATH[:NAME]");
  } else {
    output_.clear();
  }
  app_.add_flag("--verbose", verbose_, "Shapes, timings and progress on standard error");
  app_.add_option("--threads", threads_,
                  "Threads for BLAS and parallel loops (0 = OMP_NUM_THREADS, else every CPU the process may use)")
      ->check(CLI::Range(0, blas::max_threads))
      ->capture_default_str();
  app_.footer("Exit status: 0 success, 1 bad data or run-time failure, 2 bad command line.\n"
              "Tensor arguments are PATH[:NAME]; PATH '-' is standard input. See man " +
              name_ + ".\n");
}

void Tool::add_seed() {
  app_.add_option("--seed", seed_, "Seed for anything random (same seed, same bytes)")->capture_default_str();
}

void Tool::add_dtype(std::vector<std::string> choices, const std::string& help) {
  app_.add_option("--dtype", dtype_, help)->check(CLI::IsMember(std::move(choices)))->capture_default_str();
}

void Tool::add_allow_nonfinite() {
  app_.add_flag("--allow-nonfinite", allow_nonfinite_, "Accept NaN and Inf in input tensors");
}

void Tool::add_ignore_unknown_weights() {
  app_.add_flag("--ignore-unknown-weights", ignore_unknown_weights_,
                "Run although the weight file has datasets the layout does not use (they are ignored)");
}

void Tool::add_matmul_precision() {
  app_.add_option("--matmul-precision", matmul_precision_,
                  "Products over many rows (a prompt's, an encoder's) in float32, or with x and W rounded to "
                  "bfloat16 and float32 sums (bf16: faster where the CPU has AVX512-BF16, float32 elsewhere)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
}

void Tool::forbid(const std::string& context, const std::vector<std::string>& flags) const {
  for (const std::string& f : flags)
    if (given(f)) throw UsageError(fmt::format("{} does not apply to {}", f, context));
}

void Tool::require(const std::string& context, const std::vector<std::string>& flags) const {
  for (const std::string& f : flags)
    if (!given(f)) throw UsageError(fmt::format("{} needs {}", context, f));
}

h5::TensorRef Tool::input_ref(const std::string& arg) {
  h5::TensorRef ref = h5::parse_tensor_ref(arg);
  if (ref.path == "-" && mpi::size() > 1)
    throw UsageError(fmt::format("standard input is not read under MPI ({} ranks): give a file", mpi::size()));
  input_refs_.push_back(ref);
  return ref;
}

h5::Dataset Tool::open_input(const std::string& arg) { return inputs_.open(input_ref(arg)); }

MaskFiles Tool::mask_inputs(bool causal, const std::string& key_padding, const std::string& lengths,
                            const std::string& attn_mask, const std::string& keys) {
  MaskFiles files{causal, {}, {}, {}, keys};
  if (!key_padding.empty()) files.key_padding = input_ref(key_padding);
  if (!lengths.empty()) files.lengths = input_ref(lengths);
  if (!attn_mask.empty()) files.attn_mask = input_ref(attn_mask);
  return files;
}

void Tool::add_mask_options(MaskArgs& m, const std::string& attn_mask_shapes) {
  app_.add_flag("--causal", m.causal, "Query i sees keys j <= i + (m - n)");
  add_padding_options(m.key_padding, m.lengths, "", "m", "key");
  app_.add_option("--attn-mask", m.attn_mask, "bool/int (nonzero = blocked) or float (added); " + attn_mask_shapes)
      ->type_name("MASK");
}

void Tool::add_padding_options(std::string& key_padding, std::string& lengths, const std::string& prefix,
                               const std::string& keys, const std::string& what) {
  app_.add_option("--" + prefix + "key-padding-mask", key_padding,
                  fmt::format("(b, {}) bool/int, nonzero = {} padding", keys, what))
      ->type_name("MASK");
  app_.add_option("--" + prefix + "lengths", lengths, fmt::format("(b,) valid {} lengths", what))->type_name("LENGTHS");
}

void Tool::add_probe_options(ProbeFlags& p, bool cross) {
  app_.add_option("--emit-activations", p.emit,
                  "Also write /activations/layer{i}/NAME: resid_pre, q, k, v, scores, pattern, z, attn_out, resid_mid, "
                  "mlp_hidden, mlp_out, resid_post" +
                      std::string(cross ? ", cross_q, cross_k, cross_v, cross_scores, cross_pattern, cross_z, "
                                          "cross_attn_out, cross_resid_mid"
                                        : "") +
                      "; final: /activations/final")
      ->type_name("NAME[,NAME...]")
      ->delimiter(',');
  app_.add_option("--emit-layers", p.emit_layers, "The layers --emit-activations writes, as 0,2-5 (default: all)")
      ->type_name("SPEC");
  app_.add_option("--ablate-heads", p.ablate_heads, "Those self-attention heads' z is 0 (or --ablate-with's mean)")
      ->type_name("L.H[,L.H...]");
  if (cross)
    app_.add_option("--ablate-cross-heads", p.ablate_cross_heads, "The same for cross-attention heads")
        ->type_name("L.H[,L.H...]");
  app_.add_option("--ablate-with", p.ablate_with,
                  "Ablated heads take the mean over items and valid positions of a z written earlier (default "
                  "dataset: /activations/layer{L}/z)")
      ->type_name("mean:FILE[:DATASET]");
  app_.add_option("--patch", p.patch,
                  "Replace layer L's activation NAME by the dataset (default: /activations/layer{L}/NAME); repeatable")
      ->type_name("NAME@L=FILE[:DATASET]")
      ->allow_extra_args(false);
  app_.add_option("--patch-positions", p.patch_positions, "Patch only these positions (keys for k and v)")
      ->type_name("I,J,...");
  app_.add_option("--patch-heads", p.patch_heads, "Patch only these heads of a per-head name")->type_name("H,...");
  app_.add_option("--steer", p.steer,
                  "Add --steer-scale times the dataset ((E,), (n, E) or (b, n, E)) to layer L's resid_*, attn_out or "
                  "mlp_out; repeatable")
      ->type_name("NAME@L=FILE[:DATASET]")
      ->allow_extra_args(false);
  app_.add_option("--steer-scale", p.steer_scale, "The factor of --steer's directions")->capture_default_str();
}

void Tool::check_outputs(const std::vector<std::string>& extra_outputs) {
  if (mpi::size() > 1)
    for (const std::string& arg : extra_outputs)
      if (!arg.empty() && h5::parse_tensor_ref(arg).path == "-")
        throw UsageError(fmt::format("standard output is not written under MPI ({} ranks): give -o FILE", mpi::size()));
  if (mpi::size() > 1 && h5::parse_tensor_ref(output_).path == "-")
    throw UsageError(fmt::format("standard output is not written under MPI ({} ranks): give -o FILE", mpi::size()));
  if (!output_.empty()) h5::check_output_target(h5::parse_tensor_ref(output_), input_refs_);
  for (const std::string& arg : extra_outputs) {
    if (arg.empty()) continue;
    h5::TensorRef ref = h5::parse_tensor_ref(arg);
    if (ref.path == "-" && output_ == "-")
      throw UsageError(fmt::format("'{}' and -o cannot both be standard output", arg));
    if (ref.path != "-" && ref.path == h5::parse_tensor_ref(output_).path)
      throw UsageError(fmt::format("'{}' and -o name the same file", arg));
    h5::check_output_target(ref, input_refs_);
  }
}

void Tool::check_file_output(const std::string& path, std::string_view format) {
  h5::check_output_target(h5::TensorRef{path, ""}, input_refs_, format);
}

std::unique_ptr<h5::OutputFile> Tool::open_output(const std::string& primary) { return open_output(output_, primary); }

std::unique_ptr<h5::OutputFile> Tool::open_output(const std::string& arg, const std::string& primary) {
  return std::make_unique<h5::OutputFile>(h5::parse_tensor_ref(arg), primary,
                                          h5::Provenance{fmt::format("{} {}", name_, attn::version), command_});
}

void Tool::preflight_inputs(const std::vector<std::string>& args) {
  std::vector<h5::TensorRef> refs;
  for (const std::string& a : args) {
    if (a.empty()) continue;
    try {
      refs.push_back(h5::parse_tensor_ref(a));
    } catch (const UsageError&) { // reported when the argument is used
    }
  }
  inputs_.preflight(refs, [] { blas::start_threads(); });
}

std::unique_ptr<h5::OutputFile> Tool::open_group_output(const std::string& arg, const std::string& primary) {
  h5::TensorRef ref = h5::parse_tensor_ref(arg);
  if (!ref.name.empty()) ref.name += "/" + primary;
  return open_output(ref.str(), primary);
}

int Tool::run(int argc, char** argv, const std::function<void()>& body) noexcept {
  int status = 0;
  std::string message; // printed by one process: the lowest MPI rank that failed
  bool peer_failed = false;
  try {
    mpi::start(name_, splits_batch_);
    command_ = shell_join(argc, argv);
    try {
      check_integer_ranges(app_);
      app_.parse(argc, argv);
    } catch (const CLI::Success& e) {
      status = mpi::rank() == 0 ? app_.exit(e) : 0; // --help, --version: printed once
      mpi::stop();
      return status;
    } catch (const CLI::ParseError& e) {
      throw UsageError(e.what());
    }
    blas::set_threads(threads_);
    const bool bf16 = matmul_precision_ == "bf16";
    blas::set_matmul_precision(bf16 ? blas::MatmulPrecision::bf16 : blas::MatmulPrecision::f32);
    if (verbose_) // naming the core loads OpenBLAS, which a run may otherwise never need
      log("BLAS: OpenBLAS core {}; linear kernels {}, int8 {}; {} threads{}", blas::core_description(),
          blas::isa_name(blas::linear_isa()), blas::int8_kernel_name(blas::linear_isa()), blas::threads(),
          !bf16 ? std::string()
          : blas::linear_isa() == blas::Isa::avx512 && blas::bf16_products_available()
              ? fmt::format("; products of many rows in bfloat16 ({})", blas::bf16_tiles())
              : std::string("; --matmul-precision bf16: no AVX512-BF16 here, products in float32"));
    if (mpi::size() > 1) log("MPI: rank {} of {}", mpi::rank(), mpi::size());
    body();
    rusage usage{};
    if (getrusage(RUSAGE_SELF, &usage) == 0)
      log("peak memory: {:.1f} MiB", static_cast<double>(usage.ru_maxrss) / 1024);
  } catch (const mpi::PeerFailed& e) { // another rank failed and says why
    status = e.status, peer_failed = true;
  } catch (const Error& e) {
    message = e.what(), status = exit_status(e);
  } catch (const std::bad_alloc&) {
    message = "out of memory", status = 1;
  } catch (const std::exception& e) {
    message = e.what(), status = 1;
  } catch (...) {
    message = "unknown failure", status = 1;
  }
  if (status != 0 && mpi::active()) {
    if (!peer_failed && !mpi::fail_together(status)) message.clear();
    h5::close_abandoned_outputs();
  }
  if (!message.empty() && (mpi::active() || mpi::launcher_rank() == 0))
    to_stderr(fmt::format("{}: error: {}\n", name_, message));
  mpi::stop();
  return status;
}

// A flag's number: "not a number", "must be a finite number" (NaN, inf, or beyond float32's range
// when `float32` is set), or "must be MUST" when ok(v) fails.
static CLI::Validator number_check(const char* name, bool (*ok)(double), const char* must, bool float32 = false) {
  return CLI::Validator(
      [ok, must, float32](std::string& s) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(s, v)) return "not a number: " + s;
        if (!std::isfinite(v) || (float32 && std::abs(v) > std::numeric_limits<float>::max()))
          return fmt::format("must be a finite number{}, got {}", float32 ? " within float32's range" : "", s);
        return ok(v) ? std::string() : fmt::format("must be {}, got {}", must, s);
      },
      name);
}

// CLI11 2.1 saturates an integer beyond its type (--seed 18446744073709551616 and --seed -1 both
// became 2^64 - 1, --len 99999999999999999999 became 2^63 - 1): a decimal integer must fit the
// option's type, and an unsigned one has no sign.
static std::string integer_in_range(const std::string& s, bool is_unsigned) {
  std::size_t start = s.find_first_not_of(" \t");
  if (start == std::string::npos) return {};
  const std::string_view t = std::string_view(s).substr(start);
  const bool negative = t.starts_with('-');
  const std::string_view digits = t.substr(negative || t.starts_with('+') ? 1 : 0);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
    return {}; // not a decimal integer: CLI11's conversion says so
  if (is_unsigned) {
    if (negative) return fmt::format("must be an integer from 0 to {}, got {}", UINT64_MAX, s);
    std::uint64_t v = 0;
    if (std::from_chars(digits.data(), digits.data() + digits.size(), v).ec != std::errc())
      return fmt::format("must be an integer from 0 to {}, got {}", UINT64_MAX, s);
  } else {
    std::int64_t v = 0;
    const std::string_view signed_text = negative ? t : digits;
    if (std::from_chars(signed_text.data(), signed_text.data() + signed_text.size(), v).ec != std::errc())
      return fmt::format("must be an integer from {} to {}, got {}", INT64_MIN, INT64_MAX, s);
  }
  return {};
}

void check_integer_ranges(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    const std::string base = type.substr(0, type.find(':'));
    if (base != "INT" && base != "UINT") continue;
    const bool is_unsigned = base == "UINT";
    opt->check(CLI::Validator([is_unsigned](std::string& s) { return integer_in_range(s, is_unsigned); }, ""));
  }
}

CLI::Validator positive() {
  return number_check(
      "POSITIVE", [](double v) { return v > 0; }, "positive");
}

CLI::Validator non_negative() {
  return number_check(
      "NONNEGATIVE", [](double v) { return v >= 0; }, "zero or more");
}

CLI::Validator finite(bool float32) {
  return number_check(
      "FINITE", [](double) { return true; }, "", float32);
}

std::string shell_join(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                         "0123456789-_./:=,+@%") == std::string::npos;
    if (i) out += ' ';
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
} // namespace

void to_stderr(const std::string& text) noexcept {
  if (std::fwrite(text.data(), 1, text.size(), stderr) == text.size()) std::fflush(stderr);
  std::clearerr(stderr);
}

Stopwatch::Stopwatch() : start_(now()) {}
double Stopwatch::seconds() const { return now() - start_; }

Progress::Progress(const Tool& tool, std::string unit, std::int64_t total)
    : tool_(tool.name()), unit_(std::move(unit)), total_(total),
      terminal_(isatty(STDERR_FILENO) != 0 && mpi::rank() == 0), // under MPI: rank 0's share stands for all
      verbose_(tool.verbose()) {}

Progress::~Progress() {
  if (drawn_) to_stderr("\n");
}

namespace {

// "40 s", "12 min", "3.5 h", "9 days", "2e+03 years": how long the rest of a run will take.
std::string rough_duration(double seconds) {
  if (seconds < 90) return fmt::format("{:.0f} s", seconds);
  if (seconds < 90 * 60) return fmt::format("{:.0f} min", seconds / 60);
  if (seconds < 48 * 3600) return fmt::format("{:.1f} h", seconds / 3600);
  if (seconds < 730 * 86400) return fmt::format("{:.0f} days", seconds / 86400);
  return fmt::format("{:.2g} years", seconds / (365.25 * 86400));
}

} // namespace

// The estimate assumes the remaining units take as long as the finished ones did, so a huge input
// shows how long it will take (in years, if need be) after its first chunk.
void Progress::update(std::int64_t done) {
  const double elapsed = clock_.seconds();
  const bool end = done >= total_;
  const std::string left =
      end || done <= 0 ? "" : ", " + rough_duration(elapsed * static_cast<double>(total_ - done) / done) + " left";
  if (terminal_) {
    if (elapsed < 0.5 || (!end && elapsed - last_ < 0.1)) return;
    constexpr int width = 30;
    const auto filled = static_cast<int>(width * done / std::max<std::int64_t>(total_, 1));
    to_stderr(
        fmt::format("\r{}: [{}{}] {}/{} {} {:.1f} s{}\033[K", tool_, std::string(static_cast<std::size_t>(filled), '#'),
                    std::string(static_cast<std::size_t>(width - filled), ' '), done, total_, unit_, elapsed, left));
    drawn_ = true;
  } else if (verbose_ && (end || elapsed - last_ >= 5.0)) {
    to_stderr(fmt::format("{}: {}/{} {}, {:.1f} s{}\n", tool_, done, total_, unit_, elapsed, left));
  } else {
    return;
  }
  last_ = elapsed;
}

} // namespace attn::cli
