// Weights from a Hugging Face model directory (weight_source.hpp, model_dir.hpp): the state_dict
// name "a.b.c" is the path "/a/b/c", config.json's values are the root's attributes. float32 is
// borrowed from the mapping; float16 and bfloat16 Linear weights and embedding tables are laid out
// in their tiles straight from it (and its pages let go), other 16-bit tensors widened to float32.
#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/hf/model_dir.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/weights/weight_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>

namespace attn {

namespace {

std::string dotted(const std::string& path) {
  std::string s = path.substr(path.find_first_not_of('/') == std::string::npos ? path.size() : 1);
  std::replace(s.begin(), s.end(), '/', '.');
  return s;
}

std::string slashed(const std::string& name) {
  std::string s = "/" + name;
  std::replace(s.begin(), s.end(), '.', '/');
  return s;
}

class SafetensorsWeights final : public WeightSource {
public:
  explicit SafetensorsWeights(const std::string& arg) : dir_(arg) {
    for (const auto& [name, entry] : dir_.tensors()) {
      const std::string path = slashed(name);
      paths_.emplace(path, &entry);
      for (auto slash = path.rfind('/'); slash != 0 && slash != std::string::npos; slash = path.rfind('/', slash - 1))
        groups_.insert(path.substr(0, slash));
    }
  }
  std::string file_label() const override { return dir_.label(); }
  std::string name(const std::string& path) const override { return dotted(path); }
  std::string label(const std::string& path) const override {
    if (path == "/") return dir_.label();
    const auto it = paths_.find(path);
    if (it == paths_.end()) return fmt::format("{}: {}", dir_.label(), dotted(path));
    return fmt::format("{}: tensor {}", it->second->file->path(), dotted(path));
  }
  const char* item() const override { return "tensor"; }
  h5::ObjectKind kind_of(const std::string& path) override {
    if (paths_.count(path)) return h5::ObjectKind::Dataset;
    return path == "/" || groups_.count(path) ? h5::ObjectKind::Group : h5::ObjectKind::Missing;
  }
  std::vector<std::string> tensors(const std::string& group) override {
    std::vector<std::string> out;
    for (const auto& p : paths_)
      if (h5::is_under(p.first, group)) out.push_back(p.first);
    return out;
  }
  std::optional<h5::AttrValue> attribute(const std::string& path, const std::string& name) override {
    if (path != "/") return std::nullopt;
    const auto it = dir_.config().find(name);
    if (it == dir_.config().end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> attribute_names(const std::string& path) override {
    std::vector<std::string> out;
    if (path == "/")
      for (const auto& kv : dir_.config()) out.push_back(kv.first);
    return out;
  }
  std::string attr_label(const std::string&, const std::string& name) override {
    return fmt::format("{}: key {}", dir_.config_source(name), name);
  }
  Shape shape(const std::string& path) override { return entry(path).tensor->shape; }
  bool stored_16bit(const std::string& path) override { return is_16bit(*entry(path).tensor); }

  Tensor read(const std::string& path) override {
    const hf::ModelDir::Entry& e = entry(path);
    const hf::StTensor& t = *e.tensor;
    const char* p = e.file->data(t);
    const std::int64_t n = checked_numel(t.shape, "tensor");
    const std::string where = label(path);
    if (std::optional<Tensor> borrowed = borrowed_f32(e)) {
      h5::check_finite(borrowed->data(), t.shape, 0, n, where, false);
      return *std::move(borrowed);
    }
    Tensor out(t.shape, Uninitialized{});
    float* o = out.data();
    switch (t.dtype) {
    case hf::DType::F32: std::memcpy(o, p, static_cast<std::size_t>(n) * 4); break;
    case hf::DType::F64:
      for (std::int64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        // NaN and Inf named by their index, as for float32; a finite value beyond float32's range too
        if (!std::isfinite(d)) h5::check_finite(&d, t.shape, i, 1, where, false);
        o[i] = static_cast<float>(d);
        if (!std::isfinite(o[i]))
          throw Error(fmt::format("{}: {} at index {} is beyond float32's range", where, d, index_str(t.shape, i)));
      }
      break;
    case hf::DType::F16:
    case hf::DType::BF16: {
      const bool f16 = t.dtype == hf::DType::F16;
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        o[i] = f16 ? f16_to_float(b) : bf16_to_float(b);
      }
      break;
    }
    }
    h5::check_finite(o, t.shape, 0, n, where, false);
    return out;
  }

  LinearWeight read_linear(const std::string& path, LinearUse use) override {
    const bool tiles = use.tiles;
    const hf::ModelDir::Entry& e = entry(path);
    const hf::StTensor& t = *e.tensor;
    // in place when mapped and the run reads it so (as the HDF5 source's 16-bit weights)
    // (its values checked by the first product: LinearWeight::defer_check)
    if (half_matrix(t) && blas::keep_half_rows(half_kind(t), t.shape, tiles) && e.file->mapped() &&
        reinterpret_cast<std::uintptr_t>(e.file->data(t)) % 2 == 0) {
      const auto* bits = reinterpret_cast<const std::uint16_t*>(e.file->data(t));
      LinearWeight w = LinearWeight::half_rows_in_place(e.file->keeper(), half_kind(t), bits, t.shape[0], t.shape[1]);
      w.defer_check(finite_check(half_kind(t), bits, t.shape, label(path)));
      return w;
    }
    if (half_matrix(t)) {
      const char* p = e.file->data(t);
      // the tiles hold the values now: the mapping's pages are let go as each block of rows is laid
      // out (and checked for NaN and Inf, which read() then reports by index)
      const auto row_bytes = static_cast<std::uint64_t>(2 * t.shape[1]);
      bool nonfinite = false;
      LinearWeight w = LinearWeight::half_rows(
          half_kind(t), p, t.shape[0], t.shape[1],
          [&](std::int64_t r, std::int64_t n) {
            e.file->release(t, static_cast<std::uint64_t>(r) * row_bytes, static_cast<std::uint64_t>(n) * row_bytes);
          },
          &nonfinite);
      e.file->release(t);
      if (nonfinite) read(path); // throws, naming the first
      return w;
    }
    if (std::optional<Tensor> borrowed = borrowed_f32(e)) { // checked by the first pass over the values
      const float* data = borrowed->data();
      LinearWeight w(*std::move(borrowed));
      w.defer_check(finite_check(data, t.shape, label(path)));
      if (use.lays_out(w)) w.to_tiles();
      return w;
    }
    LinearWeight w(read(path));
    if (use.lays_out(w)) w.to_tiles();
    return w;
  }

  std::optional<LinearWeight> read_half_transposed(const std::string& path) override {
    const hf::ModelDir::Entry& e = entry(path);
    const hf::StTensor& t = *e.tensor;
    if (!half_matrix(t)) return std::nullopt;
    bool nonfinite = false;
    LinearWeight w = LinearWeight::half_transposed(half_kind(t), e.file->data(t), t.shape[1], t.shape[0], &nonfinite);
    e.file->release(t);
    if (nonfinite) read(path); // throws, naming the first
    return w;
  }

private:
  static bool is_16bit(const hf::StTensor& t) { return t.dtype == hf::DType::F16 || t.dtype == hf::DType::BF16; }
  static bool half_matrix(const hf::StTensor& t) { return is_16bit(t) && t.shape.size() == 2; }
  static HalfKind half_kind(const hf::StTensor& t) {
    return t.dtype == hf::DType::F16 ? HalfKind::F16 : HalfKind::BF16;
  }
  // A float32 tensor at an aligned address as a Tensor borrowed from the file's mapping (a private
  // one: copy on write), its values not checked; nullopt for the others.
  static std::optional<Tensor> borrowed_f32(const hf::ModelDir::Entry& e) {
    const hf::StTensor& t = *e.tensor;
    const char* p = e.file->data(t);
    if (t.dtype != hf::DType::F32 || reinterpret_cast<std::uintptr_t>(p) % alignof(float) != 0) return std::nullopt;
    return Tensor(t.shape, const_cast<float*>(reinterpret_cast<const float*>(p)), e.file->keeper());
  }
  const hf::ModelDir::Entry& entry(const std::string& path) const {
    const auto it = paths_.find(path);
    if (it == paths_.end()) throw Error(fmt::format("{}: no tensor {}", dir_.label(), dotted(path)));
    return *it->second;
  }
  hf::ModelDir dir_;
  std::map<std::string, const hf::ModelDir::Entry*> paths_;
  std::set<std::string> groups_;
};

} // namespace

std::shared_ptr<WeightSource> safetensors_weights(const std::string& path) {
  return std::make_shared<SafetensorsWeights>(path);
}

} // namespace attn
