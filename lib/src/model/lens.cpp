// The logit lens (lens.hpp).
#include "attn/model/lens.hpp"

#include "attn/kernels/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace attn {

namespace {
constexpr std::int64_t lens_rows = 256; // logits of this many positions at a time
}

void logit_lens(const float* resid, std::int64_t B, std::int64_t n, const Decoder& dec, const Generator& gen,
                std::int64_t K, const Mask& padding, const LensOut& out) {
  const std::int64_t E = dec.embed_dim(), V = gen.vocab(), total = B * n;
  Tensor x(Shape{std::min(total, lens_rows), E}, Uninitialized{});
  Tensor logits(Shape{std::min(total, lens_rows), V}, Uninitialized{});
  for (std::int64_t r0 = 0; r0 < total; r0 += lens_rows) {
    const std::int64_t rows = std::min(lens_rows, total - r0);
    std::copy_n(resid + r0 * E, rows * E, x.data());
    if (dec.has_final_norm) normalize(x.data(), rows, dec.norm, dec.opt);
    generator_logits(logits.data(), x.data(), gen, rows);
    parallel_for(rows, threads_if(rows * V >= (1 << 16)), [&](std::int64_t r) {
      const std::int64_t bi = r0 + r, b = bi / n, i = bi % n;
      const std::int64_t at = ((b * out.rows + out.row) * n + i) * K;
      std::int64_t* ids = out.ids + at;
      float* lp = out.logprobs + at;
      if (padding.padding(b, i)) {
        std::fill_n(ids, K, 0);
        std::fill_n(lp, K, 0.0f);
        return;
      }
      const float* row = logits.data() + r * V;
      const float mx = *std::max_element(row, row + V);
      double sum = 0;
      for (std::int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
      const double lse = mx + std::log(sum);
      std::vector<std::int64_t> best;
      top_tokens(row, V, K, best);
      for (std::int64_t k = 0; k < K; ++k) {
        ids[k] = best[static_cast<std::size_t>(k)];
        lp[k] = static_cast<float>(row[ids[k]] - lse);
      }
    });
  }
}

} // namespace attn
