// Models by their own weight names (CONTRACT.md section 3, as extended by issue 18): a one-loop
// export of a PyTorch state_dict ('.' replaced by '/') with the model config's scalars as
// attributes runs as it is. The layout is told by the datasets present.
#pragma once

#include "attn/embedding.hpp"
#include "attn/generate.hpp"
#include "attn/transformer.hpp"
#include "attn/weights.hpp"

#include <optional>
#include <string>

namespace attn {

enum class Layout {
  Toolkit, // nn.Transformer's names (layers/{i}/self_attn/..., src_embed, tgt_embed, generator)
  Llama,   // LlamaForCausalLM's (model/layers/{i}/self_attn/q_proj/..., model/embed_tokens, lm_head)
};

// Llama when the group holds model/layers/0/self_attn/q_proj/weight, else Toolkit.
Layout detect_layout(const WeightGroup& g);

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

} // namespace attn
