// decode: a Transformer decoder stack as nn.TransformerDecoder, teacher-forced or generating
// (CONTRACT.md sections 3 and 5).
#include "cli.hpp"

#include "attn/core/mpi.hpp"
#include "attn/inputs/prompts.hpp"
#include "attn/inputs/stack_input.hpp"
#include "attn/weights/embedding_weights.hpp"

#include "attn/core/error.hpp"
#include "attn/inputs/mask_files.hpp"
#include "attn/model/embedding.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/transformer.hpp"
#include "attn/weights/layouts/model_layouts.hpp"
#include "attn/weights/stack_weights.hpp"

#include <optional>

namespace {

using attn::Shape;
using attn::Tensor;

struct Options {
  std::string input, tokens, memory, weights;
  std::string lengths, key_padding, memory_lengths, memory_key_padding;
  bool no_pad_mask = false;
  bool no_causal = false, emit_weights = false;
  bool generate = false, no_cache = false;
  std::string kv_cache = "auto";
  std::int64_t max_len = 0, beam = 1, chunk = 0;
  std::optional<std::int64_t> bos, eos, pad;
  std::string prompt, prompt_lengths;
  double temperature = 0, top_p = 1.0;
  std::int64_t top_k = 0;
};

void check_flags(const Options& o, const attn::cli::Tool& tool) {
  if (o.generate) {
    tool.forbid("--generate", {"--input", "--tokens", "--lengths", "--key-padding-mask", "--no-pad-mask", "--no-causal",
                               "--emit-weights"});
    tool.require("--generate", {"--max-len"});
    if (o.temperature == 0) tool.forbid("greedy decoding (--temperature 0)", {"--top-k", "--top-p", "--seed"});
    if (o.temperature > 0 && o.beam > 1)
      throw attn::UsageError("--temperature samples one token per row: it does not combine with --beam");
    if (o.prompt.empty()) tool.forbid("generation without --prompt", {"--prompt-lengths"});
    if (o.no_cache) tool.forbid("--no-cache", {"--kv-cache"});
  } else {
    if (o.input.empty() == o.tokens.empty()) throw attn::UsageError("give exactly one of -i, --tokens and --generate");
    tool.forbid("teacher-forced decoding (no --generate)",
                {"--max-len", "--bos", "--eos", "--pad", "--beam", "--no-cache", "--kv-cache", "--prompt",
                 "--prompt-lengths", "--temperature", "--top-k", "--top-p", "--seed"});
  }
}

// The model: the decoder, and the target embeddings and generator when the file has them.
struct Model {
  attn::WeightGroup group;   // the --weights group (a sequence-to-sequence model, or a decoder)
  attn::WeightGroup decoder; // its decoder
  std::string first_layer;   // "model.h5:/decoder/layers/0", for messages
  attn::Decoder dec;
  std::optional<attn::Generator> gen;
  std::optional<attn::TokenEmbedding> embed; // read with the model (layouts by their own names)
  std::string bos_attr = "bos_id", eos_attr = "eos_id", pad_attr = "pad_id";
};

// `tiles`: the float32 Linear weights read in column tiles (WeightGroup::set_linear_tiles).
Model load_model(attn::cli::Tool& tool, const attn::h5::TensorRef& ref, bool tiles) {
  attn::WeightGroup g = attn::WeightGroup::open(tool.inputs(), ref);
  g.set_linear_tiles(tiles);
  if (const attn::Layout layout = attn::detect_layout(g); layout != attn::Layout::Toolkit) {
    attn::CausalLm lm = layout == attn::Layout::Llama ? attn::load_llama(g) : attn::load_gpt2(g);
    attn::check_all_weights_used(g, attn::layout_buffers(layout, lm.dec), tool.ignore_unknown_weights());
    const bool llama = layout == attn::Layout::Llama;
    attn::WeightGroup dg = g.child(llama ? "model" : "transformer");
    std::string first = g.label(llama ? "model/layers/0" : "transformer/h/0");
    return {std::move(g),        std::move(dg), std::move(first), std::move(lm.dec), std::move(lm.gen),
            std::move(lm.embed), lm.bos_attr,   lm.eos_attr,      lm.pad_attr};
  }
  attn::WeightGroup dg = attn::stack_group(g, "decoder");
  attn::Decoder dec = attn::load_decoder(dg);
  auto gen = attn::load_generator(g, dec.embed_dim());
  // a sequence-to-sequence file's other parts are known; the embeddings are read (or not) later
  attn::check_all_weights_used(g, attn::known_model_parts(g, {"encoder", "src_embed", "tgt_embed"}),
                               tool.ignore_unknown_weights());
  std::string first = dg.label("layers/0");
  return {std::move(g), std::move(dg), std::move(first), std::move(dec), std::move(gen), std::nullopt};
}

// The target embeddings: the model's own (moved out: a run embeds with them once), or tgt_embed.
attn::TokenEmbedding target_embedding(Model& m) {
  if (m.embed) return std::move(*m.embed);
  return attn::load_embedding(m.group, "tgt_embed", m.dec.embed_dim(), "decoder");
}

// The memory (b, s, Em), checked against the decoder's cross-attention and the target's batch.
attn::h5::SequenceReader open_memory(attn::cli::Tool& tool, const attn::h5::TensorRef& ref, const Model& m) {
  attn::h5::SequenceReader mem(tool.inputs().open(ref), tool.allow_nonfinite(), "memory");
  if (mem.features() != m.dec.memory_dim())
    throw attn::Error(fmt::format("{}: memory feature size {} differs from the decoder's {} (the key size of {})",
                                  mem.label(), mem.features(), m.dec.memory_dim(),
                                  m.decoder.label("layers/0/multihead_attn")));
  return mem;
}

// --- teacher-forced ------------------------------------------------------------------------------

void teacher_forced(const Options& o, attn::cli::Tool& tool, const attn::h5::TensorRef& target_ref,
                    const attn::h5::SequenceReader* mem, const attn::MaskFiles& self_files,
                    const attn::MaskFiles& mem_files, Model& m) {
  const attn::Decoder& dec = m.dec;
  const std::int64_t E = dec.embed_dim(), H = dec.heads(), s = mem ? mem->len() : 0;
  // The target: X (b, t, E), or token ids embedded by the model's tgt_embed.
  const attn::StackInput target =
      o.input.empty()
          ? attn::StackInput(tool.inputs().open(target_ref), "token ids (b, t) or (t,)", target_embedding(m))
          : attn::StackInput({tool.inputs().open(target_ref), tool.allow_nonfinite(), "target"});
  if (target.features() != E)
    throw attn::Error(fmt::format("{}: feature size {} differs from the decoder's E = {} ({})", target.label(),
                                  target.features(), E, m.first_layer + "/self_attn"));
  const std::int64_t B = target.items(), t = target.len();
  const bool batched = target.batched();
  if (mem && mem->items() != B)
    throw attn::Error(fmt::format("{}: batch {} differs from the target's batch {}", mem->label(), mem->items(), B));
  attn::Mask self_mask = attn::load_mask(tool.inputs(), self_files, B, H, t, t);
  if (!o.no_pad_mask && o.lengths.empty() && o.key_padding.empty())
    if (const auto pad = attn::mask_pad_tokens(self_mask, target, m.group))
      tool.log("padding: target token ids equal to pad_id {} ({})", *pad, m.group.attr_label("pad_id"));
  attn::Mask mem_mask;
  mem_mask.n = t, mem_mask.m = s;
  if (mem) mem_mask = attn::load_mask(tool.inputs(), mem_files, B, H, t, s);

  auto file = tool.open_output("output");
  const attn::h5::OutType type = tool.out_type();
  attn::h5::DatasetWriter out = file->create_items("output", {B, t, E}, type, batched);
  std::optional<attn::h5::DatasetWriter> logits_out;
  if (m.gen) logits_out = file->create_items("logits", {B, t, m.gen->vocab()}, type, batched);
  std::vector<attn::h5::DatasetWriter> self_w, cross_w;
  if (o.emit_weights)
    for (std::size_t l = 0; l < dec.layers.size(); ++l) {
      const attn::DecoderLayer& layer = dec.layers[l];
      self_w.push_back(file->create_items(fmt::format("weights/layer{}/self", l),
                                          {B, H, t, t + layer.self_attn.extra_keys()}, type, batched));
      if (dec.has_cross)
        cross_w.push_back(file->create_items(fmt::format("weights/layer{}/cross", l),
                                             {B, H, t, s + layer.cross_attn.extra_keys()}, type, batched));
    }

  const std::int64_t chunk = attn::batch_chunk(std::max(t, s), o.chunk);
  tool.log("decoder: {} layers, E={}, heads={}, F={}, {}; target b={} t={}, memory s={}; {} per chunk",
           dec.layers.size(), E, H, dec.ffn_dim(), dec.opt.norm_first ? "pre-norm" : "post-norm", B, t, s, chunk);
  const attn::mpi::Items mine = attn::mpi::items(B, chunk); // all of them without MPI
  const attn::cli::Stopwatch clock;
  double layers = 0; // the seconds in the layers, without reading, writing, the weights' writing and the logits
  attn::cli::for_each_chunk(tool, mine, chunk, [&](std::int64_t b0, std::int64_t n) {
    Tensor x = target.read(b0, n);
    const Tensor memory = mem ? mem->read(b0, n) : Tensor();
    const attn::Mask sm = attn::mask_items(self_mask, b0, n, 1, t), mm = attn::mask_items(mem_mask, b0, n, 1, t);
    attn::DecoderWeightsSink sink;
    if (o.emit_weights)
      sink = [&](std::size_t l, const Tensor& self, const Tensor& cross) {
        const attn::cli::Stopwatch writing;
        self_w[l].write_items(b0, n, self.data());
        if (dec.has_cross) cross_w[l].write_items(b0, n, cross.data());
        layers -= writing.seconds();
      };
    const attn::cli::Stopwatch forward;
    attn::decoder_forward(dec, x.data(), n, t, mem ? memory.data() : nullptr, s, sm, mm, sink);
    layers += forward.seconds();
    out.write_items(b0, n, x.data());
    if (m.gen) {
      const std::int64_t V = m.gen->vocab();
      Tensor logits(Shape{n, t, V}, attn::Uninitialized{});
      attn::generator_logits(logits.data(), x.data(), *m.gen, n * t);
      attn::zero_padding(logits.data(), n, t, V, sm);
      logits_out->write_items(b0, n, logits.data());
    }
  });
  tool.log("decoder: {:.4f} s, {:.0f} target tokens/s (the layers; {:.4f} s with reading, writing{})", layers,
           layers > 0 ? static_cast<double>(mine.count() * t) / layers : 0.0, clock.seconds(),
           m.gen ? " and the logits" : "");
  file->commit();
}

// --- generation ----------------------------------------------------------------------------------

// How a generation of B items with a memory of length s (0 without one) runs: chunks of `chunk`
// items, this rank's items under MPI, and the rows of each step (a chunk's items times the beam).
struct Chunks {
  std::int64_t chunk;
  attn::mpi::Items mine;
  std::int64_t rows;
};

Chunks generation_chunks(const Options& o, std::int64_t B, std::int64_t s) {
  const std::int64_t chunk = attn::batch_chunk(std::max<std::int64_t>(s, 1) * o.beam, o.chunk);
  const attn::mpi::Items mine = attn::mpi::items(B, chunk); // all of them without MPI
  return {chunk, mine, std::min(chunk, mine.count()) * o.beam};
}

// Before the model is read: whether cached generation's steps will read its Linear weights in
// column tiles (attn::steps_use_tiles), with the items and memory length generate() will find in
// the memory's or the prompts' shape. An input the run refuses later gives some answer here; the
// layout changes no bits.
bool steps_read_tiles(const Options& o, attn::cli::Tool& tool, const std::optional<attn::h5::TensorRef>& memory_ref,
                      const std::optional<attn::h5::TensorRef>& prompt_ref) {
  if (!o.generate || o.no_cache) return false;
  std::int64_t B = 1, s = 0;
  try {
    if (memory_ref) {
      const Shape shape = tool.inputs().open(*memory_ref).shape();
      if (shape.size() == 3) B = shape[0], s = shape[1];
      if (shape.size() == 2) s = shape[0];
    } else if (prompt_ref) {
      const Shape shape = tool.inputs().open(*prompt_ref).shape();
      if (shape.size() == 2) B = shape[0];
    }
  } catch (const attn::Error&) { // reported where the input is read
  }
  return attn::steps_use_tiles(generation_chunks(o, B, s).rows, o.max_len);
}

// A special token id from its flag or else the model's attribute (nearest ancestor), in 0..V-1.
std::int64_t special_id(const std::optional<std::int64_t>& flag, const char* flag_name, const char* attr,
                        const Model& m, std::optional<std::int64_t> fallback) {
  std::int64_t id;
  std::string source;
  if (flag) {
    id = *flag, source = fmt::format("{} {}", flag_name, id);
  } else if (auto a = m.group.attr_int(attr)) {
    id = *a, source = fmt::format("{} = {}", m.group.attr_label(attr), id);
  } else if (fallback) {
    id = *fallback, source = fmt::format("the default {} {}", attr, id);
  } else {
    throw attn::Error(
        fmt::format("{}: no {} attribute on the group or an ancestor; give {}", m.group.label(), attr, flag_name));
  }
  const std::int64_t V = m.gen->vocab();
  if (id < 0 || id >= V)
    throw attn::Error(
        fmt::format("{} is outside the vocabulary 0..{} of {}", source, V - 1, m.group.label("generator/weight")));
  return id;
}

// read_in_tiles: the model's float32 Linear weights were read in column tiles (steps_read_tiles).
void generate(const Options& o, attn::cli::Tool& tool, const attn::h5::SequenceReader* mem,
              const attn::MaskFiles& mem_files, Model& m, bool read_in_tiles) {
  if (!m.gen)
    throw attn::Error(fmt::format("{}: missing dataset {} (the generator (V, E), needed for --generate)",
                                  m.group.file_label(), m.group.object_path("generator/weight")));
  const attn::TokenEmbedding emb = target_embedding(m);
  const std::int64_t V = m.gen->vocab();
  if (emb.table.dim(0) != V)
    throw attn::Error(fmt::format("{}: vocabulary {} differs from the generator's {} ({})", emb.label, emb.table.dim(0),
                                  V, m.group.label("generator/weight")));
  if (o.beam > V)
    throw attn::Error(fmt::format("--beam {} is larger than the vocabulary V = {} of {}", o.beam, V,
                                  m.group.label("generator/weight")));
  attn::GenerateOptions g;
  g.max_len = o.max_len, g.beam = o.beam, g.cache = !o.no_cache;
  g.kv_f16 = o.kv_cache == "f16" || (o.kv_cache == "auto" && attn::quantized_decoder(m.dec));
  g.bos = special_id(o.bos, "--bos", m.bos_attr.c_str(), m, std::nullopt);
  g.eos = special_id(o.eos, "--eos", m.eos_attr.c_str(), m, std::nullopt);
  g.pad = special_id(o.pad, "--pad", m.pad_attr.c_str(), m, 0);
  g.temperature = o.temperature, g.top_k = o.top_k, g.top_p = o.top_p, g.seed = tool.seed();

  // The prompts, each item's prefix (right-padded, with --prompt-lengths), instead of bos.
  std::optional<attn::Prompts> prompts;
  if (!o.prompt.empty()) {
    const attn::h5::Dataset ids = tool.open_input(o.prompt);
    std::optional<attn::h5::Dataset> lengths;
    if (!o.prompt_lengths.empty()) lengths = tool.open_input(o.prompt_lengths);
    prompts = attn::load_prompts(ids, lengths ? &*lengths : nullptr, V);
  }
  // Items: the memory's, or (a decoder-only model) the prompts', or one
  const std::int64_t B = mem ? mem->items() : prompts ? prompts->items() : 1, s = mem ? mem->len() : 0;
  if (mem && prompts && prompts->items() != B)
    throw attn::Error(
        fmt::format("{}: {} prompts for a memory of batch {} ({})", o.prompt, prompts->items(), B, mem->label()));
  const bool batched = mem ? mem->batched() : prompts ? prompts->batched : false;
  attn::Mask mem_mask;
  mem_mask.n = 1, mem_mask.m = s;
  if (mem) mem_mask = attn::load_mask(tool.inputs(), mem_files, B, m.dec.heads(), 1, s);
  const auto [chunk, mine, rows] = generation_chunks(o, B, s);
  tool.log("generate: {} layers, E={}, V={}, {}, {}; {}; {} per chunk", m.dec.layers.size(), m.dec.embed_dim(), V,
           o.temperature > 0 ? fmt::format("sampling at temperature {:g}, top-k {}, top-p {:g}, seed {}", o.temperature,
                                           o.top_k, o.top_p, tool.seed())
                             : fmt::format("beam {}", o.beam),
           o.no_cache ? "no cache"
           : g.kv_f16 ? "cached (memory keys and values in float16)"
                      : "cached",
           mem ? fmt::format("memory b={} s={}", B, s) : fmt::format("decoder-only, b={}", B), chunk);

  // Tokens are small (b, max_len): kept until the end, when L, the longest row, is known.
  attn::TensorI tokens(Shape{B, o.max_len});
  Tensor scores(Shape{B});
  std::int64_t L = 1;
  const attn::cli::Stopwatch clock;
  if (!o.no_cache && attn::steps_use_tiles(rows, o.max_len)) {
    const int n = attn::tile_for_steps(m.dec, *m.gen, rows, o.max_len);
    tool.log("generate: float32 weights in column tiles for steps of {} rows ({}{} laid out now, {:.1f} ms)", rows,
             read_in_tiles ? "read so; " : "", n, clock.seconds() * 1e3);
  }
  attn::cli::for_each_chunk(tool, mine, chunk, [&](std::int64_t b0, std::int64_t n) {
    const Tensor memory = mem ? mem->read(b0, n) : Tensor();
    g.first_item = b0;
    if (prompts) {
      g.prompt = prompts->ids.data() + b0 * prompts->ids.dim(1), g.prompt_cols = prompts->ids.dim(1);
      g.prompt_lengths = prompts->lengths.data() + b0;
    }
    const attn::Generated r = attn::generate(m.dec, emb, *m.gen, mem ? memory.data() : nullptr, n, s,
                                             attn::mask_items(mem_mask, b0, n, 1, 1), g);
    const std::int64_t l = r.tokens.dim(1);
    L = std::max(L, l);
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t j = 0; j < o.max_len; ++j)
        tokens[(b0 + b) * o.max_len + j] = j < l ? r.tokens[b * l + j] : g.pad;
      scores[b0 + b] = static_cast<float>(r.scores[static_cast<std::size_t>(b)]);
    }
  });
  tool.log("generate: {:.4f} s", clock.seconds());
  // Under MPI every rank gets every rank's rows, and L is the longest over all of them.
  attn::mpi::share_items(tokens.data(), o.max_len * static_cast<std::int64_t>(sizeof(std::int64_t)), B, chunk);
  attn::mpi::share_items(scores.data(), static_cast<std::int64_t>(sizeof(float)), B, chunk);
  L = attn::mpi::max_over_ranks(L);
  attn::TensorI out(Shape{B, L});
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < L; ++j) out[b * L + j] = tokens[b * o.max_len + j];
  auto file = tool.open_output("tokens");
  file->write("tokens", out, attn::h5::OutType::I64, batched);
  file->write("scores", scores, tool.out_type(), batched); // a 2-D memory (or 1-D prompt): a scalar score
  file->commit();
}

void run(const Options& o, attn::cli::Tool& tool) {
  check_flags(o, tool);
  tool.preflight_inputs({o.input, o.tokens, o.memory, o.weights, o.lengths, o.key_padding, o.memory_lengths,
                         o.memory_key_padding, o.prompt, o.prompt_lengths});
  std::optional<attn::h5::TensorRef> target_ref, memory_ref;
  if (!o.generate) target_ref = tool.input_ref(o.input.empty() ? o.tokens : o.input);
  if (!o.memory.empty()) memory_ref = tool.input_ref(o.memory);
  const attn::h5::TensorRef weights_ref = tool.input_ref(o.weights);
  const attn::MaskFiles self_files = tool.mask_inputs(!o.no_causal, o.key_padding, o.lengths, "", "t");
  const attn::MaskFiles mem_files = tool.mask_inputs(false, o.memory_key_padding, o.memory_lengths, "", "s");
  std::optional<attn::h5::TensorRef> prompt_ref;
  if (!o.prompt.empty()) prompt_ref = tool.input_ref(o.prompt);
  if (!o.prompt_lengths.empty()) tool.input_ref(o.prompt_lengths);
  tool.check_outputs();

  const bool tiles = steps_read_tiles(o, tool, memory_ref, prompt_ref);
  Model m = load_model(tool, weights_ref, tiles);
  // The memory: needed by a decoder with cross-attention, meaningless to a decoder-only one.
  std::optional<attn::h5::SequenceReader> mem;
  if (m.dec.has_cross) {
    if (!memory_ref)
      throw attn::UsageError(
          fmt::format("--memory is required: {} has cross-attention (multihead_attn)", m.first_layer));
    mem = open_memory(tool, *memory_ref, m);
  } else {
    tool.forbid(fmt::format("a decoder-only model ({} has no cross-attention)", m.first_layer),
                {"--memory", "--memory-lengths", "--memory-key-padding-mask"});
  }
  if (o.generate) {
    generate(o, tool, mem ? &*mem : nullptr, mem_files, m, tiles);
  } else {
    teacher_forced(o, tool, *target_ref, mem ? &*mem : nullptr, self_files, mem_files, m);
  }
}

} // namespace

int main(int argc, char** argv) {
  attn::cli::Tool tool("decode", "A Transformer decoder stack (nn.TransformerDecoder), teacher-forced or generating.");
  tool.split_batch_over_ranks();
  Options o;
  auto& app = tool.app();
  app.add_option("-i,--input", o.input, "Target (b, t, E) or (t, E)")->type_name("TGT");
  app.add_option("--tokens", o.tokens, "Target token ids (b, t), embedded by the model's tgt_embed")->type_name("IDS");
  app.add_option("--memory", o.memory,
                 "Memory (b, s, Em) or (s, Em), e.g. encode's output (a decoder-only model has none)")
      ->type_name("MEM");
  app.add_option("--weights", o.weights, "Decoder or sequence-to-sequence weights (CONTRACT.md section 3)")
      ->type_name("FILE[:GROUP]")
      ->required();
  tool.add_padding_options(o.key_padding, o.lengths, "", "t", "target");
  app.add_flag("--no-pad-mask", o.no_pad_mask,
               "With --tokens: target tokens equal to the file's pad_id are not padding (by default they are)");
  tool.add_padding_options(o.memory_key_padding, o.memory_lengths, "memory-", "s", "memory");
  app.add_flag("--no-causal", o.no_causal, "Let every target position see every other");
  app.add_flag("--emit-weights", o.emit_weights, "Also write /weights/layer{i}/self and /weights/layer{i}/cross");
  app.add_flag("--generate", o.generate, "Decode autoregressively from --memory; writes /tokens and /scores");
  app.add_option("--max-len", o.max_len, "Generated tokens at most, end token included")->check(attn::cli::positive());
  app.add_option("--bos", o.bos, "Start token id (default: the file's bos_id)");
  app.add_option("--eos", o.eos, "End token id (default: the file's eos_id)");
  app.add_option("--pad", o.pad, "Padding id after the end token (default: the file's pad_id, else 0)");
  app.add_option("--beam", o.beam, "Beam search with K beams (1: greedy)")
      ->check(attn::cli::positive())
      ->capture_default_str();
  app.add_flag("--no-cache", o.no_cache, "Recompute the whole prefix at every step instead of the key/value cache");
  app.add_option("--kv-cache", o.kv_cache,
                 "The memory's cached keys and values for the steps: f32, f16 (half the bytes a step reads), or "
                 "auto: f16 with quantized weights, else f32")
      ->check(CLI::IsMember({"auto", "f32", "f16"}))
      ->capture_default_str();
  app.add_option("--prompt", o.prompt, "Prompt token ids (b, p) or (p,), fed before generating (instead of bos)")
      ->type_name("IDS");
  app.add_option("--prompt-lengths", o.prompt_lengths, "(b,) prompt lengths: right-padded prompts of unequal length")
      ->type_name("LENGTHS");
  app.add_option("--temperature", o.temperature, "Sample from softmax(logits / T) (0: greedy)")
      ->check(attn::cli::non_negative())
      ->capture_default_str();
  app.add_option("--top-k", o.top_k, "Sample from the K most likely tokens only")->check(attn::cli::positive());
  app.add_option("--top-p", o.top_p, "Sample from the smallest set of most likely tokens reaching probability P")
      ->check(CLI::Range(0.0, 1.0).description("in (0, 1]"))
      ->check(attn::cli::positive())
      ->capture_default_str();
  tool.add_seed();
  app.add_option("--chunk", o.chunk, "Sequences per batch chunk (default: about 4096 tokens' worth)")
      ->check(attn::cli::positive());
  tool.add_dtype();
  tool.add_allow_nonfinite();
  tool.add_ignore_unknown_weights();
  return tool.run(argc, argv, [&] { run(o, tool); });
}
