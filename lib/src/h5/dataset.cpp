// Reading an input dataset: checks, float, integer, 16-bit and int8 reads, mappings, slices.
#include "attn/h5/h5io.hpp"

#include "h5/plumbing.hpp"

#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/kernels/parallel.hpp"
#include "attn/sys/mapped_range.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace attn::h5 {

Dataset::Dataset(Handle ds, std::string label) : ds_(std::move(ds)), label_(std::move(label)) {
  Handle type(check_id(H5Dget_type(ds_.get()), label_ + ": cannot read the data type"));
  type_name_ = type_name_of(type.get());
  half_ = half_layout_of(type.get());
  switch (H5Tget_class(type.get())) {
  case H5T_FLOAT: kind_ = ElemKind::Float; break;
  case H5T_INTEGER: kind_ = ElemKind::Integer; break;
  case H5T_ENUM: kind_ = ElemKind::Bool; break;
  default: throw Error(fmt::format("{}: holds {} data; expected numbers (float, integer or bool)", label_, type_name_));
  }
  Handle space(check_id(H5Dget_space(ds_.get()), label_ + ": cannot read the shape"));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) throw Error(with_reason(label_ + ": cannot read the shape"));
  if (rank == 0) throw Error(fmt::format("{}: is a scalar (or empty) dataset; expected a tensor", label_));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  for (hsize_t d : dims) {
    if (d == 0) {
      shape_.assign(dims.begin(), dims.end());
      throw Error(fmt::format("{}: shape {} has a dimension of size 0", label_, shape_str(shape_)));
    }
    if (d > static_cast<hsize_t>(INT64_MAX)) throw Error(label_ + ": dimension too large");
    shape_.push_back(static_cast<std::int64_t>(d));
  }
  // An absurd shape in a crafted file is an error here (exit status 1: the file is wrong, not the
  // command line), before anything is allocated.
  std::int64_t n = 0;
  try {
    n = checked_numel(shape_, label_);
  } catch (const UsageError& e) {
    throw Error(e.what());
  }
  if (n > INT64_MAX / 8) throw Error(fmt::format("{}: shape {} is too large", label_, shape_str(shape_)));
  check_contiguous_data_in_file(n * static_cast<std::int64_t>(H5Tget_size(type.get())));
}

// Contiguous data lies at one offset in the file: a file too short to hold it (truncated, or a
// header claiming more than was written) is an error before a buffer of that size is allocated.
bool Dataset::contiguous() const {
  Handle dcpl(H5Dget_create_plist(ds_.get()));
  const bool yes =
      dcpl.valid() && H5Pget_layout(dcpl.get()) == H5D_CONTIGUOUS && H5Pget_external_count(dcpl.get()) == 0;
  H5Eclear2(H5E_DEFAULT);
  return yes;
}

void Dataset::check_contiguous_data_in_file(std::int64_t bytes) const {
  if (!contiguous()) return;
  const haddr_t offset = H5Dget_offset(ds_.get());
  Handle file(H5Iget_file_id(ds_.get()));
  hsize_t file_size = 0;
  if (offset == HADDR_UNDEF || !file.valid() || H5Fget_filesize(file.get(), &file_size) < 0) {
    H5Eclear2(H5E_DEFAULT); // not written yet (reads as the fill value), or not ours to judge
    return;
  }
  if (offset > file_size || static_cast<std::uint64_t>(bytes) > file_size - offset)
    throw Error(fmt::format("{}: file truncated or corrupt: the data needs {} bytes at offset {}, the file has {}",
                            label_, bytes, offset, file_size));
}

void Dataset::require_rank(int lo, int hi, std::string_view expect) const {
  if (rank() >= lo && rank() <= hi) return;
  throw Error(fmt::format("{}: expected {}, got shape {}", label_, expect, shape_str(shape_)));
}

namespace {

// Whether any of the n values at `v` has an exponent of all ones (Inf, NaN): an OR over each
// value's exponent bits plus the exponent's lowest bit, whose carry reaches the sign bit only from
// all ones. Built for AVX2 too. A one-token run of a 476 MB float32 model (Xeon, 2 threads, 6
// alternated rounds): CPU 0.16-0.20 -> 0.15-0.17 s, wall 0.11-0.13 -> 0.11-0.12 s; the rest of the
// scan is the first touch of the mapped file's pages.
__attribute__((target_clones("avx2", "default"))) bool any_all_ones(const float* v, std::int64_t n) {
  std::uint32_t acc = 0;
#pragma omp simd reduction(| : acc)
  for (std::int64_t i = 0; i < n; ++i) acc |= (std::bit_cast<std::uint32_t>(v[i]) & 0x7f800000u) + 0x00800000u;
  return (acc >> 31) != 0;
}
__attribute__((target_clones("avx2", "default"))) bool any_all_ones(const double* v, std::int64_t n) {
  std::uint64_t acc = 0;
#pragma omp simd reduction(| : acc)
  for (std::int64_t i = 0; i < n; ++i)
    acc |= (std::bit_cast<std::uint64_t>(v[i]) & 0x7ff0000000000000u) + 0x0010000000000000u;
  return (acc >> 63) != 0;
}

} // namespace

// Blocks are first scanned for an exponent of all ones (NaN or Inf) with a loop that vectorises,
// over the threads for a large count (mha-run's groups of mapped inputs: the other thread waited);
// only a block that has one is searched for its index, the first such block first (a
// std::isfinite per value kept the loop scalar, and it reads every weight of a model).
template <typename T>
void check_finite(const T* data, const Shape& shape, std::int64_t first_flat, std::int64_t count,
                  const std::string& label, bool flag_advice) {
  constexpr std::int64_t block = 4096;
  const std::int64_t blocks = (count + block - 1) / block;
  std::vector<unsigned char> flagged(static_cast<std::size_t>(blocks));
  parallel_for(blocks, threads_if(count >= (1 << 18)), [&](std::int64_t k) {
    const std::int64_t b = k * block, end = std::min(count, b + block);
    flagged[static_cast<std::size_t>(k)] = any_all_ones(data + b, end - b);
  });
  for (std::int64_t k = 0; k < blocks; ++k) {
    if (!flagged[static_cast<std::size_t>(k)]) continue;
    const std::int64_t b = k * block, end = std::min(count, b + block);
    for (std::int64_t i = b; i < end; ++i)
      if (!std::isfinite(data[i]))
        throw Error(fmt::format("{}: {} at index {}{}", label, std::isnan(data[i]) ? "NaN" : "Inf",
                                index_str(shape, first_flat + i),
                                flag_advice ? " (pass --allow-nonfinite to accept it)" : ""));
  }
}
template void check_finite<float>(const float*, const Shape&, std::int64_t, std::int64_t, const std::string&, bool);
template void check_finite<double>(const double*, const Shape&, std::int64_t, std::int64_t, const std::string&, bool);

template <typename T>
void Dataset::read_float_rows(std::int64_t first, std::int64_t count, T* out, bool allow_nonfinite) const {
  if (kind_ != ElemKind::Float)
    throw Error(fmt::format("{}: holds {} data; expected a float tensor", label_, type_name_));
  if (first < 0 || count < 0 || first + count > shape_[0])
    throw Error(
        fmt::format("{}: rows {}..{} out of range for shape {}", label_, first, first + count, shape_str(shape_)));
  auto [fspace, mspace] = row_selection(ds_.get(), shape_, first, count);
  if (half_) { // the stored bits, widened exactly here
    const std::int64_t n = count * row_size(shape_);
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(n));
    read_half_rows(mspace.get(), fspace.get(), bits.data());
    const bool f16 = *half_ == HalfKind::F16;
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(f16 ? f16_to_float(bits[static_cast<std::size_t>(i)])
                                  : bf16_to_float(bits[static_cast<std::size_t>(i)]));
  } else {
    check_ok(H5Dread(ds_.get(), native_type<T>(), mspace.get(), fspace.get(), H5P_DEFAULT, out),
             label_ + ": cannot read the data (file truncated or corrupt?)");
  }
  if (!allow_nonfinite) check_finite(out, shape_, first * row_size(shape_), count * row_size(shape_), label_, !weight_);
}

template <typename T> BasicTensor<T> Dataset::read_floats(bool allow_nonfinite) const {
  if (kind_ != ElemKind::Float)
    throw Error(fmt::format("{}: holds {} data; expected a float tensor", label_, type_name_));
  BasicTensor<T> t(shape_, Uninitialized{});
  read_float_rows(0, shape_[0], t.data(), allow_nonfinite);
  return t;
}

// Where float32 data starts in its file, when it lies there in one block as float32 in this CPU's
// byte order, at a float's alignment (h5py writes weights at 8-byte offsets).
std::optional<std::uint64_t> Dataset::float32_offset() const {
  if (kind_ != ElemKind::Float || half_ || !contiguous()) return std::nullopt;
  Handle type(H5Dget_type(ds_.get()));
  const bool f32 = type.valid() && H5Tequal(type.get(), H5T_NATIVE_FLOAT) > 0;
  const haddr_t offset = H5Dget_offset(ds_.get());
  H5Eclear2(H5E_DEFAULT);
  if (!f32 || offset == HADDR_UNDEF || offset % alignof(float) != 0) return std::nullopt;
  return offset;
}

std::shared_ptr<MappedRange> Dataset::map_file_bytes(std::uint64_t offset, std::size_t bytes) const {
  // A file on disk: HDF5's default driver, whose handle is the descriptor (not an image in memory)
  std::shared_ptr<MappedRange> mapped;
  Handle file(H5Iget_file_id(ds_.get()));
  Handle fapl(file.valid() ? H5Fget_access_plist(file.get()) : -1);
  void* fd = nullptr;
  if (fapl.valid() && H5Pget_driver(fapl.get()) == H5FD_SEC2 && H5Fget_vfd_handle(file.get(), fapl.get(), &fd) >= 0 &&
      fd)
    mapped = MappedRange::map(*static_cast<int*>(fd), offset, bytes, label_);
  H5Eclear2(H5E_DEFAULT);
  return mapped;
}

Tensor Dataset::map_values(std::int64_t first, Shape shape, bool allow_nonfinite) const {
  const std::optional<std::uint64_t> offset = float32_offset();
  const std::int64_t n = checked_numel(shape, label_);
  const std::shared_ptr<MappedRange> bytes =
      offset ? map_file_bytes(*offset + static_cast<std::uint64_t>(first) * sizeof(float),
                              static_cast<std::size_t>(n) * sizeof(float))
             : nullptr;
  if (!bytes) return Tensor();
  auto* data = reinterpret_cast<float*>(bytes->data());
  if (!allow_nonfinite) check_finite(data, shape_, first, n, label_, !weight_);
  return Tensor(std::move(shape), data, bytes);
}

Tensor Dataset::read_floats_mapped(bool allow_nonfinite) const {
  if (Tensor x = map_values(0, shape_, allow_nonfinite); x.size()) return x;
  return read_floats<float>(allow_nonfinite);
}

Tensor Dataset::map_float_rows(std::int64_t first, std::int64_t count, bool allow_nonfinite) const {
  if (shape_.empty() || first < 0 || count < 0 || first + count > shape_[0])
    throw Error(
        fmt::format("{}: rows {}..{} out of range for shape {}", label_, first, first + count, shape_str(shape_)));
  Shape rows = shape_;
  rows[0] = count;
  return map_values(first * row_size(shape_), std::move(rows), allow_nonfinite);
}

template BasicTensor<float> Dataset::read_floats<float>(bool) const;
template BasicTensor<double> Dataset::read_floats<double>(bool) const;
template void Dataset::read_float_rows<float>(std::int64_t, std::int64_t, float*, bool) const;
template void Dataset::read_float_rows<double>(std::int64_t, std::int64_t, double*, bool) const;

namespace {

// The integer of sizeof(S) bytes at p, read as the signed S or the unsigned U.
template <typename S, typename U> std::int64_t widen(const unsigned char* p, bool is_signed) {
  S s;
  U u;
  std::memcpy(&s, p, sizeof s);
  std::memcpy(&u, p, sizeof u);
  return is_signed ? static_cast<std::int64_t>(s) : static_cast<std::int64_t>(u);
}

// Reads the selection of an enum dataset (h5py's bool) into `out` as int64. An enum does not
// convert to an integer type in HDF5: read its native form and widen the base integers ourselves.
void read_enum(hid_t ds, hid_t mspace, hid_t fspace, std::int64_t count, std::int64_t* out, const std::string& label) {
  const std::string what = label + ": cannot read the data (file truncated or corrupt?)";
  Handle ftype(H5Dget_type(ds));
  Handle mtype(check_id(H5Tget_native_type(ftype.get(), H5T_DIR_ASCEND), what));
  Handle base(H5Tget_super(mtype.get()));
  const std::size_t width = H5Tget_size(mtype.get());
  const bool is_signed = H5Tget_sign(base.get()) != H5T_SGN_NONE;
  if (width != 1 && width != 2 && width != 4 && width != 8)
    throw Error(fmt::format("{}: enum of {} bytes is not supported", label, width));
  std::vector<unsigned char> raw(static_cast<std::size_t>(count) * width);
  check_ok(H5Dread(ds, mtype.get(), mspace, fspace, H5P_DEFAULT, raw.data()), what);
  for (std::int64_t i = 0; i < count; ++i) {
    const unsigned char* p = raw.data() + i * width;
    switch (width) {
    case 1: out[i] = widen<std::int8_t, std::uint8_t>(p, is_signed); break;
    case 2: out[i] = widen<std::int16_t, std::uint16_t>(p, is_signed); break;
    case 4: out[i] = widen<std::int32_t, std::uint32_t>(p, is_signed); break;
    default: out[i] = widen<std::int64_t, std::uint64_t>(p, is_signed); break;
    }
  }
}

} // namespace

TensorI Dataset::read_ints() const {
  if (kind_ == ElemKind::Float)
    throw Error(fmt::format("{}: holds {} data; expected integers or bool", label_, type_name_));
  TensorI t(shape_);
  if (kind_ == ElemKind::Integer) {
    check_ok(H5Dread(ds_.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data()),
             label_ + ": cannot read the data (file truncated or corrupt?)");
  } else {
    read_enum(ds_.get(), H5S_ALL, H5S_ALL, t.size(), t.data(), label_);
  }
  return t;
}

void Dataset::read_half_rows(hid_t mspace, hid_t fspace, std::uint16_t* out) const {
  Handle type(check_id(H5Dget_type(ds_.get()), label_ + ": cannot read the data type"));
  check_ok(H5Dread(ds_.get(), type.get(), mspace, fspace, H5P_DEFAULT, out), // the file's type: no conversion
           label_ + ": cannot read the data (file truncated or corrupt?)");
}

std::vector<std::uint16_t> Dataset::read_half_bits() const {
  if (!half_) throw Error(fmt::format("{}: holds {} data; expected float16 or bfloat16", label_, type_name_));
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(checked_numel(shape_, label_)));
  read_half_rows(H5S_ALL, H5S_ALL, bits.data());
  return bits;
}

Dataset::HalfBits Dataset::map_half_bits() const {
  if (!half_) throw Error(fmt::format("{}: holds {} data; expected float16 or bfloat16", label_, type_name_));
  HalfBits h;
  if (contiguous()) {
    const haddr_t offset = H5Dget_offset(ds_.get());
    H5Eclear2(H5E_DEFAULT);
    if (offset != HADDR_UNDEF && offset % alignof(std::uint16_t) == 0)
      h.mapped = map_file_bytes(offset, static_cast<std::size_t>(checked_numel(shape_, label_)) * 2);
  }
  if (h.mapped) {
    h.data = reinterpret_cast<const std::uint16_t*>(h.mapped->data());
  } else {
    h.owned = read_half_bits();
    h.data = h.owned.data();
  }
  return h;
}

std::shared_ptr<MappedRange> Dataset::map_int8s() const {
  if (type_name_ != "int8" || !contiguous()) return nullptr;
  const haddr_t offset = H5Dget_offset(ds_.get());
  H5Eclear2(H5E_DEFAULT);
  if (offset == HADDR_UNDEF) return nullptr;
  return map_file_bytes(offset, static_cast<std::size_t>(checked_numel(shape_, label_)));
}

void Dataset::read_int8_rows(std::int64_t first, std::int64_t count, std::int8_t* out) const {
  if (type_name_ != "int8") throw Error(fmt::format("{}: holds {} data; expected int8", label_, type_name_));
  if (shape_.empty() || first < 0 || count < 0 || first + count > shape_[0])
    throw Error(
        fmt::format("{}: rows {}..{} out of range for shape {}", label_, first, first + count, shape_str(shape_)));
  auto [fspace, mspace] = row_selection(ds_.get(), shape_, first, count);
  check_ok(H5Dread(ds_.get(), H5T_NATIVE_SCHAR, mspace.get(), fspace.get(), H5P_DEFAULT, out),
           label_ + ": cannot read the data (file truncated or corrupt?)");
}

void Dataset::read_head(std::int64_t n) const {
  const bool int8 = type_name_ == "int8";
  if (kind_ != ElemKind::Float && !int8)
    throw Error(fmt::format("{}: holds {} data; expected a float tensor or int8", label_, type_name_));
  if (shape_.empty()) return;
  n = std::min(n, shape_.back());
  if (n <= 0) return;
  std::vector<hsize_t> start(shape_.size(), 0), extent(shape_.size(), 1);
  extent.back() = static_cast<hsize_t>(n);
  const auto spaces = box_selection(ds_.get(), start, extent, label_ + ": cannot select values");
  const auto& [fspace, mspace] = spaces;
  // A conversion buffer for these few values: HDF5's default is 1 MiB, zero-filled at each read
  // (a float32 dataset read as double: 256 page faults of the preflight's child, ~40% of its time).
  const Handle ftype(H5Dget_type(ds_.get()));
  const std::size_t bytes = static_cast<std::size_t>(n) * std::max<std::size_t>(H5Tget_size(ftype.get()), 8);
  Handle xfer(H5Pcreate(H5P_DATASET_XFER));
  check_ok(H5Pset_buffer(xfer.get(), std::max<std::size_t>(bytes, 4096), nullptr, nullptr),
           label_ + ": cannot set up the read");
  const auto read = [&](hid_t type, void* out) { // (structured bindings: clang 14 captures none)
    check_ok(H5Dread(ds_.get(), type, std::get<1>(spaces).get(), std::get<0>(spaces).get(), xfer.get(), out),
             label_ + ": cannot read the data (file truncated or corrupt?)");
  };
  const auto size = static_cast<std::size_t>(n);
  if (int8) {
    std::vector<std::int8_t> q(size);
    read(H5T_NATIVE_SCHAR, q.data());
  } else if (half_) {
    std::vector<std::uint16_t> bits(size);
    read_half_rows(mspace.get(), fspace.get(), bits.data());
  } else {
    std::vector<float> f(size);
    std::vector<double> d(size);
    read(H5T_NATIVE_FLOAT, f.data());
    read(H5T_NATIVE_DOUBLE, d.data());
  }
}

std::vector<std::int8_t> Dataset::read_int8s() const {
  if (kind_ != ElemKind::Integer) throw Error(fmt::format("{}: holds {} data; expected integers", label_, type_name_));
  if (type_name_ == "int8") { // as stored: HDF5's conversion to int64 cost more than the rest of a load
    std::vector<std::int8_t> q(static_cast<std::size_t>(checked_numel(shape_, label_)));
    if (!shape_.empty())
      read_int8_rows(0, shape_[0], q.data());
    else
      check_ok(H5Dread(ds_.get(), H5T_NATIVE_SCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, q.data()),
               label_ + ": cannot read the data (file truncated or corrupt?)");
    return q;
  }
  const TensorI wide = read_ints();
  std::vector<std::int8_t> q(static_cast<std::size_t>(wide.size()));
  for (std::size_t i = 0; i < q.size(); ++i) {
    const std::int64_t v = wide.data()[i];
    if (v < -128 || v > 127) throw Error(fmt::format("{}: int8 values must lie in [-128, 127], got {}", label_, v));
    q[i] = static_cast<std::int8_t>(v);
  }
  return q;
}

TensorD Dataset::read_slice(const Shape& leading) const {
  const int lead = std::max(rank() - 2, 0);
  if (static_cast<int>(leading.size()) != lead)
    throw Error(fmt::format("{}: shape {} takes {} leading ind{} to pick a 2-D slice, got {}", label_,
                            shape_str(shape_), lead, lead == 1 ? "ex" : "ices", leading.size()));
  std::vector<hsize_t> start(shape_.size(), 0), extent(shape_.size(), 1);
  for (int a = 0; a < lead; ++a) {
    if (leading[a] < 0 || leading[a] >= shape_[a])
      throw Error(fmt::format("{}: index {} is out of range for axis {} of shape {} (0..{})", label_, leading[a], a,
                              shape_str(shape_), shape_[a] - 1));
    start[a] = static_cast<hsize_t>(leading[a]);
  }
  const std::int64_t n = rank() >= 2 ? shape_[rank() - 2] : 1, m = shape_.back();
  for (int a = lead; a < rank(); ++a) extent[a] = static_cast<hsize_t>(shape_[a]);
  auto [fspace, mspace] = box_selection(ds_.get(), start, extent, label_ + ": cannot select the slice");
  TensorD t(Shape{n, m}, Uninitialized{});
  if (kind_ == ElemKind::Bool) {
    std::vector<std::int64_t> ints(static_cast<std::size_t>(n * m));
    read_enum(ds_.get(), mspace.get(), fspace.get(), t.size(), ints.data(), label_);
    std::copy(ints.begin(), ints.end(), t.data());
  } else {
    // HDF5 converts float16/32/64 and every integer type to double.
    check_ok(H5Dread(ds_.get(), H5T_NATIVE_DOUBLE, mspace.get(), fspace.get(), H5P_DEFAULT, t.data()),
             label_ + ": cannot read the data (file truncated or corrupt?)");
  }
  return t;
}

} // namespace attn::h5
