// Tensors: their storage (weights in slabs of their own), shapes, checked element counts (tensor.hpp).
#include "attn/core/tensor.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

#include <malloc.h>
#include <sys/mman.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace attn {

namespace {
constexpr std::size_t huge = std::size_t{2} << 20; // a transparent huge page
} // namespace

void* allocate_storage(std::size_t bytes) {
  // Big blocks always from mmap, returned to the system when freed. glibc's default raises its
  // mmap threshold after the first big free and then serves big blocks from the heap, where the
  // 2 MiB-aligned blocks of a chunked run fragmented it: encode's peak memory grew with the number
  // of chunks (402 MiB for 512 sequences of (128, 512), 181 MiB with this).
  // Fixing it also fixes glibc's trim threshold at 128 KiB: every free that left that much at the
  // heap's top gave it back to the kernel, and the next decoding step, allocating the same buffers
  // (logits over 32000 tokens are 125 KiB a row), faulted it in again: 64 tokens of a LLaMA-layout
  // model took 0.263 s instead of 0.214 s (medians of 5). So up to 64 MiB of freed heap is kept.
  static const bool fixed_threshold =
      mallopt(M_MMAP_THRESHOLD, static_cast<int>(huge)) != 0 && mallopt(M_TRIM_THRESHOLD, 64 << 20) != 0;
  (void)fixed_threshold;
  void* p = nullptr;
  if (bytes >= huge) {
    p = std::aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
    if (p) ::madvise(p, bytes / huge * huge, MADV_HUGEPAGE); // a hint: ignored where THP is off
  } else {
    p = std::malloc(bytes ? bytes : 1);
  }
  if (!p) throw std::bad_alloc();
  return p;
}

void free_storage(void* p) noexcept { std::free(p); }

namespace {

// The slabs of allocate_weight_storage: each is bumped from its start, counts its live buffers,
// and is freed when that count returns to zero (the newest one is kept and restarted instead).
struct WeightSlabs {
  struct Slab {
    char* base;
    std::size_t size, used;
    std::int64_t live;
  };
  static constexpr std::size_t slab_size = std::size_t{32} << 20, align = 64;
  std::mutex mutex;
  std::vector<Slab> slabs; // the last is the one being filled

  void* allocate(std::size_t bytes) {
    bytes = (std::max<std::size_t>(bytes, 1) + align - 1) / align * align;
    std::lock_guard lock(mutex);
    if (slabs.empty() || slabs.back().size - slabs.back().used < bytes) {
      const std::size_t size = std::max(slab_size, (bytes + huge - 1) / huge * huge);
      void* p = allocate_storage(size);               // a big block: 2 MiB-aligned, advised as huge pages
      if (!slabs.empty() && slabs.back().live == 0) { // an empty slab too small for this buffer
        free_storage(slabs.back().base);
        slabs.pop_back();
      }
      slabs.push_back({static_cast<char*>(p), size, 0, 0});
    }
    Slab& s = slabs.back();
    char* p = s.base + s.used;
    s.used += bytes;
    ++s.live;
    return p;
  }

  void free(void* p) noexcept {
    std::lock_guard lock(mutex);
    const auto c = static_cast<char*>(p);
    for (std::size_t i = 0; i < slabs.size(); ++i) {
      Slab& s = slabs[i];
      if (c < s.base || c >= s.base + s.size) continue;
      if (--s.live > 0) return;
      if (i + 1 == slabs.size()) {
        s.used = 0; // the slab being filled: start it again
      } else {
        free_storage(s.base);
        slabs.erase(slabs.begin() + static_cast<std::ptrdiff_t>(i));
      }
      return;
    }
  }
};

WeightSlabs& weight_slabs() {
  static WeightSlabs* slabs = new WeightSlabs; // never destroyed: weights in statics may outlive it
  return *slabs;
}

} // namespace

void* allocate_weight_storage(std::size_t bytes) { return weight_slabs().allocate(bytes); }

void free_weight_storage(void* p) noexcept {
  if (p) weight_slabs().free(p);
}

std::int64_t checked_numel(const Shape& shape, const std::string& what) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d <= 0)
      throw UsageError(
          fmt::format("{}: shape {} has a dimension of size {} (sizes must be positive)", what, shape_str(shape), d));
    if (n > std::numeric_limits<std::int64_t>::max() / d)
      throw UsageError(fmt::format("{}: shape {} has more elements than fit in 64 bits", what, shape_str(shape)));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string index_str(const Shape& shape, std::int64_t flat) {
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t k = shape.size(); k-- > 0;) {
    idx[k] = flat % shape[k];
    flat /= shape[k];
  }
  std::string s = "[";
  for (std::size_t k = 0; k < idx.size(); ++k) s += (k ? ", " : "") + std::to_string(idx[k]);
  return s + "]";
}

// MemAvailable from /proc/meminfo in bytes, or -1 when it cannot be read.
static std::int64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return -1;
}

static std::int64_t memory_budget = 0;

// A tensor smaller than this is allocated without asking how much memory is available (unless a
// budget is set): reading /proc/meminfo takes ~10 us, and a decoding step allocates a few small
// tensors (6 a token, 60 us of float16 generation's 1.5 ms). Only a large tensor can be absurd.
constexpr std::int64_t memory_check_min = std::int64_t{64} << 20;

void set_memory_budget(std::int64_t bytes) { memory_budget = bytes; }

void check_fits_in_memory(std::int64_t bytes, const std::string& what) {
  std::int64_t avail = available_memory();
  if (memory_budget > 0 && (avail < 0 || memory_budget < avail)) avail = memory_budget;
  if (avail >= 0 && bytes > avail)
    throw Error(fmt::format("{} needs {:.1f} GiB but only {:.1f} GiB of memory is available", what,
                            static_cast<double>(bytes) / (1 << 30), static_cast<double>(avail) / (1 << 30)));
}

template <typename T> typename BasicTensor<T>::Storage BasicTensor<T>::allocate(const Shape& shape) {
  const std::int64_t n = checked_numel(shape, "tensor");
  if (n > std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(sizeof(T)))
    throw UsageError(fmt::format("tensor of shape {} is too large", shape_str(shape)));
  const std::int64_t bytes = n * static_cast<std::int64_t>(sizeof(T));
  if (bytes >= memory_check_min || memory_budget > 0)
    check_fits_in_memory(bytes, fmt::format("a tensor of shape {}", shape_str(shape)));
  return Storage(static_cast<std::size_t>(n));
}

template <typename T> BasicTensor<T>::BasicTensor(Shape shape, const std::vector<T>& data) : shape_(std::move(shape)) {
  if (checked_numel(shape_, "tensor") != static_cast<std::int64_t>(data.size()))
    throw Error(fmt::format("tensor of shape {} given {} values", shape_str(shape_), data.size()));
  data_ = Storage(data.size());
  std::copy(data.begin(), data.end(), data_.data());
}

template <typename T> std::span<T> BasicTensor<T>::batch(std::int64_t b) {
  const std::int64_t per = size() / shape_.at(0);
  return span().subspan(static_cast<std::size_t>(b * per), static_cast<std::size_t>(per));
}

template <typename T> std::span<const T> BasicTensor<T>::batch(std::int64_t b) const {
  const std::int64_t per = size() / shape_.at(0);
  return span().subspan(static_cast<std::size_t>(b * per), static_cast<std::size_t>(per));
}

template <typename T> void BasicTensor<T>::reshape(Shape shape) {
  if (checked_numel(shape, "reshape") != size())
    throw Error(fmt::format("cannot reshape {} to {}", shape_str(shape_), shape_str(shape)));
  shape_ = std::move(shape);
}

template class BasicTensor<float>;
template class BasicTensor<double>;
template class BasicTensor<std::int64_t>;

} // namespace attn
