// The activation names, and a probe's captures and interventions at each point (probe.hpp).
#include "attn/model/probe.hpp"

#include "attn/core/error.hpp"
#include "attn/core/names.hpp"

#include <algorithm>
#include <memory>
#include <utility>

namespace attn {

namespace {
constexpr Named<Act> act_names[] = {{"resid_pre", Act::ResidPre},
                                    {"q", Act::Q},
                                    {"k", Act::K},
                                    {"v", Act::V},
                                    {"scores", Act::Scores},
                                    {"pattern", Act::Pattern},
                                    {"z", Act::Z},
                                    {"attn_out", Act::AttnOut},
                                    {"resid_mid", Act::ResidMid},
                                    {"mlp_hidden", Act::MlpHidden},
                                    {"mlp_out", Act::MlpOut},
                                    {"resid_post", Act::ResidPost},
                                    {"cross_q", Act::CrossQ},
                                    {"cross_k", Act::CrossK},
                                    {"cross_v", Act::CrossV},
                                    {"cross_scores", Act::CrossScores},
                                    {"cross_pattern", Act::CrossPattern},
                                    {"cross_z", Act::CrossZ},
                                    {"cross_attn_out", Act::CrossAttnOut},
                                    {"cross_resid_mid", Act::CrossResidMid},
                                    {"final", Act::Final}};

std::size_t index(Act a) { return static_cast<std::size_t>(a); }

// Each cross-attention name beside its self-attention name.
constexpr std::pair<Act, Act> cross_forms[] = {{Act::Q, Act::CrossQ},
                                               {Act::K, Act::CrossK},
                                               {Act::V, Act::CrossV},
                                               {Act::Scores, Act::CrossScores},
                                               {Act::Pattern, Act::CrossPattern},
                                               {Act::Z, Act::CrossZ},
                                               {Act::AttnOut, Act::CrossAttnOut},
                                               {Act::ResidMid, Act::CrossResidMid}};
} // namespace

Act parse_act(std::string_view name) { return parse_named(name, act_names, "activation name"); }

std::string act_name(Act a) { return name_of(a, act_names); }

Act self_form(Act a) {
  for (const auto& [self, cross] : cross_forms)
    if (a == cross) return self;
  return a;
}

bool is_cross(Act a) { return a >= Act::CrossQ && a <= Act::CrossResidMid; }

bool per_head(Act a) {
  const Act s = self_form(a);
  return s == Act::Q || s == Act::K || s == Act::V || s == Act::Scores || s == Act::Pattern || s == Act::Z;
}

bool key_rows(Act a) { return self_form(a) == Act::K || self_form(a) == Act::V; }

bool steerable(Act a) {
  const Act s = self_form(a);
  return s == Act::ResidPre || s == Act::ResidMid || s == Act::ResidPost || s == Act::AttnOut || s == Act::MlpOut;
}

ActView rows_view(float* data, std::int64_t B, std::int64_t n, std::int64_t width) {
  return {data, B, 1, n, width, n * width, 0, width};
}

Act ProbeSite::act(Act a) const {
  if (cross)
    for (const auto& [self, cross_form] : cross_forms)
      if (a == self) return cross_form;
  return a;
}

// --- setting up ------------------------------------------------------------------------------------

Probe::Point& Probe::point(std::size_t layer) {
  if (layer == final_layer) return final_;
  if (points_.size() <= layer) points_.resize(layer + 1);
  return points_[layer];
}

const Probe::Point* Probe::find(std::size_t layer) const {
  if (layer == final_layer) return &final_;
  return layer < points_.size() ? &points_[layer] : nullptr;
}

void Probe::capture(std::size_t layer, Act a) { point(layer).capture[index(a)] = true; }

void Probe::ablate(std::size_t layer, bool cross, std::int64_t head, const Tensor* mean) {
  point(layer).ablate.push_back({cross, head, mean});
}

void Probe::patch(std::size_t layer, Act a, Tensor src, bool batched) {
  point(layer).patch[index(a)] = Patch{std::move(src), batched};
}

void Probe::steer(std::size_t layer, Act a, Tensor src, double scale) {
  point(layer).steer[index(a)].push_back({std::move(src), scale});
}

// --- during the run --------------------------------------------------------------------------------

bool Probe::captures(std::size_t layer, Act a) const {
  const Point* p = find(layer);
  return capturing && p && p->capture[index(a)];
}

bool Probe::changes(std::size_t layer, Act a) const {
  const Point* p = find(layer);
  if (!p) return false;
  if (p->patch[index(a)] || !p->steer[index(a)].empty()) return true;
  if (self_form(a) == Act::Z)
    return std::any_of(p->ablate.begin(), p->ablate.end(), [&](const Ablation& x) { return x.cross == is_cross(a); });
  return false;
}

bool Probe::patched_position(std::int64_t i) const {
  return patch_positions.empty() ||
         std::find(patch_positions.begin(), patch_positions.end(), i) != patch_positions.end();
}

bool Probe::patched_head(std::int64_t h) const {
  return patch_heads.empty() || std::find(patch_heads.begin(), patch_heads.end(), h) != patch_heads.end();
}

const float* Probe::patch_row(const Patch& p, const ActView& v, std::int64_t b, std::int64_t h,
                              std::int64_t pos) const {
  const std::int64_t rows = p.src.dim(p.src.shape().size() - 2); // the source's positions
  if (pos >= rows) return nullptr;
  return p.src.data() + (((p.batched ? item(b) : 0) * v.H + h) * rows + pos) * v.width;
}

void Probe::at(std::size_t layer, Act a, const ActView& v, const Mask* padding) const {
  const Point* p = find(layer);
  if (!p) return;
  const bool kernel_edited = self_form(a) == Act::Scores || self_form(a) == Act::Pattern;
  // head ablation: z's rows of the head, 0 or the mean
  if (self_form(a) == Act::Z)
    for (const Ablation& x : p->ablate) {
      if (x.cross != is_cross(a)) continue;
      for (std::int64_t b = 0; b < v.B; ++b)
        for (std::int64_t i = 0; i < v.n; ++i) {
          float* row = v.at(b, x.head, i);
          if (x.mean)
            std::copy_n(x.mean->data() + x.head * v.width, v.width, row);
          else
            std::fill_n(row, v.width, 0.0f);
        }
    }
  if (const auto& patch = p->patch[index(a)]; patch && !kernel_edited)
    for (std::int64_t b = 0; b < v.B; ++b)
      for (std::int64_t h = 0; h < v.H; ++h) {
        if (v.H > 1 && !patched_head(h)) continue;
        for (std::int64_t i = 0; i < v.n; ++i)
          if (patched_position(v.pos0 + i))
            if (const float* src = patch_row(*patch, v, b, h, v.pos0 + i)) std::copy_n(src, v.width, v.at(b, h, i));
      }
  for (const Steer& s : p->steer[index(a)]) {
    const int rank = static_cast<int>(s.src.shape().size());
    const std::int64_t rows = rank == 1 ? 1 : s.src.dim(rank - 2);
    const float scale = static_cast<float>(s.scale);
    for (std::int64_t b = 0; b < v.B; ++b)
      for (std::int64_t i = 0; i < v.n; ++i) {
        const std::int64_t pos = v.pos0 + i;
        if (rank > 1 && pos >= rows) continue; // a position the direction does not cover
        const std::int64_t at = rank == 1 ? 0 : rank == 2 ? pos : item(b) * rows + pos;
        const float* d = s.src.data() + at * v.width;
        float* row = v.at(b, 0, i);
        for (std::int64_t c = 0; c < v.width; ++c) row[c] += scale * d[c];
      }
  }
  if (!capturing || !p->capture[index(a)] || !sink_) return;
  const Shape shape = per_head(a) ? Shape{v.B, v.H, v.n, v.width} : Shape{v.B, v.n, v.width};
  if (v.owned && v.row == v.width && v.head == v.n * v.width && v.batch == v.H * v.n * v.width) {
    for (std::int64_t b = 0; b < v.B; ++b)
      for (std::int64_t i = 0; i < v.n; ++i)
        if (padding && padding->padding(b, i))
          for (std::int64_t h = 0; h < v.H; ++h) std::fill_n(v.at(b, h, i), v.width, 0.0f);
    sink_(layer, a, Tensor(shape, v.data, std::shared_ptr<const void>(v.data, [](const void*) {})));
    return;
  }
  Tensor& out = captured_[shape];
  if (out.shape() != shape) out = Tensor(shape, Uninitialized{});
  for (std::int64_t b = 0; b < v.B; ++b)
    for (std::int64_t h = 0; h < v.H; ++h)
      for (std::int64_t i = 0; i < v.n; ++i) {
        float* dst = out.data() + ((b * v.H + h) * v.n + i) * v.width;
        if (padding && padding->padding(b, i))
          std::fill_n(dst, v.width, 0.0f);
        else
          std::copy_n(v.at(b, h, i), v.width, dst);
      }
  sink_(layer, a, out);
}

void Probe::edit_rows(std::size_t layer, Act a, std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t ni,
                      float* s, std::int64_t lds, std::int64_t m) const {
  const Point* p = find(layer);
  if (!p || !p->patch[index(a)] || !patched_head(h)) return;
  const Patch& patch = *p->patch[index(a)];
  // the source's (H, n, m) per item: its own shape gives them
  const Shape& sh = patch.src.shape();
  const std::size_t r = sh.size();
  const std::int64_t H = sh[r - 3], n = sh[r - 2], sm = sh[r - 1];
  const std::int64_t src_item = patch.batched ? item(b) : 0;
  for (std::int64_t i = i0; i < std::min(i0 + ni, n); ++i)
    if (patched_position(i))
      std::copy_n(patch.src.data() + ((src_item * H + h) * n + i) * sm, std::min(m, sm), s + (i - i0) * lds);
}

} // namespace attn
