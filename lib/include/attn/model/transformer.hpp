// Transformer encoder and decoder layers as in Vaswani et al. 2017 and PyTorch's
// nn.TransformerEncoderLayer / nn.TransformerDecoderLayer (CONTRACT.md section 3). Every sublayer
// is a residual around one function f:
//
//   post-norm (norm_first = 0):  x = LN(x + f(x))
//   pre-norm  (norm_first = 1):  x = x + f(LN(x))
//
//   encoder layer: f = SelfAttn (LN1), FFN (LN2)
//   decoder layer: f = masked SelfAttn (LN1), CrossAttn over the memory (LN2), FFN (LN3)
//   FFN(x) = act(x W1^T + b1) W2^T + b2,  act = ReLU | GELU (erf) | GELU (tanh) | SiLU
//   gated: FFN(x) = (g(x Wg^T + bg) * (x W1^T + b1)) W2^T + b2,  g = sigmoid (GLU), GELU (GEGLU;
//          geglu_tanh: GELU's tanh form, T5 v1.1's gated-gelu), SiLU (SwiGLU): Wg is linear_gate, W1 the "up" and W2
//          the "down" projection
//   with ffn_conv_kernel k: what enters the activation (x W1^T + b1, or the gate's x Wg^T + bg)
//          first goes through a depthwise convolution over the sequence, channel by channel
//          (nn.Conv1d(F, F, k, groups=F)): centred in encoders (k odd, (k - 1) / 2 positions each
//          side), causal in decoders (the k - 1 positions before), zero past the ends and at padded
//          positions (Primer's and Conformer's convolution in the feed-forward block)
//   LN = LayerNorm, or RMSNorm: x / sqrt(mean(x^2) + eps) * weight (no mean, no bias)
//   SelfAttn: with RoPE on q and k, or ALiBi on the scores (the `pe` attribute), or T5's relative
//   bias on the scores, and a sliding window (sliding_window), in every layer
//
// and an optional final LayerNorm after the stack (the `norm` of nn.TransformerEncoder/Decoder).
// Beside this file: the KV cache of generation (kv_cache.hpp), token embeddings and a stack's
// input (embedding.hpp), and reading, initialising and saving the stacks' weights
// (stack_weights.hpp).
#pragma once

#include "attn/attention/attention.hpp"
#include "attn/core/tensor.hpp"
#include "attn/model/mha.hpp"
#include "attn/model/probe.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

enum class Activation { Relu, Gelu, GeluTanh, Silu, Glu, Geglu, Swiglu, GegluTanh };
// "relu" | "gelu" | "gelu_tanh" | "silu" | "glu" | "geglu" | "swiglu" | "geglu_tanh"
Activation parse_activation(std::string_view s);
std::string activation_name(Activation a);
// GLU, GEGLU and SwiGLU: the feed-forward has a gate projection (linear_gate).
bool gated(Activation a);

enum class NormKind { Layer, Rms };
NormKind parse_norm_kind(std::string_view s); // "layer_norm" | "rms_norm"
std::string norm_kind_name(NormKind k);

struct LayerNorm {
  Tensor weight, bias; // (E); bias empty for RMSNorm
};

// x (rows, E) = (x - mean) / sqrt(var + eps) * weight + bias per row, in place (biased variance,
// as nn.LayerNorm), with the sums in double. With `add` (rows, E), x = x + add first, row by row in
// the same pass (a post-norm residual: one pass over x instead of two; the same bits).
void layer_norm(float* x, std::int64_t rows, const LayerNorm& ln, double eps, const float* add = nullptr);
// x (rows, E) = x / sqrt(mean(x^2) + eps) * weight per row, in place (RMSNorm, Zhang and Sennrich
// 2019, as LLaMA), with the sum in double; `add` as for layer_norm.
void rms_norm(float* x, std::int64_t rows, const LayerNorm& ln, double eps, const float* add = nullptr);

// x (rows, n) = act(x) in place; for a gated activation, its gate's function (sigmoid, GELU, SiLU).
void activate(float* x, std::int64_t count, Activation act);

struct FeedForward {
  LinearWeight w1;       // linear1 (F, E): "up" (any format, as MhaWeights)
  LinearWeight w2;       // linear2 (E, F): "down"
  LinearWeight wg;       // linear_gate (F, E) for a gated activation, or empty
  Tensor b1, b2, bg;     // their biases (F), (E), (F), or empty
  Tensor conv_w, conv_b; // ffn_conv (F, k), (F): the depthwise convolution, or empty
  std::int64_t conv_kernel() const { return conv_w.size() ? conv_w.dim(1) : 0; }
};

// Positions applied inside every layer's self-attention: the model's `pe` attribute rope or alibi,
// or T5's relative bias (one learned table for the whole stack, the first layer's). (Sinusoidal and
// learned positions are added to the token embeddings instead, embedding.hpp.)
enum class LayerPositions { None, Rope, Alibi, Relative };

// The attributes every layer of a stack shares.
struct LayerOptions {
  bool norm_first = false;
  Activation activation = Activation::Relu;
  NormKind norm = NormKind::Layer; // norm_type
  double eps = 1e-5;               // layer_norm_eps, the eps of either norm
  LayerPositions positions = LayerPositions::None;
  Rope rope;                                    // positions Rope: rope_style, rope_theta, rotary_dim
  std::int64_t sliding_window = 0;              // self-attention sees the W nearest keys (|p - j| < W); 0: all
  bool parallel_residual = false;               // x = x + SelfAttn(LN1(x)) + FFN(LN2(x)) (GPT-NeoX), pre-norm
  std::int64_t ffn_conv = 0;                    // ffn_conv_kernel: the FFN's depthwise convolution's k; 0: none
  std::shared_ptr<const RelativeBias> relative; // positions Relative: the stack's bias table and rule
};

// A stack's self-attention mask: items 0..batch-1 of `base` with the stack's sliding window and,
// with ALiBi positions, the slopes of its `heads` heads, or its relative bias.
Mask self_attention_mask(const Mask& base, const LayerOptions& opt, std::int64_t batch, std::int64_t heads);

// x (rows, E) through the stack's kind of norm, in place (after x = x + add, when given).
void normalize(float* x, std::int64_t rows, const LayerNorm& ln, const LayerOptions& opt, const float* add = nullptr);

struct EncoderLayer {
  MhaWeights self_attn;
  FeedForward ffn;
  LayerNorm norm1, norm2;
};

struct Encoder {
  std::vector<EncoderLayer> layers;
  bool has_final_norm = false;
  LayerNorm norm; // the stack's final norm, when has_final_norm
  LayerOptions opt;
  std::int64_t embed_dim() const { return layers.front().self_attn.shape.embed_dim; }
  std::int64_t heads() const { return layers.front().self_attn.shape.heads; }
  std::int64_t ffn_dim() const { return layers.front().ffn.w1.dim(0); }
};

struct DecoderLayer {
  MhaWeights self_attn;
  MhaWeights cross_attn; // PyTorch's multihead_attn: queries from the target, keys/values the memory
  FeedForward ffn;
  LayerNorm norm1, norm2, norm3; // self-attention's, cross-attention's, the FFN's
};

// A decoder stack, or a decoder-only one (GPT-style: no cross-attention and no memory; its layers
// are an encoder's, norm1 before self-attention and norm2 before the FFN, under a causal mask).
struct Decoder {
  std::vector<DecoderLayer> layers;
  bool has_cross = true;
  bool has_final_norm = false;
  LayerNorm norm;
  LayerOptions opt;
  std::int64_t embed_dim() const { return layers.front().self_attn.shape.embed_dim; }
  std::int64_t heads() const { return layers.front().self_attn.shape.heads; }
  std::int64_t ffn_dim() const { return layers.front().ffn.w1.dim(0); }
  std::int64_t memory_dim() const { return has_cross ? layers.front().cross_attn.shape.kdim : 0; }
  const LayerNorm& ffn_norm(const DecoderLayer& l) const { return has_cross ? l.norm3 : l.norm2; }
};

// --- the building blocks of a layer (also the KV cache's, kv_cache.hpp) ---

// x (rows, E) += y (rows, E).
void add_in_place(float* x, const float* y, std::int64_t count);

// The sequences a feed-forward's rows belong to, for its convolution: rows = batch * n, item b's
// positions in order. Positions padded under `padding` enter the convolution as 0. With `state`
// (batch, k - 1, F) (a decoder's cache), the k - 1 positions before each item's first are taken
// from it, and it is updated to the item's last k - 1 (causal only).
struct FfnSequence {
  std::int64_t batch = 0, n = 0;
  bool causal = false;
  const Mask* padding = nullptr;
  float* state = nullptr;
};

// h (batch, n, F) = the depthwise convolution of h with w (F, k) and bias (F, or empty), in place.
void depthwise_conv(float* h, std::int64_t F, const Tensor& w, const Tensor& bias, const FfnSequence& seq);

// out (rows, E) = FFN(x), plain or gated (see the top of this file); hidden and gate are scratch,
// grown here to the rows of one pass by F (gate only for a gated activation). `seq` is needed when
// f has a convolution. With int8 weights the rows go by ffn_rows at a time (the bits are the same:
// each row's products do not depend on the rows beside it).
// With `probe` (its layer's mlp_hidden), the hidden values after the activation go to the probe
// (and may be changed by it) before the second product; `seq` then gives the rows' batch and n.
void feed_forward(float* out, const float* x, const FeedForward& f, Activation act, std::int64_t rows, Tensor& hidden,
                  Tensor& gate, const FfnSequence& seq = {}, const ProbeSite* probe = nullptr);
// Rows at a time through an FFN of int8 weights: the hidden activations (4 MiB at F = 2048) stay in
// the cache between the two products and the activation, and are fewer fresh pages (encode, 6
// layers of (512, 2048) on (8, 512, 512), 2 threads, alternated: 1.05-1.07x at 512 and 1024 rows).
// A float32 or float16 weight is packed (or widened) into panels by each product, so its FFN
// takes all rows at once (float32 in passes of 512 rows: 0.88x).
constexpr std::int64_t ffn_rows = 1024;

// Scratch of one forward pass, sized once for all layers (hidden and gate: by feed_forward).
struct LayerScratch {
  Tensor normed, sub, gate; // (rows, E), (rows, E); feed_forward's gate
  Tensor sub2;              // (rows, E), the second branch of a parallel residual
  MhaScratch mha;
  LayerScratch(std::int64_t rows, std::int64_t E, bool parallel = false)
      : normed(Shape{rows, E}, Uninitialized{}), sub(Shape{rows, E}, Uninitialized{}) {
    if (parallel) sub2 = Tensor(Shape{rows, E}, Uninitialized{});
  }
  // feed_forward's hidden values: the attention's buffer, whose contents are dead by then. One
  // buffer instead of two: an encoder over (8, 512, 512) first touches 32 MiB less.
  Tensor& hidden() { return mha.qkv; }
};

// A parallel residual block over x (rows, E), in place (GPT-J, GPT-NeoX; pre-norm):
//   x = x + attn(LN1(x)) + ffn(LN2(x)).
template <typename A, typename F>
void parallel_residual(const LayerOptions& opt, const LayerNorm& ln1, const LayerNorm& ln2, float* x, std::int64_t rows,
                       std::int64_t E, LayerScratch& s, A&& attn, F&& ffn) {
  std::copy_n(x, rows * E, s.normed.data());
  normalize(s.normed.data(), rows, ln1, opt);
  attn(s.normed.data(), s.sub.data());
  std::copy_n(x, rows * E, s.normed.data());
  normalize(s.normed.data(), rows, ln2, opt);
  ffn(s.normed.data(), s.sub2.data());
  add_in_place(x, s.sub.data(), rows * E);
  add_in_place(x, s.sub2.data(), rows * E);
}

// One sublayer around f(in, out) over x (rows, E), in place:
//   post-norm: x = LN(x + f(x));   pre-norm: x = x + f(LN(x)).
template <typename F>
void residual(const LayerOptions& opt, const LayerNorm& ln, float* x, std::int64_t rows, std::int64_t E,
              LayerScratch& s, F&& f) {
  if (opt.norm_first) {
    std::copy_n(x, rows * E, s.normed.data());
    normalize(s.normed.data(), rows, ln, opt);
    f(s.normed.data(), s.sub.data());
    add_in_place(x, s.sub.data(), rows * E);
  } else {
    f(x, s.sub.data());
    normalize(x, rows, ln, opt, s.sub.data()); // x = norm(x + sub)
  }
}

// A probe's point `a` of a layer over x (B, n, width) (padded rows per `padding`, or none; row i at
// position pos0 + i), when the probe does something there.
void probe_at(const Probe* probe, std::size_t layer, Act a, float* x, std::int64_t B, std::int64_t n,
              std::int64_t width, const Mask* padding, std::int64_t pos0 = 0);

// --- stacks ---

// Items per batch chunk for a stack over sequences of `tokens` tokens: `requested` when positive,
// else about `budget` tokens' worth, at least one item, so memory does not grow with the number of
// sequences in a file. A stack's default, 4096 tokens: at E = 512, F = 2048 their activations take
// about 100 MiB. mha-run's groups take 512 positions' worth, each in the buffers of the one before:
// (8, 512, 512) faults in 32 MiB of fresh memory instead of 74 MiB, and the projections' outputs
// are still in the cache when the attention reads them.
std::int64_t batch_chunk(std::int64_t tokens, std::int64_t requested, std::int64_t budget = 4096);

// Per-layer attention weights: called with the layer index and its (B, H, n, n) weights.
using LayerWeightsSink = std::function<void(std::size_t layer, const Tensor& weights)>;

// x (B, n, E) through the stack, in place. `mask` applies to every layer's self-attention (its
// lengths or key padding also pad the queries: those rows come out 0). With `sink`, every layer's
// attention weights are computed and handed over.
// With `probe`, its activations are captured and its interventions made (probe.hpp).
void encoder_forward(const Encoder& enc, float* x, std::int64_t batch, std::int64_t n, const Mask& mask,
                     const LayerWeightsSink& sink = {}, const Probe* probe = nullptr);

// Per-layer decoder weights: self (B, H, t, t) and cross (B, H, t, s).
using DecoderWeightsSink = std::function<void(std::size_t layer, const Tensor& self, const Tensor& cross)>;

// Teacher-forced decoding: x (B, t, E) through the stack, in place, attending to memory (B, s, Em)
// (null, s = 0, for a decoder-only stack, whose sink then gets empty cross weights).
// `self_mask` (causal by default in decode, plus the target's lengths or key padding, whose
// positions come out 0) applies to self-attention, `memory_mask` (the memory's lengths or key
// padding) to cross-attention.
void decoder_forward(const Decoder& dec, float* x, std::int64_t batch, std::int64_t t, const float* memory,
                     std::int64_t s, const Mask& self_mask, const Mask& memory_mask,
                     const DecoderWeightsSink& sink = {}, const Probe* probe = nullptr);

} // namespace attn
