// Weight groups: a weight file's datasets and attributes read with their shapes checked, and
// unknown datasets refused (weights.hpp).
#include "attn/weights/weights.hpp"

#include "attn/core/half.hpp"
#include "attn/weights/quantize.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace attn {

WeightGroup::WeightGroup(h5::InputFiles& in, std::string file, std::string group)
    : in_(&in), file_(std::move(file)), group_(std::move(group)), read_(std::make_shared<std::set<std::string>>()) {}

WeightGroup WeightGroup::open(h5::InputFiles& in, const h5::TensorRef& ref) {
  const std::string group = h5::normalize_path(ref.name);
  switch (in.kind_of(ref.path, group)) {
  case h5::ObjectKind::Group: break;
  case h5::ObjectKind::Missing:
    throw Error(fmt::format("{}: no group '{}' (datasets: {})", h5::input_label(ref.path), group,
                            h5::list_names(in.list_datasets(ref.path))));
  default: throw Error(fmt::format("{}: '{}' is not a group of weights", h5::input_label(ref.path), group));
  }
  return WeightGroup(in, ref.path, group);
}

WeightGroup WeightGroup::child(std::string_view name) const {
  WeightGroup c(*in_, file_, h5::join_path(group_, name));
  c.read_ = read_;
  c.linear_tiles_ = linear_tiles_;
  return c;
}

std::vector<std::string> WeightGroup::unused(const std::vector<std::string>& known) const {
  const auto under = [](const std::string& path, const std::string& group) {
    return group == "/" ||
           (path.size() > group.size() && path.compare(0, group.size(), group) == 0 && path[group.size()] == '/');
  };
  std::vector<std::string> out;
  for (const std::string& ds : in_->list_datasets(file_)) {
    if (!under(ds, group_) || read_->count(ds)) continue;
    bool is_known = false;
    for (const std::string& k : known)
      is_known = is_known || ds == h5::join_path(group_, k) || under(ds, h5::join_path(group_, k));
    if (!is_known) out.push_back(ds);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void check_all_weights_used(const WeightGroup& g, const std::vector<std::string>& known, bool ignore) {
  if (ignore) return;
  const std::vector<std::string> unknown = g.unused(known);
  if (unknown.empty()) return;
  std::string list;
  for (std::size_t i = 0; i < unknown.size() && i < 5; ++i) list += (i ? ", " : "") + unknown[i];
  if (unknown.size() > 5) list += fmt::format(" and {} more", unknown.size() - 5);
  // What the names usually mean
  const auto named = [&](std::string_view leaf) {
    return std::any_of(unknown.begin(), unknown.end(), [&](const std::string& u) {
      return u.size() > leaf.size() && u.compare(u.size() - leaf.size(), leaf.size(), leaf) == 0 &&
             u[u.size() - leaf.size() - 1] == '/';
    });
  };
  if (named("q_proj_bias") || named("k_proj_bias") || named("v_proj_bias"))
    list += " (nn.MultiheadAttention keeps the query, key and value biases in one in_proj_bias of length E + 2 G dh: "
            "concatenate them there)";
  throw Error(fmt::format("{}: {} {} {} not part of the layout this tool reads (PyTorch state_dict names, '.' as "
                          "'/'; man attn-toolkit, WEIGHT FILES): {}; --ignore-unknown-weights runs without {}",
                          g.file_label(), unknown.size(), unknown.size() == 1 ? "dataset" : "datasets",
                          unknown.size() == 1 ? "is" : "are", list, unknown.size() == 1 ? "it" : "them"));
}

std::string WeightGroup::object_path(std::string_view name) const { return h5::join_path(group_, name); }

std::string WeightGroup::file_label() const { return h5::input_label(file_); }

std::string WeightGroup::label(std::string_view name) const {
  return h5::input_label(file_) + ":" + h5::join_path(group_, name);
}

bool WeightGroup::has(std::string_view name) const {
  return in_->kind_of(file_, h5::join_path(group_, name)) == h5::ObjectKind::Dataset;
}

bool WeightGroup::has_group(std::string_view name) const {
  return in_->kind_of(file_, h5::join_path(group_, name)) == h5::ObjectKind::Group;
}

Shape WeightGroup::shape(std::string_view name) const {
  return in_->open({file_, h5::join_path(group_, name)}).shape();
}

h5::Dataset WeightGroup::open_checked(std::string_view name, const Shape& expect, std::string_view why) const {
  read_->insert(h5::join_path(group_, name));
  const std::string because = why.empty() ? "" : fmt::format(" ({})", why);
  switch (in_->kind_of(file_, h5::join_path(group_, name))) {
  case h5::ObjectKind::Dataset: break;
  case h5::ObjectKind::Missing:
    throw Error(fmt::format("{}: missing dataset {} (expected shape {}{})", h5::input_label(file_),
                            h5::join_path(group_, name), shape_str(expect), because));
  default:
    throw Error(fmt::format("{}: is not a dataset (expected shape {}{})", label(name), shape_str(expect), because));
  }
  h5::Dataset ds = in_->open({file_, h5::join_path(group_, name)});
  ds.mark_weight();
  if (ds.shape() != expect)
    throw Error(
        fmt::format("{}: expected shape {}{}, got {}", ds.label(), shape_str(expect), because, shape_str(ds.shape())));
  return ds;
}

Tensor WeightGroup::read(std::string_view name, const Shape& expect, std::string_view why) const {
  const h5::Dataset ds = open_checked(name, expect, why);
  if (ds.kind() != h5::ElemKind::Float && in_->attribute(file_, h5::join_path(group_, name), "quantization")) {
    const Int8Data d = read_int8(ds, name);
    TensorI q(d.shape, Uninitialized{});
    std::copy(d.q.begin(), d.q.end(), q.data());
    return dequantize_int8(q, d.scale, d.block, d.scale_label);
  }
  return ds.read_floats_mapped(false);
}

LinearWeight WeightGroup::read_linear(std::string_view name, const Shape& expect, std::string_view why) const {
  const h5::Dataset ds = open_checked(name, expect, why);
  if (ds.kind() != h5::ElemKind::Float && in_->attribute(file_, h5::join_path(group_, name), "quantization")) {
    const Int8Data d = read_int8(ds, name);
    return LinearWeight::int8(d.q.data(), d.shape, d.scale, d.block);
  }
  if (ds.half_layout() == HalfKind::F16 && ds.rank() == 2) {
    std::vector<std::uint16_t> bits = ds.read_half_bits();
    // a value that is not finite: read() reports it as for any float weight
    if (std::none_of(bits.begin(), bits.end(), [](std::uint16_t b) { return (b & 0x7c00u) == 0x7c00u; }))
      return LinearWeight::f16(bits, expect[0], expect[1]);
  }
  LinearWeight w(ds.read_floats_mapped(false));
  if (linear_tiles_) w.to_tiles();
  return w;
}

// An int8 weight with its scales and block (quantize.hpp), checked.
WeightGroup::Int8Data WeightGroup::read_int8(const h5::Dataset& ds, std::string_view name) const {
  const std::string path = h5::join_path(group_, name), scale_name = std::string(name) + "_scale";
  const auto scheme = in_->attribute(file_, path, "quantization");
  const auto* s = std::get_if<std::string>(&*scheme);
  if (!s || *s != "int8")
    throw Error(fmt::format("{}: attribute quantization = {}: expected 'int8' (quantize(1))", ds.label(),
                            s ? "'" + *s + "'" : "a number"));
  const auto block = in_->attribute(file_, path, "block");
  const auto* b = block ? std::get_if<std::int64_t>(&*block) : nullptr;
  if (!b || *b < 0)
    throw Error(fmt::format("{}: int8 weight without a block attribute (elements per scale; 0: a row)", ds.label()));
  if (in_->kind_of(file_, h5::join_path(group_, scale_name)) != h5::ObjectKind::Dataset)
    throw Error(fmt::format("{}: missing dataset {} (the scales of the int8 weight {})", h5::input_label(file_),
                            h5::join_path(group_, scale_name), path));
  read_->insert(h5::join_path(group_, scale_name));
  h5::Dataset scale = in_->open({file_, h5::join_path(group_, scale_name)});
  scale.mark_weight();
  Int8Data d{ds.read_int8s(), ds.shape(), scale.read_floats<float>(false), *b, scale.label()};
  check_int8_scales(d.shape, d.scale.shape(), d.block, d.scale_label);
  return d;
}

Tensor WeightGroup::read_optional(std::string_view name, const Shape& expect, std::string_view why) const {
  if (in_->kind_of(file_, h5::join_path(group_, name)) == h5::ObjectKind::Missing) return Tensor();
  return read(name, expect, why);
}

std::optional<std::pair<h5::AttrValue, std::string>> WeightGroup::find_attr(const std::string& name) const {
  std::string g = group_;
  for (;;) {
    if (auto v = in_->attribute(file_, g, name)) return std::make_pair(*v, g);
    if (g == "/") return std::nullopt;
    const auto slash = g.rfind('/');
    g = slash == 0 ? "/" : g.substr(0, slash);
  }
}

std::string WeightGroup::attr_label(const std::string& name) const {
  auto found = find_attr(name);
  return fmt::format("{}:{} attribute {}", h5::input_label(file_), found ? found->second : group_, name);
}

namespace {

std::string value_str(const h5::AttrValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "True (a boolean)" : "False (a boolean)";
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return fmt::format("{}", *d);
  return fmt::format("'{}'", std::get<std::string>(v));
}

} // namespace

std::optional<std::int64_t> WeightGroup::attr_int(const std::string& name) const {
  auto found = find_attr(name);
  if (!found) return std::nullopt;
  if (std::holds_alternative<bool>(found->first))
    throw Error(fmt::format("{} = {}: expected an integer", attr_label(name), value_str(found->first)));
  if (const auto* i = std::get_if<std::int64_t>(&found->first)) return *i;
  if (const auto* d = std::get_if<double>(&found->first);
      d && std::isfinite(*d) && *d == std::floor(*d) && std::abs(*d) < 9e15)
    return static_cast<std::int64_t>(*d);
  throw Error(fmt::format("{}: expected an integer", attr_label(name)));
}

std::optional<double> WeightGroup::attr_real(const std::string& name) const {
  auto found = find_attr(name);
  if (!found) return std::nullopt;
  if (const auto* i = std::get_if<std::int64_t>(&found->first)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&found->first)) return *d;
  throw Error(fmt::format("{} = {}: expected a number", attr_label(name), value_str(found->first)));
}

std::optional<std::int64_t> WeightGroup::attr_positive(const std::string& name) const {
  const auto v = attr_int(name);
  if (v && *v <= 0) throw Error(fmt::format("{} = {}: expected a positive integer", attr_label(name), *v));
  return v;
}

std::optional<bool> WeightGroup::attr_flag(const std::string& name) const {
  auto found = find_attr(name);
  if (!found) return std::nullopt;
  if (const auto* b = std::get_if<bool>(&found->first)) return *b;
  if (const auto* i = std::get_if<std::int64_t>(&found->first); i && (*i == 0 || *i == 1)) return *i == 1;
  if (const auto* d = std::get_if<double>(&found->first); d && (*d == 0.0 || *d == 1.0)) return *d == 1.0;
  throw Error(fmt::format("{} = {}: expected 0 or 1", attr_label(name), value_str(found->first)));
}

std::optional<double> WeightGroup::attr_positive_real(const std::string& name) const {
  auto found = find_attr(name);
  if (!found) return std::nullopt;
  const auto* i = std::get_if<std::int64_t>(&found->first);
  const auto* d = std::get_if<double>(&found->first);
  const double v = i ? static_cast<double>(*i) : d ? *d : 0.0;
  if ((!i && !d) || !std::isfinite(v) || v <= 0)
    throw Error(fmt::format("{} = {}: expected a finite number > 0", attr_label(name), value_str(found->first)));
  return v;
}

std::optional<std::string> WeightGroup::attr_string(const std::string& name) const {
  auto found = find_attr(name);
  if (!found) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&found->first)) return *s;
  throw Error(fmt::format("{} = {}: expected a string", attr_label(name), value_str(found->first)));
}

WeightWriter WeightWriter::child(std::string_view name) const {
  return WeightWriter(*out_, prefix_ + std::string(name) + "/");
}

void WeightWriter::write(std::string_view name, const Tensor& t) const {
  if (t.size() == 0) return;
  out_->write(prefix_ + std::string(name), t, h5::OutType::F32);
}

void WeightWriter::write(std::string_view name, const LinearWeight& w) const {
  const std::string path = prefix_ + std::string(name);
  switch (w.format()) {
  case LinearWeight::Format::f32: return write(name, w.tensor());
  case LinearWeight::Format::f32_tiles: return write(name, w.to_float());
  case LinearWeight::Format::f16: {
    Tensor t = w.to_float(); // float16 values, written as float16 again
    out_->write(path, t, h5::OutType::F16);
    return;
  }
  case LinearWeight::Format::int8:
    write_int8_weight(*out_, path, w.int8_values(), w.int8_scales(), w.block() == w.in() ? 0 : w.block());
    return;
  }
}

void WeightWriter::attr(const std::string& name, const h5::AttrValue& value) const {
  std::string group = prefix_;
  if (!group.empty() && group.back() == '/') group.pop_back();
  out_->set_attribute(group, name, value);
}

} // namespace attn
