// int8_matmul M K N THREADS: int8 matrix products of (M, K) inputs by an nn.Linear weight (N, K),
// ours (blas::linear on an int8 LinearWeight: inputs quantized per row inside the call, sums per
// block of 32 and per row) against oneDNN's u8 x s8 -> f32 matmul with a scale per output column
// (weights reordered to its own layout once, outside the timing; inputs given already quantized).
// oneDNN 2.6 takes scales per column only, so the per-block scheme has no oneDNN counterpart.
// On a CPU with AMX-INT8 ours is timed on its tiles and on VNNI's alone. Prints "name GMAC/s"
// lines, best of 7. Built by bench/bench_quantize.sh (libdnnl-dev), not by
// the project's build: the tools never use oneDNN.
#include "attn/kernels/blas.hpp"
#include "attn/kernels/linear_weight.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

double best_seconds(const std::function<void()>& run) {
  double best = 1e9;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: int8_matmul M K N THREADS\n");
    return 2;
  }
  const long M = std::atol(argv[1]), K = std::atol(argv[2]), N = std::atol(argv[3]);
  attn::blas::set_threads(std::atoi(argv[4]));
  std::mt19937 gen(1);
  std::uniform_int_distribution<int> q8(-127, 127);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(M * K)), y(static_cast<std::size_t>(M * N));
  for (float& v : x) v = unit(gen);
  attn::TensorI q({N, K});
  for (std::int64_t i = 0; i < q.size(); ++i) q.data()[i] = q8(gen);
  const double macs = double(M) * K * N;
  for (long block : {32L, 0L}) {
    const long blocks = block ? (K + block - 1) / block : 1;
    attn::Tensor scale({N, blocks});
    for (std::int64_t i = 0; i < scale.size(); ++i) scale.data()[i] = 0.01f;
    const attn::LinearWeight w = attn::LinearWeight::int8(q, scale, block);
    // on a CPU with AMX-INT8, its tiles (from amx_int8_rows() rows) and VNNI's alone, alternated
    const bool amx =
        std::string(attn::blas::int8_kernel_name(attn::blas::linear_isa())).find("amx") != std::string::npos;
    double best[2] = {1e9, 1e9};
    for (int round = 0; round < (amx ? 3 : 1); ++round)
      for (int vnni = 0; vnni < (amx ? 2 : 1); ++vnni) {
        attn::blas::prefer_vnni_int8(vnni == 1);
        best[vnni] = std::min(best[vnni], best_seconds([&] { attn::blas::linear(y.data(), x.data(), w, nullptr, M); }));
      }
    attn::blas::prefer_vnni_int8(false);
    std::printf("ours-%s %.1f", block ? "block32" : "row", macs / best[0] / 1e9);
    if (amx) std::printf(" (amx-int8; avx512-vnni alone %.1f)", macs / best[1] / 1e9);
    std::printf("\n");
  }

  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const memory::desc src_md({M, K}, memory::data_type::u8, memory::format_tag::ab);
  const memory::desc wei_any({K, N}, memory::data_type::s8, memory::format_tag::any);
  const memory::desc wei_md({K, N}, memory::data_type::s8, memory::format_tag::ba); // W (N, K) row-major
  const memory::desc dst_md({M, N}, memory::data_type::f32, memory::format_tag::ab);
  primitive_attr attr;
  attr.set_output_scales(1 << 1, std::vector<float>(static_cast<std::size_t>(N), 0.01f));
  const matmul::primitive_desc pd(matmul::desc(src_md, wei_any, dst_md), attr, eng);
  std::vector<std::uint8_t> xu(static_cast<std::size_t>(M * K));
  for (std::size_t i = 0; i < xu.size(); ++i) xu[i] = static_cast<std::uint8_t>(128 + q8(gen));
  std::vector<std::int8_t> wq(static_cast<std::size_t>(N * K));
  for (std::size_t i = 0; i < wq.size(); ++i) wq[i] = static_cast<std::int8_t>(q.data()[i]);
  memory src(src_md, eng, xu.data()), wei_user(wei_md, eng, wq.data()), dst(dst_md, eng, y.data());
  memory wei(pd.weights_desc(), eng);
  reorder(wei_user, wei).execute(strm, wei_user, wei);
  const matmul mm(pd);
  const double s = best_seconds([&] {
    mm.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    strm.wait();
  });
  std::printf("onednn-row %.1f %s\n", macs / s / 1e9, pd.impl_info_str());
}
