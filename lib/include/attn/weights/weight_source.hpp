// Where a WeightGroup's tensors and hyperparameters come from: an HDF5 weight file (section 3),
// or a Hugging Face model directory, a .safetensors file or a safetensors index (section 6.1),
// whose state_dict names "a.b.c" are the paths "/a/b/c" and whose config.json values are the root's
// attributes. Every layout reads both through WeightGroup (weights.hpp) with the same checks.
#pragma once

#include "attn/core/tensor.hpp"
#include "attn/h5/h5io.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/kernels/linear_weight.hpp"

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace attn {

// How a run's products will read its Linear weights: with `tiles`, generation's steps of at most
// `step_rows` rows each (a check of drafted tokens counts its rows), `steps` of them, read float32
// ones in column tiles, and a loader lays out what those steps read faster laid out
// (WeightGroup::set_linear_tiles), but for mapped float32 ones that few steps read where they are
// (blas::f32_steps_in_place).
struct LinearUse {
  static constexpr std::int64_t many = std::numeric_limits<std::int64_t>::max(); // steps not counted
  bool tiles = false;
  std::int64_t step_rows = 1;
  std::int64_t steps = many;
  // Whether a loader lays a float32 weight out in column tiles: with `tiles`, but for one the file
  // maps when the steps read it there.
  bool lays_out(const LinearWeight& w) const {
    return tiles && !(w.mapped() && blas::f32_steps_in_place(step_rows, steps));
  }
};

class WeightSource {
public:
  virtual ~WeightSource() = default;
  // The file or directory as messages name it ("w.h5", "llama").
  virtual std::string file_label() const = 0;
  // A tensor (an absolute path "/a/b") as messages name it: "/a/b" in HDF5, "a.b" in safetensors.
  virtual std::string name(const std::string& path) const = 0;
  // "w.h5:/a/b"; "llama/model.safetensors: tensor a.b" (a group: "llama: a.b").
  virtual std::string label(const std::string& path) const = 0;
  // What a stored tensor is called: "dataset" or "tensor".
  virtual const char* item() const = 0;
  virtual h5::ObjectKind kind_of(const std::string& path) = 0;
  // The tensors under group `group` ("/": all), as absolute paths, sorted.
  virtual std::vector<std::string> tensors(const std::string& group = "/") = 0;
  // The attribute `name` of object `path` (safetensors: the config's values, on the root only).
  virtual std::optional<h5::AttrValue> attribute(const std::string& path, const std::string& name) = 0;
  virtual std::vector<std::string> attribute_names(const std::string& path) = 0; // sorted
  // Where attribute `name` of `path` is: "w.h5:/ attribute num_heads", "llama/config.json: key num_heads".
  virtual std::string attr_label(const std::string& path, const std::string& name) = 0;
  virtual Shape shape(const std::string& path) = 0;
  // Stored as float16 or bfloat16 (read_linear keeps such a matrix 16-bit)?
  virtual bool stored_16bit(const std::string& path) = 0;
  // An int8 weight with its scales (quantize.hpp; read_linear keeps it int8)?
  virtual bool stored_int8(const std::string&) { return false; }
  // The tensor at `path` as float32 (finite: a weight's NaN or Inf is an Error naming it),
  // borrowed from a mapping of the file where its bytes can be.
  virtual Tensor read(const std::string& path) = 0;
  // As a Linear weight (out, in) in the file's own form where the kernels take it (int8 with its
  // scales, float16, bfloat16), else float32 (in column tiles with use.tiles); laid out for the
  // run's steps as `use` says.
  virtual LinearWeight read_linear(const std::string& path, LinearUse use) = 0;
  // A 16-bit matrix stored (in, out) (GPT-2's Conv1D) as a Linear weight (out, in) kept 16-bit, or
  // nullopt when it is stored otherwise (WeightGroup::read_linear_transposed then transposes read()).
  virtual std::optional<LinearWeight> read_half_transposed(const std::string& path) = 0;

  // The tensors read so far, for WeightGroup::unused.
  void mark_read(const std::string& path) { read_.insert(path); }
  bool was_read(const std::string& path) const { return read_.count(path) != 0; }

private:
  std::set<std::string> read_;
};

// The deferred NaN/Inf checks (LinearWeight::defer_check) of a weight's values that a loader leaves
// where the file maps them, float32 or 16-bit: each throws what h5::check_finite throws for the
// values as float32, `label` naming the tensor.
std::function<void()> finite_check(const float* data, const Shape& shape, const std::string& label);
std::function<void()> finite_check(HalfKind kind, const std::uint16_t* bits, const Shape& shape,
                                   const std::string& label);

// An HDF5 weight file read through `in`.
std::shared_ptr<WeightSource> hdf5_weights(h5::InputFiles& in, const std::string& path);
// A model directory, a .safetensors file or an index (hf::is_model_path).
std::shared_ptr<WeightSource> safetensors_weights(const std::string& path);

} // namespace attn
