// The cache of compiled tokenizer tables (table_cache.hpp): its file format, directory and the stamp
// that tells whether it still holds a tokenizer.json's tables.
#include "table_cache.hpp"

#include "attn/sys/tempfile.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace attn::text {

namespace fs = std::filesystem;

namespace {

// The file's header; every section is `align`-aligned and listed after it as (offset, bytes).
constexpr char magic[8] = {'A', 'T', 'T', 'N', 'T', 'O', 'K', '\x01'};
constexpr std::uint32_t format_version = 1; // raised whenever a table's layout changes
constexpr std::size_t align = 64;
constexpr std::size_t padding = 64; // simdjson::SIMDJSON_PADDING, checked in tokenizer.cpp
struct Header {
  char magic[8];
  std::uint32_t version, endian; // endian: 0x01020304 as this machine writes it
  FileStamp stamp;
  std::uint64_t file_size, small_json_bytes, sections;
  std::uint64_t checksum; // of every byte after the header
};
struct SectionEntry {
  std::uint64_t offset, bytes;
};

std::uint64_t mix(std::uint64_t h) { // murmur3's finalizer
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 33);
}

std::string cache_file(const std::string& dir, const FileStamp& stamp) {
  return (fs::path(dir) / "tokenizers" / fmt::format("{:x}-{:x}.tables", stamp.dev, stamp.ino)).string();
}

// A Fletcher-style sum of the bytes in eight 64-bit lanes (vectorized): any changed 8-byte word
// changes the sums, and the running sums tell where it was.
std::uint64_t fletcher(std::string_view bytes) {
  constexpr std::size_t lanes = 8;
  std::uint64_t a[lanes] = {}, b[lanes] = {};
  auto add = [&](const char* p) {
    for (std::size_t l = 0; l < lanes; ++l) {
      std::uint64_t w;
      std::memcpy(&w, p + 8 * l, 8);
      a[l] += w;
      b[l] += a[l];
    }
  };
  std::size_t i = 0;
  for (; i + 8 * lanes <= bytes.size(); i += 8 * lanes) add(bytes.data() + i);
  char tail[8 * lanes] = {};
  std::memcpy(tail, bytes.data() + i, bytes.size() - i);
  add(tail);
  std::uint64_t h = bytes.size();
  for (std::size_t l = 0; l < lanes; ++l) h = mix(mix(h ^ a[l]) ^ b[l]);
  return h;
}

// The file's checksum, so that a damaged cache file is read as none: the sums of its 1 MiB pieces
// on every thread (reading a freshly mapped file is bound by its page walks, ~2 GB/s a core on our
// KVM guests: LLaMA 3's 15 MB took 7.7 ms on one thread), mixed in order.
std::uint64_t checksum(std::string_view bytes) {
  constexpr std::size_t piece = std::size_t{1} << 20;
  const auto n = static_cast<std::int64_t>((bytes.size() + piece - 1) / piece);
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static) if (n > 1)
  for (std::int64_t k = 0; k < n; ++k)
    sums[static_cast<std::size_t>(k)] = fletcher(bytes.substr(static_cast<std::size_t>(k) * piece, piece));
  std::uint64_t h = bytes.size();
  for (const std::uint64_t s : sums) h = mix(h ^ s);
  return h;
}

std::size_t rounded(std::size_t n) { return (n + align - 1) / align * align; }

} // namespace

FileStamp file_stamp(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_dev),
          static_cast<std::uint64_t>(st.st_ino),
          static_cast<std::uint64_t>(st.st_size),
          st.st_mtim.tv_sec,
          st.st_mtim.tv_nsec,
          st.st_ctim.tv_sec,
          st.st_ctim.tv_nsec};
}

bool settled(const FileStamp& stamp, const struct timespec& start) {
  return stamp.ctime_s < start.tv_sec || (stamp.ctime_s == start.tv_sec && stamp.ctime_ns < start.tv_nsec);
}

std::string table_cache_dir() {
  if (const char* d = std::getenv("ATTN_CACHE_DIR")) return std::string_view(d) == "none" ? std::string() : d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return (fs::path(x) / "attn-toolkit").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "attn-toolkit").string();
  return {};
}

void TableWriter::add_bytes(const void* p, std::size_t bytes) {
  sections_.emplace_back(static_cast<const char*>(p), bytes);
}

std::span<const char> TableReader::next_bytes() {
  if (at_ >= sections_.size()) throw BadTables("fewer sections than the tables need");
  return sections_[at_++];
}

std::optional<CachedTables> open_cached_tables(const std::string& dir, const FileStamp& stamp) {
  if (dir.empty()) return std::nullopt;
  const std::string file = cache_file(dir, stamp);
  const ScopedFd f(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  const bool ok =
      f.fd >= 0 && ::fstat(f.fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= static_cast<off_t>(sizeof(Header));
  auto mapping = ok ? MappedRange::map(f.fd, 0, static_cast<std::size_t>(st.st_size), file) : nullptr;
  if (!mapping) return std::nullopt;
  const char* base = mapping->data();
  const std::uint64_t size = mapping->size();
  Header h;
  std::memcpy(&h, base, sizeof h);
  if (std::memcmp(h.magic, magic, sizeof magic) != 0 || h.version != format_version || h.endian != 0x01020304 ||
      !(h.stamp == stamp) || h.file_size != size || h.sections > 64 ||
      sizeof(Header) + (h.sections + 1) * sizeof(SectionEntry) > size)
    return std::nullopt;
  if (checksum(std::string_view(base + sizeof(Header), size - sizeof(Header))) != h.checksum) return std::nullopt;
  std::vector<SectionEntry> entries(h.sections + 1); // the small JSON, then the tables
  std::memcpy(entries.data(), base + sizeof(Header), entries.size() * sizeof(SectionEntry));
  for (const SectionEntry& e : entries)
    if (e.offset % align != 0 || e.offset > size || e.bytes > size - e.offset) return std::nullopt;
  // the small JSON is followed by simdjson's padding
  if (entries[0].bytes != h.small_json_bytes || entries[0].bytes + padding > size - entries[0].offset)
    return std::nullopt;
  std::vector<std::span<const char>> sections;
  for (std::size_t k = 1; k < entries.size(); ++k) sections.emplace_back(base + entries[k].offset, entries[k].bytes);
  return CachedTables{file, std::move(mapping), std::string_view(base + entries[0].offset, entries[0].bytes),
                      TableReader(std::move(sections))};
}

void write_cached_tables(const std::string& dir, const FileStamp& stamp, std::string_view json,
                         const TableWriter& tables) noexcept {
  if (dir.empty()) return;
  try {
    const fs::path folder = fs::path(dir) / "tokenizers";
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) return;
    std::vector<std::span<const char>> parts{std::span<const char>(json.data(), json.size())};
    parts.insert(parts.end(), tables.sections().begin(), tables.sections().end());
    std::vector<SectionEntry> entries;
    std::size_t at = rounded(sizeof(Header) + parts.size() * sizeof(SectionEntry));
    for (const auto& p : parts) {
      entries.push_back({at, p.size()});
      at = rounded(at + p.size() + (entries.size() == 1 ? padding : 0));
    }
    std::vector<char> file(at, 0); // the whole file, then its checksum
    std::memcpy(file.data() + sizeof(Header), entries.data(), entries.size() * sizeof(SectionEntry));
    for (std::size_t k = 0; k < parts.size(); ++k)
      std::memcpy(file.data() + entries[k].offset, parts[k].data(), parts[k].size());
    Header h{};
    std::memcpy(h.magic, magic, sizeof magic);
    h.version = format_version;
    h.endian = 0x01020304;
    h.stamp = stamp;
    h.file_size = file.size();
    h.small_json_bytes = json.size();
    h.sections = parts.size() - 1;
    h.checksum = checksum(std::string_view(file.data() + sizeof(Header), file.size() - sizeof(Header)));
    std::memcpy(file.data(), &h, sizeof h);
    TempFile temp(folder.string(), "tables");
    const int fd = ::open(temp.path().c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    bool ok = true;
    for (std::size_t done = 0; ok && done < file.size();) {
      const ssize_t w = ::write(fd, file.data() + done, file.size() - done);
      if (w <= 0)
        ok = false;
      else
        done += static_cast<std::size_t>(w);
    }
    ok = ::close(fd) == 0 && ok;
    if (ok) temp.publish(cache_file(dir, stamp));
  } catch (...) { // no cache this time: nothing lost but the shortcut
  }
}

} // namespace attn::text
