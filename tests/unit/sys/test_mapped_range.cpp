// Unit tests of lib/src/sys/mapped_range.cpp.
#include "attn/sys/mapped_range.hpp"
#include "attn/sys/tempfile.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using attn::MappedRange;

namespace {

// A file of n bytes, byte i = i * 7 mod 251.
std::string pattern_file(const test::TempDir& dir, std::size_t n) {
  const std::string path = dir.file("data.bin");
  std::string bytes(n, '\0');
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i * 7 % 251);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

} // namespace

TEST_CASE("MappedRange: bytes from any offset of a file, private to the process; null past its end") {
  const test::TempDir dir;
  const std::size_t n = 3 * 4096 + 100;
  const std::string path = pattern_file(dir, n);
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  std::shared_ptr<MappedRange> m = MappedRange::map(fd, 5000, 3000, "data.bin");
  REQUIRE(m);
  CHECK(m->size() == 3000);
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{2999}})
    CHECK(m->data()[i] == static_cast<char>((5000 + i) * 7 % 251));
  CHECK(test::mapped_path(m->data()) == std::filesystem::canonical(path).string());
  std::memset(m->data(), 0, 3000); // the process's own copy of the pages
  char byte = 1;
  CHECK(::pread(fd, &byte, 1, 5000) == 1);
  CHECK(byte == static_cast<char>(5000 * 7 % 251));
  CHECK_FALSE(MappedRange::map(fd, n - 10, 20, "data.bin")); // past the end
  CHECK_FALSE(MappedRange::map(fd, n + 4096, 1, "data.bin"));
  CHECK_FALSE(MappedRange::map(fd, 0, 0, "data.bin"));
  CHECK(MappedRange::map(fd, 0, n, "data.bin"));
  ::close(fd);
  CHECK(m->data()[2999] == 0); // outlives the descriptor
  const char* p = m->data();
  m.reset();
  CHECK(test::mapped_path(p) != std::filesystem::canonical(path).string()); // unmapped
}

TEST_CASE("reading a mapped file that another process truncated ends with the error and no temporary file") {
  const test::TempDir dir;
  const std::string path = pattern_file(dir, 4 * 4096);
  int err[2];
  REQUIRE(::pipe(err) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(err[1], STDERR_FILENO);
    const int fd = ::open(path.c_str(), O_RDONLY);
    auto m = MappedRange::map(fd, 8192, 4096, "w.h5:/layers/0/w");
    attn::TempFile out(dir.path.string(), "out.h5");
    if (!m || ::truncate(path.c_str(), 100) != 0) _exit(4);
    volatile char c = m->data()[10]; // past the file's new end: SIGBUS
    (void)c;
    _exit(3); // the handler should have ended the child
  }
  ::close(err[1]);
  std::string message;
  char buf[256];
  for (ssize_t r; (r = ::read(err[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<std::size_t>(r));
  ::close(err[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(message.find(": error: w.h5:/layers/0/w: truncated while being read") != std::string::npos);
  CHECK(message.find('\n') == message.size() - 1); // one line
  CHECK(dir.count() == 1);                         // the data file only: no temporary output left
}

TEST_CASE("a SIGBUS that is no read of a mapped file takes its default course") {
  const test::TempDir dir;
  const std::string path = pattern_file(dir, 4096);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    auto m = MappedRange::map(fd, 0, 4096, "data.bin"); // installs the handler
    if (!m) _exit(4);
    std::raise(SIGBUS);
    _exit(3);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGBUS);
}
