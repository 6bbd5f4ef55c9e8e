// Models by their own weight names (CONTRACT.md section 3, as extended by issue 18): a one-loop
// export of a PyTorch state_dict ('.' replaced by '/') with the model config's scalars as
// attributes runs as it is. The layout is told by the datasets present.
#pragma once

#include "attn/model/embedding.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/transformer.hpp"
#include "attn/weights/weights.hpp"

#include <optional>
#include <string>
#include <vector>

namespace attn {

enum class Layout {
  Toolkit, // nn.Transformer's names (layers/{i}/self_attn/..., src_embed, tgt_embed, generator)
  Llama,   // LlamaForCausalLM's (model/layers/{i}/self_attn/q_proj/..., model/embed_tokens, lm_head)
  Gpt2,    // GPT2LMHeadModel's (transformer/h/{i}/attn/c_attn/..., transformer/wte, transformer/wpe)
  Bert,    // BertModel's (embeddings/..., encoder/layer/{i}/attention/self/query/...), or under bert/
  T5,      // T5ForConditionalGeneration's (shared, encoder/block/{i}/layer/0/SelfAttention/q/...)
  Bart,    // BartForConditionalGeneration's (model/encoder/layers/{i}/self_attn/q_proj/..., fc1), or BartModel's
};

// Llama when the group holds model/layers/0/self_attn/q_proj/weight, Gpt2 when it holds
// transformer/h/0/attn/c_attn/weight, Bert when it holds (bert/)embeddings/word_embeddings/weight,
// T5 when it holds encoder/ or decoder/block/0/layer/0/SelfAttention/q/weight, Bart when it holds
// (model/)encoder/ or decoder/layers/0/fc1/weight, else Toolkit.
Layout detect_layout(const WeightGroup& g);
// The datasets a layout's exports may carry that no computation reads (buffers such as GPT-2's
// causal mask and LLaMA's RoPE frequencies), relative to the group, for check_all_weights_used.
std::vector<std::string> layout_buffers(Layout layout, const Decoder& dec);

// A decoder-only language model: the stack, its token embeddings, the output layer, and the names
// of the attributes that hold its special token ids.
struct CausalLm {
  Decoder dec;
  TokenEmbedding embed;
  Generator gen;
  std::string bos_attr, eos_attr, pad_attr;
};

// LlamaForCausalLM (and Mistral's and Qwen2's, which share it): model/embed_tokens/weight (V, E);
// per layer model/layers/{i}/self_attn/{q,k,v,o}_proj/weight (with q, k and v biases or none, as
// Qwen2), mlp/{gate,up,down}_proj/weight, input_layernorm/weight and post_attention_layernorm/weight
// (RMSNorm); model/norm/weight; lm_head/weight, or the embeddings when tied. The config's
// attributes: num_attention_heads (required), num_key_value_heads, hidden_size, intermediate_size,
// vocab_size (checked against the datasets), rms_norm_eps (1e-6), rope_theta (10000), hidden_act
// (silu: SwiGLU; gelu: GEGLU), tie_word_embeddings, sliding_window, and bos_token_id,
// eos_token_id, pad_token_id. Positions: rotate-half RoPE on q and k in every layer (the layout's
// q and k weights are permuted for it); the embeddings are not scaled.
CausalLm load_llama(const WeightGroup& g);

// GPT2LMHeadModel: transformer/wte/weight (V, E) and transformer/wpe/weight (positions, E), added
// unscaled; per block transformer/h/{i}/ln_1, attn/c_attn (E, 3E) and attn/c_proj (E, E), ln_2,
// mlp/c_fc (E, F) and mlp/c_proj (F, E), each with its bias (Conv1D weights, (in, out): transposed
// as read); transformer/ln_f; lm_head/weight or the tied wte. Pre-norm LayerNorm blocks, causal.
// Attributes: n_head (required), n_embd, n_inner, vocab_size, n_positions (checked against the
// datasets), layer_norm_epsilon (1e-5), activation_function (gelu_new, the default, and
// gelu_pytorch_tanh: GELU's tanh form; gelu; relu; silu), bos_token_id, eos_token_id, pad_token_id.
CausalLm load_gpt2(const WeightGroup& g);

// An encoder with its token embeddings.
struct EncoderLm {
  Encoder enc;
  TokenEmbedding embed;
};

// BertModel (or the bert/ part of BertForMaskedLM and the like): embeddings/word_embeddings,
// position_embeddings and token_type_embeddings (summed, unscaled) and embeddings/LayerNorm; per
// layer encoder/layer/{i}/attention/self/{query,key,value}, attention/output/dense and its
// LayerNorm, intermediate/dense, output/dense and its LayerNorm: post-norm layers. Attributes:
// num_attention_heads (required), hidden_size, intermediate_size, vocab_size,
// max_position_embeddings, type_vocab_size (checked against the datasets), layer_norm_eps
// (1e-12), hidden_act (gelu: erf, the default; gelu_new; relu). The pooler and the task heads are
// not read.
EncoderLm load_bert(const WeightGroup& g);

} // namespace attn
