// int8 and float16 weight files: quantizing a weight file's Linear weights, and dequantizing them
// (quantize.hpp).
#include "attn/weights/quantize.hpp"

#include "attn/core/names.hpp"

#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/weights/weights.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace attn {

QuantScheme parse_quant_scheme(std::string_view s) {
  static constexpr Named<QuantScheme> schemes[] = {
      {"int8", QuantScheme::Int8}, {"f16", QuantScheme::F16}, {"f32", QuantScheme::F32}};
  return parse_named(s, schemes, "quantization");
}

Shape int8_scale_shape(const Shape& shape, std::int64_t block) {
  const std::int64_t in = shape.back();
  Shape s(shape.begin(), shape.end() - 1);
  s.push_back(block > 0 ? (in + block - 1) / block : 1);
  return s;
}

Int8Weight quantize_int8(const Tensor& w, std::int64_t block) {
  const std::int64_t in = w.shape().back(), rows = w.size() / in, b = block > 0 ? block : in;
  Int8Weight r{TensorI(w.shape(), Uninitialized{}), Tensor(int8_scale_shape(w.shape(), block), Uninitialized{})};
  const std::int64_t blocks = r.scale.shape().back();
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t k = 0; k < blocks; ++k) {
      const float* x = w.data() + i * in + k * b;
      const std::int64_t n = std::min(b, in - k * b);
      float top = 0;
      for (std::int64_t j = 0; j < n; ++j) top = std::max(top, std::abs(x[j]));
      const float scale = top / 127.0f;
      r.scale.data()[i * blocks + k] = scale;
      std::int64_t* q = r.q.data() + i * in + k * b;
      for (std::int64_t j = 0; j < n; ++j)
        q[j] = scale > 0 ? std::clamp<std::int64_t>(static_cast<std::int64_t>(std::nearbyint(x[j] / scale)), -127, 127)
                         : 0;
    }
  return r;
}

void check_int8_scales(const Shape& q, const Shape& scale, std::int64_t block, const std::string& label) {
  const Shape expect = int8_scale_shape(q, block);
  if (scale != expect)
    throw Error(fmt::format("{}: expected shape {} (the scales of a {} weight in blocks of {}), got {}", label,
                            shape_str(expect), shape_str(q), block > 0 ? std::to_string(block) : "a row",
                            shape_str(scale)));
}

Tensor dequantize_int8(const TensorI& q, const Tensor& scale, std::int64_t block, const std::string& label) {
  check_int8_scales(q.shape(), scale.shape(), block, label);
  const std::int64_t in = q.shape().back(), rows = q.size() / in, b = block > 0 ? block : in,
                     blocks = scale.shape().back();
  Tensor w(q.shape(), Uninitialized{});
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < in; ++j)
      w.data()[i * in + j] = static_cast<float>(q.data()[i * in + j]) * scale.data()[i * blocks + j / b];
  return w;
}

void write_int8_weight(h5::OutputFile& out, const std::string& name, const TensorI& q, const Tensor& scale,
                       std::int64_t block) {
  out.write(name, q, h5::OutType::I8, true);
  out.write(name + "_scale", scale, h5::OutType::F32, true);
  out.set_attribute(name, "quantization", std::string("int8"));
  out.set_attribute(name, "block", block);
}

bool is_quantized_weight(std::string_view path, const Shape& shape, bool all) {
  if (shape.size() < 2) return false;
  const auto slash = path.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (last != "weight" && !last.ends_with("_weight")) return false;
  const bool embedding = path.find("embed") != std::string_view::npos || path.find("wte") != std::string_view::npos ||
                         path.find("wpe") != std::string_view::npos;
  return all || !embedding;
}

namespace {

// "/a/b" relative to group g ("/a" or "/"): "b".
std::string relative(const std::string& path, const std::string& g) {
  if (g == "/") return path.substr(1);
  return path.substr(g.size() + 1);
}

// Copies the attributes of `object` of the input onto `std_name` of the output (the base group
// for ""), leaving out the output's own provenance.
void copy_attributes(h5::InputFiles& in, const std::string& file, const std::string& object, h5::OutputFile& out,
                     const std::string& std_name) {
  for (const std::string& name : in.attribute_names(file, object)) {
    if (object == "/" && (name == "creator" || name == "command" || name == "default")) continue;
    if (const auto v = in.attribute(file, object, name)) out.set_attribute(std_name, name, *v);
  }
}

// Writes weight `w` as `rel` in the scheme (float16, or int8 with its scales), counting it and its
// bytes in `report` with the largest error of its values relative to its largest value.
void write_quantized(h5::OutputFile& out, const std::string& rel, const Tensor& w, const QuantOptions& opt,
                     const std::string& label, QuantReport& report) {
  Tensor back;
  if (opt.scheme == QuantScheme::F16) {
    out.write(rel, w, h5::OutType::F16, true);
    back = w;
    for (auto& x : back.span()) x = static_cast<float>(from_half(to_half(x, HalfKind::F16), HalfKind::F16));
    report.bytes_out += w.size() * 2;
  } else {
    const Int8Weight q = quantize_int8(w, opt.block);
    write_int8_weight(out, rel, q.q, q.scale, opt.block);
    back = dequantize_int8(q.q, q.scale, opt.block, label);
    report.bytes_out += w.size() + q.scale.size() * 4;
  }
  float top = 0, err = 0;
  for (std::int64_t i = 0; i < w.size(); ++i) {
    top = std::max(top, std::abs(w.data()[i]));
    err = std::max(err, std::abs(back.data()[i] - w.data()[i]));
  }
  if (top > 0) report.max_rel_error = std::max(report.max_rel_error, double(err) / top);
  ++report.quantized;
}

} // namespace

QuantReport quantize_weight_file(h5::InputFiles& in, const std::string& file, const std::string& group,
                                 h5::OutputFile& out, const QuantOptions& opt) {
  QuantReport report;
  std::set<std::string> groups; // every group between `group` and a dataset, relative
  // Hyperparameters inherited from above the group (num_heads on the root of model.h5:/encoder),
  // then the group's own.
  std::vector<std::string> ancestors;
  for (std::string g = group; g != "/";) {
    const auto slash = g.rfind('/');
    g = slash == 0 ? "/" : g.substr(0, slash);
    ancestors.insert(ancestors.begin(), g);
  }
  for (const std::string& a : ancestors) copy_attributes(in, file, a, out, "");
  copy_attributes(in, file, group, out, "");
  for (const std::string& path : in.list_datasets(file, group)) {
    const std::string rel = relative(path, group);
    for (auto slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1))
      groups.insert(rel.substr(0, slash));
    h5::Dataset ds = in.open({file, path});
    ds.mark_weight();
    const std::int64_t bytes_in = ds.shape().empty() ? 0 : checked_numel(ds.shape(), ds.label());
    const bool int8 = ds.kind() != h5::ElemKind::Float && in.attribute(file, path, "quantization");
    if (opt.scheme == QuantScheme::F32) { // back to float32: the dequantized values
      if (int8) {
        const WeightGroup g(hdf5_weights(in, file), "/");
        out.write(rel, g.read(path.substr(1), ds.shape()), h5::OutType::F32, true);
        ++report.quantized;
        report.bytes_in += bytes_in;
        report.bytes_out += bytes_in * 4;
        continue; // its quantization attributes stay behind
      }
      if (path.ends_with("_scale") && in.attribute(file, path.substr(0, path.size() - 6), "quantization")) continue;
      if (ds.kind() == h5::ElemKind::Float) {
        if (ds.type_name() == "float16" && ds.shape().size() >= 2) ++report.quantized;
        out.write(rel, ds.read_floats<float>(false), h5::OutType::F32, true);
        report.bytes_out += bytes_in * 4;
      } else {
        out.write(rel, ds.read_ints(), h5::OutType::I64, true);
      }
      ++report.kept;
    } else if (ds.kind() != h5::ElemKind::Float) {
      if (int8) throw Error(fmt::format("{}: is quantized already (attribute quantization)", ds.label()));
      out.write(rel, ds.read_ints(), h5::OutType::I64, true);
      ++report.kept;
    } else if (!is_quantized_weight(rel, ds.shape(), opt.all)) {
      out.write(rel, ds.read_floats<float>(false), h5::OutType::F32, true);
      ++report.kept;
      report.bytes_out += bytes_in * 4;
    } else {
      write_quantized(out, rel, ds.read_floats<float>(false), opt, ds.label(), report);
    }
    report.bytes_in += bytes_in * (ds.type_name() == "float64" || ds.type_name() == "int64" ? 8 : 4);
    for (const std::string& name : in.attribute_names(file, path)) // a dataset's own attributes
      if (const auto v = in.attribute(file, path, name)) out.set_attribute(rel, name, *v);
  }
  for (const std::string& g : groups) copy_attributes(in, file, group == "/" ? "/" + g : group + "/" + g, out, g);
  return report;
}

QuantReport convert_weights(WeightSource& src, const std::string& group, h5::OutputFile& out, const QuantOptions& opt) {
  QuantReport report;
  for (const std::string& name : src.attribute_names("/"))
    if (const auto v = src.attribute("/", name)) out.set_attribute("", name, *v);
  for (const std::string& path : src.tensors(group)) {
    const std::string rel = relative(path, group);
    const Tensor w = src.read(path); // float32, finite (16-bit widened exactly)
    const std::int64_t n = w.size();
    report.bytes_in += n * 4;
    if (opt.scheme == QuantScheme::F32 || !is_quantized_weight(rel, w.shape(), opt.all)) {
      out.write(rel, w, h5::OutType::F32, true);
      ++report.kept;
      report.bytes_out += n * 4;
      continue;
    }
    write_quantized(out, rel, w, opt, src.label(path), report);
  }
  return report;
}

} // namespace attn
