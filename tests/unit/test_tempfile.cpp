#include "attn/tempfile.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <pthread.h>
#include <string>
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
