// The safetensors reader: the header parsed with simdjson and checked as the format specifies,
// the data buffer mapped (safetensors.hpp).
#include "attn/hf/safetensors.hpp"

#include "attn/core/error.hpp"
#include "attn/sys/mapped_range.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attn::hf {

namespace {

struct DTypeName {
  const char* name;
  DType type;
};
constexpr DTypeName read_types[] = {
    {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"F64", DType::F64}};
// The format's other types: known, not read.
constexpr const char* other_types[] = {"BOOL", "U8",      "I8",      "I16",     "U16", "I32",     "U32",     "I64",
                                       "U64",  "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};

// The whole file's bytes: mapped where it can be, else read.
std::shared_ptr<const void> file_bytes(const std::string& path, std::uint64_t& size, const char*& data, bool& mapped) {
  ScopedFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) throw Error(fmt::format("{}: not a regular file", path));
  size = static_cast<std::uint64_t>(st.st_size);
  if (size < 8)
    throw Error(fmt::format("{}: {} bytes: too short for a safetensors file (8-byte header length)", path, size));
  if (auto m = MappedRange::map(f.fd, 0, static_cast<std::size_t>(size), path)) {
    data = m->data();
    mapped = true;
    return m;
  }
  auto copy = std::make_shared<std::vector<char>>(static_cast<std::size_t>(size));
  for (std::size_t got = 0; got < copy->size();) {
    const ssize_t r = ::pread(f.fd, copy->data() + got, copy->size() - got, static_cast<off_t>(got));
    if (r <= 0) throw Error(fmt::format("{}: cannot read: {}", path, r < 0 ? std::strerror(errno) : "truncated"));
    got += static_cast<std::size_t>(r);
  }
  data = copy->data();
  return copy;
}

} // namespace

std::size_t dtype_size(DType t) {
  switch (t) {
  case DType::F32: return 4;
  case DType::F16:
  case DType::BF16: return 2;
  case DType::F64: return 8;
  }
  return 0;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  std::uint64_t size = 0;
  const char* base = nullptr;
  bytes_ = file_bytes(path, size, base, mapped_);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(base[i]);
  if (n > max_header_bytes)
    throw Error(fmt::format("{}: the header claims {} bytes: more than the format's 100 MB (not a safetensors file, "
                            "or a damaged one)",
                            path, n));
  if (n > size - 8)
    throw Error(fmt::format("{}: the header's length {} runs past the end of the file ({} bytes)", path, n, size));
  data_ = base + 8 + n;
  parse_header(std::string_view(base + 8, static_cast<std::size_t>(n)), size - 8 - n);
}

SafetensorsFile::~SafetensorsFile() = default;

const StTensor* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::release(const StTensor& t, std::uint64_t from, std::uint64_t count) const {
  const long page = ::sysconf(_SC_PAGESIZE);
  auto first = reinterpret_cast<std::uintptr_t>(data_ + t.begin + from),
       last = reinterpret_cast<std::uintptr_t>(data_ + t.begin + std::min(from + count, t.end - t.begin));
  first = (first + page - 1) / page * page; // whole pages inside the tensor only
  last = last / page * page;
  if (mapped_ && last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void SafetensorsFile::parse_header(std::string_view json, std::uint64_t buffer_bytes) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const simdjson::padded_string padded(json);
  if (auto e = parser.parse(padded).get(doc))
    throw Error(fmt::format("{}: the header is not JSON ({})", path_, simdjson::error_message(e)));
  simdjson::dom::object top;
  if (doc.get(top)) throw Error(fmt::format("{}: the header is not a JSON object", path_));
  std::set<std::string> seen;
  for (auto field : top) {
    const std::string name(field.key);
    if (!seen.insert(name).second) throw Error(fmt::format("{}: tensor {} is named twice in the header", path_, name));
    if (name == "__metadata__") {
      simdjson::dom::object meta;
      if (field.value.get(meta)) throw Error(fmt::format("{}: __metadata__ is not an object of strings", path_));
      for (auto m : meta) {
        std::string_view v;
        if (m.value.get(v))
          throw Error(fmt::format("{}: __metadata__ value {} is not a string", path_, std::string(m.key)));
        metadata_[std::string(m.key)] = std::string(v);
      }
      continue;
    }
    const std::string where = fmt::format("{}: tensor {}", path_, name);
    simdjson::dom::object info;
    if (field.value.get(info)) throw Error(fmt::format("{}: expected an object (dtype, shape, data_offsets)", where));
    StTensor t;
    t.name = name;
    for (auto k : info) {
      if (k.key != "dtype" && k.key != "shape" && k.key != "data_offsets")
        throw Error(fmt::format("{}: unknown key '{}' (dtype, shape, data_offsets)", where, std::string(k.key)));
    }
    std::string_view dtype;
    if (info["dtype"].get(dtype)) throw Error(fmt::format("{}: no dtype string", where));
    const auto* known =
        std::find_if(std::begin(read_types), std::end(read_types), [&](const DTypeName& d) { return dtype == d.name; });
    if (known == std::end(read_types)) {
      const bool other =
          std::any_of(std::begin(other_types), std::end(other_types), [&](const char* o) { return dtype == o; });
      throw Error(fmt::format("{}: dtype {} {} (the tools read F32, F16, BF16 and F64)", where, dtype,
                              other ? "is not read" : "is unknown"));
    }
    t.dtype = known->type;
    simdjson::dom::array shape, offsets;
    if (info["shape"].get(shape)) throw Error(fmt::format("{}: no shape array", where));
    std::uint64_t numel = 1;
    for (auto d : shape) {
      std::uint64_t v;
      if (d.get(v) || v > (1ull << 48))
        throw Error(fmt::format("{}: the shape holds {}: expected sizes >= 0", where, simdjson::to_string(d)));
      if (v != 0 && numel > (1ull << 62) / v) throw Error(fmt::format("{}: the shape's size overflows", where));
      numel *= v;
      t.shape.push_back(static_cast<std::int64_t>(v));
    }
    if (info["data_offsets"].get(offsets) || offsets.size() != 2)
      throw Error(fmt::format("{}: data_offsets is not [begin, end]", where));
    if (offsets.at(0).get(t.begin) || offsets.at(1).get(t.end))
      throw Error(fmt::format("{}: data_offsets holds something other than two offsets >= 0", where));
    if (t.end < t.begin)
      throw Error(fmt::format("{}: data_offsets [{}, {}] ends before it begins", where, t.begin, t.end));
    if (t.end > buffer_bytes)
      throw Error(fmt::format("{}: data_offsets [{}, {}] run past the end of the data ({} bytes)", where, t.begin,
                              t.end, buffer_bytes));
    const std::uint64_t want = numel * dtype_size(t.dtype);
    if (t.end - t.begin != want)
      throw Error(fmt::format("{}: shape {} of {} takes {} bytes, data_offsets [{}, {}] hold {}", where,
                              shape_str(t.shape), dtype, want, t.begin, t.end, t.end - t.begin));
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  // The buffer, tensor after tensor: no overlap, no hole, nothing after the last.
  std::vector<const StTensor*> order;
  for (const StTensor& t : tensors_) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const StTensor* a, const StTensor* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t at = 0;
  for (const StTensor* t : order) {
    if (t->begin < at)
      throw Error(fmt::format("{}: tensor {}'s bytes [{}, {}] overlap another tensor's (which end at {})", path_,
                              t->name, t->begin, t->end, at));
    if (t->begin > at)
      throw Error(fmt::format("{}: a hole in the data before tensor {}: bytes [{}, {}] belong to no tensor", path_,
                              t->name, at, t->begin));
    at = t->end;
  }
  if (at != buffer_bytes)
    throw Error(fmt::format("{}: {} bytes after the last tensor's data (the data buffer holds {}, the tensors {})",
                            path_, buffer_bytes - at, buffer_bytes, at));
}

} // namespace attn::hf
