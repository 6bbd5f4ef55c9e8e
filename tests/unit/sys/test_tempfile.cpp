// Unit tests of lib/src/sys/tempfile.cpp.
#include "attn/sys/tempfile.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <poll.h>
#include <pthread.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

int hook_signal = 0; // what the child's hook raises

} // namespace

TEST_CASE("a temporary file is removed on success paths and by a signal the moment it exists") {
  const test::TempDir tmp;
  const fs::path& dir = tmp.path;
  {
    attn::TempFile t(dir.string(), "out.h5");
    CHECK(fs::exists(t.path()));
    CHECK(fs::path(t.path()).filename().string().rfind(".out.h5.", 0) == 0);
  }
  CHECK(tmp.count() == 0); // removed on destruction
  {
    attn::TempFile t(dir.string(), "out.h5");
    t.publish((dir / "out.h5").string());
  }
  CHECK(fs::exists(dir / "out.h5")); // renamed, then nothing left to remove
  fs::remove(dir / "out.h5");
  // A script may send the signal as soon as it sees the file (tests/cli/test_reliability.sh),
  // even before the file is registered with the handlers that remove it; and the kernel may give a
  // signal sent to the process to any of its threads (the tools run an OpenMP team).
  for (const bool other_thread : {false, true})
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      CAPTURE(sig);
      CAPTURE(other_thread);
      const pid_t child = fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        hook_signal = sig;
        if (other_thread)
          attn::detail::temp_created_hook = [](const std::string&) {
            std::thread([] { // as an OpenMP worker started earlier, it does not hold the signal back
              sigset_t one;
              sigemptyset(&one);
              sigaddset(&one, hook_signal);
              pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
              pthread_kill(pthread_self(), hook_signal);
            })
                .join();
          };
        else
          attn::detail::temp_created_hook = [](const std::string&) { std::raise(hook_signal); };
        try {
          attn::TempFile t(dir.string(), "out.h5");
        } catch (...) {
        }
        _exit(3); // the signal should have ended the child
      }
      int status = 0;
      REQUIRE(waitpid(child, &status, 0) == child);
      CHECK(WIFSIGNALED(status));
      CHECK(WTERMSIG(status) == sig);
      CHECK(tmp.count() == 0);
    }
}

TEST_CASE("StagedOutput starts the writeback of a file that will replace another, only then") {
  const test::TempDir tmp;
  const std::string target = tmp.file("out.h5");
  {
    attn::StagedOutput fresh(target); // a new file: the rename writes nothing out
    CHECK_FALSE(fresh.start_writeback());
    fresh.commit();
  }
  REQUIRE(fs::exists(target));
  {
    attn::StagedOutput over(target);
    CHECK(over.replaces_file());
    CHECK(over.start_writeback());
    CHECK(over.start_writeback()); // again, as each batch is written
    over.commit();
  }
  CHECK(fs::exists(target));
  attn::StagedOutput out("-"); // standard output: copied, never renamed
  CHECK_FALSE(out.start_writeback());
}

namespace {

// True when every copy of the pipe's write end is closed within `ms` (its read end sees the end).
bool pipe_ends(int read_end, int ms) {
  pollfd p{read_end, POLLIN, 0};
  char byte;
  return ::poll(&p, 1, ms) == 1 && ::read(read_end, &byte, 1) == 0;
}

// The descriptors of this process that name `path` or, once it is deleted, "path (deleted)".
int descriptors_of(const std::string& path) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string to = fs::read_symlink(e.path(), ec).string();
    if (!ec && to.rfind(path, 0) == 0) ++n;
  }
  return n;
}

char release_fifo[4096]; // the FIFO that process opens: it waits there until the test opens it too

} // namespace

TEST_CASE("release_in_background: the descriptor, and the caller's others, closed by a process left to init") {
  int released[2], callers[2];
  REQUIRE(::pipe(released) == 0);
  REQUIRE(::pipe(callers) == 0); // as a caller's standard output: the release must not hold it open
  attn::detail::release_in_background(released[1]);
  CHECK(::fcntl(released[1], F_GETFD) == -1); // closed here
  ::close(callers[1]);
  CHECK(pipe_ends(released[0], 10000)); // and in the process that closes it last
  CHECK(pipe_ends(callers[0], 10000));
  CHECK(::waitpid(-1, nullptr, WNOHANG) == -1); // no child left to reap
  CHECK(errno == ECHILD);
  ::close(released[0]);
  ::close(callers[0]);
}

TEST_CASE("publish over a large file: the new bytes and the old mode, the old file released elsewhere") {
  const test::TempDir tmp;
  const std::string target = tmp.file("out.h5");
  for (const long size : {attn::detail::release_min_bytes, 1000L}) { // handed on, and freed at once
    {
      std::FILE* f = std::fopen(target.c_str(), "wb");
      REQUIRE(f);
      const std::string old(static_cast<std::size_t>(size), 'o');
      std::fwrite(old.data(), 1, old.size(), f);
      std::fclose(f);
    }
    ::chmod(target.c_str(), 0640);
    {
      attn::StagedOutput out(target);
      std::FILE* f = std::fopen(out.path().c_str(), "wb");
      REQUIRE(f);
      std::fputs("new", f);
      std::fclose(f);
      out.commit();
    }
    INFO("replaced " << size << " bytes");
    CHECK(fs::file_size(target) == 3);
    CHECK((fs::status(target).permissions() & fs::perms::all) ==
          (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
    CHECK(descriptors_of(target) == 0);
    CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);
    int entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path)) ++entries;
    CHECK(entries == 1); // no temporary file left
  }
}

TEST_CASE("release_in_background: while it closes the descriptor, that process holds the last copy and nothing else") {
  const test::TempDir tmp;
  const std::string fifo = tmp.file("gate");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::snprintf(release_fifo, sizeof release_fifo, "%s", fifo.c_str());
  attn::detail::release_wait_fifo = release_fifo;
  // the caller's descriptors below, between and above the two that process keeps (the released
  // one and its gate, opened last)
  int below[2], released[2], between[2], above[2];
  REQUIRE(::pipe(below) == 0);
  REQUIRE(::pipe(released) == 0);
  REQUIRE(::pipe(between) == 0);
  REQUIRE(::pipe(above) == 0);
  REQUIRE(::dup2(above[1], 900) == 900);
  ::close(above[1]);
  attn::detail::release_in_background(released[1]);
  attn::detail::release_wait_fifo = nullptr;
  for (int* callers : {below, between, above}) {
    ::close(callers == above ? 900 : callers[1]);
    CHECK(pipe_ends(callers[0], 10000)); // that process holds none of the caller's descriptors
    ::close(callers[0]);
  }
  pollfd p{released[0], POLLIN, 0};
  CHECK(::poll(&p, 1, 0) == 0); // but still the released one: its close is the last
  int writer = -1;              // let it go on: open the FIFO's other end once it waits there
  for (int i = 0; i < 1000 && writer < 0; ++i) {
    writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer < 0) ::usleep(10000);
  }
  REQUIRE(writer >= 0);
  ::close(writer);
  CHECK(pipe_ends(released[0], 10000));
  ::close(released[0]);
}
