// Attention rollout and flow (rollout.hpp).
#include "attn/attention/rollout.hpp"

#include "attn/core/names.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/kernels/parallel.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>

#include <algorithm>

namespace attn {

namespace {
constexpr Named<HeadFusion> fusions[] = {
    {"mean", HeadFusion::Mean}, {"max", HeadFusion::Max}, {"min", HeadFusion::Min}};
} // namespace

HeadFusion parse_head_fusion(std::string_view s) { return parse_named(s, fusions, "head fusion"); }

std::vector<double> residual_attention(const float* w, std::int64_t H, std::int64_t n, HeadFusion fusion,
                                       double residual) {
  std::vector<double> a(static_cast<std::size_t>(n * n));
  for (std::int64_t e = 0; e < n * n; ++e) {
    double v = w[e];
    for (std::int64_t h = 1; h < H; ++h) {
      const double x = w[h * n * n + e];
      v = fusion == HeadFusion::Mean ? v + x : fusion == HeadFusion::Max ? std::max(v, x) : std::min(v, x);
    }
    a[static_cast<std::size_t>(e)] = (fusion == HeadFusion::Mean ? v / static_cast<double>(H) : v) * (1 - residual);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    double* row = a.data() + i * n;
    row[i] += residual;
    double sum = 0;
    for (std::int64_t j = 0; j < n; ++j) sum += row[j];
    if (sum > 0)
      for (std::int64_t j = 0; j < n; ++j) row[j] /= sum;
  }
  return a;
}

Tensor fused_layer(const Tensor& weights, HeadFusion fusion, double residual) {
  const std::int64_t B = weights.dim(0), H = weights.dim(1), n = weights.dim(2);
  Tensor out(Shape{B, n, n}, Uninitialized{});
  parallel_for(B, threads_if(B > 1), [&](std::int64_t b) {
    const std::vector<double> a = residual_attention(weights.data() + b * H * n * n, H, n, fusion, residual);
    std::transform(a.begin(), a.end(), out.data() + b * n * n, [](double v) { return static_cast<float>(v); });
  });
  return out;
}

std::vector<std::uint8_t> padded_queries(const Tensor& first) {
  const std::int64_t B = first.dim(0), H = first.dim(1), n = first.dim(2);
  std::vector<std::uint8_t> pad(static_cast<std::size_t>(B * n), 1);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < n; ++i) {
        const float* row = first.data() + ((b * H + h) * n + i) * n;
        if (std::any_of(row, row + n, [](float v) { return v != 0.0f; })) pad[static_cast<std::size_t>(b * n + i)] = 0;
      }
  return pad;
}

Tensor attention_rollout(const std::vector<Tensor>& fused, const std::vector<std::uint8_t>& padded) {
  const std::int64_t B = fused.front().dim(0), n = fused.front().dim(1);
  Tensor out(Shape{B, n, n});
  // r = Ã_l r from r = I, in float32 products (sgemm: O(L n^3) per item)
  std::vector<float> next(static_cast<std::size_t>(n * n));
  for (std::int64_t b = 0; b < B; ++b) {
    float* r = out.data() + b * n * n;
    for (std::int64_t i = 0; i < n; ++i) r[i * n + i] = 1;
    for (const Tensor& a : fused) {
      blas::gemm(false, false, n, n, n, 1.0f, a.data() + b * n * n, n, r, n, 0.0f, next.data(), n);
      std::copy(next.begin(), next.end(), r);
    }
    for (std::int64_t i = 0; i < n; ++i)
      if (padded[static_cast<std::size_t>(b * n + i)]) std::fill_n(r + i * n, n, 0.0f);
  }
  return out;
}

namespace {

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using Graph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<boost::edge_capacity_t, double,
                    boost::property<boost::edge_residual_capacity_t, double,
                                    boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;

// The layer graph of one item: node l * n + p, an edge (l-1, j) -> (l, i) of capacity Ã_l[i][j]
// (and its reverse of capacity 0, as the max-flow algorithms need).
Graph layer_graph(const std::vector<Tensor>& fused, std::int64_t b) {
  const std::int64_t n = fused.front().dim(1), L = static_cast<std::int64_t>(fused.size());
  Graph g(static_cast<std::size_t>((L + 1) * n));
  auto cap = boost::get(boost::edge_capacity, g);
  auto rev = boost::get(boost::edge_reverse, g);
  for (std::int64_t l = 1; l <= L; ++l) {
    const float* a = fused[static_cast<std::size_t>(l - 1)].data() + b * n * n;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const double c = a[i * n + j];
        if (c <= 0) continue;
        const auto u = static_cast<std::size_t>((l - 1) * n + j), v = static_cast<std::size_t>(l * n + i);
        const auto e = boost::add_edge(u, v, g).first, r = boost::add_edge(v, u, g).first;
        cap[e] = c, cap[r] = 0, rev[e] = r, rev[r] = e;
      }
  }
  return g;
}

} // namespace

Tensor attention_flow(const std::vector<Tensor>& fused, const std::vector<std::uint8_t>& padded,
                      const std::vector<std::int64_t>& rows) {
  const std::int64_t B = fused.front().dim(0), n = fused.front().dim(1), L = static_cast<std::int64_t>(fused.size());
  Tensor out(Shape{B, n, n});
  std::vector<std::int64_t> wanted = rows;
  if (wanted.empty())
    for (std::int64_t i = 0; i < n; ++i) wanted.push_back(i);
  for (std::int64_t b = 0; b < B; ++b) {
    const auto pairs = static_cast<std::int64_t>(wanted.size()) * n;
    // each thread its own graph: a flow writes its residual capacities
#pragma omp parallel num_threads(blas::threads()) if (pairs > 16)
    {
      Graph g = layer_graph(fused, b);
#pragma omp for schedule(dynamic)
      for (std::int64_t p = 0; p < pairs; ++p) {
        const std::int64_t i = wanted[static_cast<std::size_t>(p / n)], j = p % n;
        if (padded[static_cast<std::size_t>(b * n + i)]) continue;
        const auto source = static_cast<std::size_t>(j), sink = static_cast<std::size_t>(L * n + i);
        out.data()[(b * n + i) * n + j] = static_cast<float>(boost::push_relabel_max_flow(g, source, sink));
      }
    }
  }
  return out;
}

} // namespace attn
