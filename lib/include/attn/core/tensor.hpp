// Dense row-major tensors: a shape and contiguous storage, as NumPy and h5py see them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace attn {

using Shape = std::vector<std::int64_t>;

// Number of elements; throws UsageError when a dimension is not positive or the count overflows.
std::int64_t checked_numel(const Shape& shape, const std::string& what);
// "(2, 16, 64)"
std::string shape_str(const Shape& shape);
// "[0, 3, 1]": a C-order multi-index of flat position `flat`.
std::string index_str(const Shape& shape, std::int64_t flat);

// Throws Error when `bytes` exceed the memory this machine has available, before anything is
// allocated, so an absurd shape is a clear error and not an out-of-memory kill. Tensors check it
// from 64 MiB up (every tensor while a budget is set).
void check_fits_in_memory(std::int64_t bytes, const std::string& what);
// Caps what check_fits_in_memory allows below what is available (0, the default: no cap), for
// harnesses with a memory limit of their own (the fuzzers run under libFuzzer's -rss_limit_mb).
void set_memory_budget(std::int64_t bytes);

// Tag for a tensor whose every element the caller is about to write: skips the zero fill, so
// the pages are first touched by the (parallel) code that computes them.
struct Uninitialized {};

// Tensor storage: malloc for small blocks; blocks of 2 MiB and more are 2 MiB aligned and
// offered to the kernel as transparent huge pages, which cuts the cost of first touching them
// (24 MiB: 9 ms of page faults in 4 KiB pages, 1.7 ms in huge pages, on a KVM guest). Only whole
// huge pages are advised, so a 3 MiB block takes one huge page and 256 small ones, no more
// memory than in small pages. Throws std::bad_alloc.
void* allocate_storage(std::size_t bytes);
void free_storage(void* p) noexcept;

// An allocator that default-initialises (leaves trivial types unset) instead of zeroing.
template <typename T> struct DefaultInitAllocator : std::allocator<T> {
  template <typename U> struct rebind { using other = DefaultInitAllocator<U>; };
  using std::allocator<T>::allocator;
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_storage(n * sizeof(T))); }
  void deallocate(T* p, std::size_t) noexcept { free_storage(p); }
  template <typename U> void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
  template <typename U, typename... Args> void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// A buffer from allocate_storage (big ones on huge pages where THP allows), left unset when
// resized: caches that are not tensors (kv_cache.hpp's float16 copies).
template <typename T> using Buffer = std::vector<T, DefaultInitAllocator<T>>;

// Storage for weights that live as long as a model (linear_weight.hpp's int8 and float16 tiles):
// packed one after another into shared 2 MiB-aligned slabs offered as huge pages, so a model's
// many small weights (512 KiB each at E = 512) stream from huge pages too: 44 MB of float16 tiles
// at batch 1 on 2 threads streamed 1.04-1.08x faster than from 4 KiB pages (alternated in one
// process), and decode --generate ran 1.12x (float16) and 1.07x (int8) faster (paired builds).
// A slab is freed when its last buffer is. Thread-safe; throws std::bad_alloc.
void* allocate_weight_storage(std::size_t bytes);
void free_weight_storage(void* p) noexcept;

template <typename T> struct WeightAllocator {
  using value_type = T;
  WeightAllocator() = default;
  template <typename U> WeightAllocator(const WeightAllocator<U>&) noexcept {} // NOLINT
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_weight_storage(n * sizeof(T))); }
  void deallocate(T* p, std::size_t) noexcept { free_weight_storage(p); }
  // resize() leaves the values unset (the layout fills them); assign() and value construction set them
  template <typename U> void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
  template <typename U, typename... A> void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
  template <typename U> bool operator==(const WeightAllocator<U>&) const noexcept { return true; }
};
template <typename T> using WeightBuffer = std::vector<T, WeightAllocator<T>>;

// A tensor's elements: a block from allocate_storage, left unset, or memory it borrows and keeps
// alive through `owner` (a weight read through a mapping of its file, h5io.hpp: the pages stay
// the page cache's until written). A copy is always a new block of its own.
template <typename T> class TensorStorage {
public:
  TensorStorage() = default;
  explicit TensorStorage(std::size_t n) : p_(static_cast<T*>(allocate_storage(n * sizeof(T)))), n_(n) {}
  TensorStorage(T* p, std::size_t n, std::shared_ptr<const void> owner) : p_(p), n_(n), owner_(std::move(owner)) {}
  TensorStorage(const TensorStorage& o) : TensorStorage(o.n_) { std::copy_n(o.p_, o.n_, p_); }
  TensorStorage(TensorStorage&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)), owner_(std::move(o.owner_)) {}
  TensorStorage& operator=(TensorStorage o) noexcept {
    std::swap(p_, o.p_), std::swap(n_, o.n_), std::swap(owner_, o.owner_);
    return *this;
  }
  ~TensorStorage() {
    if (!owner_) free_storage(p_);
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  std::size_t size() const { return n_; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  const T* begin() const { return p_; }
  const T* end() const { return p_ + n_; }
  T& operator[](std::size_t i) { return p_[i]; }
  const T& operator[](std::size_t i) const { return p_[i]; }
  bool borrowed() const { return owner_ != nullptr; }

private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
  std::shared_ptr<const void> owner_; // set: p_ is borrowed memory, not ours to free
};

template <typename T> class BasicTensor {
public:
  using Storage = TensorStorage<T>;

  BasicTensor() = default;
  // Zero-filled tensor; checks the shape and that it fits in memory.
  explicit BasicTensor(Shape shape) : BasicTensor(std::move(shape), Uninitialized{}) {
    std::fill(data_.begin(), data_.end(), T{});
  }
  // Tensor with unset values (see Uninitialized); checks as above.
  BasicTensor(Shape shape, Uninitialized) : shape_(std::move(shape)), data_(allocate(shape_)) {}
  BasicTensor(Shape shape, const std::vector<T>& data);
  // Elements borrowed from memory that `owner` keeps alive (and frees); the shape is not checked
  // against it.
  BasicTensor(Shape shape, T* data, std::shared_ptr<const void> owner)
      : shape_(std::move(shape)),
        data_(data, static_cast<std::size_t>(checked_numel(shape_, "tensor")), std::move(owner)) {}

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // dim(-1) is the last axis.
  std::int64_t dim(int axis) const { return shape_.at(axis < 0 ? axis + rank() : axis); }
  std::int64_t size() const { return static_cast<std::int64_t>(data_.size()); }

  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  std::span<T> span() { return {data_.data(), data_.size()}; }
  std::span<const T> span() const { return {data_.data(), data_.size()}; }
  // Borrowed elements (the constructor above): written in place, they change only this process's
  // copy of the pages.
  bool borrowed() const { return data_.borrowed(); }
  T& operator[](std::int64_t i) { return data_[static_cast<std::size_t>(i)]; }
  const T& operator[](std::int64_t i) const { return data_[static_cast<std::size_t>(i)]; }

  // Elements of item b along the first axis (a view, no copy).
  std::span<T> batch(std::int64_t b);
  std::span<const T> batch(std::int64_t b) const;

  // Same data under another shape with the same element count (e.g. (n, d) -> (1, n, d)).
  void reshape(Shape shape);

private:
  static Storage allocate(const Shape& shape);
  Shape shape_;
  Storage data_;
};

using Tensor = BasicTensor<float>;
using TensorD = BasicTensor<double>;
using TensorI = BasicTensor<std::int64_t>;

extern template class BasicTensor<float>;
extern template class BasicTensor<double>;
extern template class BasicTensor<std::int64_t>;

// Scratch: at least `count` floats of t, reallocated (unset) only when it is too small.
inline float* reserve(Tensor& t, std::int64_t count) {
  if (t.size() < count) t = Tensor(Shape{count}, Uninitialized{});
  return t.data();
}

} // namespace attn
