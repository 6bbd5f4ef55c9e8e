// Atomic output: a temporary file beside the target, renamed over it on success and removed on
// failure, on destruction, and on SIGINT/SIGTERM/SIGHUP (the signal handler unlinks every live
// temporary file, then lets the signal take its default course).
#pragma once

#include <memory>
#include <string>

namespace attn {

class TempFile {
public:
  // Creates an empty file "DIR/.STEM.XXXXXX.tmp"; throws Error when the directory is missing or
  // not writable. On the main thread only: the signal handler runs there (see tempfile.cpp).
  TempFile(const std::string& dir, const std::string& stem);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  // Gives the file the mode of the regular file `target` it replaces (or, for a new one,
  // 0666 & ~umask), then renames it over `target`. Afterwards nothing is left to remove. A replaced
  // file of release_min_bytes or more is freed by a detached process (release_in_background).
  void publish(const std::string& target);
  // Copies the file into `target` ("-": standard output; otherwise an existing device or FIFO,
  // which must be written into, never renamed over), then removes it. A closed pipe is an Error.
  void stream_into(const std::string& target);

private:
  void forget();
  std::string path_;
  int slot_ = -1;
};

// Where an output to `target` is written before it is published: a temporary file beside a regular
// (or new) target, renamed over it by commit(); or, for standard output ("-"), a device or a FIFO,
// one in $TMPDIR (else /tmp) whose bytes commit() copies into the target. Until commit() the
// target is untouched; without it the temporary file is removed.
class StagedOutput {
public:
  explicit StagedOutput(const std::string& target);
  ~StagedOutput();
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;
  const std::string& path() const { return temp_->path(); }
  // True when the target already exists as a regular file (its bytes may be merged, as -o FILE:NAME).
  bool replaces_file() const { return replaces_file_; }
  // Has the kernel start writing out what the file holds so far, when commit() will rename it over
  // an existing file; true when it did. ext4 (auto_da_alloc) writes out a file renamed over another
  // at the rename itself: mha-run's 8 MiB output made commit() take 5-7 ms instead of 0.7 ms.
  // Started as each batch of items is written, that writing overlaps the computation.
  bool start_writeback();
  void commit();

private:
  std::string target_;
  bool stream_ = false, replaces_file_ = false;
  std::unique_ptr<TempFile> temp_;
  int writeback_fd_ = -1; // the temporary file, opened by start_writeback()
};

namespace detail {
// Closes fd, the last reference to a file just replaced, in a detached process, so that the caller
// does not wait while the file's blocks are freed: on the ext4 file systems of our machines
// (mounted with discard) that waits for the disk, ~1.4 ms a MiB (an 8 MiB output: 12-14 ms of
// mha-run's rename, 3 ms of CPU in 86 ms for 64 MiB). The caller waits only for a child that
// starts the one that closes it and exits; that one closes the caller's other descriptors first.
// Both share the caller's memory (no copy of its page tables) and leave 64 KiB of stacks in it.
void release_in_background(int fd) noexcept;
// TempFile::publish hands a replaced file to it from this size on; a smaller one is freed at once.
inline constexpr long release_min_bytes = 1 << 20;
// Test seam: a FIFO the process that closes fd opens and reads once, just before it does. Null
// outside tests.
extern const char* release_wait_fifo;
// Test seam: called by TempFile's constructor the moment the file exists, before it is registered
// for removal (a test sends a signal there, which must still remove the file). Null outside tests.
extern void (*temp_created_hook)(const std::string& path);
} // namespace detail

// Unlinks every live temporary file, from any thread; async-signal-safe. For a fatal signal's
// handler that ends the process itself (mapped_range.cpp's SIGBUS).
void remove_temp_files() noexcept;

// Copies the bytes of file `from` to the existing file `to` (truncating it).
void copy_file_bytes(const std::string& from, const std::string& to);

} // namespace attn
