// encode: a Transformer encoder stack as nn.TransformerEncoder (CONTRACT.md sections 3 and 5).
#include "encode.hpp"

#include "attn/core/mpi.hpp"
#include "attn/hf/image_processor.hpp"
#include "attn/inputs/stack_input.hpp"
#include "attn/text/token_files.hpp"
#include "attn/text/tokenizer.hpp"
#include "attn/view/pixel_values.hpp"
#include "attn/weights/embedding_weights.hpp"
#include "attn/weights/models.hpp"

#include "attn/core/error.hpp"
#include "attn/inputs/mask_files.hpp"
#include "attn/model/embedding.hpp"
#include "attn/model/transformer.hpp"
#include "attn/weights/stack_weights.hpp"

#include <filesystem>
#include <optional>

namespace encode {
namespace {

using attn::Shape;
using attn::Tensor;

// --image: the PNG files as pixel_values, by --image-processor, else the model directory's
// preprocessor_config.json, else ViTImageProcessor's defaults at the model's image size.
attn::StackInput image_input(const Options& o, attn::cli::Tool& tool, const attn::PatchEmbedding& patches) {
  attn::hf::ImageProcessor proc;
  const std::string dir_config = (std::filesystem::path(o.weights) / "preprocessor_config.json").string();
  std::error_code ec;
  if (!o.image_processor.empty()) {
    proc = attn::hf::read_image_processor(o.image_processor);
  } else if (std::filesystem::is_directory(o.weights, ec) && std::filesystem::exists(dir_config, ec)) {
    proc = attn::hf::read_image_processor(dir_config);
  } else {
    proc.height = patches.grid_h * patches.patch, proc.width = patches.grid_w * patches.patch;
    proc.source = "ViTImageProcessor's defaults";
  }
  tool.log("images: {} ({}resize to {} x {}, rescale, normalize)", proc.source, proc.resize ? "" : "no ", proc.height,
           proc.width);
  std::vector<attn::RgbImage> images;
  for (const std::string& path : o.images) images.push_back(attn::read_png_rgb(path));
  std::int64_t H, W;
  attn::pixel_size(images[0], proc, H, W);
  for (std::size_t i = 1; i < images.size(); ++i) {
    std::int64_t h, w;
    attn::pixel_size(images[i], proc, h, w);
    if (h != H || w != W)
      throw attn::Error(
          fmt::format("{}: {} x {} pixels (width x height), but {} is {} x {} (without do_resize ({}) the "
                      "images of one run must have one size)",
                      o.images[i], w, h, o.images[0], W, H, proc.source));
  }
  const auto b = static_cast<std::int64_t>(images.size());
  Tensor pixels(Shape{b, 3, H, W}, attn::Uninitialized{});
  for (std::int64_t i = 0; i < b; ++i)
    attn::pixel_values(pixels.data() + i * 3 * H * W, images[static_cast<std::size_t>(i)], proc);
  return attn::StackInput(std::move(pixels), o.images.size() == 1 ? o.images[0] : "--image", patches);
}

// The input: X, or token ids embedded by the model's src_embed (CONTRACT.md section 3), or by the
// embeddings a layout by its own names brings (`embed`: BERT's, with token types), or images cut
// into a ViT's patches.
attn::StackInput open_input(const Options& o, attn::cli::Tool& tool, const attn::h5::TensorRef& ref,
                            const std::optional<attn::WeightGroup>& model, const attn::Encoder& enc,
                            std::optional<attn::TokenEmbedding>&& embed,
                            const std::optional<attn::PatchEmbedding>& st_patches) {
  if (!o.input.empty()) return attn::StackInput({tool.inputs().open(ref), tool.allow_nonfinite(), "inputs"});
  if (!o.pixels.empty()) return attn::StackInput(tool.inputs().open(ref), *st_patches, tool.allow_nonfinite());
  if (!o.images.empty()) return image_input(o, tool, *st_patches);
  attn::StackInput in(tool.inputs().open(ref), "token ids (b, n) or (n,)",
                      embed ? std::move(*embed)
                            : attn::load_embedding(*model, "src_embed", enc.embed_dim(), "encoder"));
  if (!o.token_types.empty()) in.set_token_types(tool.open_input(o.token_types));
  return in;
}

// --token-types applies to token ids and a model with type embeddings (BERT's).
void check_token_types(const Options& o, const std::optional<attn::WeightGroup>& model,
                       const std::optional<attn::TokenEmbedding>& embed,
                       const std::optional<attn::h5::TensorRef>& weights_ref) {
  if (o.token_types.empty()) return;
  if (!o.input.empty()) throw attn::UsageError("--token-types applies to --tokens, not to -i's features");
  if (!model) throw attn::UsageError("--token-types needs --weights of a model with token type embeddings (BERT's)");
  if (!(embed && embed->type_table.size()))
    throw attn::Error(
        fmt::format("{}: the model has no token type embeddings (BERT's) for --token-types", weights_ref->str()));
}

// The stack over the input in batch chunks: /output, and /weights/layer{i} with --emit-weights;
// a ViT's /pooled (b, E) and /logits (b, labels) when it has those heads; committed.
void encode_chunks(const Options& o, attn::cli::Tool& tool, const attn::Encoder& enc, const attn::StackInput& input,
                   const attn::Mask& mask, attn::ProbeRun* probe, const attn::VisionHead& head) {
  const std::int64_t b = input.items(), n = input.len(), E = enc.embed_dim(), H = enc.heads();
  auto file = tool.open_output("output");
  attn::h5::DatasetWriter out = file->create_items("output", {b, n, E}, tool.out_type(), input.batched());
  if (probe) probe->create_outputs(*file, tool.out_type());
  std::vector<attn::h5::DatasetWriter> weights_out;
  if (o.emit_weights)
    for (std::size_t l = 0; l < enc.layers.size(); ++l)
      weights_out.push_back(file->create_items(fmt::format("weights/layer{}", l),
                                               {b, H, n, n + enc.layers[l].self_attn.extra_keys()}, tool.out_type(),
                                               input.batched()));
  std::optional<attn::h5::DatasetWriter> pooled_out, logits_out;
  if (head.pooler.size()) pooled_out = file->create_items("pooled", {b, E}, tool.out_type(), input.batched());
  const std::int64_t labels = head.classifier.size() ? head.classifier.dim(0) : 0;
  if (labels) logits_out = file->create_items("logits", {b, labels}, tool.out_type(), input.batched());
  std::int64_t chunk = attn::batch_chunk(n, o.chunk);
  if (probe && !o.chunk) chunk = probe->chunk_items(chunk);
  tool.log("encoder: {} layers, E={}, heads={}, F={}, {}, {}; input b={} n={}; {} per chunk", enc.layers.size(), E, H,
           enc.ffn_dim(), enc.opt.norm_first ? "pre-norm" : "post-norm", attn::activation_name(enc.opt.activation), b,
           n, chunk);
  const attn::mpi::Items mine = attn::mpi::items(b, chunk); // all of them without MPI
  const attn::cli::Stopwatch clock;
  double layers = 0; // the seconds in the layers, without reading, writing and the weights' writing
  attn::cli::for_each_chunk(tool, mine, chunk, [&](std::int64_t b0, std::int64_t count) {
    Tensor x = input.read(b0, count);
    attn::LayerWeightsSink sink;
    if (o.emit_weights)
      sink = [&](std::size_t layer, const Tensor& w) {
        const attn::cli::Stopwatch writing;
        weights_out[layer].write_items(b0, count, w.data());
        layers -= writing.seconds();
      };
    const attn::cli::Stopwatch forward;
    const double written = probe ? probe->write_seconds() : 0; // the activations' writing is not the layers'
    attn::encoder_forward(enc, x.data(), count, n, attn::mask_items(mask, b0, count, 1, n), sink,
                          probe ? probe->chunk(b0) : nullptr);
    layers += forward.seconds() - (probe ? probe->write_seconds() - written : 0);
    out.write_items(b0, count, x.data());
    if (pooled_out) {
      Tensor pooled(Shape{count, E}, attn::Uninitialized{});
      attn::vision_pooled(pooled.data(), x.data(), count, n, head);
      pooled_out->write_items(b0, count, pooled.data());
    }
    if (logits_out) {
      Tensor logits(Shape{count, labels}, attn::Uninitialized{});
      attn::vision_logits(logits.data(), x.data(), count, n, head);
      logits_out->write_items(b0, count, logits.data());
    }
  });
  tool.log("encoder: {:.4f} s, {:.0f} tokens/s (the layers; {:.4f} s with reading and writing)", layers,
           layers > 0 ? static_cast<double>(mine.count() * n) / layers : 0.0, clock.seconds());
  file->commit();
}

// --text: the texts tokenized (with the model's special tokens) into an HDF5 image read as
// "--text:ids" and "--text:lengths", as if a tokenize output were given with --tokens and --lengths.
Options tokenize_text(Options o, attn::cli::Tool& tool) {
  const std::string path = attn::text::choose_tokenizer(o.tokenizer, o.weights);
  if (path.empty())
    throw attn::UsageError(
        fmt::format("--text needs --tokenizer T ({} is not a model directory with a tokenizer.json)", o.weights));
  const attn::text::Tokenizer tok = attn::text::Tokenizer::load(path);
  const std::vector<std::string_view> texts(o.text.begin(), o.text.end());
  const auto rows = attn::text::encode_all(tok, texts, true, "--text", tool.threads());
  tool.inputs().add_image("--text", attn::text::token_file_image(tok, rows));
  o.tokens = "--text:ids", o.lengths = "--text:lengths";
  return o;
}

void run(const Options& options, attn::cli::Tool& tool) {
  check_flags(options, tool);
  const Options o = options.text.empty() ? options : tokenize_text(options, tool);
  std::vector<std::string> inputs{o.input,   o.tokens,         o.weights,     o.key_padding,
                                  o.lengths, o.attention_mask, o.token_types, o.pixels};
  for (const std::string& arg : o.probe.input_args()) inputs.push_back(tool.input_ref(arg).path);
  tool.preflight_inputs(inputs);
  // the input's file (--image's PNG files are read by image_input; the weights stand in for them)
  const std::string input_arg = !o.input.empty()    ? o.input
                                : !o.pixels.empty() ? o.pixels
                                : !o.images.empty() ? o.weights
                                                    : o.tokens;
  const attn::h5::TensorRef input_ref = tool.input_ref(input_arg);
  attn::MaskFiles files = tool.mask_inputs(o.causal, o.key_padding, o.lengths, "", "n");
  if (!o.attention_mask.empty()) { // BERT users' polarity: 1 = attend
    files.key_padding = tool.input_ref(o.attention_mask);
    files.keep_polarity = true;
  }
  std::optional<attn::h5::TensorRef> weights_ref;
  if (!o.weights.empty()) weights_ref = tool.input_ref(o.weights);
  tool.check_outputs({o.save_weights});

  Stack st = open_stack(o, tool, weights_ref);
  const attn::Encoder& enc = st.enc;
  check_token_types(o, st.model, st.embed, weights_ref);
  const attn::StackInput input = open_input(o, tool, input_ref, st.model, enc, std::move(st.embed), st.patches);
  const std::int64_t b = input.items(), n = input.len(), E = enc.embed_dim(), H = enc.heads();
  if (input.features() != E)
    throw attn::Error(
        fmt::format("{}: feature size {} differs from {} = {}", o.input, input.features(), st.e_source, E));
  attn::Mask mask = attn::load_mask(tool.inputs(), files, b, H, n, n);
  if (st.model && !o.no_pad_mask && o.lengths.empty() && o.key_padding.empty())
    if (const auto pad = attn::mask_pad_tokens(mask, input, *st.model))
      tool.log("padding: token ids equal to pad_id {} ({})", *pad, st.model->attr_label("pad_id"));

  std::unique_ptr<attn::h5::OutputFile> weights_file;
  if (!o.save_weights.empty()) {
    const char* q = enc.layers[0].self_attn.packed() ? "in_proj_weight" : "q_proj_weight";
    weights_file = tool.open_group_output(o.save_weights, std::string("layers/0/self_attn/") + q);
    attn::save_encoder(attn::WeightWriter(*weights_file), enc);
  }

  std::optional<attn::ProbeRun> probe;
  if (o.probe.any())
    probe.emplace(o.probe, attn::probe_model(enc, weights_ref ? weights_ref->str() : "the --init stack"), tool.inputs(),
                  b, n, 0, input.batched(), tool.allow_nonfinite());
  encode_chunks(o, tool, enc, input, mask, probe ? &*probe : nullptr, st.head);
  if (weights_file) weights_file->commit();
}

} // namespace
} // namespace encode

int main(int argc, char** argv) {
  using encode::Options;
  attn::cli::Tool tool("encode", "A Transformer encoder stack (nn.TransformerEncoder).");
  tool.split_batch_over_ranks();
  Options o;
  auto& app = tool.app();
  app.add_option("-i,--input", o.input, "Input (b, n, E) or (n, E)")->type_name("X");
  app.add_option("--tokens", o.tokens, "Token ids (b, n), embedded by the model's src_embed and positional encoding")
      ->type_name("IDS");
  app.add_option("--pixels", o.pixels,
                 "Images (b, channels, height, width) as pixel_values, cut into a Vision Transformer's patches")
      ->type_name("X");
  app.add_option("--image", o.images,
                 "A PNG image (repeatable: one item each), made pixel_values by the model's image processor")
      ->type_name("PNG")
      ->allow_extra_args(false);
  app.add_option("--image-processor", o.image_processor,
                 "preprocessor_config.json for --image (default: the model directory's, else ViTImageProcessor's)")
      ->type_name("JSON");
  app.add_option("--weights", o.weights,
                 "Encoder weights (CONTRACT.md section 3), or a Hugging Face model directory (section 6.1)")
      ->type_name("FILE[:GROUP]|DIR[:PREFIX]");
  app.add_option("--init", o.init, "Initialise the weights instead, as PyTorch does (xavier)")
      ->check(CLI::IsMember({"xavier"}));
  app.add_option("--layers", o.layers, "Layers, with --init")->check(attn::cli::positive());
  app.add_option("--embed-dim", o.embed_dim, "E, with --init")->check(attn::cli::positive());
  app.add_option("--heads", o.heads, "H, with --init")->check(attn::cli::positive());
  app.add_option("--ffn-dim", o.ffn_dim, "F, the feed-forward size, with --init")->check(attn::cli::positive());
  app.add_flag("--norm-first", o.norm_first, "Pre-norm layers, with --init");
  app.add_flag("--final-norm", o.final_norm, "A final LayerNorm after the stack, with --init");
  app.add_option(
         "--activation", o.activation,
         "relu, gelu (erf), gelu_tanh, silu, or gated: glu, geglu, geglu_tanh, swiglu (with linear_gate), with --init")
      ->check(CLI::IsMember({"relu", "gelu", "gelu_tanh", "silu", "glu", "geglu", "geglu_tanh", "swiglu"}));
  app.add_option("--norm", o.norm, "layer_norm or rms_norm, with --init")
      ->check(CLI::IsMember({"layer_norm", "rms_norm"}));
  app.add_option("--kv-heads", o.kv_heads, "G key/value heads dividing H (grouped-query attention), with --init")
      ->check(attn::cli::positive());
  app.add_option("--rope", o.rope, "Rotary positions on q and k in every layer: half or interleaved, with --init")
      ->check(CLI::IsMember({"half", "interleaved"}));
  app.add_option("--rope-base", o.rope_base, "Base (theta) of the rotary angles, with --init")
      ->check(attn::cli::positive())
      ->capture_default_str();
  app.add_option("--rotary-dim", o.rotary_dim, "Rotated elements of each head (default: all), with --init")
      ->check(attn::cli::positive());
  app.add_flag("--alibi", o.alibi, "ALiBi biases on the scores in every layer, with --init");
  app.add_flag("--parallel-residual", o.parallel_residual,
               "x + SelfAttn(LN1(x)) + FFN(LN2(x)) in every layer (GPT-NeoX), with --init --norm-first");
  app.add_option("--sliding-window", o.sliding_window,
                 "Self-attention sees the W nearest positions (|i - j| < W), with --init")
      ->check(attn::cli::positive());
  app.add_option("--ffn-conv", o.ffn_conv,
                 "A depthwise convolution of K taps (odd) over the sequence before the feed-forward's activation, "
                 "with --init")
      ->check(attn::cli::positive());
  app.add_option("--save-weights", o.save_weights, "Write the weights used, for --weights")->type_name("FILE[:GROUP]");
  app.add_flag("--causal", o.causal, "Position i sees positions j <= i (decoder-only use)");
  tool.add_padding_options(o.key_padding, o.lengths, "", "n", "sequence");
  app.add_option("--attention-mask", o.attention_mask,
                 "(b, n) bool/int, nonzero = attend (BERT users' attention_mask; the opposite of --key-padding-mask)")
      ->type_name("MASK")
      ->excludes("--key-padding-mask")
      ->excludes("--lengths");
  app.add_option("--text", o.text, "A sequence as text (repeatable: one row each), tokenized by --tokenizer")
      ->type_name("TEXT")
      ->allow_extra_args(false);
  app.add_option("--tokenizer", o.tokenizer, "The tokenizer.json of --text (default: the model directory's own)")
      ->type_name("T");
  app.add_option("--token-types", o.token_types, "(b, n) token type (segment) ids, with --tokens and a BERT model")
      ->type_name("IDS");
  app.add_flag("--no-pad-mask", o.no_pad_mask,
               "With --tokens: tokens equal to the file's pad_id are not padding (by default they are)");
  app.add_flag("--emit-weights", o.emit_weights, "Also write /weights/layer{i} (b, H, n, n)");
  tool.add_probe_options(o.probe, false);
  app.add_option("--chunk", o.chunk, "Sequences per batch chunk (default: about 4096 tokens' worth)")
      ->check(attn::cli::positive());
  tool.add_seed();
  tool.add_dtype();
  tool.add_allow_nonfinite();
  tool.add_matmul_precision();
  tool.add_ignore_unknown_weights();
  return tool.run(argc, argv, [&] { encode::run(o, tool); });
}
