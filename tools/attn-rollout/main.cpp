// attn-rollout: attention rollout and attention flow (Abnar and Zuidema 2020) over the per-layer
// attention weights a run wrote (lib/attention/rollout.hpp).
#include "cli.hpp"

#include "attn/attention/rollout.hpp"
#include "attn/core/error.hpp"
#include "attn/inputs/probe_run.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace {

struct Options {
  std::string run, method = "rollout", heads = "mean", rows;
  double residual = 0.5;
};

// The layers' weights of a run file: FILE:GROUP names them; without GROUP, /weights (encode's
// layer{i}, decode's layer{i}/self) or else /activations (layer{i}/pattern).
std::vector<attn::h5::TensorRef> layer_refs(attn::cli::Tool& tool, const attn::h5::TensorRef& ref) {
  std::vector<std::string> groups;
  if (!ref.name.empty())
    groups.push_back(attn::h5::normalize_path(ref.name));
  else
    groups = {"/weights", "/activations"};
  for (const std::string& g : groups) {
    std::vector<attn::h5::TensorRef> out;
    for (int l = 0;; ++l) {
      const std::string layer = attn::h5::join_path(g, fmt::format("layer{}", l));
      const attn::h5::ObjectKind kind = tool.inputs().kind_of(ref.path, layer);
      std::string ds;
      if (kind == attn::h5::ObjectKind::Dataset) {
        ds = layer;
      } else if (kind == attn::h5::ObjectKind::Group) {
        for (const char* name : {"self", "pattern"})
          if (tool.inputs().kind_of(ref.path, attn::h5::join_path(layer, name)) == attn::h5::ObjectKind::Dataset)
            ds = attn::h5::join_path(layer, name);
      }
      if (ds.empty()) break;
      out.push_back({ref.path, ds});
    }
    if (!out.empty()) return out;
  }
  throw attn::Error(fmt::format("{}: no per-layer self-attention weights (layer0, layer1, ... under {}; write them "
                                "with --emit-weights or --emit-activations pattern)",
                                attn::h5::input_label(ref.path),
                                ref.name.empty() ? "/weights or /activations" : ref.name));
}

void run(const Options& o, attn::cli::Tool& tool) {
  if (o.method != "flow") tool.forbid("--method rollout", {"--rows"});
  const attn::HeadFusion fusion = attn::parse_head_fusion(o.heads);
  const attn::h5::TensorRef ref = tool.input_ref(o.run);
  tool.preflight_inputs({o.run});
  tool.check_outputs();
  // each layer read, checked and reduced to its Ã (b, n, n) in turn: one layer's weights at a time
  std::vector<attn::Tensor> fused;
  std::vector<std::uint8_t> padded;
  attn::Shape first;
  bool batched = true;
  const attn::cli::Stopwatch clock;
  for (const attn::h5::TensorRef& r : layer_refs(tool, ref)) {
    const attn::h5::Dataset ds = tool.inputs().open(r);
    attn::Tensor w = ds.read_floats<float>(false);
    if (w.shape().size() == 3) { // an unbatched run: (H, n, n)
      batched = false;
      w.reshape(attn::Shape{1, w.dim(0), w.dim(1), w.dim(2)});
    }
    if (w.shape().size() != 4 || w.dim(2) != w.dim(3))
      throw attn::Error(fmt::format("{}: shape {}: expected self-attention weights (b, H, n, n)", ds.label(),
                                    attn::shape_str(w.shape())));
    if (!fused.empty() && w.shape() != first)
      throw attn::Error(fmt::format("{}: shape {} differs from layer 0's {}", ds.label(), attn::shape_str(w.shape()),
                                    attn::shape_str(first)));
    if (fused.empty()) first = w.shape(), padded = attn::padded_queries(w);
    fused.push_back(attn::fused_layer(w, fusion, o.residual));
  }
  const std::int64_t n = first[2];
  std::vector<std::int64_t> rows;
  if (!o.rows.empty()) rows = attn::parse_index_list(o.rows, "--rows");
  for (std::int64_t r : rows)
    if (r >= n) throw attn::Error(fmt::format("--rows: row {} is beyond the {} positions", r, n));
  tool.log("{}: {} layers of {}, heads fused by {}, residual {}; read and fused in {:.3f} s", o.method, fused.size(),
           attn::shape_str(first), o.heads, o.residual, clock.seconds());
  const attn::cli::Stopwatch compute;
  attn::Tensor out =
      o.method == "flow" ? attn::attention_flow(fused, padded, rows) : attn::attention_rollout(fused, padded);
  tool.log("{}: {:.3f} s", o.method, compute.seconds());
  tool.write_output(o.method, out, batched); // without the batch axis when the weights had none
}

} // namespace

int main(int argc, char** argv) {
  attn::cli::Tool tool("attn-rollout",
                       "Attention rollout and attention flow (Abnar and Zuidema 2020) over a run's per-layer weights.");
  Options o;
  auto& app = tool.app();
  app.add_option("run", o.run,
                 "A run's output with per-layer attention weights (encode or decode, see man attn-rollout)")
      ->type_name("FILE[:GROUP]")
      ->required();
  app.add_option("--method", o.method, "rollout (a product of the layers) or flow (maximum flows through them)")
      ->check(CLI::IsMember({"rollout", "flow"}))
      ->capture_default_str();
  app.add_option("--residual", o.residual, "R in (1 - R) A + R I, rows then renormalised (the residual connection)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--heads", o.heads, "How the heads are fused: mean, max or min")
      ->check(CLI::IsMember({"mean", "max", "min"}))
      ->capture_default_str();
  app.add_option("--rows", o.rows, "With --method flow: only these output positions (each costs n max flows)")
      ->type_name("I,J,...");
  return tool.run(argc, argv, [&] { run(o, tool); });
}
