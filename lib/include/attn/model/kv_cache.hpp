// Incremental decoding: the decoder's key/value cache and one step of the stack over it.
#pragma once

#include "attn/attention/mask.hpp"
#include "attn/core/tensor.hpp"
#include "attn/model/transformer.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace attn {

// A key/value cache for incremental decoding (as llama2.c's RunState, one buffer per tensor):
// self-attention keys and values of every position so far, the memory's cross-attention keys
// and values, projected once, and (with ffn_conv_kernel k) what the feed-forward's causal
// convolution needs of the positions before: their last k - 1 inputs.
struct DecoderCache {
  std::int64_t rows = 0, capacity = 0, len = 0, s = 0;
  std::int64_t key_width = 16; // cross_kt's and cross_kt16's blocks of keys (KeyTiles::width)
  Tensor self_k, self_v;       // (layers, rows, capacity, G dh)
  Tensor cross_k;              // (layers, rows, s, G dh); with cross_rows false, allocated and never written (as
                               // cross_v with StepKV::f16)
  Tensor cross_v;              // (layers, rows, G, s, dh): head-major, each head's values one run; or as
                               // cross_k when the cross-attention has extra keys (bias_k, add_zero_attn)
  bool cross_v_heads = false;  // cross_v is head-major
  bool cross_rows = true;      // cross_k holds the float32 keys; false: cross_v holds the values only with
                               // StepKV::tiles (see start_decoder_cache)
  Tensor cross_kt;             // (layers, rows, G, key_tiles_floats(s, dh, key_width)): cross_k in KeyTiles, or empty
  // StepKV::f16: cross_k in float16 KeyTiles (as cross_kt) and cross_v in float16 (as cross_v)
  Buffer<std::uint16_t> cross_kt16, cross_v16;
  Tensor conv; // (layers, rows, k - 1, F): the last k - 1 inputs of each FFN convolution
  // The steps' buffers, kept from one step to the next while they take as many rows: the layers'
  // scratch and a step's new q | k | v (or k and v).
  std::optional<LayerScratch> scratch;
  Tensor step_qkv;

  // Layer l's parts: its self-attention keys and values (rows, capacity, G dh), its memory keys and
  // values (as cross_k, cross_v), their tiles (as cross_kt), float16 ones and the convolution's state.
  float* self_keys(std::int64_t l) { return self_k.data() + l * rows * capacity * self_k.dim(3); }
  float* self_values(std::int64_t l) { return self_v.data() + l * rows * capacity * self_v.dim(3); }
  const float* cross_keys(std::int64_t l) const { return cross_k.data() + l * rows * s * cross_k.dim(3); }
  const float* cross_values(std::int64_t l) const { return cross_v.data() + l * rows * s * cross_k.dim(3); }
  float* conv_state(std::int64_t l) { return conv.data() + l * rows * conv.dim(2) * conv.dim(3); }
};

// What steps of few rows read of the memory's keys and values, besides the float32 rows that
// prefills of many rows (and attention weights) read:
//   rows   nothing else: the float32 rows;
//   tiles  the keys also in column tiles (cross_kt), which a step streams with no transposing (the
//          same scores' bits);
//   f16    the keys in float16 column tiles and the values in float16 (cross_kt16, cross_v16),
//          rounded to nearest: half the bytes of every step's cross-attention, whose products are
//          the float32 chains over the rounded values.
enum class StepKV { rows, tiles, f16 };

// Projects memory (rows, s, Em) for every layer's cross-attention; room for `capacity` positions.
// With StepKV::tiles or f16 and float32_rows false, steps of fewer than few_query_rows positions
// read only the key tiles (and the float16 values), so the float32 keys (and with f16 the values)
// are not written (6 MiB of fresh pages each, 6 layers of (512, 512)): decoder_steps then refuses
// more positions at once. Cross-attentions with extra keys (bias_k, add_zero_attn) always keep them.
// A probe's patches of cross_k and cross_v are made here, once (probe.hpp).
DecoderCache start_decoder_cache(const Decoder& dec, const float* memory, std::int64_t rows, std::int64_t s,
                                 std::int64_t capacity, StepKV step_kv = StepKV::rows, bool float32_rows = true,
                                 const Probe* probe = nullptr);

// Row r of the cache becomes row parent[r] of the old one (beam search's reordering).
void reorder_decoder_cache(DecoderCache& cache, const std::vector<std::int64_t>& parent);
// One position: x (rows, E), the embedded tokens at position cache.len, through the stack with
// self-attention over the cached positions 0..len (this one appended) and cross-attention over the
// cached memory under `memory_mask` (lengths or key padding per row, n = 1).
// With a probe, its interventions are made at positions len.. as they would be over the whole
// sequence (the keys and values changed before the cache holds them); it captures nothing here.
void decoder_step(const Decoder& dec, DecoderCache& cache, float* x, const Mask& memory_mask,
                  const Probe* probe = nullptr);
// n positions at once (a prompt's prefill): x (rows, n, E) at positions len..len+n-1, causal among
// themselves; the same numbers as n decoder_step calls, to float tolerance.
void decoder_steps(const Decoder& dec, DecoderCache& cache, float* x, std::int64_t n, const Mask& memory_mask,
                   const Probe* probe = nullptr);

} // namespace attn
