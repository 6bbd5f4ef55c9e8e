// Reading a stack's input and marking its pad tokens (inputs/stack_input.hpp).
#include "attn/inputs/stack_input.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

namespace attn {

StackInput::StackInput(h5::SequenceReader x)
    : x_(std::move(x)), items_(x_->items()), n_(x_->len()), batched_(x_->batched()), label_(x_->label()) {}

StackInput::StackInput(const h5::Dataset& ids, std::string_view layout, TokenEmbedding emb) : emb_(std::move(emb)) {
  ids.require_rank(1, 2, layout);
  ids_ = ids.read_ints();
  batched_ = ids_.rank() == 2;
  if (!batched_) ids_.reshape({1, ids_.dim(0)});
  items_ = ids_.dim(0), n_ = ids_.dim(1), label_ = ids.label();
}

StackInput::StackInput(const h5::Dataset& pixels, PatchEmbedding patches, bool allow_nonfinite)
    : StackInput(
          [&] {
            pixels.require_rank(3, 4, "pixel values (b, channels, height, width) or (channels, height, width)");
            return pixels.read_floats<float>(allow_nonfinite);
          }(),
          pixels.label(), std::move(patches)) {}

StackInput::StackInput(Tensor pixels, std::string label, PatchEmbedding patches)
    : pixels_(std::move(pixels)), patches_(std::move(patches)) {
  batched_ = pixels_.rank() == 4;
  if (!batched_) pixels_.reshape({1, pixels_.dim(0), pixels_.dim(1), pixels_.dim(2)});
  label_ = std::move(label);
  items_ = pixels_.dim(0);
  const std::int64_t P = patches_->patch;
  n_ = 1 + (pixels_.dim(2) / P) * (pixels_.dim(3) / P);
  check_pixels(pixels_.dim(1), pixels_.dim(2), pixels_.dim(3), *patches_, label_); // before anything runs
}

std::vector<std::uint8_t> StackInput::pad_mask(std::int64_t pad) const {
  std::vector<std::uint8_t> m(static_cast<std::size_t>(ids_.size()));
  for (std::int64_t i = 0; i < ids_.size(); ++i) m[static_cast<std::size_t>(i)] = ids_[i] == pad;
  return m;
}

std::optional<std::int64_t> padding_token(const WeightGroup& model) {
  const auto pad = model.attr_int("pad_id");
  if (!pad || model.attr_int("bos_id") == pad || model.attr_int("eos_id") == pad) return std::nullopt;
  return pad;
}

std::optional<std::int64_t> mask_pad_tokens(Mask& mask, const StackInput& input, const WeightGroup& model) {
  if (!input.has_ids()) return std::nullopt;
  const auto pad = padding_token(model);
  if (pad) mask.key_padding = input.pad_mask(*pad);
  return pad;
}

Tensor StackInput::read(std::int64_t first, std::int64_t count) const {
  if (x_) return x_->read(first, count);
  Tensor x(Shape{count, n_, features()}, Uninitialized{});
  if (patches_) {
    const std::int64_t C = pixels_.dim(1), H = pixels_.dim(2), W = pixels_.dim(3);
    embed_patches(x.data(), pixels_.data() + first * C * H * W, count, C, H, W, *patches_, label_);
    return x;
  }
  embed_tokens(x.data(), ids_.data() + first * n_, count, n_, *emb_, 0, label_, first,
               types_.size() ? types_.data() + first * n_ : nullptr);
  return x;
}

void StackInput::set_token_types(const h5::Dataset& types) {
  types.require_rank(1, 2, "token types (b, n) or (n,)");
  types_ = types.read_ints();
  if (types_.rank() == 1) types_.reshape({1, types_.dim(0)});
  if (types_.shape() != ids_.shape())
    throw Error(fmt::format("{}: token types must have the token ids' shape {} ({}), got {}", types.label(),
                            shape_str(ids_.shape()), label_, shape_str(types_.shape())));
  const std::int64_t T = emb_ && emb_->type_table.size() ? emb_->type_table.dim(0) : 0;
  if (T == 0) throw Error(fmt::format("{}: the model has no token type embeddings ({})", types.label(), emb_->label));
  for (std::int64_t i = 0; i < types_.size(); ++i)
    if (types_[i] < 0 || types_[i] >= T)
      throw Error(fmt::format("{}: token type {} at index [{}, {}] is outside 0..{} of {}", types.label(), types_[i],
                              i / n_, i % n_, T - 1, emb_->type_label));
}

} // namespace attn
