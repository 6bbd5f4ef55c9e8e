// The open input files of a run: opening, preflight, images of standard input, listing, attributes.
#include "attn/h5/h5io.hpp"

#include "h5/plumbing.hpp"

#include "attn/core/error.hpp"
#include "attn/h5/h5guard.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace attn::h5 {

InputFiles::InputFiles() { silence_hdf5(); }
InputFiles::~InputFiles() = default;

namespace {

// `object` is `scope` or lies under it ("/a/b" under "/a"; everything under "/").
bool within(const std::string& object, const std::string& scope) { return object == scope || is_under(object, scope); }

// Refs whose preflight (h5guard.hpp) walks the whole file: no name, or one with "." or ".."
// components, which HDF5 resolves its own way.
std::string scope_of(const std::string& name) {
  if (name.empty()) return "/";
  const std::string p = normalize_path(name);
  return (p + "/").find("/./") != std::string::npos || (p + "/").find("/../") != std::string::npos ? "/" : p;
}

} // namespace

bool InputFiles::covered(const std::string& path, const std::string& object, Reach reach) const {
  const auto it = checked_.find(path);
  if (it == checked_.end()) return false;
  // A scope's preflight also read the groups on the way to it: an object access there is covered.
  return std::any_of(it->second.begin(), it->second.end(), [&](const std::string& scope) {
    return within(object, scope) || (reach == Reach::Object && within(scope, object));
  });
}

std::int64_t InputFiles::file(const std::string& path, const std::string& object, Reach reach) {
  if (auto it = broken_.find(path); it != broken_.end()) throw Error(it->second);
  const auto open_file = files_.find(path);
  if (open_file != files_.end() && covered(path, object, reach)) return open_file->second.get();
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
  if (open_file == files_.end()) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error(fmt::format("{}: no such file", path));
    if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a directory, not an HDF5 file", path));
    if (st.st_size == 0) throw Error(fmt::format("{}: is empty, not an HDF5 file", path));
    if (::access(path.c_str(), R_OK) != 0) throw Error(fmt::format("{}: {}", path, std::strerror(errno)));
    if (H5Fis_hdf5(path.c_str()) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      throw Error(fmt::format("{}: not an HDF5 file", path));
    }
  }
  Handle fapl = unlocked_access();
  if (!covered(path, object, reach)) {
    const std::string scope = scope_of(object);
    h5::preflight([&] { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()); }, path, scope);
    checked_[path].push_back(scope);
  }
  if (open_file != files_.end()) return open_file->second.get();
  const hid_t id = check_id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()),
                            fmt::format("{}: cannot open the HDF5 file (truncated or corrupt?)", path));
  files_.emplace(path, Handle(id));
  return id;
}

void InputFiles::preflight(const std::vector<TensorRef>& refs, const std::function<void()>& meanwhile) {
  std::vector<std::string> todo, scopes;
  for (const TensorRef& ref : refs) {
    const std::string& path = ref.path;
    const std::string scope = scope_of(ref.name);
    struct stat st {};
    bool listed = false; // the same part of the same file named twice (-k f.h5:/x -v f.h5:/x)
    for (std::size_t i = 0; i < todo.size(); ++i) listed = listed || (todo[i] == path && scopes[i] == scope);
    if (listed || path == "-" || covered(path, scope, Reach::Subtree) || ::stat(path.c_str(), &st) != 0 ||
        !S_ISREG(st.st_mode) || st.st_size == 0 || ::access(path.c_str(), R_OK) != 0)
      continue;
    if (H5Fis_hdf5(path.c_str()) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      continue;
    }
    todo.push_back(path);
    scopes.push_back(scope);
  }
  std::vector<std::function<std::int64_t()>> opens;
  for (const std::string& path : todo)
    opens.emplace_back([path] {
      Handle fapl = unlocked_access();
      return H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
    });
  h5::preflight_all(opens, todo, meanwhile, scopes);
  for (std::size_t i = 0; i < todo.size(); ++i) checked_[todo[i]].push_back(scopes[i]);
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
  checked_[path] = {"/"};
}

std::vector<std::string> InputFiles::list_datasets(const std::string& path, const std::string& group) {
  struct Visit {
    std::string prefix; // the group's path with a trailing "/"
    std::vector<std::string> names;
  } v{group == "/" ? "/" : group + "/", {}};
  if (group != "/" && kind_of(path, group) != ObjectKind::Group) return {};
  // H5Lvisit walks every link once (cycles of hard links are visited once); only the group's
  // subtree is walked, so a weight group costs its own datasets, not the whole file's.
  herr_t st = H5Lvisit_by_name(
      file(path, group, Reach::Subtree), group.c_str(), H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t g, const char* name, const H5L_info_t* info, void* data) -> herr_t {
        auto* v = static_cast<Visit*>(data);
        if (info->type != H5L_TYPE_HARD) return 0;
        hid_t obj = H5Oopen(g, name, H5P_DEFAULT);
        if (obj < 0) return 0;
        if (H5Iget_type(obj) == H5I_DATASET) v->names.push_back(v->prefix + name);
        H5Oclose(obj);
        return 0;
      },
      &v, H5P_DEFAULT);
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
  const std::string p = normalize_path(object);
  const hid_t f = file(path, p, Reach::Object);
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
  const std::string p = normalize_path(object);
  const hid_t f = file(path, p, Reach::Object);
  const std::string where = fmt::format("{}:{}", input_label(path), p);
  Handle obj(check_id(H5Oopen(f, p.c_str(), H5P_DEFAULT), where + ": cannot open"));
  return read_attribute(obj.get(), name, where);
}

std::vector<std::string> InputFiles::attribute_names(const std::string& path, const std::string& object) {
  const std::string p = normalize_path(object);
  const hid_t f = file(path, p, Reach::Object);
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
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (cls == H5T_INTEGER && H5Sget_simple_extent_ndims(space.get()) == 1 && points >= 1 && points <= (1 << 20)) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(points));
    check_ok(H5Aread(attr.get(), H5T_NATIVE_INT64, v.data()), where + ": cannot read attribute " + name);
    return v;
  }
  if (points != 1) throw Error(fmt::format("{}: attribute '{}' must be a single value", where, name));
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

Dataset InputFiles::open(const TensorRef& ref) {
  // a group is followed through its `default` attributes: what lies under it may be read
  const hid_t f = file(ref.path, ref.name.empty() ? "/" : normalize_path(ref.name), Reach::Subtree);
  const std::string file_label = input_label(ref.path);
  std::string path;
  if (ref.name.empty()) {
    auto names = list_datasets(ref.path);
    if (names.size() == 1) {
      path = names[0];
    } else if (auto def = read_string_attr(f, "default", file_label)) {
      path = join_path("/", *def);
      if (!object_exists(f, path))
        throw Error(fmt::format("{}: the root's default '{}' names nothing present (datasets: {})", file_label, *def,
                                list_names(names)));
    } else if (names.empty()) {
      throw Error(fmt::format("{}: holds no datasets", file_label));
    } else {
      throw Error(fmt::format("{}: holds several datasets and no root 'default'; name one as "
                              "PATH:NAME (datasets: {})",
                              file_label, list_names(names)));
    }
  } else {
    path = normalize_path(ref.name);
    if (!object_exists(f, path))
      throw Error(fmt::format("{}: no dataset or group '{}' (datasets: {})", file_label, path,
                              list_names(list_datasets(ref.path))));
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
                              file_label, path, list_names(list_datasets(ref.path))));
    const std::string next = join_path(path, *def);
    file(ref.path, normalize_path(next), Reach::Subtree); // a `default` may lead out of the group checked
    if (!object_exists(f, next))
      throw Error(fmt::format("{}: the default '{}' of group '{}' names nothing present", file_label, *def, path));
    path = next;
  }
  Handle ds(
      check_id(H5Dopen2(f, path.c_str(), H5P_DEFAULT), fmt::format("{}: cannot open dataset '{}'", file_label, path)));
  return Dataset(std::move(ds), file_label + ":" + path);
}

} // namespace attn::h5

namespace attn::h5 {

Strings InputFiles::read_strings(const TensorRef& ref) {
  const std::string path = normalize_path(ref.name);
  const hid_t f = file(ref.path, path, Reach::Object);
  Strings out;
  out.label = input_label(ref.path) + ":" + path;
  if (!object_exists(f, path) || kind_of(ref.path, path) != ObjectKind::Dataset)
    throw Error(fmt::format("{}: no such dataset (datasets: {})", out.label, list_names(list_datasets(ref.path))));
  Handle ds(check_id(H5Dopen2(f, path.c_str(), H5P_DEFAULT), out.label + ": cannot open"));
  Handle type(check_id(H5Dget_type(ds.get()), out.label + ": cannot read the data type"));
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) <= 0)
    throw Error(fmt::format("{}: holds {} data; expected variable-length strings (tokenize's /pieces)", out.label,
                            H5Tget_class(type.get()) == H5T_STRING ? "fixed-length string" : "numeric"));
  Handle space(check_id(H5Dget_space(ds.get()), out.label + ": cannot read the shape"));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 1 || rank > 2) throw Error(fmt::format("{}: rank {}; expected strings (b, n) or (n,)", out.label, rank));
  hsize_t dims[2] = {0, 0};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  std::int64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    out.shape.push_back(static_cast<std::int64_t>(dims[i]));
    count *= static_cast<std::int64_t>(dims[i]);
  }
  if (count == 0) return out;
  check_vlen_string_dataset(ds.get(), count, out.label);
  Handle mem(H5Tcopy(H5T_C_S1));
  H5Tset_size(mem.get(), H5T_VARIABLE);
  H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
  std::vector<char*> ptrs(static_cast<std::size_t>(count), nullptr);
  check_ok(H5Dread(ds.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), out.label + ": cannot read");
  out.values.reserve(ptrs.size());
  for (char* p : ptrs) out.values.emplace_back(p ? p : "");
  H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
  return out;
}

} // namespace attn::h5
