// Unit tests of lib/src/model/speculative.cpp: prompt lookup's drafts; greedy generation with
// drafted tokens gives plain greedy's tokens and scores to the bit (the trained LLaMA-layout model
// and the sequence-to-sequence decoder over a memory, drafts kept and refused); sampling with
// drafted tokens draws each sequence with the model's own probabilities (chi-square against the
// exact distribution of the first two tokens, fixed seeds).
#include "attn/core/error.hpp"
#include "attn/model/speculative.hpp"
#include "attn/weights/models.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <vector>

using namespace attn;

namespace {

using Ids = std::vector<std::int64_t>;

Ids lookup(const Ids& seq, std::int64_t n) {
  LookupDrafter d;
  Ids draft;
  std::vector<double> q;
  d.propose(seq, n, nullptr, draft, q);
  CHECK(q.empty());
  return draft;
}

// The reversal model of testdata/llama_reverse.h5: vocabulary 14, <s> 1, </s> 2, <sep> 3, digit d 4 + d.
struct Llama {
  h5::InputFiles in;
  DecoderModel m = load_decoder_model(WeightGroup::open(in, {test::testdata("llama_reverse.h5"), "/w"}), false);
  TokenEmbedding emb = target_embedding(m);
};

// A draft model that often disagrees: the same model with its generator's weights plus noise.
Generator noisy_generator(const Generator& gen, double scale) {
  Generator g;
  Tensor w = gen.weight.to_float();
  const Tensor noise = test::random_tensor(w.shape(), 99, scale);
  for (std::int64_t i = 0; i < w.size(); ++i) w.data()[i] += noise.data()[i];
  g.weight = LinearWeight(std::move(w));
  g.bias = gen.bias;
  return g;
}

GenerateOptions greedy_options(const Ids& prompt, std::int64_t max_len) {
  GenerateOptions g;
  g.max_len = max_len, g.bos = 1, g.eos = 2, g.pad = 0;
  g.prompt = prompt.data(), g.prompt_cols = static_cast<std::int64_t>(prompt.size());
  return g;
}

void check_same(const Generated& a, const Generated& b) {
  REQUIRE(a.tokens.shape() == b.tokens.shape());
  CHECK(std::vector<std::int64_t>(a.tokens.data(), a.tokens.data() + a.tokens.size()) ==
        std::vector<std::int64_t>(b.tokens.data(), b.tokens.data() + b.tokens.size()));
  CHECK(a.scores == b.scores); // the bits
}

} // namespace

TEST_CASE("LookupDrafter: what followed the first earlier occurrence of the last 3, 2 or 1 tokens") {
  CHECK(lookup({5, 6, 7, 8, 9, 5, 6, 7}, 3) == Ids{8, 9, 5});
  CHECK(lookup({5, 6, 7, 8, 9, 5, 6, 7}, 1) == Ids{8});
  CHECK(lookup({1, 6, 7, 2, 6, 7, 3, 9, 7}, 4) == Ids{2, 6, 7, 3}); // no 3- or 2-gram: the first 1-gram "7"
  CHECK(lookup({4, 5, 9, 4, 5}, 8) == Ids{9, 4, 5});                // cut at the sequence's end
  CHECK(lookup({1, 2, 3, 4}, 4).empty());                           // nothing occurred before
  CHECK(lookup({7}, 4).empty());
  CHECK(lookup({7, 7}, 4) == Ids{7});
}

TEST_CASE("greedy with drafted tokens: plain greedy decoding's tokens and scores, to the bit") {
  Llama l;
  const Generator draft_gen = noisy_generator(*l.m.gen, 3.0);
  const Ids prompts[] = {{1, 7, 5, 8, 5, 9, 3}, {1, 4, 4, 4, 5, 4, 4, 3}, {1, 13, 6, 3}};
  for (const Ids& prompt : prompts) {
    const GenerateOptions g = greedy_options(prompt, 9);
    const Generated plain = generate(l.m.dec, l.emb, *l.m.gen, nullptr, 1, 0, Mask(), g);
    for (const std::int64_t n : {std::int64_t{1}, std::int64_t{3}, max_draft_tokens}) {
      LookupDrafter lookup;
      SpeculativeStats st;
      check_same(generate_speculative(l.m.dec, l.emb, *l.m.gen, nullptr, 1, 0, Mask(), g, lookup, n, &st), plain);
      CHECK(st.tokens == plain.tokens.dim(1));
      ModelDrafter same(l.m.dec, l.emb, *l.m.gen, g, 20), noisy(l.m.dec, l.emb, draft_gen, g, 20);
      check_same(generate_speculative(l.m.dec, l.emb, *l.m.gen, nullptr, 1, 0, Mask(), g, same, n, &st), plain);
      CHECK(st.accepted == st.drafted); // the model drafting for itself: every token kept
      check_same(generate_speculative(l.m.dec, l.emb, *l.m.gen, nullptr, 1, 0, Mask(), g, noisy, n, &st), plain);
      if (n > 1) CHECK(st.accepted < st.drafted);
    }
  }
  SUBCASE("a batch: each item's tokens as the batch's plain greedy decoding") {
    const Ids batch = {1, 7, 5, 8, 9, 6, 3, /**/ 1, 4, 4, 3, 0, 0, 0};
    GenerateOptions g = greedy_options(batch, 9);
    g.prompt_cols = 7;
    const std::int64_t lengths[] = {7, 4}; // right padding beyond
    g.prompt_lengths = lengths;
    const Generated plain = generate(l.m.dec, l.emb, *l.m.gen, nullptr, 2, 0, Mask(), g);
    LookupDrafter lookup;
    const Generated spec = generate_speculative(l.m.dec, l.emb, *l.m.gen, nullptr, 2, 0, Mask(), g, lookup, 4);
    CHECK(std::vector<std::int64_t>(spec.tokens.data(), spec.tokens.data() + spec.tokens.size()) ==
          std::vector<std::int64_t>(plain.tokens.data(), plain.tokens.data() + plain.tokens.size()));
  }
}

TEST_CASE("greedy with prompt lookup over a memory: the sequence-to-sequence decoder's plain tokens and scores") {
  h5::InputFiles in;
  DecoderModel m = load_decoder_model(WeightGroup::open(in, {test::testdata("reverse_model.h5"), ""}), false);
  const TokenEmbedding emb = target_embedding(m);
  const std::int64_t s = 10, Em = m.dec.memory_dim();
  const Tensor memory = test::random_tensor(Shape{s, Em}, 5);
  Mask mm;
  mm.n = 1, mm.m = s, mm.lengths = {7};
  for (bool f16 : {false, true}) {
    GenerateOptions g;
    g.max_len = 12, g.bos = 1, g.eos = 2, g.kv_f16 = f16;
    const Generated plain = generate(m.dec, emb, *m.gen, memory.data(), 1, s, mm, g);
    LookupDrafter lookup;
    check_same(generate_speculative(m.dec, emb, *m.gen, memory.data(), 1, s, mm, g, lookup, 5), plain);
  }
}

TEST_CASE("generate_speculative refuses beams, no cache, interventions and too many drafted tokens") {
  Llama l;
  const Ids prompt = {1, 5, 3};
  GenerateOptions g = greedy_options(prompt, 4);
  LookupDrafter d;
  const auto run = [&](std::int64_t n) {
    generate_speculative(l.m.dec, l.emb, *l.m.gen, nullptr, 1, 0, Mask(), g, d, n);
  };
  CHECK_THROWS_AS(run(max_draft_tokens + 1), UsageError);
  CHECK_THROWS_AS(run(0), UsageError);
  g.beam = 2;
  CHECK_THROWS_AS(run(2), UsageError);
  g.beam = 1, g.cache = false;
  CHECK_THROWS_AS(run(2), UsageError);
}

namespace {

// The exact probability of each first two generated tokens (t0, t1) when sampling under g from
// `prompt`: P(t0) P(t1 | prompt t0), each from the model's logits at the prompt's last position.
std::map<std::pair<std::int64_t, std::int64_t>, double> exact_pairs(const Llama& l, const Ids& prompt,
                                                                    const GenerateOptions& g) {
  const std::int64_t V = l.m.gen->vocab(), E = l.m.dec.embed_dim();
  const auto next = [&](const Ids& seq) { // the distribution after seq
    const auto n = static_cast<std::int64_t>(seq.size());
    Tensor x(Shape{1, n, E});
    embed_tokens(x.data(), seq.data(), 1, n, l.emb, 0, "test");
    Mask causal;
    causal.n = causal.m = n, causal.causal = true;
    decoder_forward(l.m.dec, x.data(), 1, n, nullptr, 0, causal, Mask(), {});
    std::vector<float> logits(static_cast<std::size_t>(V));
    generator_logits(logits.data(), x.data() + (n - 1) * E, *l.m.gen, 1);
    std::vector<double> p;
    token_probabilities(logits.data(), V, g, p);
    return p;
  };
  std::map<std::pair<std::int64_t, std::int64_t>, double> out;
  const std::vector<double> p0 = next(prompt);
  for (std::int64_t a = 0; a < V; ++a) {
    if (p0[static_cast<std::size_t>(a)] == 0) continue;
    Ids seq = prompt;
    seq.push_back(a);
    if (g.ends(a)) { // the sequence ends: t1 is padding
      out[{a, g.pad}] += p0[static_cast<std::size_t>(a)];
      continue;
    }
    const std::vector<double> p1 = next(seq);
    for (std::int64_t b = 0; b < V; ++b)
      if (p1[static_cast<std::size_t>(b)] > 0)
        out[{a, b}] = p0[static_cast<std::size_t>(a)] * p1[static_cast<std::size_t>(b)];
  }
  return out;
}

// Pearson's chi-square of `runs` sequences drawn by `draw_pair` (seed -> (t0, t1)) against
// `exact`, pairs of expected count below 5 pooled into one bin; its degrees of freedom in df.
template <class Draw>
double chi_square(const std::map<std::pair<std::int64_t, std::int64_t>, double>& exact, int runs, Draw draw_pair,
                  int& df) {
  std::map<std::pair<std::int64_t, std::int64_t>, int> seen;
  for (int seed = 0; seed < runs; ++seed) ++seen[draw_pair(seed)];
  double chi = 0, pooled_expect = 0;
  int pooled_seen = 0, bins = 0;
  for (const auto& [pair, p] : exact) {
    const double expect = p * runs;
    const auto it = seen.find(pair);
    const int got = it == seen.end() ? 0 : it->second;
    if (expect < 5) {
      pooled_expect += expect, pooled_seen += got;
      continue;
    }
    chi += (got - expect) * (got - expect) / expect, ++bins;
  }
  for (const auto& [pair, n] : seen) CHECK_MESSAGE(exact.count(pair), "a pair the model never draws");
  if (pooled_expect > 0) chi += (pooled_seen - pooled_expect) * (pooled_seen - pooled_expect) / pooled_expect, ++bins;
  df = bins - 1;
  return chi;
}

} // namespace

TEST_CASE("sampling with drafted tokens: the model's own distribution (chi-square, fixed seeds)") {
  Llama l;
  const Generator draft_gen = noisy_generator(*l.m.gen, 0.5);
  const Ids prompt = {1, 7, 5, 7, 5, 3};
  GenerateOptions g = greedy_options(prompt, 4);
  g.temperature = 2.5, g.top_k = 8; // spread out, with tokens cut
  const auto exact = exact_pairs(l, prompt, g);
  double total = 0;
  for (const auto& e : exact) total += e.second;
  CHECK(total == doctest::Approx(1.0).epsilon(1e-9));
  REQUIRE(exact.size() > 20);
  const int runs = 3000;
  const auto pair_of = [](const Generated& r) { return std::pair{r.tokens[0], r.tokens.dim(1) > 1 ? r.tokens[1] : 0}; };
  const auto run_with = [&](Drafter* d, std::uint64_t seed) {
    g.seed = seed;
    return pair_of(d ? generate_speculative(l.m.dec, l.emb, *l.m.gen, nullptr, 1, 0, Mask(), g, *d, 3)
                     : generate(l.m.dec, l.emb, *l.m.gen, nullptr, 1, 0, Mask(), g));
  };
  LookupDrafter lookup;
  ModelDrafter noisy(l.m.dec, l.emb, draft_gen, g, 20);
  std::map<std::string, Drafter*> drafters = {{"plain", nullptr}, {"lookup", &lookup}, {"draft model", &noisy}};
  for (const auto& [name, d] : drafters) {
    int df = 0;
    const double chi = chi_square(
        exact, runs, [&](int seed) { return run_with(d, static_cast<std::uint64_t>(seed)); }, df);
    // the chi-square distribution's 0.999 quantile, by the Wilson-Hilferty approximation
    const double z = 3.090, k = df, limit = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
    INFO(name << ": chi-square " << chi << " with " << df << " degrees of freedom (0.999 quantile " << limit << ")");
    CHECK(df >= 10);
    CHECK(chi < limit);
  }
}
