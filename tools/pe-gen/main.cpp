// pe-gen: positional encodings (CONTRACT.md section 5): sinusoidal tables, learned tables, rotary
// embeddings (applied, or as cos/sin tables), ALiBi biases and T5's relative bias (or its buckets).
#include "cli.hpp"

#include "attn/attention/posenc.hpp"
#include "attn/core/error.hpp"

namespace {

using attn::BasicTensor;
using attn::Shape;

struct Options {
  std::string kind = "sinusoidal";
  std::int64_t len = 0, dim = 0, offset = 0, heads = 1, len_k = 0;
  double base = 10000;
  std::string layout = "interleaved", rope_style = "half", direction = "bidirectional";
  std::int64_t buckets = 0, max_distance = 128;
  std::string add, table, apply;
};

// X as (b, n, d) in T; 2-D inputs give 2-D outputs.
template <typename T> attn::h5::Sequence<T> read_sequence(attn::cli::Tool& tool, const std::string& arg) {
  return attn::h5::read_sequence<T>(tool.open_input(arg), tool.allow_nonfinite(), "a tensor");
}

// Positions offset .. offset + n - 1 are computed in float64, which counts every integer only up to
// 2^53: beyond it positions collapse (and offset + n can pass 64 bits).
void check_positions(const Options& o, std::int64_t n) {
  constexpr std::int64_t exact = std::int64_t{1} << 53;
  if (o.offset > exact - n + 1)
    throw attn::UsageError(fmt::format("--offset {}: positions up to {} + {} - 1 pass 2^53 = {}, beyond which float64 "
                                       "cannot tell them apart",
                                       o.offset, o.offset, n, exact));
}

template <typename T> void run_sinusoidal(const Options& o, attn::cli::Tool& tool) {
  const auto layout = attn::parse_pe_layout(o.layout);
  if (o.add.empty()) {
    tool.check_outputs();
    auto out = tool.open_output("pe");
    check_positions(o, o.len);
    BasicTensor<T> pe(Shape{o.len, o.dim}, attn::Uninitialized{});
    attn::sinusoidal_table(pe.data(), o.len, o.dim, o.base, o.offset, layout);
    out->write("pe", pe, tool.out_type());
    return out->commit();
  }
  auto [x, batched] = read_sequence<T>(tool, o.add);
  tool.check_outputs();
  if (tool.given("--len") && o.len != x.dim(1))
    throw attn::Error(fmt::format("--len {} but {} has {} positions", o.len, o.add, x.dim(1)));
  if (tool.given("--dim") && o.dim != x.dim(2))
    throw attn::Error(fmt::format("--dim {} but {} has {} features", o.dim, o.add, x.dim(2)));
  check_positions(o, x.dim(1));
  attn::add_sinusoidal(x.data(), x.dim(0), x.dim(1), x.dim(2), o.base, o.offset, layout);
  tool.write_output("output", x, batched);
}

// Positions offset .. offset + n - 1 within a learned table of `rows` rows.
void check_in_table(const Options& o, std::int64_t n, std::int64_t rows, const std::string& table) {
  if (o.offset > rows - n)
    throw attn::Error(fmt::format("--offset {}: {} positions from it are outside the {} rows of the learned table {}",
                                  o.offset, n, rows, table));
}

template <typename T> void run_learned(const Options& o, attn::cli::Tool& tool) {
  attn::h5::Dataset tds = tool.open_input(o.table);
  tds.require_rank(2, 2, "a learned table (positions, features)");
  const BasicTensor<T> table = tds.read_floats<T>(tool.allow_nonfinite());
  const std::int64_t rows = table.dim(0), d = table.dim(1);
  if (o.add.empty()) {
    tool.check_outputs();
    const std::int64_t n = tool.given("--len") ? o.len : rows - o.offset;
    if (n <= 0) throw attn::Error(fmt::format("--offset {} is beyond the {} rows of {}", o.offset, rows, tds.label()));
    check_in_table(o, n, rows, tds.label());
    BasicTensor<T> pe(Shape{n, d});
    attn::add_learned(pe.data(), 1, n, d, table.data(), rows, o.offset, tds.label());
    return tool.write_output("pe", pe);
  }
  auto [x, batched] = read_sequence<T>(tool, o.add);
  tool.check_outputs();
  if (x.dim(2) != d)
    throw attn::Error(fmt::format("{} has {} features but the table {} has {} (shape {})", o.add, x.dim(2), tds.label(),
                                  d, attn::shape_str(table.shape())));
  check_in_table(o, x.dim(1), rows, tds.label());
  attn::add_learned(x.data(), x.dim(0), x.dim(1), d, table.data(), rows, o.offset, tds.label());
  tool.write_output("output", x, batched);
}

template <typename T> void run_rope(const Options& o, attn::cli::Tool& tool) {
  const auto style = attn::parse_rope_style(o.rope_style);
  if (o.apply.empty()) {
    if (o.dim % 2) throw attn::UsageError(fmt::format("--kind rope needs an even --dim (got {})", o.dim));
    tool.check_outputs();
    const std::int64_t half = o.dim / 2;
    check_positions(o, o.len);
    attn::TensorD cos(Shape{o.len, half}), sin(Shape{o.len, half});
    attn::rope_tables(cos.data(), sin.data(), o.len, o.dim, o.base, o.offset);
    auto out = tool.open_output("cos");
    out->write("cos", cos, tool.out_type());
    out->write("sin", sin, tool.out_type());
    return out->commit();
  }
  auto [x, batched] = read_sequence<T>(tool, o.apply);
  tool.check_outputs();
  const std::int64_t e = x.dim(2);
  if (e % o.heads)
    throw attn::Error(fmt::format("--heads {} does not divide the {} features of {}", o.heads, e, o.apply));
  if ((e / o.heads) % 2)
    throw attn::Error(
        fmt::format("RoPE needs an even head size; {} features / {} heads = {}", e, o.heads, e / o.heads));
  check_positions(o, x.dim(1));
  attn::apply_rope(x.data(), x.dim(0), x.dim(1), o.heads, e / o.heads, style, o.base, o.offset);
  tool.write_output("output", x, batched);
}

template <typename T> void run_alibi(const Options& o, attn::cli::Tool& tool) {
  tool.check_outputs();
  const std::int64_t m = tool.given("--len-k") ? o.len_k : o.len;
  BasicTensor<T> bias(Shape{1, o.heads, o.len, m});
  attn::alibi_bias(bias.data(), o.heads, o.len, m);
  tool.write_output("bias", bias);
}

// T5's bias (1, H, N, M) from a learned table (buckets, H), or without a table the buckets (N, M).
template <typename T> void run_relative(const Options& o, attn::cli::Tool& tool) {
  attn::RelativeBuckets rule;
  rule.max_distance = o.max_distance;
  rule.bidirectional = o.direction == "bidirectional";
  const std::int64_t m = tool.given("--len-k") ? o.len_k : o.len;
  if (o.table.empty()) {
    rule.buckets = o.buckets;
    attn::check_relative_buckets(rule, "--buckets");
    tool.check_outputs();
    attn::BasicTensor<std::int64_t> buckets(Shape{o.len, m});
    for (std::int64_t i = 0; i < o.len; ++i)
      for (std::int64_t j = 0; j < m; ++j)
        buckets.data()[i * m + j] = attn::relative_bucket(j - (i + (m - o.len)), rule);
    auto out = tool.open_output("buckets");
    out->write("buckets", buckets, attn::h5::OutType::I64);
    return out->commit();
  }
  attn::h5::Dataset tds = tool.open_input(o.table);
  tds.require_rank(2, 2, "a relative bias table (buckets, heads)");
  const attn::Tensor table = tds.read_floats<float>(tool.allow_nonfinite());
  rule.buckets = table.dim(0);
  const std::int64_t heads = table.dim(1);
  if (tool.given("--buckets") && o.buckets != rule.buckets)
    throw attn::Error(fmt::format("--buckets {} but the table {} has {} rows (shape {})", o.buckets, tds.label(),
                                  rule.buckets, attn::shape_str(table.shape())));
  if (tool.given("--heads") && o.heads != heads)
    throw attn::Error(fmt::format("--heads {} but the table {} has {} columns, one per head (shape {})", o.heads,
                                  tds.label(), heads, attn::shape_str(table.shape())));
  const attn::RelativeBias rb(rule, heads, std::vector<float>(table.data(), table.data() + table.size()), tds.label());
  tool.check_outputs();
  BasicTensor<T> bias(Shape{1, heads, o.len, m});
  attn::relative_bias(bias.data(), rb, o.len, m);
  tool.write_output("bias", bias);
}

template <typename T> void run(const Options& o, attn::cli::Tool& tool) {
  if (o.kind == "sinusoidal") return run_sinusoidal<T>(o, tool);
  if (o.kind == "learned") return run_learned<T>(o, tool);
  if (o.kind == "rope") return run_rope<T>(o, tool);
  if (o.kind == "relative") return run_relative<T>(o, tool);
  return run_alibi<T>(o, tool);
}

// Which flags each kind takes (CONTRACT.md); anything else is a usage error, never ignored.
void check_flags(const Options& o, const attn::cli::Tool& tool) {
  const std::string ctx = "--kind " + o.kind;
  if (o.kind != "relative") tool.forbid(ctx, {"--buckets", "--max-distance", "--direction"});
  if (o.kind == "sinusoidal") {
    tool.forbid(ctx, {"--table", "--apply", "--heads", "--rope-style", "--len-k"});
    if (o.add.empty()) tool.require(ctx + " without --add", {"--len", "--dim"});
  } else if (o.kind == "learned") {
    tool.forbid(ctx, {"--dim", "--base", "--layout", "--apply", "--heads", "--rope-style", "--len-k"});
    tool.require(ctx, {"--table"});
    if (!o.add.empty()) tool.forbid(ctx + " --add", {"--len"});
  } else if (o.kind == "rope") {
    tool.forbid(ctx, {"--add", "--table", "--layout", "--len-k"});
    if (o.apply.empty()) {
      tool.require(ctx + " without --apply", {"--len", "--dim"});
      tool.forbid(ctx + " without --apply", {"--heads", "--rope-style"});
    } else {
      tool.forbid(ctx + " --apply", {"--len", "--dim"});
    }
  } else if (o.kind == "relative") {
    tool.forbid(ctx, {"--dim", "--base", "--offset", "--layout", "--add", "--apply", "--rope-style"});
    tool.require(ctx, {"--len"});
    if (o.table.empty()) {
      tool.require(ctx + " without --table", {"--buckets"});
      tool.forbid(ctx + " without --table", {"--heads"});
    }
  } else {
    tool.forbid(ctx, {"--dim", "--base", "--offset", "--layout", "--add", "--table", "--apply", "--rope-style"});
    tool.require(ctx, {"--heads", "--len"});
  }
}

} // namespace

int main(int argc, char** argv) {
  attn::cli::Tool tool("pe-gen",
                       "Positional encodings: sinusoidal, learned, rotary (RoPE), ALiBi and T5's relative bias.");
  Options o;
  auto& app = tool.app();
  app.add_option("--kind", o.kind, "sinusoidal, learned, rope, alibi or relative")
      ->check(CLI::IsMember({"sinusoidal", "learned", "rope", "alibi", "relative"}))
      ->capture_default_str();
  app.add_option("--len", o.len, "Number of positions (query positions for alibi and relative)")
      ->check(attn::cli::positive());
  app.add_option("--dim", o.dim, "Features (sinusoidal) or head size Dh (rope tables)")->check(attn::cli::positive());
  app.add_option("--base", o.base, "Frequency base")->check(attn::cli::positive())->capture_default_str();
  app.add_option("--offset", o.offset, "Position of the first row")
      ->check(attn::cli::non_negative())
      ->capture_default_str();
  app.add_option("--layout", o.layout,
                 "Sinusoidal columns: interleaved (sin, cos, ...) or concat (sines, then cosines)")
      ->check(CLI::IsMember({"interleaved", "concat"}))
      ->capture_default_str();
  app.add_option("--add", o.add, "Write X + PE as /output instead of the table")->type_name("X");
  app.add_option("--table", o.table, "Learned table (positions, features); relative: (buckets, heads)")->type_name("T");
  app.add_option("--apply", o.apply, "Rotate X (batch, seq, heads*Dh) and write /output")->type_name("X");
  app.add_option("--heads", o.heads, "Heads: of X for rope --apply, of the bias for alibi (relative: checked)")
      ->check(attn::cli::positive());
  app.add_option("--rope-style", o.rope_style, "half (GPT-NeoX/LLaMA) or interleaved (RoFormer/GPT-J)")
      ->check(CLI::IsMember({"half", "interleaved"}))
      ->capture_default_str();
  app.add_option("--len-k", o.len_k, "Key positions for alibi and relative (default --len)")
      ->check(attn::cli::positive());
  app.add_option("--buckets", o.buckets, "relative: buckets (without --table: write /buckets; with it: checked)")
      ->check(attn::cli::positive());
  app.add_option("--max-distance", o.max_distance, "relative: the distance from which buckets stop growing")
      ->check(attn::cli::positive())
      ->capture_default_str();
  app.add_option("--direction", o.direction,
                 "relative: bidirectional (encoders: both signs) or causal (decoders: keys before the query)")
      ->check(CLI::IsMember({"bidirectional", "causal"}))
      ->capture_default_str();
  tool.add_dtype({"f32", "f64", "f16", "bf16"},
                 "Output element type (f64, f16 and bf16 compute in float64; f16 and bf16 round to nearest even)");
  tool.add_allow_nonfinite();
  return tool.run(argc, argv, [&] {
    check_flags(o, tool);
    if (tool.out_type() != attn::h5::OutType::F32) // f64; f16 and bf16 are rounded once from float64
      run<double>(o, tool);
    else
      run<float>(o, tool);
  });
}
