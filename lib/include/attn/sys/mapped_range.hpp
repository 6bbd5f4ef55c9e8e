// Bytes of an input file mapped into memory, so that a weight is read where the page cache holds
// it instead of being copied into fresh memory (h5io.hpp, Dataset::read_floats_mapped).
//
// Why: on the KVM guests we measure, fresh memory is slow the first time it is touched, and much
// slower when the host has taken it back (free page reporting, ~2 s after a process freed it):
// reading 172 MB of a model file into new pages took 76-530 ms, mapping the same bytes and reading
// them once 39-61 ms. With a 183 MB model, whole processes ran faster back to back and after a 3-s
// pause: decode (teacher-forced) 1.04x and 1.18x, encode 1.07x and 1.15x (stop 43's note).
//
// Each mapping is private and writable: written in place, it gets its own copy of the pages
// written (copy on write), so it behaves as a copy would, and the file never changes. Should the
// file be truncated by another process while a tool runs, reading a page past its new end raises
// SIGBUS: the handler installed with the first mapping reports "TOOL: error: LABEL: truncated while
// being read", removes the temporary outputs (tempfile.hpp) and exits with status 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace attn {

// A file descriptor closed when it goes out of scope (the descriptor MappedRange::map takes).
struct ScopedFd {
  int fd = -1;
  explicit ScopedFd(int f) : fd(f) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();
};

class MappedRange {
public:
  // Bytes [offset, offset + bytes) of the regular file open as descriptor `fd` (which may be closed
  // afterwards), named `label` in the SIGBUS message. Null when they cannot be mapped (past the
  // file's end, no address space, or more mappings live than the handler keeps track of): the
  // caller then reads them instead.
  static std::shared_ptr<MappedRange> map(int fd, std::uint64_t offset, std::size_t bytes, const std::string& label);
  ~MappedRange();
  MappedRange(const MappedRange&) = delete;
  MappedRange& operator=(const MappedRange&) = delete;

  char* data() const { return data_; } // the byte at `offset`
  std::size_t size() const { return bytes_; }

private:
  MappedRange(char* base, std::size_t length, char* data, std::size_t bytes, std::string label);
  char* base_; // the mapping: from the page that holds `offset`
  std::size_t length_;
  char* data_;
  std::size_t bytes_;
  std::string label_;
  int slot_ = -1; // in the SIGBUS handler's table
};

} // namespace attn
