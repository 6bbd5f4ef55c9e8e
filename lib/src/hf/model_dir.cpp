// Hugging Face model directories: the index, the shards and the config, checked (model_dir.hpp).
#include "attn/hf/model_dir.hpp"

#include "attn/core/error.hpp"
#include "hf/json_file.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <filesystem>
#include <set>

namespace attn::hf {

namespace fs = std::filesystem;

namespace {

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

} // namespace

simdjson::dom::element parse_json_file(simdjson::dom::parser& parser, const std::string& path) {
  simdjson::padded_string text;
  if (auto e = simdjson::padded_string::load(path).get(text))
    throw Error(fmt::format("{}: cannot read ({})", path, simdjson::error_message(e)));
  simdjson::dom::element doc;
  if (auto e = parser.parse(text).get(doc))
    throw Error(fmt::format("{}: not JSON ({})", path, simdjson::error_message(e)));
  return doc;
}

namespace {

void flatten(const simdjson::dom::object& obj, const std::string& prefix, std::map<std::string, h5::AttrValue>& out) {
  for (auto field : obj) {
    const std::string key = prefix + std::string(field.key);
    const simdjson::dom::element v = field.value;
    switch (v.type()) {
    case simdjson::dom::element_type::NULL_VALUE: break;
    case simdjson::dom::element_type::BOOL: out[key] = bool(v.get_bool()); break;
    case simdjson::dom::element_type::INT64: out[key] = std::int64_t(v.get_int64()); break;
    case simdjson::dom::element_type::UINT64: out[key] = double(v.get_uint64()); break;
    case simdjson::dom::element_type::DOUBLE: out[key] = double(v.get_double()); break;
    case simdjson::dom::element_type::STRING: out[key] = std::string(std::string_view(v.get_string())); break;
    case simdjson::dom::element_type::OBJECT: flatten(v.get_object(), key + ".", out); break;
    case simdjson::dom::element_type::ARRAY: {
      std::vector<std::int64_t> ints;
      bool all_ints = true;
      for (auto x : v.get_array()) {
        std::int64_t i;
        if (x.get(i)) {
          all_ints = false;
          break;
        }
        ints.push_back(i);
      }
      if (all_ints && !ints.empty()) out[key] = std::move(ints);
      break;
    }
    }
  }
}

} // namespace

bool is_model_path(const std::string& arg) {
  std::error_code ec;
  return fs::is_directory(arg, ec) || ends_with(arg, ".safetensors") || ends_with(arg, ".safetensors.index.json");
}

std::map<std::string, h5::AttrValue> read_config(const std::string& path) {
  simdjson::dom::parser parser;
  const simdjson::dom::element doc = parse_json_file(parser, path);
  simdjson::dom::object obj;
  if (doc.get(obj)) throw Error(fmt::format("{}: not a JSON object", path));
  std::map<std::string, h5::AttrValue> out;
  flatten(obj, "", out);
  return out;
}

ModelDir::ModelDir(const std::string& arg) : label_(arg) {
  std::error_code ec;
  std::string index, single;
  if (fs::is_directory(arg, ec)) {
    dir_ = arg;
    const std::string model = (fs::path(arg) / "model.safetensors").string();
    const std::string idx = (fs::path(arg) / "model.safetensors.index.json").string();
    if (fs::exists(model, ec))
      single = model;
    else if (fs::exists(idx, ec))
      index = idx;
    else
      throw Error(fmt::format("{}: neither model.safetensors nor model.safetensors.index.json (a Hugging Face model "
                              "directory holds one)",
                              arg));
  } else {
    if (!fs::exists(arg, ec)) throw Error(fmt::format("{}: no such file or directory", arg));
    dir_ = fs::path(arg).parent_path().string();
    if (dir_.empty()) dir_ = ".";
    (ends_with(arg, ".json") ? index : single) = arg;
  }
  config_path_ = (fs::path(dir_) / "config.json").string();
  if (!fs::exists(config_path_, ec))
    throw Error(fmt::format("{}: missing (the model's config.json, beside its weights, gives its hyperparameters)",
                            config_path_));
  config_ = read_config(config_path_);
  generation_path_ = (fs::path(dir_) / "generation_config.json").string();
  if (fs::exists(generation_path_, ec)) {
    const auto gen = read_config(generation_path_);
    for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id",
                            "forced_bos_token_id", "forced_eos_token_id"})
      if (const auto it = gen.find(key); it != gen.end()) config_[key] = it->second, from_generation_[key] = true;
  }

  if (!single.empty()) {
    add_file(std::make_shared<const SafetensorsFile>(single));
    return;
  }
  simdjson::dom::parser parser;
  const simdjson::dom::element doc = parse_json_file(parser, index);
  simdjson::dom::object map;
  if (doc["weight_map"].get(map))
    throw Error(fmt::format("{}: no weight_map object (tensor name -> shard file)", index));
  std::map<std::string, std::string> shard_of;
  for (auto field : map) {
    const std::string name(field.key);
    std::string_view shard;
    if (field.value.get(shard)) throw Error(fmt::format("{}: weight_map's tensor {} names no shard file", index, name));
    if (!shard_of.emplace(name, std::string(shard)).second)
      throw Error(fmt::format("{}: tensor {} is named twice in weight_map", index, name));
    const fs::path p(shard);
    bool outside = p.empty() || p.is_absolute();
    for (const auto& part : p) outside = outside || part == "..";
    if (outside)
      throw Error(fmt::format("{}: tensor {}'s shard '{}' lies outside the model's folder", index, name, shard));
  }
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;
  for (const auto& [name, shard] : shard_of) {
    if (shards.count(shard)) continue;
    const std::string path = (fs::path(dir_) / shard).string();
    if (!fs::exists(path, ec))
      throw Error(fmt::format("{}: shard {} (of tensor {}) is missing from {}", index, shard, name, dir_));
    shards[shard] = std::make_shared<const SafetensorsFile>(path);
  }
  for (const auto& [shard, file] : shards) {
    for (const StTensor& t : file->tensors()) {
      const auto it = shard_of.find(t.name);
      if (it == shard_of.end())
        throw Error(fmt::format("{}: tensor {} is not in {}'s weight_map", file->path(), t.name, index));
      if (it->second != shard)
        throw Error(
            fmt::format("{}: tensor {} is here, but {} puts it in {}", file->path(), t.name, index, it->second));
    }
    add_file(file);
  }
  for (const auto& [name, shard] : shard_of)
    if (!tensors_.count(name))
      throw Error(fmt::format("{}: tensor {} is not in {}, where {} puts it", (fs::path(dir_) / shard).string(), name,
                              shard, index));
}

void ModelDir::add_file(const std::shared_ptr<const SafetensorsFile>& f) {
  for (const StTensor& t : f->tensors()) {
    const auto [it, fresh] = tensors_.emplace(t.name, Entry{f, &t});
    if (!fresh) throw Error(fmt::format("{}: tensor {} is also in {}", f->path(), t.name, it->second.file->path()));
  }
}

std::string ModelDir::config_source(const std::string& key) const {
  return from_generation_.count(key) ? generation_path_ : config_path_;
}

} // namespace attn::hf
