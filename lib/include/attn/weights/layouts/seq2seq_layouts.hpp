// Encoder-decoder models by their own names (issue 57): T5ForConditionalGeneration (T5 v1.0, v1.1,
// flan-t5) and BartForConditionalGeneration (or BartModel), each side loaded on its own into the
// generic stacks (transformer.hpp), as model_layouts.hpp loads LLaMA, GPT-2 and BERT.
#pragma once

#include "attn/model/embedding.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/transformer.hpp"
#include "attn/weights/layouts/model_layouts.hpp"
#include "attn/weights/weights.hpp"

#include <optional>
#include <string>
#include <vector>

namespace attn {

// A sequence-to-sequence model's decoder side: the stack, its token embeddings, the output layer
// (none in a model without an LM head), the attributes naming its special ids, and the ids the
// config forces (forced_bos_token_id, forced_eos_token_id; -1: none).
struct Seq2SeqDecoder {
  Decoder dec;
  TokenEmbedding embed;
  std::optional<Generator> gen;
  std::string bos_attr = "decoder_start_token_id", eos_attr = "eos_token_id", pad_attr = "pad_token_id";
  std::int64_t forced_bos = -1, forced_eos = -1;
  std::vector<std::string> known; // the other side's parts, for check_all_weights_used
  std::string group, first_layer; // the decoder's group and its first layer, under the model's group
};

// T5 (shared/weight (V, d_model); per stack block/{i}/layer/...): pre-norm layers with T5LayerNorm
// (RMS, no bias, layer_norm_epsilon 1e-6), attention with q, k, v, o (no biases, H heads of d_kv,
// scores not scaled), the relative attention bias of block 0 (relative_attention_bias/weight
// (relative_attention_num_buckets, H)) in every layer: bidirectional buckets in the encoder, causal
// in the decoder, with relative_attention_max_distance; feed_forward_proj relu (wi, wo) or gated-gelu
// / gated-silu (wi_0 the gate, wi_1, wo); each stack's final_layer_norm. Embeddings unscaled and
// without positions; the head lm_head/weight, or (tie_word_embeddings, the default) the shared table
// after the decoder's output is scaled by d_model^-0.5. Config defaults as T5Config's (num_heads 8,
// d_kv 64, ...); the decoder starts from decoder_start_token_id.
EncoderLm load_t5_encoder(const WeightGroup& g);
Seq2SeqDecoder load_t5_decoder(const WeightGroup& g);

// BART (model/ or the root: shared/weight, {encoder,decoder}/embed_positions/weight (positions + 2,
// E): learned positions looked up 2 rows on, then layernorm_embedding; per layer self_attn and (in
// the decoder) encoder_attn with q/k/v/out_proj and biases, fc1, fc2, and post-norm LayerNorms
// self_attn_layer_norm, encoder_attn_layer_norm, final_layer_norm (eps 1e-5); activation_function
// (gelu); embeddings times sqrt(d_model) when scale_embedding). The head: lm_head/weight or the
// tied shared table, plus final_logits_bias (1, V); forced_bos_token_id and forced_eos_token_id
// from the config.
EncoderLm load_bart_encoder(const WeightGroup& g);
Seq2SeqDecoder load_bart_decoder(const WeightGroup& g);

// The datasets of an encoder side that its load does not read (the decoder's, the head's).
std::vector<std::string> seq2seq_encoder_known(Layout layout, const WeightGroup& g);

} // namespace attn
