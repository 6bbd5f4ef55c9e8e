// quantize: a weight file with its Linear weights stored as int8 with scales, or as float16, in the
// same layout, which every tool taking --weights runs (lib/quantize.hpp).
#include "cli.hpp"

#include "attn/core/error.hpp"
#include "attn/hf/model_dir.hpp"
#include "attn/weights/quantize.hpp"
#include "attn/weights/weights.hpp"

namespace {

struct Options {
  std::string weights, output, scheme = "int8";
  std::int64_t block = 32;
  bool all = false;
};

void report(const Options& o, const attn::QuantOptions& opt, const attn::QuantReport& r, attn::cli::Tool& tool);

void run(const Options& o, attn::cli::Tool& tool) {
  if (o.scheme != "int8") tool.forbid("--scheme " + o.scheme, {"--block"});
  if (o.scheme == "f32") tool.forbid("--scheme f32", {"--all"});
  const attn::h5::TensorRef ref = tool.input_ref(o.weights);
  tool.check_outputs();
  const attn::QuantOptions opt{attn::parse_quant_scheme(o.scheme), o.block, o.all};
  if (attn::hf::is_model_path(ref.path)) { // a Hugging Face model directory: the converter
    attn::WeightGroup g = attn::WeightGroup::open(tool.inputs(), ref);
    const std::vector<std::string> tensors = g.source().tensors(g.path()); // not empty: open() checked
    auto out = tool.open_group_output(o.output, tensors.front().substr(g.path() == "/" ? 1 : g.path().size() + 1));
    const attn::QuantReport r = attn::convert_weights(g.source(), g.path(), *out, opt);
    out->commit();
    return report(o, opt, r, tool);
  }
  const std::string group = ref.name.empty() ? "/" : (ref.name.front() == '/' ? ref.name : "/" + ref.name);
  if (tool.inputs().kind_of(ref.path, group) != attn::h5::ObjectKind::Group)
    throw attn::Error(fmt::format("{}: {} is not a group (give FILE[:GROUP] of a weight file)",
                                  attn::h5::input_label(ref.path), group));
  std::string primary; // the output's primary dataset: the first one, relative to the group
  if (const auto names = tool.inputs().list_datasets(ref.path, group); !names.empty())
    primary = names.front().substr(group == "/" ? 1 : group.size() + 1);
  if (primary.empty())
    throw attn::Error(fmt::format("{}: no datasets under {}", attn::h5::input_label(ref.path), group));
  auto out = tool.open_group_output(o.output, primary);
  const attn::QuantReport r = attn::quantize_weight_file(tool.inputs(), ref.path, group, *out, opt);
  out->commit();
  report(o, opt, r, tool);
}

void report(const Options& o, const attn::QuantOptions& opt, const attn::QuantReport& r, attn::cli::Tool& tool) {
  if (opt.scheme == attn::QuantScheme::F32)
    tool.log("{} int8 or float16 weights written as float32, {} datasets kept; data {} -> {} bytes", r.quantized,
             r.kept, r.bytes_in, r.bytes_out);
  else
    tool.log("{} weights quantized ({}), {} datasets kept; data {} -> {} bytes ({:.3f}x); max error {:.3g} of a "
             "weight's largest value",
             r.quantized, o.scheme == "int8" ? fmt::format("int8, block {}", o.block) : "float16", r.kept, r.bytes_in,
             r.bytes_out, r.bytes_in ? double(r.bytes_out) / double(r.bytes_in) : 0.0, r.max_rel_error);
}

} // namespace

int main(int argc, char** argv) {
  attn::cli::Tool tool("quantize", "Store a weight file's Linear weights as int8 with scales, or as float16; the "
                                   "tools run the result with --weights.");
  Options o;
  auto& app = tool.app();
  app.add_option("--weights", o.weights,
                 "The weight file, or a group of it (CONTRACT.md section 3); or a Hugging Face model directory to "
                 "convert (section 6.1)")
      ->required()
      ->type_name("FILE[:GROUP]|DIR[:PREFIX]");
  app.add_option("--scheme", o.scheme,
                 "int8 (symmetric, a float32 scale per block) or f16; f32 writes a quantized file back as float32 "
                 "(int8 dequantized, float16 widened)")
      ->check(CLI::IsMember({"int8", "f16", "f32"}))
      ->capture_default_str();
  app.add_option("--block", o.block, "int8: weights per scale along the input dimension (0: a whole row)")
      ->check(attn::cli::non_negative())
      ->capture_default_str();
  app.add_flag("--all", o.all, "Embedding tables too (biases and norms always stay float32)");
  return tool.run(argc, argv, [&] {
    o.output = tool.output_arg();
    run(o, tool);
  });
}
