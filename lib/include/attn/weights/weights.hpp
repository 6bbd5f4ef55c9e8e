// Weight files (CONTRACT.md section 3): a module's parameters are datasets named by its PyTorch
// state_dict keys with '.' replaced by '/', hyperparameters are attributes read from the module's
// own group or, failing that, the nearest ancestor group up to the root. A Hugging Face model
// directory (section 6.1) reads the same way (weight_source.hpp).
//
// WeightGroup reads one module group of an input file; WeightWriter writes one into an output
// file. Every shape check names the dataset and gives the expected and the actual shape.
#pragma once

#include "attn/core/tensor.hpp"
#include "attn/h5/h5io.hpp"
#include "attn/kernels/linear_weight.hpp"
#include "attn/weights/weight_source.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

class WeightGroup {
public:
  // The group `group` ("/" or "/encoder") of the weights `source`.
  WeightGroup(std::shared_ptr<WeightSource> source, std::string group);
  // From a --weights argument FILE[:GROUP]: GROUP must be a group (the root without one). FILE is
  // an HDF5 file read through `in`, or a model directory, .safetensors file or index, whose GROUP
  // is a dotted prefix of its tensor names ("bert") or a path ("/bert").
  static WeightGroup open(h5::InputFiles& in, const h5::TensorRef& ref);

  WeightGroup child(std::string_view name) const; // "layers/0/self_attn"
  const std::string& path() const { return group_; }
  WeightSource& source() const { return *src_; }
  // "/encoder/norm/weight" for name "norm/weight" (the group itself for "").
  std::string object_path(std::string_view name) const;
  // "w.h5" ("standard input" for "-").
  std::string file_label() const;
  // "w.h5:/encoder/norm/weight" for name "norm/weight"; the group itself for "".
  std::string label(std::string_view name = "") const;
  // How messages name a stored tensor: "/encoder/norm/weight" (HDF5), "encoder.norm.weight".
  std::string tensor_name(std::string_view name) const;
  const char* item() const; // "dataset" or "tensor"
  // For messages: "w.h5: missing dataset /enc/norm/weight", "llama: missing tensor enc.norm.weight";
  // a group: "w.h5: missing group /enc/layers/0", "llama: missing tensors enc.layers.0.*".
  std::string missing(std::string_view name) const;
  std::string missing_group(std::string_view name) const;

  bool has(std::string_view name) const;       // a dataset `name` in this group
  bool has_group(std::string_view name) const; // a group `name` in this group
  Shape shape(std::string_view name) const;
  // A token embedding table (V, E) as read() checks it: float32 in `table`, or a 16-bit or int8 one
  // kept so in `compact_table` (embedding.hpp).
  void read_table(std::string_view name, const Shape& expect, Tensor& table,
                  std::shared_ptr<const LinearWeight>& compact_table) const;
  // Dataset `name`, which must have shape `expect` (finite float values; or an int8 weight with
  // its scales, quantize.hpp, dequantized). `why` says where the expected shape comes from
  // ("num_heads 8, num_kv_heads 2"), for the error message.
  Tensor read(std::string_view name, const Shape& expect, std::string_view why = "") const;
  // As read(), or an empty tensor when the dataset is absent (optional parameters such as biases).
  Tensor read_optional(std::string_view name, const Shape& expect, std::string_view why = "") const;
  // A Linear weight (out, in) as read() checks it, kept in its file's format: an int8 weight with
  // its scales, or a float16 dataset, stays so in memory (linear_weight.hpp); others are float32,
  // as rows or (set_linear_tiles) in column tiles.
  LinearWeight read_linear(std::string_view name, const Shape& expect, std::string_view why = "") const;
  // A Linear weight stored transposed, (in, out) = `stored` (GPT-2's Conv1D), as (out, in), kept
  // 16-bit where it is stored so.
  LinearWeight read_linear_transposed(std::string_view name, const Shape& stored, std::string_view why = "") const;
  // float32 weights stored in one block are borrowed from a mapping of the file (h5io.hpp:
  // read_floats_mapped). With `tiles`, read_linear lays float32 ones out in column tiles as it reads
  // them (LinearWeight::to_tiles: from the mapping into the tiles), for decode's generation, whose
  // steps read them so: done while the file is read, on the BLAS threads, instead of in place at the
  // start of the generation. This group's children made afterwards inherit it.
  // Int8 weights stay in place as rows when the steps' rows are few enough for the kernels to read
  // them so at the memory's rate (blas::int8_steps_in_place), and mapped float32 ones when the
  // steps are few (`steps`: blas::f32_steps_in_place).
  void set_linear_tiles(bool tiles, std::int64_t step_rows = 1, std::int64_t steps = LinearUse::many) {
    linear_use_ = {tiles, step_rows, steps};
  }

  // Hyperparameter `name` from this group or the nearest ancestor that has it.
  std::optional<std::int64_t> attr_int(const std::string& name) const;
  std::optional<double> attr_real(const std::string& name) const;
  std::optional<std::string> attr_string(const std::string& name) const;
  // The same, checked for what a hyperparameter may be; each error names the file, the attribute
  // and its value. A positive integer (not a boolean: num_heads = True is refused):
  std::optional<std::int64_t> attr_positive(const std::string& name) const;
  // 0 or 1, or a boolean (norm_first):
  std::optional<bool> attr_flag(const std::string& name) const;
  // A finite number > 0 (layer_norm_eps):
  std::optional<double> attr_positive_real(const std::string& name) const;
  // The datasets under this group that no read() of this group, its parent or any child asked for,
  // leaving out those under `known` (names relative to this group: parts of the layout another tool
  // reads, such as "decoder" for encode). Absolute paths, sorted.
  std::vector<std::string> unused(const std::vector<std::string>& known = {}) const;
  // Where attribute `name` was found ("w.h5:/ attribute num_heads"), for messages.
  std::string attr_label(const std::string& name) const;

  // A list of integers (eos_token_id: one id or a list of them), each checked as attr_int is.
  std::optional<std::vector<std::int64_t>> attr_ints(const std::string& name) const;

private:
  std::optional<std::pair<h5::AttrValue, std::string>> find_attr(const std::string& name) const;
  std::string open_checked(std::string_view name, const Shape& expect, std::string_view why) const;
  std::shared_ptr<WeightSource> src_; // shared with parent and children, with the paths read
  std::string group_;
  LinearUse linear_use_;
};

// Throws Error unless every dataset under `g` was read (WeightGroup::unused), naming the unknown
// ones and what the module did read; `ignore` (--ignore-unknown-weights) lets them be.
void check_all_weights_used(const WeightGroup& g, const std::vector<std::string>& known, bool ignore);

// Writes a module's parameters into an output file under `prefix` ("" or "layers/0/self_attn/"),
// relative to the group of the file's primary dataset.
class WeightWriter {
public:
  WeightWriter(h5::OutputFile& out, std::string prefix = "") : out_(&out), prefix_(std::move(prefix)) {}
  WeightWriter child(std::string_view name) const;
  void write(std::string_view name, const Tensor& t) const; // skipped when t is empty
  // In its format: float32, float16, or int8 with NAME_scale and the attributes quantize writes.
  void write(std::string_view name, const LinearWeight& w) const;
  void attr(const std::string& name, const h5::AttrValue& value) const;

private:
  h5::OutputFile* out_;
  std::string prefix_;
};

} // namespace attn
