// Atomic output: a temporary file beside the target, renamed over it on success and removed on
// failure, on destruction, and on SIGINT/SIGTERM/SIGHUP (the signal handler unlinks every live
// temporary file, then lets the signal take its default course).
#pragma once

#include <string>

namespace attn {

class TempFile {
public:
  // Creates an empty file "DIR/.STEM.XXXXXX.tmp"; throws Error when the directory is missing or
  // not writable.
  TempFile(const std::string& dir, const std::string& stem);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  // Gives the file the mode of the regular file `target` it replaces (or, for a new one,
  // 0666 & ~umask), then renames it over `target`. Afterwards nothing is left to remove.
  void publish(const std::string& target);
  // Copies the file into `target` ("-": standard output; otherwise an existing device or FIFO,
  // which must be written into, never renamed over), then removes it. A closed pipe is an Error.
  void stream_into(const std::string& target);

private:
  void forget();
  std::string path_;
  int slot_ = -1;
};

// Copies the bytes of file `from` to the existing file `to` (truncating it).
void copy_file_bytes(const std::string& from, const std::string& to);

} // namespace attn
