#include "attn/masks.hpp"

#include "attn/error.hpp"

#include <fmt/format.h>

#include <stdexcept>

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
      throw Error(fmt::format("{}: key padding mask must be (batch, m) = {}, got {}", ds.label(), shape_str({batch, m}),
                              shape_str(pad.shape())));
    for (std::int64_t x : pad.span()) mk.key_padding.push_back(x != 0);
  }
  if (files.lengths) {
    h5::Dataset ds = in.open(*files.lengths);
    const TensorI len = ds.read_ints();
    if (len.shape() != Shape{batch})
      throw Error(fmt::format("{}: lengths must be (batch,) = {}, got {}", ds.label(), shape_str({batch}),
                              shape_str(len.shape())));
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

namespace {

// Items [first, first + count) of a broadcast mask; one shared by every item stays whole.
std::unique_ptr<BroadcastMask> broadcast_items(const BroadcastMask& bm, std::int64_t first, std::int64_t count) {
  auto r = std::make_unique<BroadcastMask>(bm);
  if (bm.sb != 0) r->values.assign(bm.values.begin() + first * bm.sb, bm.values.begin() + (first + count) * bm.sb);
  return r;
}

} // namespace

Mask mask_items(const Mask& mask, std::int64_t first, std::int64_t count, std::int64_t repeat, std::int64_t n) {
  if (repeat != 1 && (mask.blocked || mask.bias || mask.has_pattern() || mask.top_k))
    throw std::logic_error("mask_items: only causal, lengths and key padding repeat for beams");
  Mask r;
  r.n = n, r.m = mask.m, r.causal = mask.causal;
  r.window = mask.window, r.stride = mask.stride, r.global = mask.global, r.top_k = mask.top_k;
  if (mask.blocked) r.blocked = broadcast_items(*mask.blocked, first, count);
  if (mask.bias) r.bias = broadcast_items(*mask.bias, first, count);
  for (std::int64_t b = first; b < first + count; ++b)
    for (std::int64_t k = 0; k < repeat; ++k) {
      if (!mask.lengths.empty()) r.lengths.push_back(mask.lengths[static_cast<std::size_t>(b)]);
      if (!mask.key_padding.empty())
        r.key_padding.insert(r.key_padding.end(), mask.key_padding.begin() + b * mask.m,
                             mask.key_padding.begin() + (b + 1) * mask.m);
    }
  return r;
}

} // namespace attn
