// decode's parts: its options, teacher-forced decoding and generation (tools/decode/*.cpp).
#pragma once

#include "cli.hpp"

#include "attn/h5/h5io.hpp"
#include "attn/inputs/mask_files.hpp"
#include "attn/weights/models.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace decode {

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
  std::vector<std::string> prompt_text; // --prompt-text: prompts as text, tokenized by `tokenizer`
  std::string tokenizer, text_out;
  double temperature = 0, top_p = 1.0;
  std::int64_t top_k = 0;
  attn::ProbeFlags probe; // --emit-activations and the interventions
  std::int64_t lens = 0;  // --lens K
  // --lookup N (prompt-lookup drafts of up to N tokens), or --draft MODEL with --draft-tokens N
  std::int64_t lookup = 0, draft_tokens = 4;
  std::string draft;
};

// --lens's unembedding: the model's generator (an Error when it has none).
const attn::Generator& lens_generator(const attn::DecoderModel& m);

// The run's target (X or token ids) through the decoder: /output, /logits, the weights.
void teacher_forced(const Options& o, attn::cli::Tool& tool, const attn::h5::TensorRef& target_ref,
                    const attn::h5::SequenceReader* mem, const attn::MaskFiles& self_files,
                    const attn::MaskFiles& mem_files, attn::DecoderModel& m);

// Whether cached generation's steps will read the Linear weights in column tiles, and the most
// rows a step has, decided before the model is read (from the memory's or the prompts' shape).
attn::LinearUse steps_linear_use(const Options& o, attn::cli::Tool& tool,
                                 const std::optional<attn::h5::TensorRef>& memory_ref,
                                 const std::optional<attn::h5::TensorRef>& prompt_ref);

// --generate: /tokens and /scores. read_as: how the model's Linear weights were read
// (steps_linear_use: float32 ones in column tiles or not).
void generate_tokens(const Options& o, attn::cli::Tool& tool, const attn::h5::SequenceReader* mem,
                     const attn::MaskFiles& mem_files, attn::DecoderModel& m, attn::LinearUse read_as);

} // namespace decode
