// Checks of a file's attributes against HDF5's global heap before HDF5 reads them, and the
// preflight child that reads damaged files first (h5guard.hpp).
#include "attn/h5/h5guard.hpp"

#include "attn/core/error.hpp"
#include "attn/core/tensor.hpp"
#include "attn/h5/h5io.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <optional>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>
#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace attn::h5 {

namespace {

// Little-endian unsigned integer of `n` (1 to 8) bytes at `p`.
std::uint64_t decode_le(const char* p, unsigned n) {
  std::uint64_t v = 0;
  for (unsigned i = n; i-- > 0;) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}

std::uint64_t align8(std::uint64_t x) { return (x + 7) / 8 * 8; }

} // namespace

// The collection layout (HDF5 file format, "Global Heap"): "GCOL", version 1, 3 reserved bytes,
// the collection size; then objects, each an index (2 bytes), a reference count (2), 4 reserved
// bytes, the data size and the data padded to 8 bytes. Index 0 is the free space, unpadded.
// The walk below is HDF5 1.10's own (H5HG__cache_heap_deserialize), with its two failure modes
// turned into refusals: a step that does not advance, and one that runs past the collection.
std::string global_heap_problem(std::string_view heap, unsigned size_len, const HeapId& id) {
  if (size_len < 1 || size_len > 8) return fmt::format("unsupported size of lengths {}", size_len);
  const std::uint64_t header = align8(8 + size_len), object_header = align8(8 + size_len);
  if (heap.size() < header || heap.substr(0, 4) != "GCOL" || heap[4] != 1) return "no heap collection there";
  const std::uint64_t size = decode_le(heap.data() + 8, size_len);
  if (size != heap.size()) return fmt::format("collection size {} disagrees with the file", size);

  struct Object {
    std::uint64_t begin, size;
  };
  std::map<std::uint64_t, Object> objects; // by index; a repeated index replaces, as in HDF5
  std::uint64_t pos = header;
  while (pos < size) {
    if (pos + object_header > size) break; // a tail too small for an object header: free space
    const std::uint64_t index = decode_le(heap.data() + pos, 2);
    const std::uint64_t data_size = decode_le(heap.data() + pos + 8, size_len);
    const std::uint64_t step = index > 0 ? object_header + align8(data_size) : data_size;
    if (step == 0 || (index > 0 && align8(data_size) < data_size))
      return fmt::format("object at offset {} does not advance", pos);
    if (step > size - pos) return fmt::format("object at offset {} runs past the collection", pos);
    objects[index] = {pos, data_size};
    pos += step;
  }

  const auto it = objects.find(id.index);
  if (id.index == 0 || it == objects.end()) return fmt::format("no object {}", id.index);
  const Object& obj = it->second;
  if (obj.size > size - obj.begin - object_header) return fmt::format("object {} runs past the collection", id.index);
  if (obj.size != id.length)
    return fmt::format("object {} holds {} bytes, the string says {}", id.index, obj.size, id.length);
  return "";
}

namespace {

// --- the raw heap ID of a variable-length string attribute --------------------------------------
// H5Aread converts the stored bytes to the memory type we ask for. We register a conversion from
// variable-length strings to an opaque type of our own that leaves the stored bytes as they are:
// the string's length (4 bytes), the collection address and the object index (4 bytes).

constexpr const char* raw_tag = "attn-toolkit raw variable-length string";
constexpr std::size_t raw_capacity = 64;

herr_t keep_stored_bytes(hid_t src, hid_t dst, H5T_cdata_t* cdata, size_t, size_t, size_t, void*, void*, hid_t) {
  if (cdata->command != H5T_CONV_INIT) return 0; // H5T_CONV_CONV leaves the buffer untouched
  if (H5Tis_variable_str(src) <= 0 || H5Tget_class(dst) != H5T_OPAQUE) return -1;
  char* tag = H5Tget_tag(dst);
  const bool ours = tag && std::strcmp(tag, raw_tag) == 0;
  H5free_memory(tag);
  if (!ours) return -1;
  cdata->need_bkg = H5T_BKG_NO;
  return 0;
}

Handle raw_string_type() {
  Handle raw(H5Tcreate(H5T_OPAQUE, raw_capacity));
  if (!raw.valid() || H5Tset_tag(raw.get(), raw_tag) < 0) throw Error("cannot create the raw string type");
  static std::once_flag once;
  std::call_once(once, [&] {
    Handle vlen_string(H5Tcopy(H5T_C_S1));
    H5Tset_size(vlen_string.get(), H5T_VARIABLE);
    if (H5Tregister(H5T_PERS_SOFT, "attn raw vlen string", vlen_string.get(), raw.get(), keep_stored_bytes) < 0)
      throw Error("cannot register the raw string conversion");
    H5Eclear2(H5E_DEFAULT);
  });
  return raw;
}

// The `n` bytes at address `addr` of the file behind `file` (which we open with the sec2 or the
// core driver), or nullopt when they are not all there (checked before anything is allocated).
std::optional<std::string> read_file_bytes(hid_t file, std::uint64_t addr, std::uint64_t n) {
  hsize_t file_size = 0;
  if (H5Fget_filesize(file, &file_size) < 0 || addr > file_size || n > file_size - addr) return std::nullopt;
  Handle fapl(H5Fget_access_plist(file));
  const hid_t driver = H5Pget_driver(fapl.get());
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file, fapl.get(), &handle) < 0 || !handle) return std::nullopt;
  std::string out(n, '\0');
  if (driver == H5FD_CORE) {
    const char* image = *static_cast<char**>(handle);
    if (!image) return std::nullopt;
    std::memcpy(out.data(), image + addr, n);
    return out;
  }
  if (driver != H5FD_SEC2) return std::nullopt;
  const int fd = *static_cast<int*>(handle);
  for (std::size_t done = 0; done < n;) {
    const ssize_t got = ::pread(fd, out.data() + done, n - done, static_cast<off_t>(addr + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return std::nullopt;
    done += static_cast<std::size_t>(got);
  }
  return out;
}

} // namespace

namespace {

// Checks the heap objects `ids` point to (null strings skipped), each collection read once; `refuse`
// makes the error.
template <class Refuse> void check_heap_ids(hid_t obj, const std::vector<HeapId>& ids, Refuse refuse) {
  Handle file(H5Iget_file_id(obj));
  Handle fcpl(H5Fget_create_plist(file.get()));
  std::size_t addr_len = 0, size_len = 0;
  hsize_t base = 0;
  if (!file.valid() || !fcpl.valid() || H5Pget_sizes(fcpl.get(), &addr_len, &size_len) < 0 ||
      H5Pget_userblock(fcpl.get(), &base) < 0)
    throw refuse("cannot read the file's parameters");
  (void)addr_len;
  std::map<std::uint64_t, std::string> heaps; // collection address -> its bytes
  for (const HeapId& id : ids) {
    if (id.collection == 0) continue; // a null string: HDF5 does not look at the heap
    auto it = heaps.find(id.collection);
    if (it == heaps.end()) {
      const std::uint64_t at = base + id.collection;
      const auto head = at < base ? std::nullopt : read_file_bytes(file.get(), at, 8 + size_len);
      if (!head) throw refuse(fmt::format("address {} is outside the file", id.collection));
      const std::uint64_t size = head->starts_with("GCOL") ? decode_le(head->data() + 8, size_len) : 0;
      if (size < head->size()) throw refuse(fmt::format("no heap collection at address {}", id.collection));
      auto heap = read_file_bytes(file.get(), at, size);
      if (!heap) throw refuse(fmt::format("collection at address {} runs past the end of the file", id.collection));
      it = heaps.emplace(id.collection, std::move(*heap)).first;
    }
    if (auto why = global_heap_problem(it->second, static_cast<unsigned>(size_len), id); !why.empty())
      throw refuse(why);
  }
}

// The heap IDs of `count` variable-length strings read raw by `read` (into count * raw_capacity bytes).
template <class Read, class Refuse>
std::vector<HeapId> raw_heap_ids(hid_t obj, std::size_t count, Read read, Refuse refuse) {
  Handle file(H5Iget_file_id(obj));
  Handle fcpl(H5Fget_create_plist(file.get()));
  std::size_t addr_len = 0, size_len = 0;
  if (!file.valid() || !fcpl.valid() || H5Pget_sizes(fcpl.get(), &addr_len, &size_len) < 0)
    throw refuse("cannot read the file's parameters");
  if (addr_len < 1 || addr_len > 8 || size_len < 1 || size_len > 8)
    throw refuse(fmt::format("unsupported address size {} or length size {}", addr_len, size_len));
  std::vector<char> raw(count * raw_capacity);
  Handle raw_type = raw_string_type();
  if (read(raw_type.get(), raw.data()) < 0) throw refuse("cannot read the stored strings");
  std::vector<HeapId> ids(count);
  for (std::size_t i = 0; i < count; ++i) {
    const char* r = raw.data() + i * raw_capacity;
    ids[i].length = decode_le(r, 4);
    ids[i].collection = decode_le(r + 4, static_cast<unsigned>(addr_len));
    ids[i].index = decode_le(r + 4 + addr_len, 4);
  }
  return ids;
}

} // namespace

void check_vlen_string_attribute(std::int64_t attr, const std::string& where, const std::string& name) {
  const auto refuse = [&](const std::string& why) {
    H5Eclear2(H5E_DEFAULT);
    return Error(fmt::format("{}: attribute '{}' points into a corrupt global heap ({})", where, name, why));
  };
  const auto ids = raw_heap_ids(
      attr, 1, [&](hid_t type, char* buf) { return H5Aread(attr, type, buf); }, refuse);
  check_heap_ids(attr, ids, refuse);
}

void check_vlen_string_dataset(std::int64_t ds, std::int64_t count, const std::string& label) {
  const auto refuse = [&](const std::string& why) {
    H5Eclear2(H5E_DEFAULT);
    return Error(fmt::format("{}: the strings point into a corrupt global heap ({})", label, why));
  };
  const auto ids = raw_heap_ids(
      ds, static_cast<std::size_t>(count),
      [&](hid_t type, char* buf) { return H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf); }, refuse);
  check_heap_ids(ds, ids, refuse);
}

// --- the preflight -------------------------------------------------------------------------------

namespace {

double preflight_seconds = 60;
constexpr std::int64_t preflight_data_bytes = 64 << 20; // per dataset
constexpr std::int64_t preflight_head = 64;             // values read of a contiguous dataset

// Every attribute of `obj`, read as the tools read one.
void read_attributes(hid_t obj) {
  H5Aiterate2(
      obj, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t loc, const char* name, const H5A_info_t*, void*) -> herr_t {
        try {
          read_attribute(loc, name, "");
        } catch (...) {
          // The tool reports errors when it meets them. No exception may cross HDF5's C frames.
        }
        return 0;
      },
      nullptr);
}

// A dataset opened and checked as the tools open one, its chunk index walked, and its data read
// as the tools read it when it is at most preflight_data_bytes. Of a contiguous dataset only its
// first values are read (Dataset::read_head): the rest is one more stretch of the same block, whose
// extent the Dataset constructor checked against the file's size. Reading it all would double the
// time a tool spends loading a large weight file (decode's 183 MB model: +0.1 s), and even a whole
// first row cost mha-run 2-3 ms a file (an (8, 512, 512) input's row read as float and as double:
// 3 MiB of fresh pages, and HDF5's 1 MiB conversion buffer).
void read_dataset(Handle obj, const char* name) {
  H5Dget_storage_size(obj.get());
  const Dataset ds(std::move(obj), name);
  const std::int64_t numel = checked_numel(ds.shape(), ds.label());
  if (numel > preflight_data_bytes / 8) return;
  if ((ds.kind() == ElemKind::Float || ds.type_name() == "int8") && ds.contiguous()) {
    ds.read_head(preflight_head);
  } else if (ds.kind() != ElemKind::Float) {
    ds.read_ints();
  } else {
    ds.read_floats<double>(true);
  }
}

// What the tools may touch under group `group` ("/": the whole file): every link (and what it
// resolves to), object, attribute and dataset.
void walk_group(hid_t file, const char* group) {
  H5Lvisit_by_name(
      file, group, H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t g, const char* name, const H5L_info_t* info, void*) -> herr_t {
        H5Lexists(g, name, H5P_DEFAULT); // as a PATH:NAME lookup does
        H5Oexists_by_name(g, name, H5P_DEFAULT);
        if (info->type != H5L_TYPE_HARD) return 0; // then as list_datasets does
        H5Eclear2(H5E_DEFAULT);
        Handle obj(H5Oopen(g, name, H5P_DEFAULT));
        if (!obj.valid()) return 0;
        read_attributes(obj.get());
        try {
          if (H5Iget_type(obj.get()) == H5I_DATASET) read_dataset(std::move(obj), name);
        } catch (...) { // errors are the tool's to report; no exception may cross HDF5's C frames
        }
        return 0;
      },
      nullptr, H5P_DEFAULT);
}

// What the tools may touch of `scope` (an absolute path; "/": the whole file): the root's
// attributes, each group on the way to the scope with its attributes (as a tool looks the name
// up and reads the hyperparameters its ancestors hold), and everything under the scope. A scope
// that is not there means the whole file: a tool that misses a name lists the file's datasets.
void walk(hid_t file, const std::string& scope) {
  if (Handle root(H5Oopen(file, "/", H5P_DEFAULT)); root.valid()) read_attributes(root.get());
  for (std::size_t at = 1; scope != "/";) {
    const std::size_t slash = scope.find('/', at);
    const std::string prefix = scope.substr(0, slash);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0 || H5Oexists_by_name(file, prefix.c_str(), H5P_DEFAULT) <= 0)
      break;
    Handle obj(H5Oopen(file, prefix.c_str(), H5P_DEFAULT));
    if (!obj.valid()) break;
    read_attributes(obj.get());
    if (slash != std::string::npos) {
      at = slash + 1;
      continue;
    }
    if (H5Iget_type(obj.get()) != H5I_DATASET) return walk_group(file, prefix.c_str());
    try {
      return read_dataset(std::move(obj), prefix.c_str());
    } catch (...) { // as in walk_group
      return;
    }
  }
  H5Eclear2(H5E_DEFAULT);
  walk_group(file, "/");
}

// The child: opens and walks each file in turn, first writing the file's index to `progress`, so
// that the parent can name the file it was on when it crashed or hung.
[[noreturn]] void run_preflight_child(const std::vector<std::function<std::int64_t()>>& opens,
                                      const std::vector<std::string>& scopes, int progress) {
  // A Ctrl-C reaches the child too: it just ends (the parent's handlers clean up the parent's
  // files). The child also ends with its parent, and by itself after the time limit. A crash
  // ends it by its signal, which the parent reports (no inherited handler of a sanitizer or
  // fuzzer engine).
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGALRM, SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL})
    std::signal(sig, SIG_DFL);
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  alarm(static_cast<unsigned>(std::ceil(preflight_seconds)) + 1);
  if (int devnull = ::open("/dev/null", O_WRONLY); devnull >= 0) {
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO); // a sanitizer's report, in instrumented builds
  }
  for (std::uint32_t i = 0; i < opens.size(); ++i) {
    // Only for naming the file: a write that fails must not skip the check.
    [[maybe_unused]] const ssize_t sent = ::write(progress, &i, sizeof i);
    try {
      if (Handle file(opens[i]()); file.valid()) walk(file.get(), i < scopes.size() ? scopes[i] : "/");
    } catch (...) {
      // An error, not a crash: the tool reports it when it meets it.
    }
  }
  _exit(0);
}

} // namespace

void set_preflight_timeout(double seconds) { preflight_seconds = seconds; }

namespace {

std::chrono::steady_clock::time_point preflight_deadline() {
  return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                std::chrono::duration<double>(preflight_seconds));
}

// How the child ended, or "" when it read every file cleanly. Waits until `deadline`, then kills it;
// the child is reaped either way.
std::string wait_for_preflight(pid_t child, std::chrono::steady_clock::time_point deadline) {
  // Wait for the child's end with a deadline: poll on a pidfd wakes at once when it ends (without
  // one, on kernels before 5.3, sleep in growing steps).
  using clock = std::chrono::steady_clock;
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0)); // glibc 2.36's wrapper lacks C linkage
  auto pause = std::chrono::microseconds(50);
  int status = 0;
  std::string failure;
  for (;;) {
    const pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (r < 0 && errno != EINTR) {
      failure = fmt::format("cannot check the file (waitpid: {})", std::strerror(errno));
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      break;
    }
    const auto left = deadline - clock::now();
    if (left <= clock::duration::zero()) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      failure = fmt::format("damaged HDF5 file: the HDF5 library did not finish reading its metadata within {:g} s",
                            preflight_seconds);
      break;
    }
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
      poll(&p, 1, static_cast<int>(std::min<long long>(ms, 1000))); // EINTR: look again
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(10000));
    }
  }
  if (pidfd >= 0) close(pidfd);
  if (!failure.empty()) return failure;
  if (WIFSIGNALED(status))
    return fmt::format("damaged HDF5 file: reading its metadata crashed the HDF5 library ({})",
                       strsignal(WTERMSIG(status)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fmt::format("damaged HDF5 file: reading its metadata failed inside the HDF5 library (exit status {})",
                       WEXITSTATUS(status));
  return "";
}

// The last file index the child wrote to the pipe `progress` (0 when none).
std::size_t last_started(int progress) {
  std::uint32_t i = 0, last = 0;
  ssize_t n;
  while ((n = ::read(progress, &i, sizeof i)) == sizeof i || (n < 0 && errno == EINTR))
    if (n == sizeof i) last = i;
  return last;
}

} // namespace

void preflight(const std::function<std::int64_t()>& open, const std::string& label, const std::string& scope) {
  preflight_all({open}, {label}, {}, {scope});
}

void preflight_all(const std::vector<std::function<std::int64_t()>>& opens, const std::vector<std::string>& labels,
                   const std::function<void()>& meanwhile, const std::vector<std::string>& scopes) {
  if (opens.empty()) {
    if (meanwhile) meanwhile();
    return;
  }
  const auto deadline = preflight_deadline();
  int progress[2];
  if (pipe2(progress, O_CLOEXEC) != 0)
    throw Error(fmt::format("{}: cannot check the file (pipe: {})", labels.front(), std::strerror(errno)));
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    ::close(progress[0]);
    run_preflight_child(opens, scopes, progress[1]);
  }
  const int fork_errno = errno;
  ::close(progress[1]);
  if (child < 0) {
    ::close(progress[0]);
    throw Error(fmt::format("{}: cannot check the file (fork: {})", labels.front(), std::strerror(fork_errno)));
  }
  if (meanwhile) {
    try {
      meanwhile();
    } catch (...) {
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
      ::close(progress[0]);
      throw;
    }
  }
  const std::string failure = wait_for_preflight(child, deadline); // the child is gone: the pipe ends
  const std::size_t at = std::min(last_started(progress[0]), labels.size() - 1);
  ::close(progress[0]);
  if (!failure.empty()) throw Error(fmt::format("{}: {}", labels[at], failure));
}

} // namespace attn::h5
