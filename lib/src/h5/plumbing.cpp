// The HDF5 plumbing every part of the HDF5 layer shares (h5/plumbing.hpp), and the handles.
#include "attn/h5/h5io.hpp"

#include "h5/plumbing.hpp"

#include "attn/core/error.hpp"
#include "attn/h5/h5guard.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

namespace attn::h5 {

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

// --- handles ---------------------------------------------------------------------------------

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

} // namespace attn::h5
