// tensor-gen: make input tensors from the shell (CONTRACT.md section 5). Writes /data.
#include "cli.hpp"

#include "attn/core/error.hpp"
#include "attn/core/fill.hpp"
#include "attn/core/tensor.hpp"

#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <utility>

namespace {

struct Options {
  std::vector<std::int64_t> shape;
  std::string fill = "normal";
  std::string from_text;
  attn::FillSpec spec;
};

// Values for the whole tensor as T, from the fill or the text source.
template <typename T> attn::BasicTensor<T> make(const Options& o, attn::cli::Tool& tool) {
  attn::BasicTensor<T> t(o.shape);
  if (o.from_text.empty()) {
    attn::FillSpec spec = o.spec;
    spec.kind = attn::parse_fill(o.fill);
    spec.seed = tool.seed();
    attn::fill(t.span(), spec);
    return t;
  }
  std::ifstream file;
  if (o.from_text != "-") {
    file.open(o.from_text);
    if (!file) throw attn::Error(fmt::format("{}: cannot open for reading", o.from_text));
  }
  std::istream& in = o.from_text == "-" ? std::cin : file;
  const std::string label = attn::h5::input_label(o.from_text);
  std::vector<T> values;
  if constexpr (std::is_integral_v<T>) {
    values = attn::parse_integers(in, label);
  } else {
    for (double v : attn::parse_numbers(in, label)) values.push_back(static_cast<T>(v));
    if (!tool.allow_nonfinite())
      attn::h5::check_finite(values.data(), attn::Shape{static_cast<std::int64_t>(values.size())}, 0,
                             static_cast<std::int64_t>(values.size()), label);
  }
  if (static_cast<std::int64_t>(values.size()) != t.size())
    throw attn::Error(fmt::format("{}: holds {} numbers; --shape {} needs {}", label, values.size(),
                                  attn::shape_str(o.shape), t.size()));
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

// The largest finite value of an output type: the bound of --mean, --low and --high.
double largest(attn::h5::OutType t) {
  switch (t) {
  case attn::h5::OutType::F64: return std::numeric_limits<double>::max();
  case attn::h5::OutType::F16: return 65504.0;
  case attn::h5::OutType::BF16: return 0x1.fep127; // bfloat16's largest: 3.39e38
  case attn::h5::OutType::I64:
  case attn::h5::OutType::I8: return 0x1p63;
  case attn::h5::OutType::F32: break;
  }
  return std::numeric_limits<float>::max();
}

// --mean, --low and --high (when given) within the output type's range.
void check_fill_range(const Options& o, const attn::cli::Tool& tool) {
  const double bound = largest(tool.out_type());
  for (auto [flag, v] : {std::pair{"--mean", o.spec.mean}, {"--low", o.spec.low}, {"--high", o.spec.high}})
    if (tool.given(flag) && !(std::abs(v) < bound || (std::abs(v) == bound && tool.dtype() != "i64")))
      throw attn::UsageError(
          fmt::format("{}: must be within {}'s range (|x| <= {:g}), got {:g}", flag, tool.dtype(), bound, v));
}

void run(const Options& o, attn::cli::Tool& tool) {
  attn::checked_numel(o.shape, "--shape");
  check_fill_range(o, tool);
  if (o.spec.high <= o.spec.low) throw attn::UsageError("--high must be greater than --low");
  if (!o.from_text.empty()) tool.input_ref(o.from_text);
  tool.check_outputs();
  switch (tool.out_type()) {
  case attn::h5::OutType::F32: tool.write_output("data", make<float>(o, tool)); break;
  case attn::h5::OutType::F64: tool.write_output("data", make<double>(o, tool)); break;
  case attn::h5::OutType::I64:
  case attn::h5::OutType::I8: // not among --dtype's choices
    tool.write_output("data", make<std::int64_t>(o, tool));
    break;
  case attn::h5::OutType::F16: // made in float64, rounded once to the 16 bits
  case attn::h5::OutType::BF16: tool.write_output("data", make<double>(o, tool)); break;
  }
  tool.log("wrote {} {}", tool.dtype(), attn::shape_str(o.shape));
}

} // namespace

int main(int argc, char** argv) {
  attn::cli::Tool tool("tensor-gen", "Make a tensor from a fill rule or from text; writes /data.");
  Options o;
  auto& app = tool.app();
  app.add_option("--shape", o.shape, "Shape, comma-separated (e.g. 2,16,64)")
      ->required()
      ->delimiter(',')
      ->check(attn::cli::positive());
  auto* fill = app.add_option("--fill", o.fill, "normal, uniform, zeros, ones or arange")
                   ->check(CLI::IsMember({"normal", "uniform", "zeros", "ones", "arange"}))
                   ->capture_default_str();
  app.add_option("--from-text", o.from_text, "Read whitespace-separated numbers from FILE ('-' = standard input)")
      ->type_name("FILE")
      ->excludes(fill);
  app.add_option("--mean", o.spec.mean, "Mean of --fill normal")
      ->capture_default_str()
      ->check(attn::cli::finite(false))
      ->excludes("--from-text");
  app.add_option("--std", o.spec.std, "Standard deviation of --fill normal")
      ->capture_default_str()
      ->check(attn::cli::non_negative())
      ->excludes("--from-text");
  app.add_option("--low", o.spec.low, "Lower bound of --fill uniform (inclusive)")
      ->capture_default_str()
      ->check(attn::cli::finite(false))
      ->excludes("--from-text");
  app.add_option("--high", o.spec.high, "Upper bound of --fill uniform (exclusive)")
      ->capture_default_str()
      ->check(attn::cli::finite(false))
      ->excludes("--from-text");
  tool.add_seed();
  tool.add_dtype({"f32", "f64", "i64", "f16", "bf16"},
                 "Output element type (f16 and bf16: made in float64, rounded to nearest even)");
  tool.add_allow_nonfinite();
  return tool.run(argc, argv, [&] {
    const std::string fill = o.from_text.empty() ? "--fill " + o.fill : "--from-text";
    if (o.fill != "normal" || !o.from_text.empty()) tool.forbid(fill, {"--mean", "--std"});
    if (o.fill != "uniform" || !o.from_text.empty()) tool.forbid(fill, {"--low", "--high"});
    if ((o.fill != "normal" && o.fill != "uniform") || !o.from_text.empty()) tool.forbid(fill, {"--seed"});
    run(o, tool);
  });
}
