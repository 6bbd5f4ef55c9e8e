// The parameters of attn-score's and mha-run's other attention forms, read from a weight group
// (a --params file, or a module's group): score functions, Performer's features, Linformer's
// projections, location-aware attention.
#pragma once

#include "attn/attention/linear_attention.hpp"
#include "attn/attention/location_attention.hpp"
#include "attn/attention/score.hpp"
#include "attn/weights/weights.hpp"

#include <cstdint>
#include <string_view>

namespace attn {

// The parameters of `kind` from group g (W; or W_q, W_k and v, whose length is the hidden size;
// or W_a), each shape checked against d_q, d_k and m. The caller then checks that g holds nothing
// else.
ScoreParams load_score_params(const WeightGroup& g, ScoreKind kind, std::int64_t d_q, std::int64_t d_k, std::int64_t m);

// The parameters of `kind` from a --params group: performer `features (M, d)`, linformer `E (k, m)`
// and `F (k, m)` (k at most m). Shapes are checked against d (`d_from` says where it comes from)
// and m (m < 0: E's own, F must match it); the caller checks that the group holds nothing else.
Tensor load_favor_features(const WeightGroup& g, std::int64_t d, std::string_view d_from);
LinformerProjections load_linformer(const WeightGroup& g, std::int64_t m);

// From group g: h from v, K and r from F (r odd), every shape checked. The caller then checks that
// g holds nothing else.
LocationAwareParams load_location_aware(const WeightGroup& g, std::int64_t d_q, std::int64_t d_k);

// Each written in the layout its load_* reads, float32 (attn-score --save-params), beside save_mha:
// a score's W, W_a, or W_q, W_k and v (nothing for the dot products); Performer's features;
// Linformer's E and F; location-aware attention's W_q, W_k, v, U, F and b.
void save_score_params(const WeightWriter& w, ScoreKind kind, const ScoreParams& p);
void save_favor_features(const WeightWriter& w, const Tensor& features);
void save_linformer(const WeightWriter& w, const LinformerProjections& p);
void save_location_aware(const WeightWriter& w, const LocationAwareParams& p);
// The dataset that names a group of `kind`'s parameters in an output file (its first).
const char* score_params_primary(ScoreKind kind);

} // namespace attn
