// Masks from files: key padding, lengths and mask tensors read, checked and combined with the mask
// flags (mask_files.hpp).
#include "attn/inputs/mask_files.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

#include <cmath>

namespace attn {

Mask load_mask(h5::InputFiles& in, const MaskFiles& files, std::int64_t batch, std::int64_t heads, std::int64_t n,
               std::int64_t m) {
  Mask mk;
  mk.n = n;
  mk.m = m;
  mk.causal = files.causal;
  if (files.key_padding) {
    h5::Dataset ds = in.open(*files.key_padding);
    const TensorI pad = ds.read_ints();
    if (pad.shape() != Shape{batch, m})
      throw Error(fmt::format("{}: {} must be (b, {}) = {}, got {}", ds.label(),
                              files.keep_polarity ? "attention mask (nonzero = attend)" : "key padding mask",
                              files.keys, shape_str({batch, m}), shape_str(pad.shape())));
    for (std::int64_t x : pad.span()) mk.key_padding.push_back(files.keep_polarity ? x == 0 : x != 0);
  }
  if (files.lengths) {
    h5::Dataset ds = in.open(*files.lengths);
    const TensorI len = ds.read_ints();
    if (len.shape() != Shape{batch})
      throw Error(
          fmt::format("{}: lengths must be (b,) = {}, got {}", ds.label(), shape_str({batch}), shape_str(len.shape())));
    for (std::int64_t i = 0; i < batch; ++i) {
      if (len[i] < 0 || len[i] > m)
        throw Error(fmt::format("{}: length {} at index [{}] is outside 0..{}", ds.label(), len[i], i, m));
      mk.lengths.push_back(len[i]);
    }
  }
  if (files.attn_mask) {
    h5::Dataset ds = in.open(*files.attn_mask);
    std::vector<float> values;
    if (ds.kind() == h5::ElemKind::Float) {
      const Tensor t = ds.read_floats<float>(true);
      for (std::int64_t i = 0; i < t.size(); ++i)
        if (std::isnan(t[i]) || t[i] == INFINITY)
          throw Error(fmt::format("{}: {} at index {} (an additive mask may hold -inf, not NaN or +Inf)", ds.label(),
                                  std::isnan(t[i]) ? "NaN" : "+Inf", index_str(t.shape(), i)));
      values.assign(t.span().begin(), t.span().end());
      mk.bias = broadcast_mask(std::move(values), ds.shape(), batch, heads, n, m, ds.label());
    } else {
      const TensorI t = ds.read_ints();
      for (std::int64_t x : t.span()) values.push_back(x != 0 ? 1.0f : 0.0f);
      mk.blocked = broadcast_mask(std::move(values), ds.shape(), batch, heads, n, m, ds.label());
    }
  }
  return mk;
}

} // namespace attn
