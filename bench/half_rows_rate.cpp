// half_rows_rate OUT IN N [KIND]: batch-1 products (generation's steps) over N 16-bit weights
// (OUT, IN) from memory, 2 threads: the weights read in place as rows (LinearWeight::
// half_rows_in_place, the transposing tile) against the same values in column tiles
// (LinearWeight::half_rows), alternated over 15 rounds in one process. Prints both rates (GB/s of
// weights read, medians) and the median of the per-round ratios, and checks the two give the same
// bits. KIND: bf16 (default) or f16. Built by bench/bench_hf.sh, not by the project's build.
#include "attn/kernels/blas.hpp"
#include "attn/kernels/linear_weight.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

using namespace attn;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: half_rows_rate OUT IN N [bf16|f16]\n");
    return 2;
  }
  const long out = std::atol(argv[1]), in = std::atol(argv[2]), n = std::atol(argv[3]);
  const HalfKind kind = argc > 4 && std::strcmp(argv[4], "f16") == 0 ? HalfKind::F16 : HalfKind::BF16;
  blas::set_threads(2);
  std::mt19937 g(1);
  std::vector<LinearWeight> rows, tiles;
  for (long i = 0; i < n; ++i) {
    auto bits = std::make_shared<std::vector<std::uint16_t>>(static_cast<std::size_t>(out * in));
    for (auto& b : *bits) // values near 1 of either kind
      b = static_cast<std::uint16_t>(kind == HalfKind::BF16 ? 0x3f00 + g() % 0x100 : 0x3800 + g() % 0x800);
    rows.push_back(LinearWeight::half_rows_in_place(bits, kind, bits->data(), out, in));
    tiles.push_back(LinearWeight::half_rows(kind, bits->data(), out, in));
  }
  std::vector<float> x(static_cast<std::size_t>(in)), y(static_cast<std::size_t>(out)), y2(y.size());
  for (auto& v : x) v = static_cast<float>(g() % 1000) / 1000.0f;
  const double bytes = 2.0 * static_cast<double>(out * in * n);
  const auto rate = [&](const std::vector<LinearWeight>& ws) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < 3; ++rep)
      for (const auto& w : ws) blas::linear(y.data(), x.data(), WeightRows(w, 0, out), nullptr, 1);
    return 3 * bytes / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
  };
  std::vector<double> r_rows, r_tiles, ratio;
  for (int round = 0; round < 15; ++round) {
    r_tiles.push_back(rate(tiles));
    r_rows.push_back(rate(rows));
    ratio.push_back(r_rows.back() / r_tiles.back());
  }
  blas::linear(y.data(), x.data(), WeightRows(rows[0], 0, out), nullptr, 1);
  blas::linear(y2.data(), x.data(), WeightRows(tiles[0], 0, out), nullptr, 1);
  const bool same = std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)) == 0;
  std::printf("(%ld, %ld) x %ld %s: rows in place %.1f GB/s, tiles %.1f GB/s, ratio %.2f%s\n", out, in, n,
              kind == HalfKind::BF16 ? "bf16" : "f16", median(r_rows), median(r_tiles), median(ratio),
              same ? "" : "  DIFFERENT BITS");
  return same ? 0 : 1;
}
