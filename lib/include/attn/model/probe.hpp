// Looking inside a forward pass and changing it (CONTRACT.md section 6.3): each layer's named
// activations captured and handed to a sink, and the interventions applied where the activation is
// computed: head ablation, patches from another run, steering vectors. The layers call Probe::at at
// each point (transformer.cpp) and multi-head attention at q, k, v and z (mha.cpp); the raw scores
// and the weights are captured or edited row by row inside the attention kernel, which then keeps
// its row-block path (the one --emit-weights takes), never the float64 reference. Without a probe
// the layers run as before.
#pragma once

#include "attn/attention/mask.hpp"
#include "attn/core/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// The activation names of the contract's table, self-attention's and cross-attention's.
enum class Act {
  ResidPre,
  Q,
  K,
  V,
  Scores,
  Pattern,
  Z,
  AttnOut,
  ResidMid,
  MlpHidden,
  MlpOut,
  ResidPost,
  CrossQ,
  CrossK,
  CrossV,
  CrossScores,
  CrossPattern,
  CrossZ,
  CrossAttnOut,
  CrossResidMid,
  Final
};
constexpr int act_count = 21;

// "resid_pre" ...; an unknown name is a UsageError listing them.
Act parse_act(std::string_view name);
std::string act_name(Act a);
// q, k, v, scores, pattern, z and their cross forms: (b, heads, rows, width) with a head axis.
bool per_head(Act a);
bool is_cross(Act a);
// Cross forms to their self-attention name (CrossQ -> Q), others as they are.
Act self_form(Act a);
// k and v (and the cross forms): rows along the key axis.
bool key_rows(Act a);
// Where --steer may add a direction: the residual stream's names, attn_out, mlp_out (and the cross forms).
bool steerable(Act a);

// Rows of an activation in a layer's buffers: row (b, h, i), `width` floats, at
// data + b batch + h head + i row (H = 1, head = 0, for the (b, n, E) names). Row i stands at
// position pos0 + i (a generation step's rows: the positions it adds).
struct ActView {
  float* data = nullptr;
  std::int64_t B = 0, H = 1, n = 0, width = 0;
  std::int64_t batch = 0, head = 0, row = 0;
  std::int64_t pos0 = 0;
  // The buffer is the capture's to keep as it is (a probe's own scores, the weights): contiguous in
  // the emitted layout, its padded rows zeroed in place and handed to the sink without a copy.
  bool owned = false;
  float* at(std::int64_t b, std::int64_t h, std::int64_t i) const { return data + b * batch + h * head + i * row; }
};
// A contiguous (B, n, width) buffer as a view.
ActView rows_view(float* data, std::int64_t B, std::int64_t n, std::int64_t width);

// A captured activation of one batch chunk, contiguous: (B, H, n, width) for a per-head name,
// else (B, n, width). `layer` is Probe::final_layer for Final.
using ActivationSink = std::function<void(std::size_t layer, Act a, const Tensor& values)>;

class Probe {
public:
  static constexpr std::size_t final_layer = static_cast<std::size_t>(-1);

  // --- what it does (set before the run) ---
  void capture(std::size_t layer, Act a);
  void set_sink(ActivationSink sink) { sink_ = std::move(sink); }
  // Head h of layer's self-attention (cross: cross-attention) has z = 0, or mean (H, dh)'s row h.
  void ablate(std::size_t layer, bool cross, std::int64_t head, const Tensor* mean = nullptr);
  // The activation is replaced by src: its emitted shape (b_total, ...) when batched (item b of a
  // chunk is row first_item + b), else that shape without the batch axis.
  void patch(std::size_t layer, Act a, Tensor src, bool batched);
  // scale * src added: src (E,), (n, E) or (b_total, n, E) (`rank` of them, 1 to 3).
  void steer(std::size_t layer, Act a, Tensor src, double scale);
  // Patches touch only these positions (query axis; key axis for k and v) and heads (per-head
  // names); empty: all.
  std::vector<std::int64_t> patch_positions, patch_heads;
  // The chunk's first item in the whole batch, and rows per item (a beam search's K): row b of a
  // view is item first_item + b / rows_per_item (patch and steer sources with a batch axis).
  std::int64_t first_item = 0, rows_per_item = 1;
  // Off: the captures are not made (generation's steps, whose activations a teacher-forced pass over
  // the final sequence writes).
  bool capturing = true;

  // --- the layers' side ---
  bool captures(std::size_t layer, Act a) const;
  bool changes(std::size_t layer, Act a) const;
  bool touches(std::size_t layer, Act a) const { return captures(layer, a) || changes(layer, a); }
  // Interventions in place (not for scores and pattern: edit_rows), then the capture, with the rows
  // at padded positions (`padding`, query or key axis as the name's rows) 0 in the copy.
  void at(std::size_t layer, Act a, const ActView& v, const Mask* padding) const;
  // Scores or Pattern patched in rows i0 .. i0 + ni of (b, h), s with leading dimension lds.
  // (rows are positions; m keys: the source's first m columns; positions it lacks are left)
  void edit_rows(std::size_t layer, Act a, std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t ni, float* s,
                 std::int64_t lds, std::int64_t m) const;

private:
  struct Patch {
    Tensor src;
    bool batched = false;
  };
  struct Steer {
    Tensor src;
    double scale = 1;
  };
  struct Ablation {
    bool cross = false;
    std::int64_t head = 0;
    const Tensor* mean = nullptr; // (H, dh) or null: 0
  };
  struct Point { // what happens at one layer, by name
    std::vector<bool> capture = std::vector<bool>(act_count, false);
    std::vector<std::optional<Patch>> patch = std::vector<std::optional<Patch>>(act_count);
    std::vector<std::vector<Steer>> steer = std::vector<std::vector<Steer>>(act_count);
    std::vector<Ablation> ablate;
  };
  Point& point(std::size_t layer);
  const Point* find(std::size_t layer) const;
  // Row (b, h) at position pos of a patch's source, or null when the source has no such position.
  const float* patch_row(const Patch& p, const ActView& v, std::int64_t b, std::int64_t h, std::int64_t pos) const;
  std::int64_t item(std::int64_t b) const { return first_item + b / rows_per_item; }
  bool patched_position(std::int64_t i) const;
  bool patched_head(std::int64_t h) const;

  std::vector<Point> points_;                // by layer
  Point final_;                              // final_layer's
  mutable std::map<Shape, Tensor> captured_; // the captures' buffers, by shape, reused (a run's
                                             // points capture one at a time, its sink reads at once)
  ActivationSink sink_;
};

// Where a multi-head attention call stands in a probed run: its layer, self or cross, and the
// padding of its queries and keys (for the captures' zero rows).
struct ProbeSite {
  const Probe* probe = nullptr;
  std::size_t layer = 0;
  bool cross = false;
  const Mask* query_padding = nullptr;
  const Mask* key_padding = nullptr;
  std::int64_t pos0 = 0; // the call's first query (and new key) position: a generation step's
  bool kv_given = false; // keys and values come projected (a cache): the cache makes their changes
  // The self-attention name `a` at this site (cross: its cross form).
  Act act(Act a) const;
  bool captures(Act a) const { return probe->captures(layer, act(a)); }
  bool touches(Act a) const { return probe->touches(layer, act(a)); }
  bool changes(Act a) const { return probe->changes(layer, act(a)); }
  void at(Act a, ActView v) const {
    v.pos0 = pos0;
    probe->at(layer, act(a), v, key_rows(a) ? key_padding : query_padding);
  }
};

} // namespace attn
