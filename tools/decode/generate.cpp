// decode --generate: greedy, beam or sampled generation in batch chunks, the tokens gathered over
// MPI ranks.
#include "decode.hpp"

#include "attn/core/error.hpp"
#include "attn/core/mpi.hpp"
#include "attn/inputs/prompts.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/speculative.hpp"
#include "attn/text/text_stream.hpp"
#include "attn/text/token_files.hpp"
#include "attn/text/tokenizer.hpp"

#include <algorithm>
#include <memory>

namespace decode {

using attn::Shape;
using attn::Tensor;

namespace {

// How a generation of B items with a memory of length s (0 without one) runs: chunks of `chunk`
// items, this rank's items under MPI, and the rows of each step (a chunk's items times the beam;
// with drafted tokens, one item at a time).
struct Chunks {
  std::int64_t chunk;
  attn::mpi::Items mine;
  std::int64_t rows;
};

Chunks generation_chunks(const Options& o, std::int64_t B, std::int64_t s) {
  const std::int64_t chunk = attn::batch_chunk(std::max<std::int64_t>(s, 1) * o.beam, o.chunk);
  const attn::mpi::Items mine = attn::mpi::items(B, chunk); // all of them without MPI
  const bool drafted = o.lookup > 0 || !o.draft.empty();
  return {chunk, mine, drafted ? 1 : std::min(chunk, mine.count()) * o.beam};
}

// Each row's generated text, one line per row: its tokens up to the end token (which, like the
// padding after it, is not text). Written by one process.
void write_text(const std::string& target, const attn::text::Tokenizer& tok, const attn::GeneratedBatch& batch,
                const attn::GenerateOptions& g) {
  if (attn::mpi::rank() != 0) return;
  std::string text;
  const std::int64_t B = batch.tokens.dim(0), L = batch.tokens.dim(1);
  for (std::int64_t b = 0; b < B; ++b) {
    std::vector<std::int64_t> row;
    for (std::int64_t j = 0; j < L; ++j) {
      const std::int64_t t = batch.tokens.data()[b * L + j];
      if (g.ends(t)) break;
      row.push_back(t);
    }
    text += tok.decode(row, false);
    text += '\n';
  }
  attn::text::write_text_file(target, text);
}

// The activations (and the lens) of a generation: the final sequences through the decoder,
// teacher-forced, in chunks, with the probe's interventions and captures.
void final_activations(attn::cli::Tool& tool, const attn::DecoderModel& m, const attn::TokenEmbedding& emb,
                       const attn::Sequences& seq, const attn::h5::SequenceReader* mem, const attn::Mask& mem_mask,
                       attn::ProbeRun& probe, attn::LensRun* lens, attn::h5::OutputFile& file, bool batched,
                       std::int64_t chunk, const attn::mpi::Items& mine) {
  const std::int64_t B = seq.ids.dim(0), T = seq.ids.dim(1), s = mem ? mem->len() : 0;
  probe.set_length(T);
  probe.create_outputs(file, tool.out_type());
  if (lens) lens->create_outputs(file, tool.out_type(), B, T, batched);
  attn::Mask sm; // a chunk's causal mask with its lengths, which the lens reads
  attn::cli::for_each_chunk(tool, mine, chunk, [&](std::int64_t b0, std::int64_t n) {
    const Tensor memory = mem ? mem->read(b0, n) : Tensor();
    if (lens) lens->start_chunk(n, T, sm);
    attn::forward_sequences(m.dec, emb, seq, b0, n, mem ? memory.data() : nullptr, s, mem_mask, sm, probe.chunk(b0));
    if (lens) lens->finish_chunk(b0);
  });
}

// --draft's model: decoder-only, with a generator over the target's vocabulary; its float32 Linear
// weights in column tiles when the model's are (its steps are of one row).
attn::DecoderModel load_draft(attn::cli::Tool& tool, const std::string& spec, std::int64_t V, attn::LinearUse use) {
  attn::WeightGroup group = attn::WeightGroup::open(tool.inputs(), tool.input_ref(spec));
  group.set_linear_tiles(use.tiles, use.step_rows, use.steps);
  attn::DecoderModel d = attn::load_decoder_model(std::move(group), tool.ignore_unknown_weights());
  if (d.dec.has_cross)
    throw attn::Error(
        fmt::format("--draft {}: a draft model is decoder-only ({} has cross-attention)", spec, d.first_layer));
  if (!d.gen)
    throw attn::Error(fmt::format("--draft {}: missing dataset {} (the draft model's generator)", spec,
                                  d.group.object_path("generator/weight")));
  if (d.gen->vocab() != V)
    throw attn::Error(fmt::format("--draft {}: vocabulary {} differs from the model's {} ({})", spec, d.gen->vocab(), V,
                                  d.group.label("generator/weight")));
  return d;
}

} // namespace

// Before the model is read: whether cached generation's steps will read its Linear weights in
// column tiles (attn::steps_use_tiles), and the most rows a step has (a check of drafted tokens:
// 1 + the drafts' length), with the items and memory length generate() will find in the memory's or
// the prompts' shape. An input the run refuses later gives some answer here; the layout changes no
// bits.
attn::LinearUse steps_linear_use(const Options& o, attn::cli::Tool& tool,
                                 const std::optional<attn::h5::TensorRef>& memory_ref,
                                 const std::optional<attn::h5::TensorRef>& prompt_ref) {
  if (!o.generate || o.no_cache) return {};
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
  const std::int64_t rows = generation_chunks(o, B, s).rows;
  const std::int64_t drafted = o.lookup ? o.lookup : o.draft.empty() ? 0 : o.draft_tokens;
  return {attn::steps_use_tiles(rows, o.max_len), drafted ? 1 + drafted : rows, o.max_len};
}

// read_as: how the model's Linear weights were read (steps_linear_use).
void generate_tokens(const Options& o, attn::cli::Tool& tool, const attn::h5::SequenceReader* mem,
                     const attn::MaskFiles& mem_files, attn::DecoderModel& m, attn::LinearUse read_as) {
  const bool read_in_tiles = read_as.tiles;
  if (!m.gen)
    throw attn::Error(fmt::format("{}: missing dataset {} (the generator (V, E), needed for --generate)",
                                  m.group.file_label(), m.group.object_path("generator/weight")));
  const attn::TokenEmbedding emb = attn::target_embedding(m);
  const std::int64_t V = m.gen->vocab();
  if (emb.vocab() != V)
    throw attn::Error(fmt::format("{}: vocabulary {} differs from the generator's {} ({})", emb.label, emb.vocab(), V,
                                  m.group.label("generator/weight")));
  if (o.beam > V)
    throw attn::Error(fmt::format("--beam {} is larger than the vocabulary V = {} of {}", o.beam, V,
                                  m.group.label("generator/weight")));
  attn::GenerateOptions g;
  g.max_len = o.max_len, g.beam = o.beam, g.cache = !o.no_cache;
  g.kv_f16 = o.kv_cache == "f16" || (o.kv_cache == "auto" && attn::quantized_decoder(m.dec));
  g.bos = attn::special_id(m, o.bos, "--bos", m.bos_attr, std::nullopt);
  const std::vector<std::int64_t> eos = attn::special_ids(m, o.eos, "--eos", m.eos_attr);
  g.eos = eos.front();
  g.more_eos.assign(eos.begin() + 1, eos.end());
  g.pad = attn::special_id(m, o.pad, "--pad", m.pad_attr, 0);
  g.temperature = o.temperature, g.top_k = o.top_k, g.top_p = o.top_p, g.seed = tool.seed();
  g.forced_first = m.forced_bos, g.forced_last = m.forced_eos;

  // The tokenizer of --prompt-text and --text-out: --tokenizer, else the model directory's own.
  std::optional<attn::text::Tokenizer> tok;
  if (!o.prompt_text.empty() || !o.text_out.empty()) {
    const std::string path = attn::text::choose_tokenizer(o.tokenizer, o.weights);
    if (path.empty())
      throw attn::UsageError(fmt::format("{} needs --tokenizer T ({} is not a model directory with a tokenizer.json)",
                                         o.prompt_text.empty() ? "--text-out" : "--prompt-text", o.weights));
    tok = attn::text::Tokenizer::load(path);
  }
  // The prompts, each item's prefix (right-padded, with --prompt-lengths), instead of bos.
  std::optional<attn::Prompts> prompts;
  if (!o.prompt_text.empty()) {
    prompts = attn::prompts_from_text(*tok, o.prompt_text, V, "--prompt-text");
  } else if (!o.prompt.empty()) {
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
  // The probe: its interventions at every step; its activations (and the lens) from a teacher-forced
  // pass over the final sequences, as a teacher-forced run of them gives them.
  std::optional<attn::ProbeRun> probe;
  if (o.probe.any() || o.lens)
    probe.emplace(o.probe, attn::probe_model(m.dec, m.group.label("")), tool.inputs(), B, 0, s, batched,
                  tool.allow_nonfinite());
  std::optional<attn::LensRun> lens;
  if (o.lens) lens.emplace(*probe, m.dec, lens_generator(m), o.lens, m.group.label(""));
  if (probe && (probe->emits() || lens) && tool.output_arg().empty())
    throw attn::UsageError("--emit-activations and --lens write to -o FILE: give one");
  tool.log("generate: {} layers, E={}, V={}, {}, {}; {}; {} per chunk", m.dec.layers.size(), m.dec.embed_dim(), V,
           o.temperature > 0 ? fmt::format("sampling at temperature {:g}, top-k {}, top-p {:g}, seed {}", o.temperature,
                                           o.top_k, o.top_p, tool.seed())
                             : fmt::format("beam {}", o.beam),
           o.no_cache ? "no cache"
           : g.kv_f16 ? "cached (memory keys and values in float16)"
                      : "cached",
           mem ? fmt::format("memory b={} s={}", B, s) : fmt::format("decoder-only, b={}", B), chunk);

  // Tokens are small (b, max_len): kept until the end, when the longest row is known.
  attn::GeneratedBatch batch(B, o.max_len, g.pad);
  // One row to standard output: its text as it is generated.
  std::optional<attn::text::TextStream> stream;
  if (o.text_out == "-" && B == 1 && o.beam == 1) {
    stream.emplace(*tok, stdout);
    g.on_token = [&](std::int64_t, std::int64_t token) {
      if (!g.ends(token)) stream->push(token);
    };
  }
  // Drafted tokens (--lookup, --draft): items one at a time, each pass checking a draft.
  std::optional<attn::DecoderModel> draft_model;
  std::optional<attn::TokenEmbedding> draft_emb;
  std::unique_ptr<attn::Drafter> drafter;
  std::int64_t draft_tokens = o.lookup;
  if (o.lookup) drafter = std::make_unique<attn::LookupDrafter>();
  if (!o.draft.empty()) {
    draft_model = load_draft(tool, o.draft, V, read_as);
    draft_emb = attn::target_embedding(*draft_model);
    const std::int64_t longest = prompts ? prompts->ids.dim(1) : 1;
    drafter =
        std::make_unique<attn::ModelDrafter>(draft_model->dec, *draft_emb, *draft_model->gen, g, longest + o.max_len);
    draft_tokens = o.draft_tokens;
    tool.log("generate: draft model {} layers, E={}; {} tokens per pass", draft_model->dec.layers.size(),
             draft_model->dec.embed_dim(), draft_tokens);
  }
  attn::SpeculativeStats stats;
  const attn::cli::Stopwatch clock;
  if (!o.no_cache && attn::steps_use_tiles(rows, o.max_len)) {
    const int n = attn::tile_for_steps(m.dec, *m.gen, rows, o.max_len) +
                  (draft_model ? attn::tile_for_steps(draft_model->dec, *draft_model->gen, 1, o.max_len) : 0);
    if (attn::blas::f32_steps_in_place(rows, o.max_len))
      tool.log("generate: float32 weights read where the file maps them for steps of {} rows (others in column "
               "tiles: {} laid out now, {:.1f} ms)",
               rows, n, clock.seconds() * 1e3);
    else
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
    g.probe = probe && probe->changes() ? probe->chunk(b0, o.beam, false) : nullptr;
    const attn::Mask chunk_mask = attn::mask_items(mem_mask, b0, n, 1, 1);
    if (!drafter) {
      batch.add(b0, attn::generate(m.dec, emb, *m.gen, mem ? memory.data() : nullptr, n, s, chunk_mask, g));
      return;
    }
    attn::SpeculativeStats st;
    batch.add(b0, attn::generate_speculative(m.dec, emb, *m.gen, mem ? memory.data() : nullptr, n, s, chunk_mask, g,
                                             *drafter, draft_tokens, &st));
    stats.passes += st.passes, stats.drafted += st.drafted, stats.accepted += st.accepted, stats.tokens += st.tokens;
  });
  tool.log("generate: {:.4f} s", clock.seconds());
  if (drafter)
    tool.log("generate: {} tokens in {} passes ({:.2f} per pass); {} of {} drafted tokens kept", stats.tokens,
             stats.passes, stats.passes ? static_cast<double>(stats.tokens) / static_cast<double>(stats.passes) : 0.0,
             stats.accepted, stats.drafted);
  // Under MPI every rank gets every rank's rows, and the longest is over all of them.
  attn::mpi::share_items(batch.tokens.data(), o.max_len * static_cast<std::int64_t>(sizeof(std::int64_t)), B, chunk);
  attn::mpi::share_items(batch.scores.data(), static_cast<std::int64_t>(sizeof(float)), B, chunk);
  batch.longest = attn::mpi::max_over_ranks(batch.longest);
  if (stream)
    stream->finish();
  else if (!o.text_out.empty())
    write_text(o.text_out, *tok, batch, g);
  if (tool.output_arg().empty()) return;
  auto file = tool.open_output("tokens");
  file->write("tokens", batch.trimmed(), attn::h5::OutType::I64, batched);
  file->write("scores", batch.scores, tool.out_type(), batched); // a 2-D memory (or 1-D prompt): a scalar score
  if (probe && (probe->emits() || lens)) {
    if (prompts) {
      g.prompt = prompts->ids.data(), g.prompt_cols = prompts->ids.dim(1);
      g.prompt_lengths = prompts->lengths.data();
    }
    final_activations(tool, m, emb, attn::final_sequences(batch, g), mem, mem_mask, *probe, lens ? &*lens : nullptr,
                      *file, batched, chunk, mine);
  }
  file->commit();
}

} // namespace decode
