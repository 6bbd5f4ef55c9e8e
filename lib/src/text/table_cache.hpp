// A tokenizer.json's compiled tables kept on disk, so that a tool run in a shell loop does not parse
// megabytes of JSON each time (issue 54: LLaMA 3's 9 MB file took 200 ms to read and build, most of
// it first touches of 50 MB of fresh memory; Gemma 3's 33 MB file 500 ms).
//
// The file `DIR/tokenizers/DEV-INODE.tables`, for the tokenizer.json with that device and inode
// number: a header naming the file's size, modification and change times, the file's members other
// than the model's vocabulary and merges as one small JSON object, then the model's tables
// (vocabulary.hpp, pair_table.hpp) as sections used in place from the mapping. A cache file whose
// header does not match the tokenizer.json as it is now (another format version, size, or time), or
// whose bytes do not match the header's checksum, is ignored and written again; one is published by a rename, so
// processes that share the directory never see half of one. DIR: $ATTN_CACHE_DIR ("none": no cache), else
// $XDG_CACHE_HOME/attn-toolkit, else $HOME/.cache/attn-toolkit.
//
// Why times rather than a hash of the bytes: hashing Gemma 3's 33 MB took 20 ms of its 88 (the
// mapped file read at 1.6 GB/s on our KVM guests). The kernel sets a file's change time (ctime) at
// every write, and no program can set it back; a file whose ctime is not older than the moment we
// began reading it (the same coarse clock) may still be being written, so no cache is written for
// it then (git's "racily clean" rule).
#pragma once

#include "attn/core/error.hpp"
#include "attn/sys/mapped_range.hpp"

#include <cstdint>
#include <cstring>
#include <ctime>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <vector>

namespace attn::text {

// A cache file's tables that do not add up (checksummed, so only a bug or a file changed while it
// is mapped): the caller reads the JSON.
struct BadTables : Error {
  using Error::Error;
};

// What identifies a tokenizer.json's contents for the cache: where it is and when it last changed.
struct FileStamp {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_s = 0, mtime_ns = 0, ctime_s = 0, ctime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};
// The stamp of a file as fstat gave it, and whether its contents are settled: its ctime is older
// than `start`, the coarse real-time clock (CLOCK_REALTIME_COARSE) read before its bytes were.
FileStamp file_stamp(const struct stat& st);
bool settled(const FileStamp& stamp, const struct timespec& start);

// The cache directory as the environment gives it; "" when caching is off or no directory is known.
std::string table_cache_dir();

// The tables' sections as they are written: each starts on a 64-byte boundary.
class TableWriter {
public:
  template <class T> void add(std::span<const T> items) { add_bytes(items.data(), items.size() * sizeof(T)); }
  void add_bytes(const void* p, std::size_t bytes);
  const std::vector<std::span<const char>>& sections() const { return sections_; }

private:
  std::vector<std::span<const char>> sections_; // views of the tables being saved
};

// The sections of a mapped cache file, in the order they were written.
class TableReader {
public:
  TableReader() = default;
  explicit TableReader(std::vector<std::span<const char>> sections) : sections_(std::move(sections)) {}
  // The next section as items of T (trivially copyable); BadTables when there is none or its size
  // is not a whole number of them.
  template <class T> std::span<const T> next() {
    const std::span<const char> s = next_bytes();
    if (s.size() % sizeof(T) != 0) throw BadTables("a section is not a whole number of items");
    return {reinterpret_cast<const T*>(s.data()), s.size() / sizeof(T)};
  }
  std::span<const char> next_bytes();

private:
  std::vector<std::span<const char>> sections_;
  std::size_t at_ = 0;
};

// The cache file for a tokenizer.json of this stamp: its small JSON (followed by simdjson's padding
// in the mapping) and its tables' sections, valid while `mapping` lives.
struct CachedTables {
  std::string path;
  std::shared_ptr<MappedRange> mapping;
  std::string_view json;
  TableReader tables;
};
std::optional<CachedTables> open_cached_tables(const std::string& dir, const FileStamp& stamp);

// Writes the cache file for the tokenizer.json of this stamp (best effort: a directory that cannot
// be written to is no error; the cache is only a shortcut).
void write_cached_tables(const std::string& dir, const FileStamp& stamp, std::string_view json,
                         const TableWriter& tables) noexcept;

} // namespace attn::text
