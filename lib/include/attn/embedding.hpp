// A stack's input: token embeddings with their positions, and features or token ids read a batch
// chunk at a time (CONTRACT.md section 3).
#pragma once

#include "attn/h5io.hpp"
#include "attn/mask.hpp"
#include "attn/tensor.hpp"
#include "attn/weights.hpp"

#include <cstdint>
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
  Tensor table;       // (V, E)
  bool scaled = true; // times sqrt(E), as nn.Transformer's users do; LLaMA, GPT-2 and BERT do not
  PeKind pe = PeKind::Sinusoidal;
  Tensor pos_table;      // (L, E) for learned positions
  std::string label;     // "model.h5:/src_embed/weight", for messages
  std::string pos_label; // "model.h5:/pos_embed/weight" with learned positions
  // BERT's: token-type (segment) embeddings added, then a LayerNorm over the sum; empty: neither
  Tensor type_table;      // (T, E)
  std::string type_label; // its dataset, for messages
  Tensor norm_weight, norm_bias;
  double norm_eps = 1e-12;
};

// Reads `name`/weight ("src_embed" or "tgt_embed") of model group `g` and the `pe` attribute; the
// embedding size must be `embed_dim`, the E of the stack it feeds (`stack`: "encoder", "decoder").
TokenEmbedding load_embedding(const WeightGroup& g, const std::string& name, std::int64_t embed_dim,
                              std::string_view stack);

// x (B, n, E) from ids (B, n) at positions offset.. ; throws Error naming the first id outside
// 0..V-1 and its index, or a position beyond a learned table (`ids_label` names the ids' file, and
// the ids are its items first_item..).
// With a type table, `types` (batch, n) picks each token's type (null: type 0 for every token).
void embed_tokens(float* x, const std::int64_t* ids, std::int64_t batch, std::int64_t n, const TokenEmbedding& emb,
                  std::int64_t offset, const std::string& ids_label, std::int64_t first_item = 0,
                  const std::int64_t* types = nullptr);

// A stack's input, read a batch chunk at a time: features X (b, n, E) as given, or token ids
// (b, n) (small, read whole) embedded by a model's table and positions (CONTRACT.md section 3).
// A 1-D id or 2-D feature dataset is one sequence (batched() false).
class StackInput {
public:
  explicit StackInput(h5::SequenceReader x);
  // `layout` names the ids' expected rank in the error ("token ids (b, n) or (n,)").
  StackInput(const h5::Dataset& ids, std::string_view layout, TokenEmbedding emb);
  std::int64_t items() const { return items_; }
  std::int64_t len() const { return n_; }
  std::int64_t features() const { return x_ ? x_->features() : emb_->table.dim(1); }
  bool batched() const { return batched_; }
  const std::string& label() const { return label_; } // "x.h5:/data"
  // Items [first, first + count) as (count, n, E).
  Tensor read(std::int64_t first, std::int64_t count) const;
  bool has_ids() const { return !x_; }
  // Token types (b, n) (or (n,)) for an embedding with a type table (BERT's token_type_ids): the ids'
  // shape, each in 0..T-1; throws Error naming the dataset otherwise.
  void set_token_types(const h5::Dataset& types);
  // (items, len) flags, nonzero where the token id is `pad` (a key padding mask); token ids only.
  std::vector<std::uint8_t> pad_mask(std::int64_t pad) const;

private:
  std::optional<h5::SequenceReader> x_;
  TensorI ids_, types_;
  std::optional<TokenEmbedding> emb_;
  std::int64_t items_ = 0, n_ = 0;
  bool batched_ = true;
  std::string label_;
};

// The model's pad_id when token ids equal to it are padding by default: the file sets pad_id, and it
// differs from bos_id and eos_id (a model that pads with its end token must not lose that token).
std::optional<std::int64_t> padding_token(const WeightGroup& model);
// With token ids and a padding_token(), marks the ids equal to it as key padding in `mask` (as
// PyTorch users pass ids == pad); returns that id, or nullopt when nothing applies.
std::optional<std::int64_t> mask_pad_tokens(Mask& mask, const StackInput& input, const WeightGroup& model);

} // namespace attn
