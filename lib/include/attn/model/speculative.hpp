// Generation past the memory-bandwidth bound (decode --generate --lookup / --draft): a drafter
// proposes the next few tokens, the model checks them all in one pass over its weights, and keeps
// the ones it would have chosen itself, so one pass yields one token or more.
//
// Greedy decoding keeps drafted tokens while each equals the model's own choice at its position:
// the output is plain greedy decoding's. A pass feeds at most max_draft_tokens + 1 positions, few
// enough that the step kernels compute each position's row with the bits they give it alone
// (blas::linear's chains, attention's few-query blocks), so the tokens are plain greedy's exactly.
// Sampling uses the speculative-sampling rule (Leviathan et al. 2023, Chen et al. 2023): drafted
// token x, drawn from the drafter's q, is kept with probability min(1, p(x) / q(x)); at the first
// refusal the token is drawn from max(0, p - q) renormalised; when every drafted token is kept, one
// more is drawn from p. Each token is then distributed as plain sampling's (not the same draws).
#pragma once

#include "attn/model/generate.hpp"
#include "attn/model/kv_cache.hpp"

#include <cstdint>
#include <vector>

namespace attn {

class Rng;

// Drafted tokens per pass at most: a pass of up to 15 positions stays on the step kernels.
constexpr std::int64_t max_draft_tokens = few_query_rows - 2;

class Drafter {
public:
  virtual ~Drafter() = default;
  // A new item: its state (a draft model's cache) starts over.
  virtual void start_item() {}
  // Up to n tokens that may follow seq (the item's prefix and generated tokens) into draft. With
  // sampling (rng not null) q receives each drafted token's distribution, (draft.size(), V) row
  // after row; left empty, each drafted token was certain (q(x) = 1).
  virtual void propose(const std::vector<std::int64_t>& seq, std::int64_t n, Rng* rng, std::vector<std::int64_t>& draft,
                       std::vector<double>& q) = 0;
};

// Prompt lookup (Hugging Face's prompt_lookup_num_tokens): the tokens that followed the first
// earlier occurrence of the sequence's last 3 tokens, else of its last 2, else of its last one.
class LookupDrafter : public Drafter {
public:
  static constexpr std::size_t max_ngram = 3;
  void propose(const std::vector<std::int64_t>& seq, std::int64_t n, Rng* rng, std::vector<std::int64_t>& draft,
               std::vector<double>& q) override;
};

// A smaller decoder-only model with the same vocabulary drafts greedily (or, sampling, from its
// own distribution under the same temperature, top-k and top-p), one cached step per token; its
// cache keeps what the model accepted and drops the rest.
class ModelDrafter : public Drafter {
public:
  // capacity: the positions an item can reach (prefix + max_len).
  ModelDrafter(const Decoder& dec, const TokenEmbedding& emb, const Generator& gen, const GenerateOptions& opt,
               std::int64_t capacity);
  void start_item() override;
  void propose(const std::vector<std::int64_t>& seq, std::int64_t n, Rng* rng, std::vector<std::int64_t>& draft,
               std::vector<double>& q) override;

private:
  const Decoder& dec_;
  const TokenEmbedding& emb_;
  const Generator& gen_;
  const GenerateOptions& opt_;
  std::int64_t capacity_;
  DecoderCache cache_;
  std::vector<std::int64_t> fed_; // the tokens at the cache's positions
  Tensor x_, logits_;
};

// Counts of a speculative generation, for --verbose.
struct SpeculativeStats {
  std::int64_t passes = 0;   // passes of the model over its weights (the prompt's prefill not counted)
  std::int64_t drafted = 0;  // tokens the drafter proposed
  std::int64_t accepted = 0; // of them, kept
  std::int64_t tokens = 0;   // tokens generated
};

// generate() with a drafter (beam 1, with the cache, without interventions; a stack whose
// feed-forward has a causal convolution is refused: its state cannot go back). Items one at a time.
Generated generate_speculative(const Decoder& dec, const TokenEmbedding& tgt, const Generator& gen, const float* memory,
                               std::int64_t batch, std::int64_t s, const Mask& memory_mask, const GenerateOptions& opt,
                               Drafter& drafter, std::int64_t draft_tokens, SpeculativeStats* stats = nullptr);

} // namespace attn
