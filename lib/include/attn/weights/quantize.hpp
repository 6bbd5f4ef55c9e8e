// Quantized weight files (issue 20): the Linear weights of a weight file stored as int8 with
// scales, or as float16, in the same layout, so every tool runs them with --weights.
//
//   int8: symmetric, per block of `block` consecutive elements along the last axis (the input
//   dimension of an nn.Linear weight (out, in)), block 0 meaning the whole row:
//     scale = max |w| / 127 over the block,  q = round(w / scale) in [-127, 127] (ties to even),
//     w' = q * scale.
//   Stored as: dataset NAME int8 (the weight's shape) with attributes quantization = "int8" and
//   block = B, and dataset NAME_scale float32 (rows..., ceil(in / B)) (rows... the shape's leading
//   axes; one column for block 0).
//   float16: dataset NAME stored as float16 (half.hpp), read like any float16 tensor.
//
// Which datasets: float matrices (rank >= 2) named weight or *_weight (nn.Linear, nn.MultiheadAttention's
// projections, the generator, GPT-2's Conv1D), except embedding tables (a path with embed, wte or
// wpe) unless `all`; vectors (biases, norms) always stay as they are.
#pragma once

#include "attn/core/tensor.hpp"
#include "attn/h5/h5io.hpp"
#include "attn/weights/weight_source.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// F32 goes back: int8 weights written dequantized (q * scale), float16 widened, as float32.
enum class QuantScheme { Int8, F16, F32 };
QuantScheme parse_quant_scheme(std::string_view s); // "int8" | "f16" | "f32"

struct QuantOptions {
  QuantScheme scheme = QuantScheme::Int8;
  std::int64_t block = 32; // int8: elements per scale along the last axis; 0: one per row
  bool all = false;        // embedding tables too
};

struct Int8Weight {
  TensorI q;    // the weight's shape, values in [-127, 127]
  Tensor scale; // (rows..., blocks)
};
Int8Weight quantize_int8(const Tensor& w, std::int64_t block);
// w' (q's shape) = q * scale of its block; throws Error naming `label` for scales of the wrong shape.
Tensor dequantize_int8(const TensorI& q, const Tensor& scale, std::int64_t block, const std::string& label);
// Throws Error naming `label` unless scales of shape `scale` fit a weight of shape `q` and `block`.
void check_int8_scales(const Shape& q, const Shape& scale, std::int64_t block, const std::string& label);
// The scales' shape for a weight of `shape` and `block`.
Shape int8_scale_shape(const Shape& shape, std::int64_t block);

// Writes an int8 weight in the layout above: `name` as int8 with its attributes, `name`_scale.
void write_int8_weight(h5::OutputFile& out, const std::string& name, const TensorI& q, const Tensor& scale,
                       std::int64_t block);

// Does the dataset at `path` (relative to the weight group) of `shape` get quantized?
bool is_quantized_weight(std::string_view path, const Shape& shape, bool all);

// What quantize_weight_file did, for the tool's report.
struct QuantReport {
  std::int64_t quantized = 0, kept = 0;     // datasets
  std::int64_t bytes_in = 0, bytes_out = 0; // of the datasets' data
  double max_rel_error = 0;                 // max |w' - w| / max |w| over the quantized weights
};

// Writes every dataset and attribute under group `group` of weight file `file` into `out` (its
// base group: the layout stays the same), the selected weights quantized. The root's creator,
// command and default attributes are the output's own.
QuantReport quantize_weight_file(h5::InputFiles& in, const std::string& file, const std::string& group,
                                 h5::OutputFile& out, const QuantOptions& opt);

// The same for a Hugging Face model directory (weight_source.hpp), the converter to a weight file:
// every tensor under `group` by its path ("model.norm.weight" as model/norm/weight), float32 (16-bit
// values widened exactly; F64 rounded) unless the scheme stores it as float16 or int8, and every
// config value as a root attribute (nested ones as "rope_scaling.factor", lists as 1-D integer
// attributes), generation_config.json's ids included. The scheme f32 quantizes nothing.
QuantReport convert_weights(WeightSource& src, const std::string& group, h5::OutputFile& out, const QuantOptions& opt);

} // namespace attn
