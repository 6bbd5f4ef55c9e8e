// Private mappings of a file's bytes, borrowed by tensors (mapped_range.hpp).
#include "attn/sys/mapped_range.hpp"

#include "attn/sys/tempfile.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attn {

// --- the SIGBUS handler's table of live mappings -------------------------------------------------
// The handler may only read memory and call async-signal-safe functions: a slot holds a mapping's
// range and its label's characters (owned by the MappedRange, which frees the slot before it
// unmaps). 4096 slots: a model file has a few hundred weights (LLaMA 70B: 723).

namespace {

constexpr int max_slots = 4096;

struct Slot {
  std::atomic<std::uintptr_t> begin{0}; // 0: free
  std::uintptr_t end = 0;
  const char* label = nullptr;
};
std::array<Slot, max_slots> slots;
std::mutex slots_mutex; // claims and frees slots; never taken by the handler

void write_str(const char* s) {
  for (std::size_t n = std::strlen(s); n > 0;) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w, n -= static_cast<std::size_t>(w);
  }
}

// A read of a page the file no longer has: reported as the tools report an error, with status 1
// and no temporary output left. Any other SIGBUS takes its default course.
extern "C" void on_sigbus(int sig, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  // A fault has the address it could not read; a SIGBUS sent by a process (kill, raise) has none.
  for (const Slot& s : slots) {
    const std::uintptr_t begin = s.begin.load();
    if (info->si_code <= 0 || begin == 0 || addr < begin || addr >= s.end) continue;
    write_str(program_invocation_short_name);
    write_str(": error: ");
    write_str(s.label);
    write_str(": truncated while being read (the file was changed by another process)\n");
    remove_temp_files();
    ::_exit(1);
  }
  std::signal(sig, SIG_DFL); // ends the process as it would have without this handler
  std::raise(sig);
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, nullptr);
  });
}

int claim_slot(const char* begin, std::size_t length, const char* label) {
  std::lock_guard lock(slots_mutex);
  for (int i = 0; i < max_slots; ++i) {
    Slot& s = slots[static_cast<std::size_t>(i)];
    if (s.begin.load() != 0) continue;
    s.end = reinterpret_cast<std::uintptr_t>(begin) + length;
    s.label = label;
    s.begin.store(reinterpret_cast<std::uintptr_t>(begin));
    return i;
  }
  return -1;
}

void free_slot(int i) {
  std::lock_guard lock(slots_mutex);
  slots[static_cast<std::size_t>(i)].begin.store(0);
}

} // namespace

// --- MappedRange ---------------------------------------------------------------------------------

std::shared_ptr<MappedRange> MappedRange::map(int fd, std::uint64_t offset, std::size_t bytes,
                                              const std::string& label) {
  struct stat st {};
  if (bytes == 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || offset > static_cast<std::uint64_t>(st.st_size) ||
      bytes > static_cast<std::uint64_t>(st.st_size) - offset)
    return nullptr;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t start = offset / page * page;
  const std::size_t length = bytes + static_cast<std::size_t>(offset - start);
  // Writable and private: copy on write (a read-only descriptor allows it).
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, static_cast<off_t>(start));
  if (p == MAP_FAILED) return nullptr;
  install_sigbus_handler();
  auto* base = static_cast<char*>(p);
  std::shared_ptr<MappedRange> m(new MappedRange(base, length, base + (offset - start), bytes, label));
  m->slot_ = claim_slot(base, length, m->label_.c_str()); // the label's characters stay put: m owns them
  if (m->slot_ < 0) return nullptr;                       // the destructor unmaps it
  return m;
}

MappedRange::MappedRange(char* base, std::size_t length, char* data, std::size_t bytes, std::string label)
    : base_(base), length_(length), data_(data), bytes_(bytes), label_(std::move(label)) {}

ScopedFd::~ScopedFd() {
  if (fd >= 0) ::close(fd);
}

MappedRange::~MappedRange() {
  if (slot_ >= 0) free_slot(slot_);
  ::munmap(base_, length_);
}

} // namespace attn
