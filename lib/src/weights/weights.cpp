// Weight groups: a weight file's datasets and attributes read with their shapes checked, and
// unknown datasets refused (weights.hpp).
#include "attn/weights/weights.hpp"

#include "attn/core/error.hpp"
#include "attn/hf/model_dir.hpp"
#include "attn/weights/quantize.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace attn {

WeightGroup::WeightGroup(std::shared_ptr<WeightSource> source, std::string group)
    : src_(std::move(source)), group_(std::move(group)) {}

WeightGroup WeightGroup::open(h5::InputFiles& in, const h5::TensorRef& ref) {
  if (hf::is_model_path(ref.path)) {
    std::string prefix = ref.name;
    if (!prefix.empty() && prefix[0] != '/') std::replace(prefix.begin(), prefix.end(), '.', '/');
    WeightGroup g(safetensors_weights(ref.path), h5::normalize_path(prefix));
    if (g.src_->kind_of(g.group_) != h5::ObjectKind::Group)
      throw Error(fmt::format("{}: no tensors under '{}' (tensors: {})", ref.path, ref.name,
                              h5::list_names(g.src_->tensors())));
    return g;
  }
  const std::string group = h5::normalize_path(ref.name);
  switch (in.kind_of(ref.path, group)) {
  case h5::ObjectKind::Group: break;
  case h5::ObjectKind::Missing:
    throw Error(fmt::format("{}: no group '{}' (datasets: {})", h5::input_label(ref.path), group,
                            h5::list_names(in.list_datasets(ref.path))));
  default: throw Error(fmt::format("{}: '{}' is not a group of weights", h5::input_label(ref.path), group));
  }
  return WeightGroup(hdf5_weights(in, ref.path), group);
}

WeightGroup WeightGroup::child(std::string_view name) const {
  WeightGroup c(src_, h5::join_path(group_, name));
  c.linear_use_ = linear_use_;
  return c;
}

std::vector<std::string> WeightGroup::unused(const std::vector<std::string>& known) const {
  std::vector<std::string> out;
  for (const std::string& ds : src_->tensors(group_)) {
    if (src_->was_read(ds)) continue;
    bool is_known = false;
    for (const std::string& k : known)
      is_known = is_known || ds == h5::join_path(group_, k) || h5::is_under(ds, h5::join_path(group_, k));
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
  for (std::size_t i = 0; i < unknown.size() && i < 5; ++i) list += (i ? ", " : "") + g.tensor_name(unknown[i]);
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
  const bool one = unknown.size() == 1;
  const std::string item = g.item();
  throw Error(fmt::format("{}: {} {} {} not part of the layout this tool reads (PyTorch state_dict names{}; man "
                          "attn-toolkit, WEIGHT FILES): {}; --ignore-unknown-weights runs without {}",
                          g.file_label(), unknown.size(), one ? item : item + "s", one ? "is" : "are",
                          item == "dataset" ? ", '.' as '/'" : "", list, one ? "it" : "them"));
}

std::string WeightGroup::object_path(std::string_view name) const { return h5::join_path(group_, name); }

std::string WeightGroup::file_label() const { return src_->file_label(); }

std::string WeightGroup::label(std::string_view name) const { return src_->label(h5::join_path(group_, name)); }

std::string WeightGroup::tensor_name(std::string_view name) const { return src_->name(h5::join_path(group_, name)); }

const char* WeightGroup::item() const { return src_->item(); }

std::string WeightGroup::missing(std::string_view name) const {
  return fmt::format("{}: missing {} {}", file_label(), item(), tensor_name(name));
}

std::string WeightGroup::missing_group(std::string_view name) const {
  if (std::string_view(item()) == "dataset")
    return fmt::format("{}: missing group {}", file_label(), object_path(name));
  return fmt::format("{}: missing tensors {}.*", file_label(), tensor_name(name));
}

bool WeightGroup::has(std::string_view name) const {
  return src_->kind_of(h5::join_path(group_, name)) == h5::ObjectKind::Dataset;
}

bool WeightGroup::has_group(std::string_view name) const {
  return src_->kind_of(h5::join_path(group_, name)) == h5::ObjectKind::Group;
}

Shape WeightGroup::shape(std::string_view name) const { return src_->shape(h5::join_path(group_, name)); }

std::string WeightGroup::open_checked(std::string_view name, const Shape& expect, std::string_view why) const {
  const std::string path = h5::join_path(group_, name);
  src_->mark_read(path);
  const std::string because = why.empty() ? "" : fmt::format(" ({})", why);
  switch (src_->kind_of(path)) {
  case h5::ObjectKind::Dataset: break;
  case h5::ObjectKind::Missing:
    throw Error(fmt::format("{}: missing {} {} (expected shape {}{})", src_->file_label(), src_->item(),
                            src_->name(path), shape_str(expect), because));
  default:
    throw Error(
        fmt::format("{}: is not a {} (expected shape {}{})", label(name), src_->item(), shape_str(expect), because));
  }
  const Shape got = src_->shape(path);
  if (got != expect)
    throw Error(
        fmt::format("{}: expected shape {}{}, got {}", label(name), shape_str(expect), because, shape_str(got)));
  return path;
}

void WeightGroup::read_table(std::string_view name, const Shape& expect, Tensor& table,
                             std::shared_ptr<const LinearWeight>& compact_table) const {
  const std::string path = open_checked(name, expect, "");
  if (expect.size() == 2 && (src_->stored_16bit(path) || src_->stored_int8(path))) {
    if (LinearWeight w = src_->read_linear(path, linear_use_); w.half() || w.format() == LinearWeight::Format::int8) {
      compact_table = std::make_shared<const LinearWeight>(std::move(w));
      return;
    }
  }
  table = src_->read(path);
}

Tensor WeightGroup::read(std::string_view name, const Shape& expect, std::string_view why) const {
  return src_->read(open_checked(name, expect, why));
}

LinearWeight WeightGroup::read_linear(std::string_view name, const Shape& expect, std::string_view why) const {
  return src_->read_linear(open_checked(name, expect, why), linear_use_);
}

LinearWeight WeightGroup::read_linear_transposed(std::string_view name, const Shape& stored,
                                                 std::string_view why) const {
  const std::string path = open_checked(name, stored, why);
  if (std::optional<LinearWeight> w = src_->read_half_transposed(path)) return std::move(*w);
  const Tensor s = src_->read(path); // (in, out)
  const std::int64_t in = stored[0], out = stored[1];
  Tensor t(Shape{out, in}, Uninitialized{});
  for (std::int64_t i = 0; i < in; ++i)
    for (std::int64_t o = 0; o < out; ++o) t[o * in + i] = s[i * out + o];
  LinearWeight w(std::move(t));
  if (linear_use_.tiles) w.to_tiles();
  return w;
}

Tensor WeightGroup::read_optional(std::string_view name, const Shape& expect, std::string_view why) const {
  if (src_->kind_of(h5::join_path(group_, name)) == h5::ObjectKind::Missing) return Tensor();
  return read(name, expect, why);
}

std::optional<std::pair<h5::AttrValue, std::string>> WeightGroup::find_attr(const std::string& name) const {
  std::string g = group_;
  for (;;) {
    if (auto v = src_->attribute(g, name)) return std::make_pair(*v, g);
    if (g == "/") return std::nullopt;
    const auto slash = g.rfind('/');
    g = slash == 0 ? "/" : g.substr(0, slash);
  }
}

std::string WeightGroup::attr_label(const std::string& name) const {
  auto found = find_attr(name);
  return src_->attr_label(found ? found->second : group_, name);
}

namespace {

std::string value_str(const h5::AttrValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "True (a boolean)" : "False (a boolean)";
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return fmt::format("{}", *d);
  if (const auto* l = std::get_if<std::vector<std::int64_t>>(&v))
    return fmt::format("[{}] (a list)", fmt::join(*l, ", "));
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
  throw Error(fmt::format("{} = {}: expected an integer", attr_label(name), value_str(found->first)));
}

std::optional<std::vector<std::int64_t>> WeightGroup::attr_ints(const std::string& name) const {
  auto found = find_attr(name);
  if (!found) return std::nullopt;
  if (const auto* l = std::get_if<std::vector<std::int64_t>>(&found->first)) return *l;
  return std::vector<std::int64_t>{*attr_int(name)};
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
  case LinearWeight::Format::f16:
  case LinearWeight::Format::bf16: { // 16-bit values, written as such again
    out_->write(path, w.to_float(), w.format() == LinearWeight::Format::f16 ? h5::OutType::F16 : h5::OutType::BF16);
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
