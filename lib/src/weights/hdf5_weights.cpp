// Weights from an HDF5 weight file (weight_source.hpp): datasets by path, attributes on groups,
// int8 weights with their scales (quantize.hpp), float16 and bfloat16 Linear weights kept 16-bit.
#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/sys/mapped_range.hpp"
#include "attn/weights/quantize.hpp"
#include "attn/weights/weight_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace attn {

namespace {

class Hdf5Weights final : public WeightSource {
public:
  Hdf5Weights(h5::InputFiles& in, std::string file) : in_(&in), file_(std::move(file)) {}
  std::string file_label() const override { return h5::input_label(file_); }
  std::string name(const std::string& path) const override { return path; }
  std::string label(const std::string& path) const override { return file_label() + ":" + path; }
  const char* item() const override { return "dataset"; }
  h5::ObjectKind kind_of(const std::string& path) override { return in_->kind_of(file_, path); }
  std::vector<std::string> tensors(const std::string& group) override { return in_->list_datasets(file_, group); }
  std::optional<h5::AttrValue> attribute(const std::string& path, const std::string& name) override {
    return in_->attribute(file_, path, name);
  }
  std::vector<std::string> attribute_names(const std::string& path) override {
    return in_->attribute_names(file_, path);
  }
  std::string attr_label(const std::string& path, const std::string& name) override {
    return fmt::format("{}:{} attribute {}", file_label(), path, name);
  }
  Shape shape(const std::string& path) override { return in_->open({file_, path}).shape(); }
  bool stored_16bit(const std::string& path) override { return in_->open({file_, path}).half_layout().has_value(); }
  bool stored_int8(const std::string& path) override { return is_int8(in_->open({file_, path}), path); }

  Tensor read(const std::string& path) override {
    const h5::Dataset ds = open(path);
    if (is_int8(ds, path)) {
      const Int8Data d = read_int8(ds, path);
      const std::vector<std::int8_t> values = ds.read_int8s();
      TensorI q(d.shape, Uninitialized{});
      std::copy(values.begin(), values.end(), q.data());
      return dequantize_int8(q, d.scale, d.block, d.scale_label);
    }
    return ds.read_floats_mapped(false);
  }

  LinearWeight read_linear(const std::string& path, LinearUse use) override {
    const bool tiles = use.tiles;
    const h5::Dataset ds = open(path);
    if (is_int8(ds, path)) {
      const Int8Data d = read_int8(ds, path);
      // Read where they lie in the file when it can be mapped: in place as rows when the product
      // reads them so and the steps are not to use tiles (few steps, or a prompt's many rows: the
      // product lays them out as it runs) or read rows in place at the memory's rate
      // (blas::int8_steps_in_place); else laid out in tiles now from the mapping.
      const std::int64_t block = d.block > 0 || d.shape.size() != 2 ? d.block : d.shape[1];
      if (const std::shared_ptr<MappedRange> bytes = ds.map_int8s()) {
        const auto* q = reinterpret_cast<const std::int8_t*>(bytes->data());
        if ((!tiles || blas::int8_steps_in_place(use.step_rows)) && blas::int8_rows_in_place(d.shape, block))
          return LinearWeight::int8_rows(bytes, q, d.shape, d.scale, block);
        return LinearWeight::int8(q, d.shape, d.scale, d.block);
      }
      const std::vector<std::int8_t> values = ds.read_int8s();
      return LinearWeight::int8(values.data(), d.shape, d.scale, d.block);
    }
    if (const auto kind = ds.half_layout(); kind && ds.rank() == 2) {
      const h5::Dataset::HalfBits bits = ds.map_half_bits();
      // in place when mapped and the run reads it so (as int8 above), its values checked by the
      // first product; else laid out, and checked as they are
      if (bits.mapped && blas::keep_half_rows(*kind, ds.shape(), tiles)) {
        LinearWeight w = LinearWeight::half_rows_in_place(bits.mapped, *kind, bits.data, ds.shape()[0], ds.shape()[1]);
        w.defer_check(finite_check(*kind, bits.data, ds.shape(), ds.label()));
        return w;
      }
      bool nonfinite = false; // then read_floats_mapped reports it as for any float weight
      LinearWeight w = LinearWeight::half_rows(*kind, bits.data, ds.shape()[0], ds.shape()[1], {}, &nonfinite);
      if (!nonfinite) return w;
      ds.read_floats_mapped(false); // throws, naming the first
    }
    // checked by the first pass over the values (the product's, or the layout's below)
    Tensor values = ds.read_floats_mapped(true);
    const float* data = values.data();
    LinearWeight w(std::move(values));
    w.defer_check(finite_check(data, ds.shape(), ds.label()));
    if (use.lays_out(w)) w.to_tiles();
    return w;
  }

  std::optional<LinearWeight> read_half_transposed(const std::string& path) override {
    const h5::Dataset ds = open(path);
    const auto kind = ds.half_layout();
    if (!kind || ds.rank() != 2) return std::nullopt;
    const h5::Dataset::HalfBits bits = ds.map_half_bits();
    bool nonfinite = false; // then read() reports it
    LinearWeight w = LinearWeight::half_transposed(*kind, bits.data, ds.shape()[1], ds.shape()[0], &nonfinite);
    if (nonfinite) return std::nullopt;
    return w;
  }

private:
  struct Int8Data { // an int8 weight's shape, scales and block (its values read by the caller)
    Shape shape;
    Tensor scale;
    std::int64_t block;
    std::string scale_label; // for the message on scales of the wrong shape
  };

  h5::Dataset open(const std::string& path) {
    h5::Dataset ds = in_->open({file_, path});
    ds.mark_weight();
    return ds;
  }
  bool is_int8(const h5::Dataset& ds, const std::string& path) {
    return ds.kind() != h5::ElemKind::Float && in_->attribute(file_, path, "quantization");
  }

  // An int8 weight's scales and block (quantize.hpp), checked.
  Int8Data read_int8(const h5::Dataset& ds, const std::string& path) {
    const std::string scale_path = path + "_scale";
    const auto scheme = in_->attribute(file_, path, "quantization");
    const auto* s = std::get_if<std::string>(&*scheme);
    if (!s || *s != "int8")
      throw Error(fmt::format("{}: attribute quantization = {}: expected 'int8' (quantize(1))", ds.label(),
                              s ? "'" + *s + "'" : "a number"));
    const auto block = in_->attribute(file_, path, "block");
    const auto* b = block ? std::get_if<std::int64_t>(&*block) : nullptr;
    if (!b || *b < 0)
      throw Error(fmt::format("{}: int8 weight without a block attribute (elements per scale; 0: a row)", ds.label()));
    if (in_->kind_of(file_, scale_path) != h5::ObjectKind::Dataset)
      throw Error(
          fmt::format("{}: missing dataset {} (the scales of the int8 weight {})", file_label(), scale_path, path));
    mark_read(scale_path);
    const h5::Dataset scale = open(scale_path);
    Int8Data d{ds.shape(), scale.read_floats_mapped(false), *b, scale.label()};
    check_int8_scales(d.shape, d.scale.shape(), d.block, d.scale_label);
    return d;
  }

  h5::InputFiles* in_;
  std::string file_;
};

} // namespace

std::shared_ptr<WeightSource> hdf5_weights(h5::InputFiles& in, const std::string& path) {
  return std::make_shared<Hdf5Weights>(in, path);
}

} // namespace attn
