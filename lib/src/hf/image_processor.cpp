// preprocessor_config.json read into ImageProcessor (image_processor.hpp).
#include "attn/hf/image_processor.hpp"

#include "attn/core/error.hpp"
#include "hf/json_file.hpp"

#include <fmt/format.h>

namespace attn::hf {

namespace {

bool flag(const simdjson::dom::object& o, const char* key, bool fallback, const std::string& path) {
  simdjson::dom::element v;
  if (o.at_key(key).get(v)) return fallback;
  bool b;
  if (v.get(b)) throw Error(fmt::format("{}: {} must be true or false", path, key));
  return b;
}

double number(const simdjson::dom::element& v, const std::string& what, const std::string& path) {
  double d;
  if (v.get(d)) {
    std::int64_t i;
    if (v.get(i)) throw Error(fmt::format("{}: {} must be a number", path, what));
    d = static_cast<double>(i);
  }
  return d;
}

std::array<double, 3> triple(const simdjson::dom::object& o, const char* key, std::array<double, 3> fallback,
                             const std::string& path) {
  simdjson::dom::element v;
  if (o.at_key(key).get(v)) return fallback;
  simdjson::dom::array a;
  if (v.get(a) || a.size() != 3)
    throw Error(fmt::format("{}: {} must be a list of 3 numbers (one per channel)", path, key));
  std::array<double, 3> r{};
  std::size_t i = 0;
  for (auto x : a) r[i++] = number(x, key, path);
  return r;
}

std::int64_t positive(const simdjson::dom::element& v, const std::string& what, const std::string& path) {
  std::int64_t i;
  if (v.get(i) || i <= 0) throw Error(fmt::format("{}: {} must be a positive integer", path, what));
  return i;
}

} // namespace

ImageProcessor read_image_processor(const std::string& path) {
  simdjson::dom::parser parser;
  const simdjson::dom::element doc = parse_json_file(parser, path);
  simdjson::dom::object o;
  if (doc.get(o)) throw Error(fmt::format("{}: not a JSON object", path));
  ImageProcessor p;
  p.source = path;
  std::string_view type;
  if (!o.at_key("image_processor_type").get(type) && type != "ViTImageProcessor" && type != "ViTImageProcessorFast" &&
      type != "ViTFeatureExtractor")
    throw Error(fmt::format("{}: image_processor_type '{}': the toolkit computes ViTImageProcessor's steps (resize, "
                            "rescale, normalize)",
                            path, type));
  p.resize = flag(o, "do_resize", true, path);
  p.rescale = flag(o, "do_rescale", true, path);
  p.normalize = flag(o, "do_normalize", true, path);
  simdjson::dom::element v;
  if (!o.at_key("size").get(v)) {
    simdjson::dom::object size;
    if (!v.get(size)) {
      simdjson::dom::element h, w;
      if (size.at_key("height").get(h) || size.at_key("width").get(w))
        throw Error(fmt::format("{}: size must give height and width (a shortest_edge resize is not computed)", path));
      p.height = positive(h, "size.height", path), p.width = positive(w, "size.width", path);
    } else {
      p.height = p.width = positive(v, "size", path); // older configs: one number
    }
  }
  if (!o.at_key("resample").get(v)) {
    std::int64_t r;
    if (v.get(r) || r < 0 || r > 5) throw Error(fmt::format("{}: resample must be one of Pillow's filters 0..5", path));
    p.resample = static_cast<Resample>(r);
  }
  if (!o.at_key("rescale_factor").get(v)) p.rescale_factor = number(v, "rescale_factor", path);
  p.mean = triple(o, "image_mean", p.mean, path);
  p.std = triple(o, "image_std", p.std, path);
  for (double s : p.std)
    if (!(s > 0)) throw Error(fmt::format("{}: image_std must be positive", path));
  return p;
}

} // namespace attn::hf
