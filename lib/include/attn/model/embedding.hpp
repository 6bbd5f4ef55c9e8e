// A stack's input: token embeddings with their positions, and features or token ids read a batch
// chunk at a time (CONTRACT.md section 3).
#pragma once

#include "attn/attention/mask.hpp"
#include "attn/core/tensor.hpp"
#include "attn/kernels/linear_weight.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// Token embeddings of a sequence-to-sequence model (CONTRACT.md section 3): x = table[id] * sqrt(E)
// + PE(position), with the model's `pe` attribute: sinusoidal (the default), learned
// (pos_embed/weight (L, E)) or none.
enum class PeKind { Sinusoidal, Learned, None };

struct TokenEmbedding {
  Tensor table; // (V, E), or empty when compact_table holds it
  // A bfloat16, float16 or int8 table kept so in memory (the rows widened, or dequantized as
  // dequantize_int8 does, exactly, as looked up): no float32 copy of the whole table
  std::shared_ptr<const LinearWeight> compact_table;
  std::int64_t vocab() const { return compact_table ? compact_table->out() : table.dim(0); }
  std::int64_t width() const { return compact_table ? compact_table->in() : table.dim(1); }
  bool scaled = true; // times sqrt(E), as nn.Transformer's users do; LLaMA, GPT-2 and BERT do not
  PeKind pe = PeKind::Sinusoidal;
  Tensor pos_table;      // (L, E) for learned positions
  std::string label;     // "model.h5:/src_embed/weight", for messages
  std::string pos_label; // "model.h5:/pos_embed/weight" with learned positions
  // BERT's: token-type (segment) embeddings added; empty: none
  Tensor type_table;      // (T, E)
  std::string type_label; // its dataset, for messages
  // A LayerNorm over the sum (BERT's, BART's layernorm_embedding); empty: none
  Tensor norm_weight, norm_bias;
  double norm_eps = 1e-12;
};

// The embeddings as a tied output layer's weight: a 16-bit table as it is kept, an int8 one as the
// float32 table of its values (a tied generator computes over them as over a float32 table), a
// float32 one shared.
LinearWeight tied_generator(const TokenEmbedding& emb);

// x (B, n, E) from ids (B, n) at positions offset.. ; throws Error naming the first id outside
// 0..V-1 and its index, or a position beyond a learned table (`ids_label` names the ids' file, and
// the ids are its items first_item..).
// With a type table, `types` (batch, n) picks each token's type (null: type 0 for every token).
void embed_tokens(float* x, const std::int64_t* ids, std::int64_t batch, std::int64_t n, const TokenEmbedding& emb,
                  std::int64_t offset, const std::string& ids_label, std::int64_t first_item = 0,
                  const std::int64_t* types = nullptr);

} // namespace attn
