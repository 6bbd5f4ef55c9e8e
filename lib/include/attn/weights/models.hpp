// A whole model from its weight group, whatever its layout: a tool's one call to load what it runs
// (the layout detected, every dataset accounted for, the special ids found).
#pragma once

#include "attn/model/embedding.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/transformer.hpp"
#include "attn/weights/weights.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace attn {

// An encoder: nn.Transformer's (group encoder/, embeddings src_embed/), or BERT's, or T5's or BART's
// encoder, by their own names.
struct EncoderModel {
  WeightGroup group;
  Encoder enc;
  std::optional<TokenEmbedding> embed; // BERT's, read with the model; else src_embed is read on demand
  std::string e_source;                // what fixes E, for messages ("the hidden size of ...")
};
// Throws Error for datasets the layout does not use unless `ignore_unknown`.
EncoderModel load_encoder_model(WeightGroup g, bool ignore_unknown);

// A decoder: nn.Transformer's (group decoder/, tgt_embed/, generator/), or LLaMA's or GPT-2's, or
// T5's or BART's decoder, by their own names.
struct DecoderModel {
  WeightGroup group;       // the --weights group (a sequence-to-sequence model, or a decoder)
  WeightGroup decoder;     // its decoder
  std::string first_layer; // "model.h5:/decoder/layers/0", for messages
  Decoder dec;
  std::optional<Generator> gen;
  std::optional<TokenEmbedding> embed; // read with the model (layouts by their own names)
  std::string bos_attr = "bos_id", eos_attr = "eos_id", pad_attr = "pad_id";
  // The ids the config forces as the first and the last generated token (BART's
  // forced_bos_token_id, forced_eos_token_id; GenerateOptions::forced_first, forced_last); -1: none.
  std::int64_t forced_bos = -1, forced_eos = -1;
};
// Throws Error for datasets the layout does not use unless `ignore_unknown`.
DecoderModel load_decoder_model(WeightGroup g, bool ignore_unknown);

// The target embeddings: the model's own (moved out: a run embeds with them once), or tgt_embed.
TokenEmbedding target_embedding(DecoderModel& m);

// A special token id: `flag` when given (named `flag_name` in messages), else the model's attribute
// `attr` (nearest ancestor), else `fallback`; in 0..V-1 of the generator, else an Error naming the
// source.
std::int64_t special_id(const DecoderModel& m, const std::optional<std::int64_t>& flag, const char* flag_name,
                        const std::string& attr, std::optional<std::int64_t> fallback);
// The same for a list of ids (eos_token_id may be one or a list: generation ends at any of them);
// the flag gives the one id.
std::vector<std::int64_t> special_ids(const DecoderModel& m, const std::optional<std::int64_t>& flag,
                                      const char* flag_name, const std::string& attr);

} // namespace attn
