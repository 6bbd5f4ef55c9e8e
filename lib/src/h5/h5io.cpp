#include "attn/h5/h5io.hpp"

#include "attn/core/half.hpp"

#include "attn/core/error.hpp"
#include "attn/core/mpi.hpp"
#include "attn/h5/h5guard.hpp"
#include "attn/kernels/parallel.hpp"
#include "attn/sys/mapped_range.hpp"
#include "attn/sys/tempfile.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>

namespace attn::h5 {

namespace fs = std::filesystem;

// --- HDF5 plumbing ---------------------------------------------------------------------------

namespace {

// HDF5 prints its error stack by default; we report errors ourselves. And HDF5 shuts itself down
// at exit, closing what is still open: a file whose close failed (a full disk, ulimit -f) made
// that crash in H5F__close_cb (HDF5 1.10). Every file is closed by its owner, so at exit there is
// nothing for HDF5 to do and the operating system reclaims the rest.
void silence_hdf5() {
  static std::once_flag once;
  std::call_once(once, [] {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  });
}

// The most specific message on HDF5's error stack ("truncated file: eof = ..."), or "", on one
// line. A failed system call becomes its errno text: HDF5's own message for it spans lines and
// lists buffer addresses.
std::string hdf5_reason() {
  std::string reason;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
        if (n == 0 && e->desc && *e->desc) *static_cast<std::string*>(out) = e->desc;
        return 0;
      },
      &reason);
  H5Eclear2(H5E_DEFAULT);
  if (const auto at = reason.find("error message = '"); at != std::string::npos) {
    const auto start = at + 17, end = reason.find('\'', start);
    return reason.substr(start, end == std::string::npos ? std::string::npos : end - start);
  }
  std::replace(reason.begin(), reason.end(), '\n', ' ');
  return reason;
}

std::string with_reason(std::string msg) {
  std::string r = hdf5_reason();
  return r.empty() ? msg : msg + " (" + r + ")";
}

hid_t check_id(hid_t id, const std::string& what) {
  if (id < 0) throw Error(with_reason(what));
  return id;
}

void check_ok(herr_t status, const std::string& what) {
  if (status < 0) throw Error(with_reason(what));
}

// File access without HDF5's file locking: our inputs are read-only and our outputs are private
// temporary files, and locking fails outright on filesystems that lack it.
Handle unlocked_access() {
  Handle fapl(check_id(H5Pcreate(H5P_FILE_ACCESS), "cannot create a file access property list"));
  H5Pset_file_locking(fapl.get(), false, true);
  return fapl;
}

// Every MPI rank opens the file together (MPI-IO); writes of rows are independent.
void set_parallel_access([[maybe_unused]] hid_t fapl) {
#ifdef ATTN_HAVE_MPI
  check_ok(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL), "cannot set MPI-IO file access");
#else
  throw Error("this build has no MPI");
#endif
}

// How outputs' datasets and groups are made: no modification times (two runs of one command give
// the same bytes) and datasets' space allocated when they are created, without a fill (as
// parallel HDF5 does; every element is written). So the one-process file and the file MPI ranks
// write together are byte for byte the same.
Handle output_dataset_creation() {
  Handle dcpl(check_id(H5Pcreate(H5P_DATASET_CREATE), "cannot create a dataset creation property list"));
  H5Pset_obj_track_times(dcpl.get(), false);
  H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
  H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  return dcpl;
}

Handle output_group_creation() {
  Handle gcpl(check_id(H5Pcreate(H5P_GROUP_CREATE), "cannot create a group creation property list"));
  H5Pset_obj_track_times(gcpl.get(), false);
  return gcpl;
}

// Creates the groups on the way to `path` ("/a/b/ds": /a and /a/b) that do not exist yet.
void create_parent_groups(hid_t file, const std::string& path, const std::string& label) {
  Handle gcpl = output_group_creation();
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    const std::string group = path.substr(0, slash);
    if (H5Lexists(file, group.c_str(), H5P_DEFAULT) > 0) continue;
    H5Eclear2(H5E_DEFAULT);
    Handle g(check_id(H5Gcreate2(file, group.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
                      "cannot create group " + label + " (" + group + ")"));
  }
}

// HDF5 signature "\211HDF\r\n\032\n" at offset 0, 512, 1024, 2048, ...
bool has_hdf5_signature(const char* data, std::size_t size) {
  static const char sig[8] = {'\211', 'H', 'D', 'F', '\r', '\n', '\032', '\n'};
  for (std::size_t off = 0; off + 8 <= size; off = off ? off * 2 : 512)
    if (std::memcmp(data + off, sig, 8) == 0) return true;
  return false;
}

// "/a/b" for "a/b", "/a/b/", "//a//b"; "/" for "" and "/".
std::string normalize(std::string_view name) {
  std::string out;
  std::size_t i = 0;
  while (i < name.size()) {
    while (i < name.size() && name[i] == '/') ++i;
    std::size_t j = i;
    while (j < name.size() && name[j] != '/') ++j;
    if (j > i) {
      out.push_back('/');
      out.append(name.substr(i, j - i));
    }
    i = j;
  }
  return out.empty() ? "/" : out;
}

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

std::string join(const std::string& group, std::string_view member) {
  return normalize(member.starts_with('/') ? std::string(member) : group + "/" + std::string(member));
}

// Does `path` resolve to an object (every link on the way exists and is not dangling)?
bool object_exists(hid_t file, const std::string& path) {
  if (path == "/") return true;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    std::string prefix = path.substr(0, pos);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (H5Oexists_by_name(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return true;
}

H5I_type_t object_type(hid_t file, const std::string& path) {
  hid_t obj = H5Oopen(file, path.c_str(), H5P_DEFAULT);
  if (obj < 0) return H5I_BADID;
  H5I_type_t t = H5Iget_type(obj);
  H5Oclose(obj);
  return t;
}

// Reads a string attribute (fixed or variable length, scalar or one-element); nullopt if absent.
std::optional<std::string> read_string_attr(hid_t obj, const char* name, const std::string& where) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  Handle attr(check_id(H5Aopen(obj, name, H5P_DEFAULT), where + ": cannot open attribute " + name));
  Handle type(check_id(H5Aget_type(attr.get()), where + ": cannot read attribute " + name));
  if (H5Tget_class(type.get()) != H5T_STRING)
    throw Error(fmt::format("{}: attribute '{}' is not a string", where, name));
  Handle space(H5Aget_space(attr.get()));
  if (H5Sget_simple_extent_npoints(space.get()) != 1)
    throw Error(fmt::format("{}: attribute '{}' must hold one string", where, name));
  if (H5Tis_variable_str(type.get()) > 0) {
    Handle mem(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    check_vlen_string_attribute(attr.get(), where, name); // HDF5 trusts the heap; we do not
    char* s = nullptr;
    check_ok(H5Aread(attr.get(), mem.get(), &s), where + ": cannot read attribute " + name);
    std::string out = s ? s : "";
    H5free_memory(s);
    return out;
  }
  const std::size_t size = H5Tget_size(type.get());
  std::string buf(size, '\0');
  check_ok(H5Aread(attr.get(), type.get(), buf.data()), where + ": cannot read attribute " + name);
  buf.resize(std::strlen(buf.c_str()));
  return buf;
}

void write_string_attr(hid_t obj, const char* name, const std::string& value) {
  if (H5Aexists(obj, name) > 0) check_ok(H5Adelete(obj, name), std::string("cannot replace attribute ") + name);
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR));
  Handle attr(check_id(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                       std::string("cannot write attribute ") + name));
  const char* p = value.c_str();
  check_ok(H5Awrite(attr.get(), type.get(), &p), std::string("cannot write attribute ") + name);
}

// The 2-byte float layouts the tools widen themselves: exactly IEEE binary16 or bfloat16,
// little-endian, no padding.
std::optional<HalfKind> half_layout_of(hid_t type) {
  if (H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 2 || H5Tget_order(type) != H5T_ORDER_LE ||
      H5Tget_precision(type) != 16 || H5Tget_offset(type) != 0 || H5Tget_norm(type) != H5T_NORM_IMPLIED)
    return std::nullopt;
  std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
  const std::size_t bias = H5Tget_ebias(type);
  if (spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && bias == 15) return HalfKind::F16;
  if (spos == 15 && epos == 7 && esize == 8 && mpos == 0 && msize == 7 && bias == 127) return HalfKind::BF16;
  return std::nullopt;
}

std::string type_name_of(hid_t type) {
  const std::size_t bits = H5Tget_size(type) * 8;
  switch (H5Tget_class(type)) {
  case H5T_FLOAT: {
    std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
    return bits == 16 && esize == 8 ? "bfloat16" : fmt::format("float{}", bits);
  }
  case H5T_INTEGER: return fmt::format("{}int{}", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", bits);
  case H5T_ENUM: return H5Tget_nmembers(type) == 2 && bits == 8 ? "bool" : "enum";
  case H5T_STRING: return "string";
  case H5T_COMPOUND: return "compound";
  case H5T_ARRAY: return "array";
  case H5T_VLEN: return "variable-length";
  case H5T_OPAQUE: return "opaque";
  case H5T_REFERENCE: return "reference";
  default: return "unsupported type";
  }
}

template <typename T> hid_t native_type();
template <> hid_t native_type<float>() { return H5T_NATIVE_FLOAT; }
template <> hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }
template <> hid_t native_type<std::int64_t>() { return H5T_NATIVE_INT64; }

// A little-endian 2-byte float type: sign bit 15, then `exponent` bits, then `mantissa` bits (as
// h5py makes numpy's float16: a float32 copy with its fields moved and its size cut).
hid_t make_half_type(std::size_t exponent, std::size_t mantissa) {
  const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, mantissa, exponent, 0, mantissa);
  H5Tset_precision(t, 16);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, (std::size_t{1} << (exponent - 1)) - 1);
  return t;
}

hid_t file_type(OutType t) {
  static const hid_t f16 = make_half_type(5, 10), bf16 = make_half_type(8, 7);
  switch (t) {
  case OutType::F32: return H5T_IEEE_F32LE;
  case OutType::F64: return H5T_IEEE_F64LE;
  case OutType::I64: return H5T_STD_I64LE;
  case OutType::F16: return f16;
  case OutType::BF16: return bf16;
  case OutType::I8: return H5T_STD_I8LE;
  }
  return H5T_IEEE_F32LE;
}

// Selects the box of `extent` values from `start` (one entry per axis) of a dataset; returns the
// file space and a matching contiguous memory space, in the dataset's order.
std::pair<Handle, Handle> box_selection(hid_t ds, const std::vector<hsize_t>& start, const std::vector<hsize_t>& extent,
                                        const std::string& what) {
  Handle fspace(H5Dget_space(ds));
  check_ok(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr), what);
  hsize_t count = 1;
  for (hsize_t e : extent) count *= e;
  Handle mspace(H5Screate_simple(1, &count, nullptr));
  return {std::move(fspace), std::move(mspace)};
}

// Selects rows [first, first + count) along axis 0 of a dataset of `shape`.
std::pair<Handle, Handle> row_selection(hid_t ds, const Shape& shape, std::int64_t first, std::int64_t count) {
  std::vector<hsize_t> start(shape.size(), 0), extent(shape.begin(), shape.end());
  start[0] = static_cast<hsize_t>(first);
  extent[0] = static_cast<hsize_t>(count);
  return box_selection(ds, start, extent, "cannot select rows");
}

std::int64_t row_size(const Shape& shape) {
  std::int64_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

} // namespace

// --- names -----------------------------------------------------------------------------------

TensorRef parse_tensor_ref(std::string_view arg) {
  TensorRef ref;
  std::error_code ec;
  const auto colon = arg.find(':');
  if (colon == std::string_view::npos || (arg != "-" && fs::is_regular_file(std::string(arg), ec))) {
    ref.path = std::string(arg);
  } else {
    ref.path = std::string(arg.substr(0, colon));
    ref.name = std::string(arg.substr(colon + 1));
  }
  if (ref.path.empty()) throw UsageError(fmt::format("'{}' names no file (expected PATH[:NAME])", arg));
  return ref;
}

// --- handles -----------------------------------------------------------------------------------

Handle::~Handle() {
  if (id_ >= 0) H5Idec_ref(id_);
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    if (id_ >= 0) H5Idec_ref(id_);
    id_ = o.id_;
    o.id_ = -1;
  }
  return *this;
}

// --- reading -----------------------------------------------------------------------------------

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

// Blocks are first scanned for an exponent of all ones (NaN or Inf) with a loop that vectorises,
// over the threads for a large count (mha-run's groups of mapped inputs: the other thread waited);
// only a block that has one is searched for its index, the first such block first (a
// std::isfinite per value kept the loop scalar, and it reads every weight of a model).
template <typename T>
void check_finite(const T* data, const Shape& shape, std::int64_t first_flat, std::int64_t count,
                  const std::string& label) {
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  constexpr Bits exponent = static_cast<Bits>(sizeof(T) == 4 ? 0x7f800000u : 0x7ff0000000000000u);
  constexpr std::int64_t block = 4096;
  const std::int64_t blocks = (count + block - 1) / block;
  std::vector<unsigned char> flagged(static_cast<std::size_t>(blocks));
  parallel_for(blocks, threads_if(count >= (1 << 18)), [&](std::int64_t k) {
    const std::int64_t b = k * block, end = std::min(count, b + block);
    Bits all_ones = 0;
    for (std::int64_t i = b; i < end; ++i) all_ones |= (std::bit_cast<Bits>(data[i]) & exponent) == exponent;
    flagged[static_cast<std::size_t>(k)] = all_ones != 0;
  });
  for (std::int64_t k = 0; k < blocks; ++k) {
    if (!flagged[static_cast<std::size_t>(k)]) continue;
    const std::int64_t b = k * block, end = std::min(count, b + block);
    for (std::int64_t i = b; i < end; ++i)
      if (!std::isfinite(data[i]))
        throw Error(fmt::format("{}: {} at index {} (pass --allow-nonfinite to accept it)", label,
                                std::isnan(data[i]) ? "NaN" : "Inf", index_str(shape, first_flat + i)));
  }
}
template void check_finite<float>(const float*, const Shape&, std::int64_t, std::int64_t, const std::string&);
template void check_finite<double>(const double*, const Shape&, std::int64_t, std::int64_t, const std::string&);

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
  if (!allow_nonfinite) check_finite(out, shape_, first * row_size(shape_), count * row_size(shape_), label_);
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
  if (!allow_nonfinite) check_finite(data, shape_, first, n, label_);
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

template <typename T> Sequence<T> read_sequence(const Dataset& ds, bool allow_nonfinite, std::string_view what) {
  ds.require_rank(2, 3, fmt::format("{} (seq, features) or (batch, seq, features)", what));
  Sequence<T> seq{ds.read_floats<T>(allow_nonfinite), ds.rank() == 3};
  if (!seq.batched) seq.x.reshape({1, seq.x.dim(0), seq.x.dim(1)});
  return seq;
}
template Sequence<float> read_sequence<float>(const Dataset&, bool, std::string_view);
template Sequence<double> read_sequence<double>(const Dataset&, bool, std::string_view);

SequenceReader::SequenceReader(Dataset ds, bool allow_nonfinite, std::string_view what)
    : ds_(std::move(ds)), allow_nonfinite_(allow_nonfinite), batched_(ds_.rank() == 3) {
  ds_.require_rank(2, 3, fmt::format("{} (seq, features) or (batch, seq, features)", what));
}

Tensor SequenceReader::read(std::int64_t first, std::int64_t count) const {
  Tensor x(Shape{count, len(), features()}, Uninitialized{});
  read(first, count, x.data());
  return x;
}

Tensor SequenceReader::map(std::int64_t first, std::int64_t count) const {
  Tensor x = batched_ ? ds_.map_float_rows(first, count, allow_nonfinite_)
                      : ds_.map_float_rows(0, len(), allow_nonfinite_); // one item, (n, d)
  if (x.size()) x.reshape({count, len(), features()});
  return x;
}

Tensor SequenceReader::read_mapped(std::int64_t first, std::int64_t count) const {
  if (Tensor x = map(first, count); x.size()) return x; // (a conditional expression would copy it)
  return read(first, count);
}

const float* GroupReader::read(std::int64_t first, std::int64_t count) {
  if (count > most_) throw std::logic_error("GroupReader::read: more items than the group holds");
  mapped_ = Tensor(); // the previous group's mapping goes before the next is made
  if (Tensor x = r_.map(first, count); x.size()) {
    mapped_ = std::move(x);
    return mapped_.data();
  }
  if (!buffer_.size()) buffer_ = Tensor(Shape{most_, r_.len(), r_.features()}, Uninitialized{});
  r_.read(first, count, buffer_.data());
  return buffer_.data();
}

void SequenceReader::read(std::int64_t first, std::int64_t count, float* out) const {
  if (batched_) {
    ds_.read_float_rows(first, count, out, allow_nonfinite_);
  } else {
    ds_.read_float_rows(0, len(), out, allow_nonfinite_);
  }
}

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
  auto [fspace, mspace] = box_selection(ds_.get(), start, extent, label_ + ": cannot select values");
  // A conversion buffer for these few values: HDF5's default is 1 MiB, zero-filled at each read
  // (a float32 dataset read as double: 256 page faults of the preflight's child, ~40% of its time).
  const Handle ftype(H5Dget_type(ds_.get()));
  const std::size_t bytes = static_cast<std::size_t>(n) * std::max<std::size_t>(H5Tget_size(ftype.get()), 8);
  Handle xfer(H5Pcreate(H5P_DATASET_XFER));
  check_ok(H5Pset_buffer(xfer.get(), std::max<std::size_t>(bytes, 4096), nullptr, nullptr),
           label_ + ": cannot set up the read");
  const auto read = [&](hid_t type, void* out) {
    check_ok(H5Dread(ds_.get(), type, mspace.get(), fspace.get(), xfer.get(), out),
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

InputFiles::InputFiles() { silence_hdf5(); }
InputFiles::~InputFiles() = default;

std::int64_t InputFiles::file(const std::string& path) {
  if (auto it = broken_.find(path); it != broken_.end()) throw Error(it->second);
  if (auto it = files_.find(path); it != files_.end()) return it->second.get();
  if (path == "-") {
    if (isatty(STDIN_FILENO)) throw UsageError("refusing to read HDF5 from a terminal (standard input)");
    std::vector<char> image;
    char buf[1 << 16];
    for (;;) {
      ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(fmt::format("cannot read standard input: {}", std::strerror(errno)));
      if (n == 0) break;
      image.insert(image.end(), buf, buf + n);
    }
    add_image("-", image);
    return files_.at("-").get();
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(fmt::format("{}: no such file", path));
  if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a directory, not an HDF5 file", path));
  if (st.st_size == 0) throw Error(fmt::format("{}: is empty, not an HDF5 file", path));
  if (::access(path.c_str(), R_OK) != 0) throw Error(fmt::format("{}: {}", path, std::strerror(errno)));
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw Error(fmt::format("{}: not an HDF5 file", path));
  }
  Handle fapl = unlocked_access();
  if (!checked_.count(path)) h5::preflight([&] { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()); }, path);
  const hid_t id = check_id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()),
                            fmt::format("{}: cannot open the HDF5 file (truncated or corrupt?)", path));
  files_.emplace(path, Handle(id));
  return id;
}

void InputFiles::preflight(const std::vector<std::string>& paths, const std::function<void()>& meanwhile) {
  std::vector<std::string> todo;
  for (const std::string& path : paths) {
    struct stat st {};
    if (path == "-" || files_.count(path) || checked_.count(path) ||
        std::find(todo.begin(), todo.end(), path) != todo.end() || ::stat(path.c_str(), &st) != 0 ||
        !S_ISREG(st.st_mode) || st.st_size == 0 || ::access(path.c_str(), R_OK) != 0)
      continue;
    if (H5Fis_hdf5(path.c_str()) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      continue;
    }
    todo.push_back(path);
  }
  std::vector<std::function<std::int64_t()>> opens;
  for (const std::string& path : todo)
    opens.emplace_back([path] {
      Handle fapl = unlocked_access();
      return H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
    });
  h5::preflight_all(opens, todo, meanwhile);
  checked_.insert(todo.begin(), todo.end());
}

void InputFiles::add_image(const std::string& path, const std::vector<char>& image) {
  const std::string label = input_label(path);
  if (image.empty()) throw Error(label + " is empty (expected an HDF5 file)");
  if (!has_hdf5_signature(image.data(), image.size())) throw Error(label + " is not an HDF5 file");
  Handle fapl = unlocked_access();
  check_ok(H5Pset_fapl_core(fapl.get(), 1 << 16, false), "cannot set up the file image");
  check_ok(H5Pset_file_image(fapl.get(), const_cast<char*>(image.data()), image.size()),
           "cannot set up the file image");
  h5::preflight([&] { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()); }, label);
  const hid_t id = check_id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()),
                            label + ": cannot open the HDF5 file image (truncated or corrupt?)");
  files_[path] = Handle(id);
}

std::vector<std::string> InputFiles::list_datasets(const std::string& path) {
  struct Visit {
    hid_t file;
    std::vector<std::string> names;
  } v{file(path), {}};
  // H5Lvisit walks every link once (cycles of hard links are visited once).
  herr_t st = H5Lvisit(
      v.file, H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t g, const char* name, const H5L_info_t* info, void* data) -> herr_t {
        auto* v = static_cast<Visit*>(data);
        if (info->type != H5L_TYPE_HARD) return 0;
        hid_t obj = H5Oopen(g, name, H5P_DEFAULT);
        if (obj < 0) return 0;
        if (H5Iget_type(obj) == H5I_DATASET) v->names.push_back("/" + std::string(name));
        H5Oclose(obj);
        return 0;
      },
      &v);
  if (st < 0) {
    // HDF5 is left in a state where walking the file again can crash it (found by fuzzing: a
    // second H5Lvisit after a "bad heap free list" overreads in H5T_copy). The file is not
    // touched again in this run.
    broken_[path] = with_reason(path + ": cannot list the datasets (file corrupt?)");
    throw Error(broken_[path]);
  }
  H5Eclear2(H5E_DEFAULT);
  std::sort(v.names.begin(), v.names.end());
  return v.names;
}

ObjectKind InputFiles::kind_of(const std::string& path, const std::string& object) {
  const hid_t f = file(path);
  const std::string p = normalize(object);
  if (!object_exists(f, p)) {
    H5Eclear2(H5E_DEFAULT);
    return ObjectKind::Missing;
  }
  switch (object_type(f, p)) {
  case H5I_DATASET: return ObjectKind::Dataset;
  case H5I_GROUP: return ObjectKind::Group;
  default: return ObjectKind::Other;
  }
}

std::optional<AttrValue> InputFiles::attribute(const std::string& path, const std::string& object,
                                               const std::string& name) {
  const hid_t f = file(path);
  const std::string p = normalize(object);
  const std::string where = fmt::format("{}:{}", input_label(path), p);
  Handle obj(check_id(H5Oopen(f, p.c_str(), H5P_DEFAULT), where + ": cannot open"));
  return read_attribute(obj.get(), name, where);
}

std::vector<std::string> InputFiles::attribute_names(const std::string& path, const std::string& object) {
  const hid_t f = file(path);
  const std::string p = normalize(object);
  Handle obj(check_id(H5Oopen(f, p.c_str(), H5P_DEFAULT), fmt::format("{}:{}: cannot open", input_label(path), p)));
  std::vector<std::string> names;
  H5Aiterate2(
      obj.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->emplace_back(name);
        return 0;
      },
      &names);
  return names;
}

std::optional<AttrValue> read_attribute(std::int64_t obj, const std::string& name, const std::string& where) {
  const htri_t exists = H5Aexists(obj, name.c_str());
  if (exists < 0) throw Error(with_reason(where + ": cannot read attribute " + name));
  if (exists == 0) return std::nullopt;
  Handle attr(check_id(H5Aopen(obj, name.c_str(), H5P_DEFAULT), where + ": cannot open attribute " + name));
  Handle type(check_id(H5Aget_type(attr.get()), where + ": cannot read attribute " + name));
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls == H5T_STRING) return *read_string_attr(obj, name.c_str(), where);
  Handle space(check_id(H5Aget_space(attr.get()), where + ": cannot read attribute " + name));
  if (H5Sget_simple_extent_npoints(space.get()) != 1)
    throw Error(fmt::format("{}: attribute '{}' must be a single value", where, name));
  if (cls == H5T_INTEGER || cls == H5T_ENUM) {
    std::int64_t v = 0;
    check_ok(H5Aread(attr.get(), H5T_NATIVE_INT64, &v), where + ": cannot read attribute " + name);
    if (cls == H5T_ENUM) return v != 0; // h5py's bool (FALSE = 0, TRUE = 1)
    return v;
  }
  if (cls == H5T_FLOAT) {
    double v = 0;
    check_ok(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v), where + ": cannot read attribute " + name);
    return v;
  }
  throw Error(
      fmt::format("{}: attribute '{}' holds {}; expected a number or a string", where, name, type_name_of(type.get())));
}

namespace {

std::string list_for_message(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < 12; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 12) s += fmt::format(", ... ({} in all)", names.size());
  return s;
}

} // namespace

Dataset InputFiles::open(const TensorRef& ref) {
  const hid_t f = file(ref.path);
  const std::string file_label = input_label(ref.path);
  std::string path;
  if (ref.name.empty()) {
    auto names = list_datasets(ref.path);
    if (names.size() == 1) {
      path = names[0];
    } else if (auto def = read_string_attr(f, "default", file_label)) {
      path = join("/", *def);
      if (!object_exists(f, path))
        throw Error(fmt::format("{}: the root's default '{}' names nothing present (datasets: {})", file_label, *def,
                                list_for_message(names)));
    } else if (names.empty()) {
      throw Error(fmt::format("{}: holds no datasets", file_label));
    } else {
      throw Error(fmt::format("{}: holds several datasets and no root 'default'; name one as "
                              "PATH:NAME (datasets: {})",
                              file_label, list_for_message(names)));
    }
  } else {
    path = normalize(ref.name);
    if (!object_exists(f, path))
      throw Error(fmt::format("{}: no dataset or group '{}' (datasets: {})", file_label, path,
                              list_for_message(list_datasets(ref.path))));
  }
  // Follow groups through their `default` attribute (NeXus); bounded against cycles.
  for (int depth = 0;; ++depth) {
    const H5I_type_t t = object_type(f, path);
    if (t == H5I_DATASET) break;
    if (t != H5I_GROUP) throw Error(fmt::format("{}: '{}' is neither a dataset nor a group", file_label, path));
    if (depth == 32) throw Error(fmt::format("{}: the 'default' attributes from '{}' form a cycle", file_label, path));
    Handle g(check_id(H5Gopen2(f, path.c_str(), H5P_DEFAULT), file_label + ": cannot open group " + path));
    auto def = read_string_attr(g.get(), "default", file_label + ":" + path);
    if (!def)
      throw Error(fmt::format("{}: '{}' is a group without a 'default' attribute; name a dataset in it "
                              "(datasets: {})",
                              file_label, path, list_for_message(list_datasets(ref.path))));
    const std::string next = join(path, *def);
    if (!object_exists(f, next))
      throw Error(fmt::format("{}: the default '{}' of group '{}' names nothing present", file_label, *def, path));
    path = next;
  }
  Handle ds(
      check_id(H5Dopen2(f, path.c_str(), H5P_DEFAULT), fmt::format("{}: cannot open dataset '{}'", file_label, path)));
  return Dataset(std::move(ds), file_label + ":" + path);
}

// --- writing -----------------------------------------------------------------------------------

OutType parse_out_type(std::string_view s) {
  if (s == "f32") return OutType::F32;
  if (s == "f64") return OutType::F64;
  if (s == "i64") return OutType::I64;
  if (s == "f16") return OutType::F16;
  if (s == "bf16") return OutType::BF16;
  if (s == "i8") return OutType::I8;
  throw UsageError(fmt::format("unknown dtype '{}' (f32, f64, i64, f16 or bf16)", s));
}

namespace {

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  std::error_code ec1, ec2;
  return fs::weakly_canonical(a, ec1) == fs::weakly_canonical(b, ec2) && !ec1 && !ec2;
}

std::string dir_of(const std::string& path) {
  fs::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : ".";
}

} // namespace

void check_output_target(const TensorRef& target, const std::vector<TensorRef>& inputs, std::string_view format) {
  if (target.path == "-") {
    if (isatty(STDOUT_FILENO))
      throw UsageError(fmt::format("refusing to write {} to a terminal; {} a pipe", format,
                                   format == "HDF5" ? "use -o FILE or" : "name a file or use"));
    return;
  }
  for (const TensorRef& in : inputs)
    if (in.path != "-" && same_file(target.path, in.path))
      throw UsageError(fmt::format("output '{}' names the input '{}'", target.str(), in.str()));
  struct stat st {};
  const std::string dir = dir_of(target.path);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(fmt::format("cannot write '{}': no such directory '{}'", target.path, dir));
  if (::stat(target.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(fmt::format("cannot write '{}': is a directory", target.path));
}

template <typename T> std::vector<std::uint16_t> DatasetWriter::to_half_bits(const T* data, std::int64_t count) const {
  const HalfKind kind = type_ == OutType::F16 ? HalfKind::F16 : HalfKind::BF16;
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(count));
  parallel_for(count, threads_if(count > (1 << 16)), [&](std::int64_t i) {
    bits[static_cast<std::size_t>(i)] = to_half(static_cast<double>(data[i]), kind);
  });
  return bits;
}

template <typename T> void DatasetWriter::write_rows(std::int64_t first, std::int64_t count, const T* data) {
  auto [fspace, mspace] = row_selection(ds_, shape_, first, count);
  if (type_ == OutType::F16 || type_ == OutType::BF16) { // rounded here, written as they are
    const std::vector<std::uint16_t> bits = to_half_bits(data, count * row_size(shape_));
    check_ok(H5Dwrite(ds_, file_type(type_), mspace.get(), fspace.get(), H5P_DEFAULT, bits.data()),
             "cannot write " + label_);
    return;
  }
  check_ok(H5Dwrite(ds_, native_type<T>(), mspace.get(), fspace.get(), H5P_DEFAULT, data), "cannot write " + label_);
}
template void DatasetWriter::write_rows<float>(std::int64_t, std::int64_t, const float*);
template void DatasetWriter::write_rows<double>(std::int64_t, std::int64_t, const double*);
template void DatasetWriter::write_rows<std::int64_t>(std::int64_t, std::int64_t, const std::int64_t*);

template <typename T> void DatasetWriter::write_scalar(const T* data) {
  if (type_ == OutType::F16 || type_ == OutType::BF16) {
    const std::vector<std::uint16_t> bits = to_half_bits(data, 1);
    check_ok(H5Dwrite(ds_, file_type(type_), H5S_ALL, H5S_ALL, H5P_DEFAULT, bits.data()), "cannot write " + label_);
    return;
  }
  check_ok(H5Dwrite(ds_, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "cannot write " + label_);
}
template void DatasetWriter::write_scalar<float>(const float*);
template void DatasetWriter::write_scalar<double>(const double*);
template void DatasetWriter::write_scalar<std::int64_t>(const std::int64_t*);

void DatasetWriter::items_written() const {
  if (staged_) staged_->start_writeback();
}

struct OutputFile::Impl {
  TensorRef target;
  std::string primary;
  Provenance prov;
  std::unique_ptr<StagedOutput> temp; // under MPI: rank 0's only
  Handle file;
  std::vector<Handle> datasets;
  bool merge = false;    // -o FILE:NAME into an existing FILE
  bool parallel = false; // opened by every MPI rank (mpi.hpp)
  std::string temp_path; // under MPI: the temporary file rank 0 made
  std::string label() const { return target.path == "-" ? "standard output" : target.path; }
  std::string base_group() const;
};

namespace {

// Under MPI, rank 0 runs `f`; its error, if any, is then every rank's (so all stop together),
// a usage error staying one.
template <typename F> void on_rank0(F&& f) {
  std::string error; // "2message" for a UsageError, "1message" for any other
  if (mpi::rank() == 0) {
    try {
      f();
    } catch (const UsageError& e) {
      error = std::string("2") + e.what();
    } catch (const std::exception& e) {
      error = std::string("1") + e.what();
    }
  }
  error = mpi::broadcast(error);
  if (error.empty()) return;
  if (error[0] == '2') throw UsageError(error.substr(1));
  throw Error(error.substr(1));
}

// Files an MPI failure left open: closing one is collective, so it waits for close_abandoned_outputs().
std::vector<Handle>& abandoned() {
  static std::vector<Handle> handles;
  return handles;
}

} // namespace

void close_abandoned_outputs() {
  auto& handles = abandoned();
  for (auto it = handles.rbegin(); it != handles.rend(); ++it) *it = Handle(); // datasets, then their file
  handles.clear();
}

OutputFile::OutputFile(const TensorRef& target, std::string primary, Provenance prov)
    : impl_(std::make_unique<Impl>()) {
  silence_hdf5();
  auto& m = *impl_;
  m.target = target;
  m.primary = std::move(primary);
  m.prov = std::move(prov);
  m.parallel = mpi::active();
  if (!m.parallel) {
    m.temp = std::make_unique<StagedOutput>(target.path);
    m.merge = !target.name.empty() && m.temp->replaces_file();
    if (m.merge) {
      if (H5Fis_hdf5(target.path.c_str()) <= 0)
        throw Error(
            fmt::format("{}: exists and is not an HDF5 file; refusing to add '{}' to it", target.path, target.name));
      copy_file_bytes(target.path, m.temp->path());
    }
  } else {
    // One temporary file, made (and for -o FILE:NAME filled) by rank 0, opened by every rank.
    mpi::checkpoint();
    std::string path;
    on_rank0([&] {
      struct stat st {};
      if (target.path == "-" || (::stat(target.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)))
        throw UsageError(fmt::format("{}: under MPI an output must be a regular file (not standard output, a "
                                     "device or a FIFO)",
                                     m.label()));
      m.temp = std::make_unique<StagedOutput>(target.path);
      if (!target.name.empty() && m.temp->replaces_file()) {
        if (H5Fis_hdf5(target.path.c_str()) <= 0)
          throw Error(
              fmt::format("{}: exists and is not an HDF5 file; refusing to add '{}' to it", target.path, target.name));
        copy_file_bytes(target.path, m.temp->path());
        path = "+";
      }
      path += m.temp->path();
    });
    path = mpi::broadcast(path);
    m.merge = path.starts_with('+');
    m.temp_path = m.merge ? path.substr(1) : path;
  }
  const std::string temp_path = m.parallel ? m.temp_path : m.temp->path();
  Handle fapl = unlocked_access();
  if (m.parallel) set_parallel_access(fapl.get());
  if (m.merge) {
    m.file = Handle(
        check_id(H5Fopen(temp_path.c_str(), H5F_ACC_RDWR, fapl.get()),
                 fmt::format("{}: cannot open the existing file to add '{}' (corrupt?)", target.path, target.name)));
  } else {
    m.file = Handle(check_id(H5Fcreate(temp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
                             fmt::format("cannot create {}", m.label())));
  }
}

// TempFile's destructor removes an uncommitted file. Under MPI closing it is collective: the
// handles wait for close_abandoned_outputs(), which every rank calls once they agreed to stop.
OutputFile::~OutputFile() {
  if (!impl_->parallel) return;
  auto& m = *impl_;
  if (m.file.valid()) abandoned().push_back(std::move(m.file));
  for (Handle& d : m.datasets) abandoned().push_back(std::move(d));
}

// The group the standard names are relative to: the root, or for -o FILE:NAME the group holding
// NAME (for a nested primary name such as "layers/0/w", NAME's ancestor that many levels up).
std::string OutputFile::Impl::base_group() const {
  if (target.name.empty()) return "/";
  const std::string primary_path = normalize(target.name);
  const std::string suffix = normalize(primary);
  if (primary_path.size() > suffix.size() && primary_path.ends_with(suffix))
    return normalize(primary_path.substr(0, primary_path.size() - suffix.size()));
  return parent_of(primary_path);
}

std::string OutputFile::dataset_path(std::string_view std_name) const {
  const auto& m = *impl_;
  if (m.target.name.empty()) return normalize(std_name);
  if (std_name == m.primary) return normalize(m.target.name);
  return join(m.base_group(), std_name);
}

DatasetWriter OutputFile::create(std::string_view std_name, const Shape& shape, OutType type) {
  auto& m = *impl_;
  const std::string path = dataset_path(std_name);
  const std::string label = m.label() + ":" + path;
  if (m.parallel) mpi::checkpoint();
  if (m.merge && H5Lexists(m.file.get(), path.c_str(), H5P_DEFAULT) > 0)
    check_ok(H5Ldelete(m.file.get(), path.c_str(), H5P_DEFAULT), "cannot replace " + label);
  H5Eclear2(H5E_DEFAULT);
  create_parent_groups(m.file.get(), path, label);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle dcpl = output_dataset_creation();
  hid_t ds = check_id(
      H5Dcreate2(m.file.get(), path.c_str(), file_type(type), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
      "cannot create " + label);
  m.datasets.emplace_back(ds);
  DatasetWriter w(ds, shape, label, type);
  if (!m.parallel) w.staged_ = m.temp.get();
  return w;
}

DatasetWriter OutputFile::create_items(std::string_view std_name, const Shape& shape, OutType type, bool batched) {
  if (batched) return create(std_name, shape, type);
  DatasetWriter w = create(std_name, Shape(shape.begin() + 1, shape.end()), type);
  w.unbatched_ = true;
  return w;
}

void OutputFile::set_attribute(std::string_view std_group, const std::string& name, const AttrValue& value) {
  auto& m = *impl_;
  const std::string path = std_group.empty() ? m.base_group() : dataset_path(std_group);
  const std::string label = m.label() + ":" + path;
  if (m.parallel) mpi::checkpoint();
  if (!object_exists(m.file.get(), path)) {
    H5Eclear2(H5E_DEFAULT);
    create_parent_groups(m.file.get(), path + "/", label);
  }
  if (const auto* b = std::get_if<bool>(&value)) return set_attribute(std_group, name, std::int64_t{*b ? 1 : 0});
  Handle obj(check_id(H5Oopen(m.file.get(), path.c_str(), H5P_DEFAULT), "cannot open " + label));
  if (const auto* s = std::get_if<std::string>(&value)) {
    write_string_attr(obj.get(), name.c_str(), *s);
    return;
  }
  if (H5Aexists(obj.get(), name.c_str()) > 0)
    check_ok(H5Adelete(obj.get(), name.c_str()), "cannot replace attribute " + name + " of " + label);
  const bool is_int = std::holds_alternative<std::int64_t>(value);
  Handle space(H5Screate(H5S_SCALAR));
  Handle attr(check_id(H5Acreate2(obj.get(), name.c_str(), is_int ? H5T_STD_I64LE : H5T_IEEE_F64LE, space.get(),
                                  H5P_DEFAULT, H5P_DEFAULT),
                       "cannot write attribute " + name + " of " + label));
  if (is_int)
    check_ok(H5Awrite(attr.get(), H5T_NATIVE_INT64, &std::get<std::int64_t>(value)), "cannot write attribute " + name);
  else
    check_ok(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &std::get<double>(value)), "cannot write attribute " + name);
}

void OutputFile::commit() {
  auto& m = *impl_;
  if (m.parallel) mpi::checkpoint();
  const hid_t f = m.file.get();
  // `default` chain from the root to the primary dataset, one member per group (NeXus).
  const std::string primary_path = dataset_path(m.primary);
  std::string group = "/";
  std::size_t pos = 1;
  while (true) {
    std::size_t slash = primary_path.find('/', pos);
    const std::string member = primary_path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    Handle g(check_id(H5Oopen(f, group.c_str(), H5P_DEFAULT), "cannot open group " + group));
    write_string_attr(g.get(), "default", member);
    if (slash == std::string::npos) break;
    group = primary_path.substr(0, slash);
    pos = slash + 1;
  }
  write_string_attr(f, "creator", m.prov.creator);
  write_string_attr(f, "command", m.prov.command);
  m.datasets.clear();
  const herr_t closed = H5Fclose(m.file.release());
  if (closed < 0) throw Error(with_reason(fmt::format("cannot write {}", m.label())));
  if (!m.parallel) return m.temp->commit();
  on_rank0([&] { m.temp->commit(); }); // after every rank closed the file
}

} // namespace attn::h5
