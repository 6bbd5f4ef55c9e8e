// A Hugging Face model as it is downloaded (CONTRACT.md section 6.1): a directory with config.json
// and model.safetensors, or model.safetensors.index.json and its shards; or one .safetensors file
// or the index file, with the config.json beside it. The tensors by their state_dict names, and the
// config's values, flattened, with generation_config.json's special ids over them.
#pragma once

#include "attn/h5/h5io.hpp"
#include "attn/hf/safetensors.hpp"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attn::hf {

// Is `arg` (a --weights path, without any :PREFIX) a model directory, a .safetensors file or a
// safetensors index, rather than an HDF5 file?
bool is_model_path(const std::string& arg);

// A JSON config file's values as attributes: a number, string or bool as itself, a list of integers
// as a list; a nested object's values under "KEY.INNER" (rope_scaling.factor); null as absent.
// Other lists (architectures) are left out. Not an object, not JSON: an Error naming the file.
std::map<std::string, h5::AttrValue> read_config(const std::string& path);

class ModelDir {
public:
  struct Entry {
    std::shared_ptr<const SafetensorsFile> file;
    const StTensor* tensor;
  };
  // `arg` as is_model_path accepts it; every check of section 6.1 is made here.
  explicit ModelDir(const std::string& arg);

  const std::string& label() const { return label_; } // the argument, for messages
  const std::string& config_path() const { return config_path_; }
  // config.json's values, with generation_config.json's bos_token_id, eos_token_id and
  // pad_token_id over them where it has them.
  const std::map<std::string, h5::AttrValue>& config() const { return config_; }
  // Where a config value came from ("llama/config.json", "llama/generation_config.json").
  std::string config_source(const std::string& key) const;
  // By state_dict name, sorted.
  const std::map<std::string, Entry, std::less<>>& tensors() const { return tensors_; }

private:
  void add_file(const std::shared_ptr<const SafetensorsFile>& f);
  std::string label_, dir_, config_path_, generation_path_;
  std::map<std::string, h5::AttrValue> config_;
  std::map<std::string, bool> from_generation_;
  std::map<std::string, Entry, std::less<>> tensors_;
};

} // namespace attn::hf
