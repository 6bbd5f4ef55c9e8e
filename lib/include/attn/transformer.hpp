// Transformer encoder and decoder layers as in Vaswani et al. 2017 and PyTorch's
// nn.TransformerEncoderLayer / nn.TransformerDecoderLayer (CONTRACT.md section 3). Every sublayer
// is a residual around one function f:
//
//   post-norm (norm_first = 0):  x = LN(x + f(x))
//   pre-norm  (norm_first = 1):  x = x + f(LN(x))
//
//   encoder layer: f = SelfAttn (LN1), FFN (LN2)
//   decoder layer: f = masked SelfAttn (LN1), CrossAttn over the memory (LN2), FFN (LN3)
//   FFN(x) = act(x W1^T + b1) W2^T + b2,  act = ReLU | GELU (erf) | GELU (tanh)
//
// and an optional final LayerNorm after the stack (the `norm` of nn.TransformerEncoder/Decoder).
#pragma once

#include "attn/attention.hpp"
#include "attn/h5io.hpp"
#include "attn/mha.hpp"
#include "attn/tensor.hpp"
#include "attn/weights.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

enum class Activation { Relu, Gelu, GeluTanh };
Activation parse_activation(std::string_view s); // "relu" | "gelu" | "gelu_tanh"
std::string activation_name(Activation a);

struct LayerNorm {
  Tensor weight, bias; // (E)
};

// x (rows, E) = (x - mean) / sqrt(var + eps) * weight + bias per row, in place (biased variance,
// as nn.LayerNorm), with the sums in double.
void layer_norm(float* x, std::int64_t rows, const LayerNorm& ln, double eps);

// x (rows, n) = act(x) in place.
void activate(float* x, std::int64_t count, Activation act);

struct FeedForward {
  Tensor w1, b1; // linear1 (F, E), (F)
  Tensor w2, b2; // linear2 (E, F), (E)
};

// The attributes every layer of a stack shares.
struct LayerOptions {
  bool norm_first = false;
  Activation activation = Activation::Relu;
  double eps = 1e-5; // layer_norm_eps
};

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
  LayerNorm norm1, norm2, norm3;
};

struct Decoder {
  std::vector<DecoderLayer> layers;
  bool has_final_norm = false;
  LayerNorm norm;
  LayerOptions opt;
  std::int64_t embed_dim() const { return layers.front().self_attn.shape.embed_dim; }
  std::int64_t heads() const { return layers.front().self_attn.shape.heads; }
  std::int64_t ffn_dim() const { return layers.front().ffn.w1.dim(0); }
  std::int64_t memory_dim() const { return layers.front().cross_attn.shape.kdim; }
};

// Reads layers/0, layers/1, ... (as many as the file has; at least one) with num_heads,
// norm_first, activation and layer_norm_eps from the attributes. Every layer must have the same
// sizes; a missing or odd-shaped dataset is an Error naming it.
// The stack `name` ("encoder" or "decoder") of the --weights group: the group itself, or, when it
// is a sequence-to-sequence model (no layers of its own), its child `name` (CONTRACT.md section 3).
WeightGroup stack_group(const WeightGroup& g, const std::string& name);

Encoder load_encoder(const WeightGroup& g);
// The same for a decoder: layers/{i}/self_attn, multihead_attn, linear1, linear2, norm1..norm3.
Decoder load_decoder(const WeightGroup& g);

struct EncoderShape {
  std::int64_t layers = 1, embed_dim = 0, heads = 0, ffn_dim = 0;
  bool norm_first = false, final_norm = false;
  Activation activation = Activation::Relu;
};
// PyTorch's initialisation: each layer's attention as init_mha, linear1/linear2 from nn.Linear's
// default (weights and biases U(+-1/sqrt(in))), LayerNorms 1 and 0. One seeded stream.
Encoder init_encoder(const EncoderShape& shape, std::uint64_t seed);
void save_encoder(const WeightWriter& w, const Encoder& enc);

// Token embeddings of a sequence-to-sequence model (CONTRACT.md section 3): x = table[id] * sqrt(E)
// + PE(position), with the model's `pe` attribute: sinusoidal (the default), learned
// (pos_embed/weight (L, E)) or none.
enum class PeKind { Sinusoidal, Learned, None };

struct TokenEmbedding {
  Tensor table; // (V, E)
  PeKind pe = PeKind::Sinusoidal;
  Tensor pos_table;      // (L, E) for learned positions
  std::string label;     // "model.h5:/src_embed/weight", for messages
  std::string pos_label; // "model.h5:/pos_embed/weight" with learned positions
};

// Reads `name`/weight ("src_embed" or "tgt_embed") of model group `g` and the `pe` attribute; the
// embedding size must be `embed_dim`, the E of the stack it feeds (`stack`: "encoder", "decoder").
TokenEmbedding load_embedding(const WeightGroup& g, const std::string& name, std::int64_t embed_dim,
                              std::string_view stack);

// x (B, n, E) from ids (B, n) at positions offset.. ; throws Error naming the first id outside
// 0..V-1 and its index, or a position beyond a learned table (`ids_label` names the ids' file, and
// the ids are its items first_item..).
void embed_tokens(float* x, const std::int64_t* ids, std::int64_t batch, std::int64_t n, const TokenEmbedding& emb,
                  std::int64_t offset, const std::string& ids_label, std::int64_t first_item = 0);

// A stack's input, read a batch chunk at a time: features X (b, n, E) as given, or token ids
// (b, n) (small, read whole) embedded by a model's table and positions (CONTRACT.md section 3).
// A 1-D id or 2-D feature dataset is one sequence (batched() false).
class StackInput {
public:
  explicit StackInput(h5::SequenceReader x);
  // `layout` names the ids' expected rank in the error ("token ids (b, n) or (n,)").
  StackInput(const h5::Dataset& ids, std::string_view layout, TokenEmbedding emb);
  std::int64_t items() const { return items_; }
  std::int64_t len() const { return n_; }
  std::int64_t features() const { return x_ ? x_->features() : emb_->table.dim(1); }
  bool batched() const { return batched_; }
  const std::string& label() const { return label_; } // "x.h5:/data"
  // Items [first, first + count) as (count, n, E).
  Tensor read(std::int64_t first, std::int64_t count) const;
  bool has_ids() const { return !x_; }
  // (items, len) flags, nonzero where the token id is `pad` (a key padding mask); token ids only.
  std::vector<std::uint8_t> pad_mask(std::int64_t pad) const;

private:
  std::optional<h5::SequenceReader> x_;
  TensorI ids_;
  std::optional<TokenEmbedding> emb_;
  std::int64_t items_ = 0, n_ = 0;
  bool batched_ = true;
  std::string label_;
};

// The model's pad_id when token ids equal to it are padding by default: the file sets pad_id, and it
// differs from bos_id and eos_id (a model that pads with its end token must not lose that token).
std::optional<std::int64_t> padding_token(const WeightGroup& model);
// With token ids and a padding_token(), marks the ids equal to it as key padding in `mask` (as
// PyTorch users pass ids == pad); returns that id, or nullopt when nothing applies.
std::optional<std::int64_t> mask_pad_tokens(Mask& mask, const StackInput& input, const WeightGroup& model);

// Items per batch chunk for a stack over sequences of `tokens` tokens: `requested` when positive,
// else about 4096 tokens' worth (at E = 512, F = 2048 their activations take about 100 MiB), so
// memory does not grow with the number of sequences in a file.
std::int64_t batch_chunk(std::int64_t tokens, std::int64_t requested);

// Per-layer attention weights: called with the layer index and its (B, H, n, n) weights.
using LayerWeightsSink = std::function<void(std::size_t layer, const Tensor& weights)>;

// x (B, n, E) through the stack, in place. `mask` applies to every layer's self-attention (its
// lengths or key padding also pad the queries: those rows come out 0). With `sink`, every layer's
// attention weights are computed and handed over.
void encoder_forward(const Encoder& enc, float* x, std::int64_t batch, std::int64_t n, const Mask& mask,
                     const LayerWeightsSink& sink = {});

// Per-layer decoder weights: self (B, H, t, t) and cross (B, H, t, s).
using DecoderWeightsSink = std::function<void(std::size_t layer, const Tensor& self, const Tensor& cross)>;

// Teacher-forced decoding: x (B, t, E) through the stack, in place, attending to memory (B, s, Em).
// `self_mask` (causal by default in decode, plus the target's lengths or key padding, whose
// positions come out 0) applies to self-attention, `memory_mask` (the memory's lengths or key
// padding) to cross-attention.
void decoder_forward(const Decoder& dec, float* x, std::int64_t batch, std::int64_t t, const float* memory,
                     std::int64_t s, const Mask& self_mask, const Mask& memory_mask,
                     const DecoderWeightsSink& sink = {});

// A key/value cache for incremental decoding (as llama2.c's RunState, one buffer per tensor):
// self-attention keys and values of every position so far, and the memory's cross-attention keys
// and values, projected once.
struct DecoderCache {
  std::int64_t rows = 0, capacity = 0, len = 0, s = 0;
  Tensor self_k, self_v;   // (layers, rows, capacity, G dh)
  Tensor cross_k, cross_v; // (layers, rows, s, G dh)
};

// Projects memory (rows, s, Em) for every layer's cross-attention; room for `capacity` positions.
DecoderCache start_decoder_cache(const Decoder& dec, const float* memory, std::int64_t rows, std::int64_t s,
                                 std::int64_t capacity);
// Row r of the cache becomes row parent[r] of the old one (beam search's reordering).
void reorder_decoder_cache(DecoderCache& cache, const std::vector<std::int64_t>& parent);
// One position: x (rows, E), the embedded tokens at position cache.len, through the stack with
// self-attention over the cached positions 0..len (this one appended) and cross-attention over the
// cached memory under `memory_mask` (lengths or key padding per row, n = 1).
void decoder_step(const Decoder& dec, DecoderCache& cache, float* x, const Mask& memory_mask);

} // namespace attn
