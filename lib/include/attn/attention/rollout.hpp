// Attention rollout and attention flow (Abnar and Zuidema, "Quantifying Attention Flow in
// Transformers", ACL 2020): how much each input position feeds each output position through the
// whole stack, from the per-layer attention weights a run wrote.
//
//   fused A_l (n, n) = mean, max or min over heads of layer l's weights
//   Ã_l = (1 - r) A_l + r I, rows renormalised to sum 1    (r = 0.5: the paper's residual weighting)
//   rollout = Ã_L ... Ã_2 Ã_1                             (row i: output position i over inputs j)
//   flow[i][j] = the maximum flow from input node j to output node i of the layer graph: nodes
//     (l, p) for l = 0..L, an edge (l-1, j) -> (l, i) of capacity Ã_l[i][j]
//     (Boost.Graph's push-relabel max flow, one per pair: n^2 flows over L n^2 edges)
//
// Query rows whose weights are all 0 in the first layer (padded positions) come out 0.
#pragma once

#include "attn/core/tensor.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace attn {

enum class HeadFusion { Mean, Max, Min };
HeadFusion parse_head_fusion(std::string_view s); // "mean" | "max" | "min"

// Ã (n, n) of one item's layer weights w (H, n, n) (row-major), as above.
std::vector<double> residual_attention(const float* w, std::int64_t H, std::int64_t n, HeadFusion fusion,
                                       double residual);

// layers: each (b, H, n, n). Rollout (b, n, n).
Tensor attention_rollout(const std::vector<Tensor>& layers, HeadFusion fusion, double residual);
// Flow (b, n, n); with `rows`, only those output rows are computed (the others 0).
Tensor attention_flow(const std::vector<Tensor>& layers, HeadFusion fusion, double residual,
                      const std::vector<std::int64_t>& rows = {});

} // namespace attn
