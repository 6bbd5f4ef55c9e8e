// Atomic outputs: a temporary file beside the target, renamed over it on commit; the space of a
// replaced file given back in the background (tempfile.hpp).
#include "attn/sys/tempfile.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace attn {

// --- signal-safe registry of live temporary files ---------------------------------------------
// The handler may only call async-signal-safe functions, so paths live in fixed buffers.

namespace {
constexpr int max_temps = 16;
constexpr std::size_t max_path = 4096;
std::array<std::array<char, max_path>, max_temps> temp_paths;
std::array<std::atomic<bool>, max_temps> temp_live;

// It does its work on the main thread, which creates the files: one the kernel gave to another
// thread (an OpenMP worker, say) is passed on to the main thread. So it never runs while that thread
// is between creating a file and registering it (TempFile blocks the signals there; they wait), and
// no file is created after it has removed them (the main thread is inside it until the process ends).
extern "C" void remove_temps_and_reraise(int sig) {
  if (::gettid() != ::getpid()) {
    const int saved = errno;
    ::syscall(SYS_tgkill, ::getpid(), ::getpid(), sig);
    errno = saved;
    return;
  }
  remove_temp_files();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Installed with every temporary file, not once: a handler someone else set since (a test
// framework's, say) must not take over while one exists. A signal the process ignores (nohup)
// stays ignored.
void install_handlers() {
  struct sigaction sa {};
  sa.sa_handler = remove_temps_and_reraise;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler != SIG_IGN) sigaction(sig, &sa, nullptr); // keep nohup's choice
  }
  // A reader that closes the pipe early must give a write error we can clean up after,
  // not a silent death with a temporary file left behind.
  std::signal(SIGPIPE, SIG_IGN);
  // Likewise a file-size limit (ulimit -f): write() then fails with EFBIG, which HDF5 and libpng
  // report, instead of SIGXFSZ killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
}

int register_temp(const std::string& path) {
  if (path.size() >= max_path) throw Error(fmt::format("path too long: {}", path));
  for (int i = 0; i < max_temps; ++i) {
    if (!temp_live[i].load()) {
      std::memcpy(temp_paths[i].data(), path.c_str(), path.size() + 1);
      temp_live[i].store(true);
      return i;
    }
  }
  throw Error("too many temporary files open at once");
}

std::string errno_str() { return std::strerror(errno); }

// Holds back SIGINT, SIGTERM and SIGHUP on this thread while it lives; one that arrives meanwhile
// is handled when it ends.
class HeldSignals {
public:
  HeldSignals() {
    sigset_t held;
    sigemptyset(&held);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&held, sig);
    pthread_sigmask(SIG_BLOCK, &held, &old_);
  }
  ~HeldSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

private:
  sigset_t old_;
};

} // namespace

void remove_temp_files() noexcept {
  for (int i = 0; i < max_temps; ++i)
    if (temp_live[i].load()) ::unlink(temp_paths[i].data());
}

// --- TempFile --------------------------------------------------------------------------------

namespace detail {
void (*temp_created_hook)(const std::string& path) = nullptr;
const char* release_wait_fifo = nullptr;
} // namespace detail

TempFile::TempFile(const std::string& dir, const std::string& stem) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(fmt::format("cannot write into '{}': no such directory", dir));
  // The handlers first, and the signals held back from the moment the file exists until it is
  // registered: a script may send one as soon as it sees the file appear.
  install_handlers();
  std::string templ = fmt::format("{}/.{}.XXXXXX.tmp", dir, stem);
  const HeldSignals held;
  const int fd = ::mkstemps(templ.data(), 4);
  if (fd < 0) throw Error(fmt::format("cannot create a file in '{}': {}", dir, errno_str()));
  if (detail::temp_created_hook) detail::temp_created_hook(templ);
  try {
    slot_ = register_temp(templ);
  } catch (...) {
    ::close(fd);
    ::unlink(templ.c_str());
    throw;
  }
  path_ = templ;
  ::close(fd);
}

TempFile::~TempFile() {
  if (!path_.empty()) ::unlink(path_.c_str());
  forget();
}

void TempFile::forget() {
  if (slot_ >= 0) temp_live[slot_].store(false);
  slot_ = -1;
  path_.clear();
}

namespace {

// The regular file `target` names, held by a descriptor so that renaming another file over it does
// not free its blocks; -1 when there is none, it has other names, or it is too small to matter.
int hold_replaced(const std::string& target) {
  const int fd = ::open(target.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_size >= detail::release_min_bytes)
    return fd;
  ::close(fd);
  return -1;
}

} // namespace

namespace {

// What the releasing processes need, copied onto their own stack before the first is started: they
// share this process's memory, which it goes on changing.
struct Release {
  int fd, gate_read, gate_write;
  const char* wait_fifo;
  char* grandchild_stack; // the top of the stack the second process runs on
};

// The releasing processes share the caller's memory (clone with CLONE_VM, each on a stack of its
// own) instead of copying its page tables: fork and fork again at the end of mha-run (8, 512, 512)
// took 1.4 ms of its 77. So they run no code of the C library's or a sanitizer's that keeps state
// (locks, the thread's own data, which is the caller's thread's): raw system calls only, and no
// instrumentation. syscall() and clone() write errno (the caller's) only when a call fails, and
// none of these fails on valid descriptors with the signals at their defaults but for want of
// memory (the FIFO's are the tests').
#define ATTN_RAW_CODE __attribute__((no_sanitize("address", "undefined"), noinline))

// The grandchild: closes every descriptor but fd and the gate's read end (the caller's pipes must
// not stay open), waits until the caller and its child have closed the gate's write end, and closes
// fd, the last reference. Left to init when its parent exits.
ATTN_RAW_CODE int release_last(void* arg) {
  const Release r = *static_cast<const Release*>(arg);
  struct KernelSigaction { // the kernel's layout; all zero: SIG_DFL, no flags, an empty mask
    unsigned long handler = 0, flags = 0, restorer = 0, mask = 0;
  } dfl;
  for (long sig : {SIGINT, SIGTERM, SIGHUP}) // no temporary files of its own to remove
    ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, static_cast<long>(sizeof dfl.mask));
  ::syscall(SYS_close, static_cast<long>(r.gate_write));
  const unsigned lo = static_cast<unsigned>(r.fd < r.gate_read ? r.fd : r.gate_read);
  const unsigned hi = static_cast<unsigned>(r.fd < r.gate_read ? r.gate_read : r.fd);
  // (variadic: every argument passed as a long, which syscall() reads)
  if (lo > 0) ::syscall(SYS_close_range, 0L, static_cast<long>(lo - 1), 0L);
  if (hi > lo + 1) ::syscall(SYS_close_range, static_cast<long>(lo + 1), static_cast<long>(hi - 1), 0L);
  ::syscall(SYS_close_range, static_cast<long>(hi + 1), static_cast<long>(~0u), 0L);
  char byte;
  ::syscall(SYS_read, static_cast<long>(r.gate_read), &byte, 1L); // returns at the end of the pipe
  // a test's FIFO: opening it waits for the test to open its other end
  if (r.wait_fifo) {
    const long fifo = ::syscall(SYS_openat, static_cast<long>(AT_FDCWD), r.wait_fifo, static_cast<long>(O_RDONLY));
    if (fifo >= 0) ::syscall(SYS_read, fifo, &byte, 1L);
  }
  ::syscall(SYS_close, static_cast<long>(r.fd));
  ::syscall(SYS_exit, 0L);
  return 0;
}

// The child: starts the grandchild and exits, so that the caller has no child left.
ATTN_RAW_CODE int release_start(void* arg) {
  auto* r = static_cast<Release*>(arg);
  ::clone(release_last, r->grandchild_stack, CLONE_VM | SIGCHLD, r);
  ::syscall(SYS_exit, 0L);
  return 0;
}

#undef ATTN_RAW_CODE

} // namespace

void detail::release_in_background(int fd) noexcept {
  // The grandchild's close must be the last: it waits until the caller has closed its own
  // descriptor and the gate's write end (the read then sees the end of the pipe).
  int gate[2];
  // Two stacks of 32 KiB, never unmapped: the grandchild may run on after the caller exits (the
  // memory goes with the last process that shares it).
  constexpr std::size_t stack = 32 << 10;
  void* stacks = ::mmap(nullptr, 2 * stack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stacks == MAP_FAILED || ::pipe2(gate, O_CLOEXEC) != 0) {
    if (stacks != MAP_FAILED) ::munmap(stacks, 2 * stack);
    ::close(fd); // freed here, as by the rename
    return;
  }
  char* const base = static_cast<char*>(stacks);
  // Each stack grows down from its top; the arguments sit just below the child's top, 64-byte aligned.
  auto* r = reinterpret_cast<Release*>(base + 2 * stack - 64);
  *r = {fd, gate[0], gate[1], release_wait_fifo, base + stack};
  const pid_t child = ::clone(release_start, r, CLONE_VM | SIGCHLD, r);
  ::close(fd); // the last reference only when clone failed: then freed here, as by the rename
  ::close(gate[1]);
  ::close(gate[0]);
  if (child < 0) ::munmap(stacks, 2 * stack); // no process runs on them
  if (child > 0)
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
}

void TempFile::publish(const std::string& target) {
  struct stat st {};
  mode_t mode;
  if (::stat(target.c_str(), &st) == 0) {
    mode = st.st_mode & 07777;
  } else {
    mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  ::chmod(path_.c_str(), mode);
  const int replaced = hold_replaced(target);
  if (::rename(path_.c_str(), target.c_str()) != 0) {
    const std::string why = errno_str();
    if (replaced >= 0) ::close(replaced);
    throw Error(fmt::format("cannot write '{}': {}", target, why));
  }
  forget();
  if (replaced >= 0) detail::release_in_background(replaced);
}

namespace {

// Copies everything from fd `in` to fd `out`, retrying interrupted calls. Returns 0, or -1 when
// reading failed and -2 when writing failed (errno tells why).
int copy_fd(int in, int out) {
  std::array<char, 1 << 16> buf;
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) return 0;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out, buf.data() + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return -2;
      done += w;
    }
  }
}

} // namespace

void TempFile::stream_into(const std::string& target) {
  const bool to_stdout = target == "-";
  const std::string label = to_stdout ? "standard output" : "'" + target + "'";
  const int out = to_stdout ? STDOUT_FILENO : ::open(target.c_str(), O_WRONLY);
  if (out < 0) throw Error(fmt::format("cannot write {}: {}", label, errno_str()));
  const int fd = ::open(path_.c_str(), O_RDONLY);
  if (fd < 0) {
    const std::string why = errno_str();
    if (!to_stdout) ::close(out);
    throw Error(fmt::format("cannot read back '{}': {}", path_, why));
  }
  int status = copy_fd(fd, out);
  std::string why = errno_str();
  ::close(fd);
  if (!to_stdout && ::close(out) != 0 && status == 0) {
    status = -2;
    why = errno_str();
  }
  if (status == -1) throw Error(fmt::format("cannot read back '{}': {}", path_, why));
  if (status == -2) throw Error(fmt::format("cannot write {}: {}", label, why));
  ::unlink(path_.c_str());
  forget();
}

void copy_file_bytes(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY);
  if (in < 0) throw Error(fmt::format("cannot read '{}': {}", from, errno_str()));
  const int out = ::open(to.c_str(), O_WRONLY | O_TRUNC);
  if (out < 0) {
    ::close(in);
    throw Error(fmt::format("cannot write '{}': {}", to, errno_str()));
  }
  int status = copy_fd(in, out);
  std::string why = errno_str();
  ::close(in);
  if (::close(out) != 0 && status == 0) {
    status = -2;
    why = errno_str();
  }
  if (status != 0) throw Error(fmt::format("cannot copy '{}' to '{}': {}", from, to, why));
}

StagedOutput::StagedOutput(const std::string& target) : target_(target) {
  struct stat st {};
  const bool exists = target != "-" && ::stat(target.c_str(), &st) == 0;
  stream_ = target == "-" || (exists && !S_ISREG(st.st_mode));
  replaces_file_ = exists && !stream_;
  if (stream_) {
    const char* tmpdir = std::getenv("TMPDIR");
    temp_ = std::make_unique<TempFile>(tmpdir && *tmpdir ? tmpdir : "/tmp", "attn-output");
  } else {
    const std::filesystem::path p(target);
    temp_ = std::make_unique<TempFile>(p.has_parent_path() ? p.parent_path().string() : ".", p.filename().string());
  }
}

StagedOutput::~StagedOutput() {
  if (writeback_fd_ >= 0) ::close(writeback_fd_);
}

bool StagedOutput::start_writeback() {
  if (!replaces_file_ || temp_->path().empty()) return false;
  if (writeback_fd_ < 0) writeback_fd_ = ::open(temp_->path().c_str(), O_RDONLY | O_CLOEXEC);
  return writeback_fd_ >= 0 && ::sync_file_range(writeback_fd_, 0, 0, SYNC_FILE_RANGE_WRITE) == 0; // a hint
}

void StagedOutput::commit() {
  if (writeback_fd_ >= 0) ::close(writeback_fd_);
  writeback_fd_ = -1;
  if (stream_) {
    temp_->stream_into(target_);
  } else {
    temp_->publish(target_);
  }
}

} // namespace attn
