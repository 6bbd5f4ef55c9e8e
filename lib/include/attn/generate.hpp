// Autoregressive decoding with a sequence-to-sequence model's decoder (CONTRACT.md sections 3 and
// 5, decode --generate): target embeddings in, the generator's log-probabilities out, one token
// per step, greedy or beam search, with the decoder's key/value cache or recomputing the prefix.
#pragma once

#include "attn/attention.hpp"
#include "attn/embedding.hpp"
#include "attn/tensor.hpp"
#include "attn/transformer.hpp"
#include "attn/weights.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attn {

// The output layer: logits = x W^T + b, W (V, E).
struct Generator {
  Tensor weight; // (V, E)
  Tensor bias;   // (V), or empty
  std::int64_t vocab() const { return weight.dim(0); }
};

// generator/weight (and bias) of model group `g`, when it has one; E must be `embed_dim`.
std::optional<Generator> load_generator(const WeightGroup& g, std::int64_t embed_dim);

// logits (rows, V) = x (rows, E) W^T + b.
void generator_logits(float* logits, const float* x, const Generator& gen, std::int64_t rows);

struct GenerateOptions {
  std::int64_t max_len = 0; // generated tokens at most, end token included
  std::int64_t bos = 0, eos = 0, pad = 0;
  std::int64_t beam = 1; // 1: greedy
  bool cache = true;     // false: recompute the whole prefix at every step
};

struct Generated {
  TensorI tokens;             // (B, L): without the start token, with the end token, then pad
  std::vector<double> scores; // (B): the sum of the log-probabilities of the generated tokens
};

// Decodes every item of memory (B, s, Em) under `memory_mask` (its lengths or key padding; n = 1).
//
// Beam search keeps K hypotheses per item. At each step every live hypothesis proposes each token
// with score + log p(token); a finished one (it produced eos) proposes only itself, unchanged. The
// K best proposals survive (ties: the lower beam, then the lower token). It stops when every
// hypothesis has finished or max_len tokens were generated, and returns each item's best
// hypothesis. K = 1 is greedy decoding. Scores are not length-normalised.
Generated generate(const Decoder& dec, const TokenEmbedding& tgt, const Generator& gen, const float* memory,
                   std::int64_t batch, std::int64_t s, const Mask& memory_mask, const GenerateOptions& opt);

} // namespace attn
