// The safetensors format (huggingface/safetensors), read strictly:
//   8 bytes    N, the header's length, little-endian
//   N bytes    a JSON object: "NAME": {"dtype": "BF16", "shape": [d0, ...], "data_offsets": [begin, end]}
//              per tensor, and an optional "__metadata__" of strings; padded with spaces
//   the rest   the data buffer: every tensor's bytes [begin, end) back to back, in some order, with
//              no holes, no overlaps and nothing after the last
// The file is mapped (mapped_range.hpp), never read whole into memory: a tensor's bytes are used
// where the mapping has them.
#pragma once

#include "attn/core/tensor.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attn::hf {

// The stored types read as numbers; the format's others (I8 ... U64, BOOL, F8_*) are refused by name.
enum class DType { F32, F16, BF16, F64 };
std::size_t dtype_size(DType t);

struct StTensor {
  std::string name; // "model.layers.0.self_attn.q_proj.weight"
  DType dtype = DType::F32;
  Shape shape;
  std::uint64_t begin = 0, end = 0; // in the data buffer
};

// The largest header read (the format's own limit): a longer claim is a damaged file.
constexpr std::uint64_t max_header_bytes = 100'000'000;

class SafetensorsFile {
public:
  // Maps `path` and checks its header and offsets; every error names `path` (and the tensor).
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // In header order (the JSON object's).
  const std::vector<StTensor>& tensors() const { return tensors_; }
  const StTensor* find(std::string_view name) const;
  // The tensor's first byte, in the mapping; valid while this file (or keeper()) lives.
  const char* data(const StTensor& t) const { return data_ + t.begin; }
  // Whether the bytes are the file's mapping (else a copy read into memory).
  bool mapped() const { return mapped_; }
  // Keeps the mapping alive for tensors that borrow it.
  std::shared_ptr<const void> keeper() const { return bytes_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Lets the kernel drop the pages of a tensor that was copied elsewhere (its 16-bit tiles, a
  // transposed copy): the mapping then holds only what is still used. Reading them again reads the file.
  void release(const StTensor& t) const { release(t, 0, t.end - t.begin); }
  // The same for bytes [first, first + count) of the tensor.
  void release(const StTensor& t, std::uint64_t first, std::uint64_t count) const;

private:
  void parse_header(std::string_view json, std::uint64_t buffer_bytes);
  std::string path_;
  std::shared_ptr<const void> bytes_; // the mapping (or, where it cannot be mapped, a copy)
  const char* data_ = nullptr;        // the data buffer
  bool mapped_ = false;
  std::vector<StTensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

} // namespace attn::hf
