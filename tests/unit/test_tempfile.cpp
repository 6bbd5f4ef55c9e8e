#include "attn/tempfile.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

int hook_signal = 0; // what the child's hook raises

bool empty_dir(const fs::path& dir) { return fs::directory_iterator(dir) == fs::directory_iterator(); }

} // namespace

TEST_CASE("a temporary file is removed on success paths and by a signal the moment it exists") {
  const fs::path dir = fs::temp_directory_path() / ("attn_tempfile_test." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    attn::TempFile t(dir.string(), "out.h5");
    CHECK(fs::exists(t.path()));
    CHECK(fs::path(t.path()).filename().string().rfind(".out.h5.", 0) == 0);
  }
  CHECK(empty_dir(dir)); // removed on destruction
  {
    attn::TempFile t(dir.string(), "out.h5");
    t.publish((dir / "out.h5").string());
  }
  CHECK(fs::exists(dir / "out.h5")); // renamed, then nothing left to remove
  fs::remove(dir / "out.h5");
  // A script may send the signal as soon as it sees the file (tests/cli/test_reliability.sh):
  // by then the file must be registered with the handlers that remove it.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    CAPTURE(sig);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      hook_signal = sig;
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
    CHECK(empty_dir(dir));
  }
  fs::remove_all(dir);
}
