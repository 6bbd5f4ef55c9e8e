// The logit lens (nostalgebraist, 2020; CONTRACT.md section 6.3, decode --lens): a layer's residual
// stream read as if it were the last, through the decoder's final norm and the unembedding, as the
// K most likely tokens and their log-probabilities at each position.
#pragma once

#include "attn/attention/mask.hpp"
#include "attn/model/generate.hpp"
#include "attn/model/transformer.hpp"

#include <cstdint>

namespace attn {

// Where one residual stream's tokens go: ids and logprobs (B, rows, n, K), at row `row`.
struct LensOut {
  std::int64_t* ids = nullptr;
  float* logprobs = nullptr;
  std::int64_t rows = 1, row = 0;
};

// resid (B, n, E) -> log_softmax(gen(norm(resid))): per position the K largest, most likely first
// (ties: the lower id first), into `out`; positions padded under `padding` get ids and logprobs 0.
// The logits go by blocks of rows, so memory does not grow with B n V.
void logit_lens(const float* resid, std::int64_t B, std::int64_t n, const Decoder& dec, const Generator& gen,
                std::int64_t K, const Mask& padding, const LensOut& out);

} // namespace attn
