// Output files: the target checks, dataset writers, atomic commit (and every MPI rank's share).
#include "attn/h5/h5io.hpp"

#include "h5/plumbing.hpp"

#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/core/mpi.hpp"
#include "attn/core/names.hpp"
#include "attn/kernels/parallel.hpp"
#include "attn/sys/tempfile.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <sys/stat.h>

namespace attn::h5 {

namespace fs = std::filesystem;

OutType parse_out_type(std::string_view s) {
  static constexpr Named<OutType> types[] = {{"f32", OutType::F32}, {"f64", OutType::F64},   {"i64", OutType::I64},
                                             {"f16", OutType::F16}, {"bf16", OutType::BF16}, {"i8", OutType::I8}};
  return parse_named(s, types, "dtype");
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
        path.push_back('+'); // (path = "+" sets off GCC 12's false -Wrestrict here)
      }
      path.append(m.temp->path());
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
  const std::string primary_path = normalize_path(target.name);
  const std::string suffix = normalize_path(primary);
  if (primary_path.size() > suffix.size() && primary_path.ends_with(suffix))
    return normalize_path(primary_path.substr(0, primary_path.size() - suffix.size()));
  return parent_of(primary_path);
}

std::string OutputFile::dataset_path(std::string_view std_name) const {
  const auto& m = *impl_;
  if (m.target.name.empty()) return normalize_path(std_name);
  if (std_name == m.primary) return normalize_path(m.target.name);
  return join_path(m.base_group(), std_name);
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

namespace {

// Tiles of kTileRows x kTileCols, deflated (level 1, after shuffling the bytes of integers).
Handle tiled_creation(const Shape& shape, bool shuffle) {
  Handle dcpl(check_id(H5Pcreate(H5P_DATASET_CREATE), "cannot create a dataset creation property list"));
  H5Pset_obj_track_times(dcpl.get(), false);
  hsize_t chunk[2] = {static_cast<hsize_t>(std::clamp<std::int64_t>(shape[0], 1, OutputFile::kTileRows)),
                      static_cast<hsize_t>(std::clamp<std::int64_t>(shape[1], 1, OutputFile::kTileCols))};
  check_ok(H5Pset_chunk(dcpl.get(), 2, chunk), "cannot set chunks");
  if (shuffle) H5Pset_shuffle(dcpl.get());
  check_ok(H5Pset_deflate(dcpl.get(), 1), "cannot set deflate compression");
  return dcpl;
}

// Variable-length UTF-8 strings, as /pieces holds them.
Handle utf8_string_type() {
  Handle type(check_id(H5Tcopy(H5T_C_S1), "cannot create a string type"));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  return type;
}

// The file and memory selections of rows [first, first + count) x columns [0, cols).
std::pair<Handle, Handle> region_selection(std::int64_t ds, std::int64_t first, std::int64_t count, std::int64_t cols) {
  Handle fspace(check_id(H5Dget_space(ds), "cannot read a dataset's shape"));
  const hsize_t start[2] = {static_cast<hsize_t>(first), 0},
                size[2] = {static_cast<hsize_t>(count), static_cast<hsize_t>(cols)};
  check_ok(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, size, nullptr), "cannot select rows");
  Handle mspace(H5Screate_simple(2, size, nullptr));
  return {std::move(fspace), std::move(mspace)};
}

} // namespace

std::pair<std::string, std::string> OutputFile::prepare_tiled(std::string_view std_name, const Shape& shape) {
  auto& m = *impl_;
  const std::string path = dataset_path(std_name);
  const std::string label = m.label() + ":" + path;
  if (m.parallel) throw Error(label + ": tiled datasets are not written under MPI");
  if (shape.size() != 2) throw Error(label + ": a tiled dataset is (b, n)");
  if (m.merge && H5Lexists(m.file.get(), path.c_str(), H5P_DEFAULT) > 0)
    check_ok(H5Ldelete(m.file.get(), path.c_str(), H5P_DEFAULT), "cannot replace " + label);
  H5Eclear2(H5E_DEFAULT);
  create_parent_groups(m.file.get(), path, label);
  return {path, label};
}

DatasetWriter OutputFile::create_padded(std::string_view std_name, const Shape& shape, std::int64_t fill) {
  auto& m = *impl_;
  const auto [path, label] = prepare_tiled(std_name, shape);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(H5Screate_simple(2, dims.data(), nullptr));
  Handle dcpl = tiled_creation(shape, true);
  check_ok(H5Pset_fill_value(dcpl.get(), H5T_NATIVE_INT64, &fill), "cannot set the fill value");
  hid_t ds = check_id(H5Dcreate2(m.file.get(), path.c_str(), file_type(OutType::I64), space.get(), H5P_DEFAULT,
                                 dcpl.get(), H5P_DEFAULT),
                      "cannot create " + label);
  m.datasets.emplace_back(ds);
  DatasetWriter w(ds, shape, label, OutType::I64);
  w.staged_ = m.temp.get();
  return w;
}

void DatasetWriter::write_region(std::int64_t first, std::int64_t count, std::int64_t cols, const std::int64_t* data) {
  if (count == 0 || cols == 0) return;
  auto [fspace, mspace] = region_selection(ds_, first, count, cols);
  check_ok(H5Dwrite(ds_, H5T_NATIVE_INT64, mspace.get(), fspace.get(), H5P_DEFAULT, data), "cannot write " + label_);
}

StringsWriter OutputFile::create_strings(std::string_view std_name, const Shape& shape) {
  auto& m = *impl_;
  const auto [path, label] = prepare_tiled(std_name, shape);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(H5Screate_simple(2, dims.data(), nullptr));
  Handle type = utf8_string_type();
  Handle dcpl = tiled_creation(shape, false);
  hid_t ds =
      check_id(H5Dcreate2(m.file.get(), path.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
               "cannot create " + label);
  m.datasets.emplace_back(ds);
  return StringsWriter(ds, shape, label);
}

void StringsWriter::write_region(std::int64_t first, std::int64_t count, std::int64_t cols,
                                 const std::vector<std::string_view>& values) {
  if (count == 0 || cols == 0) return;
  auto [fspace, mspace] = region_selection(ds_, first, count, cols);
  std::vector<std::string> owned; // each non-empty string NUL-terminated
  owned.reserve(values.size());
  std::vector<const char*> ptrs(values.size(), nullptr);
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!values[i].empty()) ptrs[i] = owned.emplace_back(values[i]).c_str();
  Handle type = utf8_string_type();
  // HDF5's conversion buffer sized to this write: its default, 1 MiB zeroed per write, was 8% of a
  // one-line tokenize (fresh pages are slow to touch on our KVM guests)
  Handle dxpl(check_id(H5Pcreate(H5P_DATASET_XFER), "cannot write " + label_));
  const std::size_t tconv = std::clamp<std::size_t>(values.size() * 2 * sizeof(hvl_t), 4096, std::size_t{1} << 20);
  check_ok(H5Pset_buffer(dxpl.get(), tconv, nullptr, nullptr), "cannot write " + label_);
  check_ok(H5Dwrite(ds_, type.get(), mspace.get(), fspace.get(), dxpl.get(), ptrs.data()), "cannot write " + label_);
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
  if (const auto* list = std::get_if<std::vector<std::int64_t>>(&value)) {
    const hsize_t n = list->size();
    Handle space(check_id(H5Screate_simple(1, &n, nullptr), "cannot write attribute " + name + " of " + label));
    Handle attr(check_id(H5Acreate2(obj.get(), name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                         "cannot write attribute " + name + " of " + label));
    check_ok(H5Awrite(attr.get(), H5T_NATIVE_INT64, list->data()), "cannot write attribute " + name);
    return;
  }
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
