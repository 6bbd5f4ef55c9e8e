// Autoregressive decoding with a sequence-to-sequence model's decoder (CONTRACT.md sections 3 and
// 5, decode --generate): target embeddings in, the generator's log-probabilities out, one token
// per step, greedy or beam search, with the decoder's key/value cache or recomputing the prefix.
#pragma once

#include "attn/attention/attention.hpp"
#include "attn/core/tensor.hpp"
#include "attn/model/embedding.hpp"
#include "attn/model/transformer.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace attn {

// The output layer: logits = (s x) W^T + b, W (V, E).
struct Generator {
  LinearWeight weight;      // (V, E), any format
  Tensor bias;              // (V), or empty: BART's final_logits_bias
  float input_scale = 1.0f; // s: T5's d_model^-0.5 before a head tied to the embeddings
  std::int64_t vocab() const { return weight.dim(0); }
};

// logits (rows, V) = (s x (rows, E)) W^T + b.
void generator_logits(float* logits, const float* x, const Generator& gen, std::int64_t rows);
// A teacher-forced target's logits (B, t, V) from the stack's output x (B, t, E); the rows of
// padded positions (self_mask's lengths or key padding) are 0, as their outputs are.
void target_logits(float* logits, const float* x, const Generator& gen, std::int64_t B, std::int64_t t,
                   const Mask& self_mask);

// Whether `steps` cached steps of `rows` rows (items x beams) each read the float32 Linear weights
// (and the memory's keys) in column tiles: when steps of that many rows read tiles in place
// (blas::tile_rows) and there are enough of them to repay laying the weights out (one pass over
// them, about what two steps read).
bool steps_use_tiles(std::int64_t rows, std::int64_t steps);

// Before generating `steps` tokens with the cache, `rows` per step: the float32 Linear weights of
// the decoder and the generator still in rows laid out in column tiles (LinearWeight::to_tiles)
// when steps_use_tiles, but for those borrowed from a mapped file when the steps read them in
// place (blas::f32_steps_in_place). The bits stay the same. The number of weights laid out so now (a loader
// may have read them so already: WeightGroup::set_linear_tiles).
int tile_for_steps(Decoder& dec, Generator& gen, std::int64_t rows, std::int64_t steps);

// True when the decoder holds quantized Linear weights (int8 or float16, linear_weight.hpp): what
// decode's --kv-cache auto keeps the memory's keys and values in float16 for.
bool quantized_decoder(const Decoder& dec);

// best = the (at most) K tokens of the largest logits, the lower token first among equal logits,
// in that order: the only tokens of a row that can be among a beam search step's K best proposals
// (the row's score is one for all its tokens). One pass with the K best so far: sorting all V
// proposals of a step over V = 32000 took more time than the rest of its work but the products.
void top_tokens(const float* logits, std::int64_t V, std::int64_t K, std::vector<std::int64_t>& best);

struct GenerateOptions {
  std::int64_t max_len = 0; // generated tokens at most, end token included
  std::int64_t bos = 0, eos = 0, pad = 0;
  // Further end tokens (a Hugging Face config's eos_token_id list): a row ends at eos or any of them.
  std::vector<std::int64_t> more_eos;
  bool ends(std::int64_t token) const {
    return token == eos || std::find(more_eos.begin(), more_eos.end(), token) != more_eos.end();
  }
  // Hugging Face's forced_bos_token_id and forced_eos_token_id (BART): the first token generated
  // after a lone start token, and a row's max_len-th token, are these (-1: none), whatever the
  // logits say; a forced token's log-probability counts as 0 (the processed distribution's, as
  // transformers' beam scores count it).
  std::int64_t forced_first = -1, forced_last = -1;
  std::int64_t beam = 1; // 1: greedy
  bool cache = true;     // false: recompute the whole prefix at every step
  // The cache's memory keys and values in float16 for the steps (kv_cache.hpp, StepKV::f16): half
  // the bytes each step's cross-attention reads, the values rounded to float16.
  bool kv_f16 = false;
  // Prompts (B, prompt_cols), row b's first prompt_lengths[b] ids (all of them when null; right
  // padding beyond): each item's prefix, fed before anything is generated, instead of bos. A
  // prompt of length 0 starts from bos. Null: every item starts from bos.
  const std::int64_t* prompt = nullptr;
  std::int64_t prompt_cols = 0;
  const std::int64_t* prompt_lengths = nullptr;
  // Sampling (beam 1): each token drawn from softmax(logits / temperature), kept to the top_k most
  // likely (0: all) and then to the smallest set of them whose probability reaches top_p.
  // temperature 0 is greedy. Item b (counted from first_item) draws from Rng(seed + b), so the
  // tokens do not depend on how the batch is split.
  double temperature = 0;
  std::int64_t top_k = 0;
  double top_p = 1.0;
  std::uint64_t seed = 0;
  std::int64_t first_item = 0;
  // Called with beam 1 for each token as it is chosen (the item, counted from first_item, and the
  // token), so a caller can show the text as it is generated.
  std::function<void(std::int64_t item, std::int64_t token)> on_token;
  // Interventions made at every step (probe.hpp; its rows_per_item the beam, captures off): a patch
  // or steer at the positions it names, the cache holding the changed keys and values.
  const Probe* probe = nullptr;
};

// log(sum exp(logits)) of one row, in double: log p(v) = logits[v] - that.
double log_sum_exp(const float* logits, std::int64_t V);

// p (V): the distribution sampling draws a row's token from (softmax(logits / temperature) kept to
// top_k, then top_p, renormalised; 0 for the tokens it never draws), as generate() samples.
void token_probabilities(const float* logits, std::int64_t V, const GenerateOptions& opt, std::vector<double>& p);

// Each item's prefix: the ids of its prompt (as long as its length), or bos alone.
std::vector<std::vector<std::int64_t>> prompt_prefixes(std::int64_t batch, const GenerateOptions& opt);

struct Generated {
  TensorI tokens;             // (B, L): generated (neither bos nor the prompt), the end token, then pad
  std::vector<double> scores; // (B): the sum of the generated tokens' log-probabilities (temperature 1)
};

// A batch's generated tokens and scores, gathered as its chunks finish: (B, max_len) until the end,
// when `longest`, the longest row, is known.
struct GeneratedBatch {
  GeneratedBatch(std::int64_t items, std::int64_t max_len, std::int64_t pad);
  TensorI tokens;           // (B, max_len): each row's tokens, then pad
  Tensor scores;            // (B)
  std::int64_t longest = 1; // the longest row so far (at least 1)
  // Items [first, first + count) as generate() returned them.
  void add(std::int64_t first, const Generated& r);
  // tokens (B, longest).
  TensorI trimmed() const;

private:
  std::int64_t pad_;
};

// Each item's whole sequence as a teacher-forced run takes it (the activations of a generation):
// its prefix (its prompt, or bos; opt.prompt as for the whole batch) and its generated tokens
// through the end token, right-padded with opt.pad to the longest; lengths per item.
struct Sequences {
  TensorI ids; // (B, T)
  std::vector<std::int64_t> lengths;
};
Sequences final_sequences(const GeneratedBatch& batch, const GenerateOptions& opt);
// Items [b0, b0 + n) of `seq` teacher-forced through the decoder (causal, their lengths), over
// memory (n, s, Em) under memory_mask (the batch's, n = 1), with `probe`: a generation's
// activations. self_mask receives the items' mask (the lens reads its padding).
void forward_sequences(const Decoder& dec, const TokenEmbedding& tgt, const Sequences& seq, std::int64_t b0,
                       std::int64_t n, const float* memory, std::int64_t s, const Mask& memory_mask, Mask& self_mask,
                       const Probe* probe);

// Decodes every item of memory (B, s, Em) under `memory_mask` (its lengths or key padding; n = 1);
// with a decoder-only stack, memory is null and s = 0, and B items are generated from their prompts.
//
// Beam search keeps K hypotheses per item. At each step every live hypothesis proposes each token
// with score + log p(token); a finished one (it produced eos) proposes only itself, unchanged. The
// K best proposals survive (ties: the lower beam, then the lower token). It stops when every
// hypothesis has finished or max_len tokens were generated, and returns each item's best
// hypothesis. K = 1 is greedy decoding. Scores are not length-normalised.
Generated generate(const Decoder& dec, const TokenEmbedding& tgt, const Generator& gen, const float* memory,
                   std::int64_t batch, std::int64_t s, const Mask& memory_mask, const GenerateOptions& opt);

} // namespace attn
