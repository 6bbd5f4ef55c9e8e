// Masks and their application: causal, lengths, key padding, mask tensors, windows, strides, global
// tokens, top-k, ALiBi, T5's relative bias (mask.hpp).
#include "attn/attention/mask.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace attn {

namespace {
constexpr float neg_inf = -std::numeric_limits<float>::infinity();
} // namespace

bool Mask::allowed(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
  const std::int64_t p = i + (m - n);
  if (has_pattern()) {
    const bool in_pattern = (window >= 0 && std::llabs(p - j) <= window) || (stride > 0 && (p - j) % stride == 0) ||
                            (!global.empty() && (global[static_cast<std::size_t>(j)] ||
                                                 (p >= 0 && p < m && global[static_cast<std::size_t>(p)])));
    if (!in_pattern) return false;
  }
  if (causal && j > p) return false;
  if (padding(b, j)) return false;
  if (blocked && blocked->at(b, h, i, j) != 0) return false;
  return true;
}

void Mask::key_range(std::int64_t b, std::int64_t i0, std::int64_t i1, std::int64_t& lo, std::int64_t& hi) const {
  lo = 0;
  hi = m;
  if (!lengths.empty()) hi = std::min(hi, lengths[static_cast<std::size_t>(b)]);
  const std::int64_t p_first = i0 + (m - n), p_last = i1 - 1 + (m - n);
  if (causal) hi = std::min(hi, p_last + 1);
  if (window_only()) { // only keys near the diagonal
    lo = std::max(lo, p_first - window);
    hi = std::min(hi, p_last + window + 1);
  }
  hi = std::max(hi, lo);
}

bool Mask::needs_elementwise(std::int64_t b, std::int64_t i0, std::int64_t, std::int64_t j0, std::int64_t nj) const {
  if (has_pattern() || !key_padding.empty() || blocked || bias || !alibi.empty() || relative) return true;
  if (causal && j0 + nj - 1 > i0 + (m - n)) return true;
  if (!lengths.empty() && j0 + nj > lengths[static_cast<std::size_t>(b)]) return true;
  return false;
}

void zero_padding(float* x, std::int64_t B, std::int64_t n, std::int64_t width, const Mask& mask) {
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < n; ++i)
      if (mask.padding(b, i)) std::fill_n(x + (b * n + i) * width, width, 0.0f);
}

namespace {

// A (batch or 1, heads or 1, n, m + extra) mask from value(b, h, i, j) at keys j < m, 0 after them.
template <typename F>
std::unique_ptr<BroadcastMask> widened(std::int64_t batch, std::int64_t heads, std::int64_t n, std::int64_t m,
                                       std::int64_t extra, F&& value) {
  auto r = std::make_unique<BroadcastMask>();
  const std::int64_t mx = m + extra;
  r->values.assign(static_cast<std::size_t>(batch * heads * n * mx), 0.0f);
  r->sj = 1, r->si = mx, r->sh = heads > 1 ? n * mx : 0, r->sb = batch > 1 ? heads * n * mx : 0;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < m; ++j)
          r->values[static_cast<std::size_t>(((b * heads + h) * n + i) * mx + j)] = value(b, h, i, j);
  return r;
}

} // namespace

Mask with_extra_keys(const Mask& mk, std::int64_t batch, std::int64_t heads, std::int64_t n, std::int64_t extra) {
  if (mk.has_pattern() || mk.top_k > 0 || !mk.alibi.empty() || mk.relative)
    throw std::logic_error("with_extra_keys: a mask with patterns, top-k, ALiBi or a relative bias");
  if ((mk.blocked || mk.bias) && mk.n != n) throw std::logic_error("with_extra_keys: the mask is for other queries");
  const std::int64_t m = mk.m, mx = m + extra;
  Mask r;
  r.n = n, r.m = mx;
  if (!mk.lengths.empty() || !mk.key_padding.empty()) {
    r.key_padding.assign(static_cast<std::size_t>(batch * mx), 0);
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t j = 0; j < m; ++j) r.key_padding[static_cast<std::size_t>(b * mx + j)] = mk.padding(b, j);
  }
  const BroadcastMask* blocked = mk.blocked.get();
  if (mk.causal || blocked)
    r.blocked = widened(blocked && blocked->sb ? batch : 1, blocked && blocked->sh ? heads : 1, n, m, extra,
                        [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
                          const bool late = mk.causal && j > i + (m - n);
                          return late || (blocked && blocked->at(b, h, i, j) != 0) ? 1.0f : 0.0f;
                        });
  if (const BroadcastMask* bias = mk.bias.get())
    r.bias =
        widened(bias->sb ? batch : 1, bias->sh ? heads : 1, n, m, extra,
                [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) { return bias->at(b, h, i, j); });
  return r;
}

void zero_padding_rows(float* weights, std::int64_t B, std::int64_t H, std::int64_t n, std::int64_t m, const Mask& mask,
                       std::int64_t first) {
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < n; ++i)
      if (mask.padding(first + b, i))
        for (std::int64_t h = 0; h < H; ++h) std::fill_n(weights + ((b * H + h) * n + i) * m, m, 0.0f);
}

std::unique_ptr<BroadcastMask> broadcast_mask(std::vector<float> values, const Shape& shape, std::int64_t batch,
                                              std::int64_t heads, std::int64_t n, std::int64_t m,
                                              const std::string& label) {
  if (shape.size() < 2 || shape.size() > 4)
    throw Error(fmt::format("{}: expected rank 2 (n, m), 3 (batch, n, m) or 4 (batch, heads, n, m), got shape {}",
                            label, shape_str(shape)));
  // As (batch, heads, n, m): rank 2 is (1, 1, n, m), rank 3 is (batch, 1, n, m).
  Shape full = shape;
  if (full.size() == 3) full.insert(full.begin() + 1, 1);
  while (full.size() < 4) full.insert(full.begin(), 1);
  const Shape target{batch, heads, n, m};
  std::int64_t stride[4], s = 1;
  for (int ax = 3; ax >= 0; --ax) {
    const std::int64_t size = full[static_cast<std::size_t>(ax)];
    if (size != 1 && size != target[static_cast<std::size_t>(ax)])
      throw Error(fmt::format("{}: shape {} does not broadcast to (batch, heads, n, m) = {}", label, shape_str(shape),
                              shape_str(target)));
    stride[ax] = size == 1 ? 0 : s;
    s *= size;
  }
  auto mask = std::make_unique<BroadcastMask>();
  mask->values = std::move(values);
  mask->sb = stride[0];
  mask->sh = stride[1];
  mask->si = stride[2];
  mask->sj = stride[3];
  return mask;
}

namespace {

// s[r * rs + c * cs]: query i0 + r, key j0 + c
void mask_scores(float* s, std::int64_t rs, std::int64_t cs, const Mask& mk, std::int64_t b, std::int64_t h,
                 std::int64_t i0, std::int64_t ni, std::int64_t j0, std::int64_t nj) {
  if (!mk.has_pattern() && !mk.blocked && !mk.bias && mk.alibi.empty()) { // causal, padding, relative bias
    // the relative bias first, so that the blocked scores below are -inf whatever it adds
    if (mk.relative) {
      const std::int64_t p0 = i0 + (mk.m - mk.n); // query r at position p0 + r
      if (cs == 1)                                // rows of keys
        for (std::int64_t r = 0; r < ni; ++r) mk.relative->add_run(s + r * rs, h, j0 - (p0 + r), nj, 1);
      else // the transposed tiles: each key's run of queries, distances falling
        for (std::int64_t c = 0; c < nj; ++c) mk.relative->add_run(s + c * cs, h, j0 + c - p0, ni, -1);
    }
    for (std::int64_t c = 0; c < nj; ++c) {
      const std::int64_t j = j0 + c;
      // queries r < first see nothing of key j: all when it is padding, else those before it
      const std::int64_t first = mk.padding(b, j) ? ni
                                 : mk.causal      ? std::clamp<std::int64_t>(j - (mk.m - mk.n) - i0, 0, ni)
                                                  : 0;
      for (std::int64_t r = 0; r < first; ++r) s[r * rs + c * cs] = neg_inf;
    }
    return;
  }
  for (std::int64_t r = 0; r < ni; ++r)
    for (std::int64_t c = 0; c < nj; ++c) {
      float& x = s[r * rs + c * cs];
      if (!mk.allowed(b, h, i0 + r, j0 + c)) {
        x = neg_inf;
        continue;
      }
      if (mk.bias) x += mk.bias->at(b, h, i0 + r, j0 + c);
      if (!mk.alibi.empty()) x += static_cast<float>(mk.alibi_term(h, i0 + r, j0 + c));
      if (mk.relative) x += mk.relative_term(h, i0 + r, j0 + c);
    }
}

} // namespace

const char* pattern_part(const Mask& mask) {
  if (mask.blocked || mask.bias) return "a mask tensor (--attn-mask)";
  if (mask.window >= 0) return "--window";
  if (mask.stride > 0) return "--stride";
  if (!mask.global.empty()) return "--global";
  if (mask.top_k > 0) return "--top-k";
  if (!mask.alibi.empty()) return "ALiBi";
  if (mask.relative) return "a relative position bias";
  return nullptr;
}

void apply_mask(float* s, std::int64_t lds, const Mask& mk, std::int64_t b, std::int64_t h, std::int64_t i0,
                std::int64_t ni, std::int64_t j0, std::int64_t nj) {
  mask_scores(s, lds, 1, mk, b, h, i0, ni, j0, nj);
}

void apply_mask_transposed(float* st, std::int64_t ld, const Mask& mk, std::int64_t b, std::int64_t h, std::int64_t i0,
                           std::int64_t ni, std::int64_t j0, std::int64_t nj) {
  mask_scores(st, 1, ld, mk, b, h, i0, ni, j0, nj);
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
  r.alibi = mask.alibi;
  r.relative = mask.relative;
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
