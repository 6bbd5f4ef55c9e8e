// decode: a Transformer decoder stack as nn.TransformerDecoder, teacher-forced or generating
// (CONTRACT.md sections 3 and 5). Its parts: teacher_forced.cpp, generate.cpp.
#include "decode.hpp"

#include "attn/core/error.hpp"
#include "attn/core/mpi.hpp"
#include "attn/model/speculative.hpp"

#include <optional>

namespace decode {
namespace {

void check_flags(const Options& o, const attn::cli::Tool& tool) {
  o.probe.check();
  if (o.generate) {
    tool.forbid("--generate", {"--input", "--tokens", "--lengths", "--key-padding-mask", "--no-pad-mask", "--no-causal",
                               "--emit-weights"});
    tool.require("--generate", {"--max-len"});
    if (o.temperature == 0) tool.forbid("greedy decoding (--temperature 0)", {"--top-k", "--top-p", "--seed"});
    if (o.temperature > 0 && o.beam > 1)
      throw attn::UsageError("--temperature samples one token per row: it does not combine with --beam");
    if (o.prompt.empty()) tool.forbid("generation without --prompt", {"--prompt-lengths"});
    if (!o.prompt_text.empty()) tool.forbid("--prompt-text", {"--prompt", "--prompt-lengths"});
    if (o.no_cache) tool.forbid("--no-cache", {"--kv-cache"});
    if (o.lookup || !o.draft.empty()) { // drafted tokens: checked one row at a time, through the cache
      if (o.lookup && !o.draft.empty()) throw attn::UsageError("give one of --lookup and --draft");
      const char* flag = o.lookup ? "--lookup" : "--draft";
      if (o.beam > 1)
        throw attn::UsageError(fmt::format("{} checks drafted tokens for one row: not with --beam", flag));
      tool.forbid(flag, {"--no-cache", "--patch", "--steer", "--ablate-heads", "--ablate-cross-heads"});
    }
    if (o.draft.empty()) tool.forbid("generation without --draft", {"--draft-tokens"});
  } else {
    if (o.input.empty() == o.tokens.empty()) throw attn::UsageError("give exactly one of -i, --tokens and --generate");
    tool.forbid("teacher-forced decoding (no --generate)",
                {"--max-len", "--bos", "--eos", "--pad", "--beam", "--no-cache", "--kv-cache", "--prompt",
                 "--prompt-lengths", "--temperature", "--top-k", "--top-p", "--seed", "--prompt-text", "--text-out",
                 "--lookup", "--draft", "--draft-tokens"});
  }
}

// The memory (b, s, Em), checked against the decoder's cross-attention and the target's batch.
attn::h5::SequenceReader open_memory(attn::cli::Tool& tool, const attn::h5::TensorRef& ref,
                                     const attn::DecoderModel& m) {
  attn::h5::SequenceReader mem(tool.inputs().open(ref), tool.allow_nonfinite(), "memory");
  if (mem.features() != m.dec.memory_dim())
    throw attn::Error(fmt::format("{}: memory feature size {} differs from the decoder's {} (the key size of {})",
                                  mem.label(), mem.features(), m.dec.memory_dim(),
                                  m.decoder.label("layers/0/multihead_attn")));
  return mem;
}

void run(const Options& o, attn::cli::Tool& tool) {
  check_flags(o, tool);
  std::vector<std::string> inputs{o.input,   o.tokens,        o.memory,         o.weights,
                                  o.lengths, o.key_padding,   o.memory_lengths, o.memory_key_padding,
                                  o.prompt,  o.prompt_lengths};
  for (const std::string& arg : o.probe.input_args()) inputs.push_back(tool.input_ref(arg).path);
  if (!o.draft.empty()) inputs.push_back(tool.input_ref(o.draft).path);
  tool.preflight_inputs(inputs);
  std::optional<attn::h5::TensorRef> target_ref, memory_ref;
  if (!o.generate) target_ref = tool.input_ref(o.input.empty() ? o.tokens : o.input);
  if (!o.memory.empty()) memory_ref = tool.input_ref(o.memory);
  const attn::h5::TensorRef weights_ref = tool.input_ref(o.weights);
  const attn::MaskFiles self_files = tool.mask_inputs(!o.no_causal, o.key_padding, o.lengths, "", "t");
  const attn::MaskFiles mem_files = tool.mask_inputs(false, o.memory_key_padding, o.memory_lengths, "", "s");
  std::optional<attn::h5::TensorRef> prompt_ref;
  if (!o.prompt.empty()) prompt_ref = tool.input_ref(o.prompt);
  if (!o.prompt_lengths.empty()) tool.input_ref(o.prompt_lengths);
  if (!o.text_out.empty()) {
    if (!tool.given("--output")) tool.no_hdf5_output(); // the text is the output
    if (o.text_out == "-" && tool.output_arg() == "-")
      throw attn::UsageError("--text-out - and -o - cannot both be standard output: give -o FILE");
    if (o.text_out == "-" && attn::mpi::size() > 1)
      throw attn::UsageError("--text-out - is not written under MPI: give --text-out FILE");
    if (o.text_out != "-") tool.check_file_output(o.text_out, "text");
  }
  tool.check_outputs();

  const attn::LinearUse use = steps_linear_use(o, tool, memory_ref, prompt_ref);
  attn::WeightGroup group = attn::WeightGroup::open(tool.inputs(), weights_ref);
  group.set_linear_tiles(use.tiles, use.step_rows, use.steps); // the Linear weights as the steps read them
  attn::DecoderModel m = attn::load_decoder_model(std::move(group), tool.ignore_unknown_weights());
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
    generate_tokens(o, tool, mem ? &*mem : nullptr, mem_files, m, use);
  } else {
    teacher_forced(o, tool, *target_ref, mem ? &*mem : nullptr, self_files, mem_files, m);
  }
}

} // namespace
} // namespace decode

int main(int argc, char** argv) {
  using decode::Options;
  attn::cli::Tool tool("decode", "A Transformer decoder stack (nn.TransformerDecoder), teacher-forced or generating.");
  tool.split_batch_over_ranks();
  Options o;
  auto& app = tool.app();
  app.add_option("-i,--input", o.input, "Target (b, t, E) or (t, E)")->type_name("TGT");
  app.add_option("--tokens", o.tokens, "Target token ids (b, t), embedded by the model's tgt_embed")->type_name("IDS");
  app.add_option("--memory", o.memory,
                 "Memory (b, s, Em) or (s, Em), e.g. encode's output (a decoder-only model has none)")
      ->type_name("MEM");
  app.add_option("--weights", o.weights,
                 "Decoder or sequence-to-sequence weights (CONTRACT.md section 3), or a Hugging Face model directory "
                 "(section 6.1)")
      ->type_name("FILE[:GROUP]|DIR[:PREFIX]")
      ->required();
  tool.add_padding_options(o.key_padding, o.lengths, "", "t", "target");
  app.add_flag("--no-pad-mask", o.no_pad_mask,
               "With --tokens: target tokens equal to the file's pad_id are not padding (by default they are)");
  tool.add_padding_options(o.memory_key_padding, o.memory_lengths, "memory-", "s", "memory");
  app.add_flag("--no-causal", o.no_causal, "Let every target position see every other");
  app.add_flag("--emit-weights", o.emit_weights, "Also write /weights/layer{i}/self and /weights/layer{i}/cross");
  tool.add_probe_options(o.probe, true);
  app.add_option("--lens", o.lens,
                 "The logit lens: /lens/ids and /lens/logprobs (b, L + 1, t, K), the K most likely tokens of the "
                 "embeddings and of each layer's output through the final norm and the unembedding")
      ->type_name("K")
      ->check(attn::cli::positive());
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
  app.add_option("--prompt-text", o.prompt_text,
                 "A prompt as text (repeatable: one row each), tokenized with its special tokens by --tokenizer")
      ->type_name("TEXT")
      ->allow_extra_args(false);
  app.add_option("--tokenizer", o.tokenizer,
                 "The tokenizer.json of --prompt-text and --text-out (default: the model directory's own)")
      ->type_name("T");
  app.add_option("--text-out", o.text_out,
                 "Write each row's generated text, one line per row ('-': standard output, as it is generated when "
                 "there is one row); without -o no HDF5 is written")
      ->type_name("FILE|-");
  app.add_option("--temperature", o.temperature, "Sample from softmax(logits / T) (0: greedy)")
      ->check(attn::cli::non_negative())
      ->capture_default_str();
  app.add_option("--top-k", o.top_k, "Sample from the K most likely tokens only")->check(attn::cli::positive());
  app.add_option("--top-p", o.top_p, "Sample from the smallest set of most likely tokens reaching probability P")
      ->check(CLI::Range(0.0, 1.0).description("in (0, 1]"))
      ->check(attn::cli::positive())
      ->capture_default_str();
  app.add_option("--lookup", o.lookup,
                 "Prompt-lookup decoding: each pass checks up to N tokens copied from where the sequence's last "
                 "tokens occurred before (the same tokens as without it when greedy)")
      ->type_name("N")
      ->check(CLI::Range(std::int64_t{1}, attn::max_draft_tokens));
  app.add_option("--draft", o.draft,
                 "Speculative decoding: a smaller decoder-only model with the same vocabulary drafts --draft-tokens "
                 "tokens per pass (the same tokens as without it when greedy)")
      ->type_name("FILE[:GROUP]|DIR[:PREFIX]");
  app.add_option("--draft-tokens", o.draft_tokens, "Tokens the --draft model proposes per pass")
      ->check(CLI::Range(std::int64_t{1}, attn::max_draft_tokens))
      ->capture_default_str();
  tool.add_seed();
  app.add_option("--chunk", o.chunk, "Sequences per batch chunk (default: about 4096 tokens' worth)")
      ->check(attn::cli::positive());
  tool.add_dtype();
  tool.add_allow_nonfinite();
  tool.add_matmul_precision();
  tool.add_ignore_unknown_weights();
  return tool.run(argc, argv, [&] { decode::run(o, tool); });
}
