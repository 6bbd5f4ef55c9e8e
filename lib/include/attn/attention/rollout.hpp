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

// Ã (b, n, n) of a layer's weights (b, H, n, n): what rollout and flow keep of a layer, so a caller
// reads one layer's weights at a time (12 layers of (8, 12, 512, 512): 1.2 GB, their Ã 100 MB).
Tensor fused_layer(const Tensor& weights, HeadFusion fusion, double residual);
// The rows all 0 over every head of the first layer's weights (b, H, n, n): padded queries, (b, n).
std::vector<std::uint8_t> padded_queries(const Tensor& first_layer);

// Rollout (b, n, n) of the layers' Ã in order; padded queries' rows 0.
Tensor attention_rollout(const std::vector<Tensor>& fused, const std::vector<std::uint8_t>& padded);
// Flow (b, n, n); with `rows`, only those output rows are computed (the others 0).
Tensor attention_flow(const std::vector<Tensor>& fused, const std::vector<std::uint8_t>& padded,
                      const std::vector<std::int64_t>& rows = {});

} // namespace attn
