// A stack's input, read a batch chunk at a time: features as given, or token ids embedded by the
// model's table (CONTRACT.md section 3); and the padding the model's pad token implies.
#pragma once

#include "attn/attention/mask.hpp"
#include "attn/core/tensor.hpp"
#include "attn/h5/h5io.hpp"
#include "attn/model/embedding.hpp"
#include "attn/model/vision.hpp"
#include "attn/weights/weights.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// A stack's input, read a batch chunk at a time: features X (b, n, E) as given, or token ids
// (b, n) (small, read whole) embedded by a model's table and positions (CONTRACT.md section 3), or
// images (b, C, H, W) cut into patches by a Vision Transformer's patch embedding (read whole too).
// A 1-D id, 2-D feature or 3-D image dataset is one sequence (batched() false).
class StackInput {
public:
  explicit StackInput(h5::SequenceReader x);
  // `layout` names the ids' expected rank in the error ("token ids (b, n) or (n,)").
  StackInput(const h5::Dataset& ids, std::string_view layout, TokenEmbedding emb);
  // pixel_values (b, C, H, W) or (C, H, W), finite floats: 1 + (H / P)(W / P) positions each.
  StackInput(const h5::Dataset& pixels, PatchEmbedding patches, bool allow_nonfinite);
  // The same from pixel values made in memory (view/pixel_values.hpp), (b, C, H, W), named `label`.
  StackInput(Tensor pixels, std::string label, PatchEmbedding patches);
  std::int64_t items() const { return items_; }
  std::int64_t len() const { return n_; }
  std::int64_t features() const { return x_ ? x_->features() : patches_ ? patches_->width() : emb_->width(); }
  bool batched() const { return batched_; }
  const std::string& label() const { return label_; } // "x.h5:/data"
  // Items [first, first + count) as (count, n, E).
  Tensor read(std::int64_t first, std::int64_t count) const;
  bool has_ids() const { return !x_ && !patches_; }
  // Token types (b, n) (or (n,)) for an embedding with a type table (BERT's token_type_ids): the ids'
  // shape, each in 0..T-1; throws Error naming the dataset otherwise.
  void set_token_types(const h5::Dataset& types);
  // (items, len) flags, nonzero where the token id is `pad` (a key padding mask); token ids only.
  std::vector<std::uint8_t> pad_mask(std::int64_t pad) const;

private:
  std::optional<h5::SequenceReader> x_;
  TensorI ids_, types_;
  std::optional<TokenEmbedding> emb_;
  Tensor pixels_; // (b, C, H, W)
  std::optional<PatchEmbedding> patches_;
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
