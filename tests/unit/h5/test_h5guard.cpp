// Unit tests of lib/src/h5/h5guard.cpp.
#include "attn/core/error.hpp"
#include "attn/h5/h5guard.hpp"
#include "attn/h5/h5io.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace attn;
using namespace attn::h5;
using test::testdata;

namespace {

// Little-endian bytes of `v`, `n` wide.
std::string le(std::uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>(v >> (8 * i) & 0xff);
  return s;
}

// One heap object header (8-byte lengths) and its data padded to 8 bytes.
std::string object(std::uint64_t index, std::uint64_t size, const std::string& data = "") {
  std::string s = le(index, 2) + le(1, 2) + le(0, 4) + le(size, 8) + data;
  return s + std::string((8 - s.size() % 8) % 8, '\0');
}

// A collection of `total` bytes holding `objects`, the rest free space (index 0).
std::string collection(std::uint64_t total, const std::string& objects) {
  std::string s = "GCOL" + std::string("\1\0\0\0", 4) + le(total, 8) + objects;
  if (s.size() + 16 <= total) s += object(0, total - s.size());
  return s + std::string(total - s.size(), '\0');
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

} // namespace

TEST_CASE("global heap: a sound collection passes; HDF5's hang and overreads are refused") {
  const std::string two = object(1, 5, "hello") + object(2, 0);
  const std::string good = collection(4096, two);
  CHECK(global_heap_problem(good, 8, {5, 4096, 1}) == "");
  CHECK(global_heap_problem(good, 8, {0, 4096, 2}) == "");

  // The fuzzer's hang: a free-space object of size 0 never moves HDF5's parser on.
  CHECK(global_heap_problem(collection(4096, object(0, 0) + two), 8, {5, 4096, 1}).find("does not advance") !=
        std::string::npos);
  // A size whose padding wraps around 2^64 would also step by (almost) nothing.
  CHECK(global_heap_problem(collection(4096, object(1, ~0ull - 3)), 8, {5, 4096, 1}).find("does not advance") !=
        std::string::npos);
  // Objects running past the collection, a missing index, index 0, a length that disagrees.
  CHECK(global_heap_problem(collection(4096, object(1, 5000)), 8, {5000, 4096, 1}).find("runs past") !=
        std::string::npos);
  CHECK(global_heap_problem(good, 8, {5, 4096, 3}) == "no object 3");
  CHECK(global_heap_problem(good, 8, {5, 4096, 0}) == "no object 0");
  CHECK(global_heap_problem(good, 8, {6, 4096, 1}).find("holds 5 bytes") != std::string::npos);
  // Not a collection, or one whose size disagrees with the bytes there.
  CHECK(global_heap_problem("GCOX" + good.substr(4), 8, {5, 4096, 1}) == "no heap collection there");
  CHECK(global_heap_problem(good.substr(0, 2048), 8, {5, 4096, 1}).find("disagrees") != std::string::npos);
  CHECK(global_heap_problem(good, 16, {5, 4096, 1}).find("unsupported") != std::string::npos);
}

TEST_CASE("string attributes h5py writes read back, behind a user block, from a file and an image") {
  const std::string path = testdata("h5py_strings.h5");
  InputFiles in;
  CHECK(std::get<std::string>(*in.attribute(path, "/g", "activation")) == "gelu");
  CHECK(std::get<std::string>(*in.attribute(path, "/g", "empty")) == "");
  CHECK(std::get<std::string>(*in.attribute(path, "/g", "fixed")) == "relu");
  CHECK(std::get<std::string>(*in.attribute(path, "/g", "long")) == std::string(100, 'x'));

  const std::string bytes = read_bytes(path);
  InputFiles image;
  image.add_image("img", std::vector<char>(bytes.begin(), bytes.end()));
  CHECK(std::get<std::string>(*image.attribute("img", "/g", "activation")) == "gelu");
}

TEST_CASE("a corrupt global heap is an error, not a hang, from a file and an image") {
  const std::string good = read_bytes(testdata("h5py_strings.h5"));
  const std::size_t gcol = good.find("GCOL");
  REQUIRE(gcol != std::string::npos);
  test::TempDir dir;

  struct Case {
    const char* what;
    std::string patch; // written over the first object header
    const char* message;
    bool whole_collection; // every string in the collection is refused, not only this one
  };
  const Case cases[] = {
      {"index 0, size 0 (HDF5 loops forever)", object(0, 0), "does not advance", true},
      {"a size past the collection", object(1, 1 << 20), "runs past the collection", true},
      {"the object renumbered", object(9, 4), "no object 1", false},
      {"the object shortened", object(1, 3), "holds 3 bytes, the string says 4", false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    std::string bad = good;
    bad.replace(gcol + 16, c.patch.size(), c.patch);
    const std::string path = dir.file("bad.h5");
    std::ofstream(path, std::ios::binary) << bad;
    for (bool as_image : {false, true}) {
      CAPTURE(as_image);
      InputFiles in;
      std::string file = path;
      if (as_image) in.add_image(file = "img", std::vector<char>(bad.begin(), bad.end()));
      try {
        in.attribute(file, "/g", "activation");
        FAIL("no error");
      } catch (const Error& e) {
        const std::string msg = e.what();
        CHECK(msg.find(":/g: attribute 'activation' points into a corrupt global heap") != std::string::npos);
        CHECK(msg.find(c.message) != std::string::npos);
      }
      // A collection that cannot be parsed refuses all its strings; a bad object only its own.
      // Fixed-length strings do not use the heap.
      if (c.whole_collection)
        CHECK_THROWS_AS(in.attribute(file, "/g", "long"), Error);
      else
        CHECK(std::get<std::string>(*in.attribute(file, "/g", "long")) == std::string(100, 'x'));
      CHECK(std::get<std::string>(*in.attribute(file, "/g", "fixed")) == "relu");
    }
    CHECK(read_bytes(path) == bad);
  }
}

TEST_CASE("preflight: a clean read passes; a crash, a sanitizer's exit or a hang in the child is an Error") {
  const auto message = [](const std::function<std::int64_t()>& open) -> std::string {
    try {
      preflight(open, "x.h5");
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  };
  CHECK(message([] { return std::int64_t{-1}; }) == ""); // nothing opened: the tool reports that
  CHECK(message([]() -> std::int64_t {
          std::raise(SIGSEGV);
          return -1;
        }) == "x.h5: damaged HDF5 file: reading its metadata crashed the HDF5 library (Segmentation fault)");
  CHECK(message([]() -> std::int64_t { _exit(1); }) ==
        "x.h5: damaged HDF5 file: reading its metadata failed inside the HDF5 library (exit status 1)");
  set_preflight_timeout(0.3);
  CHECK(message([]() -> std::int64_t {
          for (;;) pause();
        }) == "x.h5: damaged HDF5 file: the HDF5 library did not finish reading its metadata within 0.3 s");
  set_preflight_timeout(60);
  // Every input goes through it: a real file passes and reads back.
  InputFiles in;
  CHECK(std::get<std::string>(*in.attribute(testdata("h5py_strings.h5"), "/g", "activation")) == "gelu");
}

TEST_CASE("preflight_all: one child checks the files in order; the failure names its file; none is left") {
  const auto message = [](const std::vector<std::function<std::int64_t()>>& opens) -> std::string {
    try {
      preflight_all(opens, {"a.h5", "b.h5", "c.h5"});
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  };
  const auto clean = [] { return std::int64_t{-1}; };
  const auto crash = []() -> std::int64_t {
    std::raise(SIGSEGV);
    return -1;
  };
  const auto hang = []() -> std::int64_t {
    for (;;) pause();
  };
  CHECK(message({clean, clean, clean}) == "");
  CHECK(message({clean, crash, crash}) ==
        "b.h5: damaged HDF5 file: reading its metadata crashed the HDF5 library (Segmentation fault)");
  CHECK(message({clean, clean, crash}) ==
        "c.h5: damaged HDF5 file: reading its metadata crashed the HDF5 library (Segmentation fault)");
  CHECK(message({[]() -> std::int64_t { _exit(3); }, clean, clean}) ==
        "a.h5: damaged HDF5 file: reading its metadata failed inside the HDF5 library (exit status 3)");
  // One child for all: each open, in the child, appends its process ID to a pipe.
  int pids[2];
  REQUIRE(pipe(pids) == 0);
  const auto record = [&pids]() -> std::int64_t {
    const pid_t me = getpid();
    if (::write(pids[1], &me, sizeof me) != sizeof me) _exit(1);
    return -1;
  };
  CHECK(message({record, record, record}) == "");
  ::close(pids[1]);
  std::vector<pid_t> seen(4, 0);
  CHECK(::read(pids[0], seen.data(), 4 * sizeof(pid_t)) == 3 * sizeof(pid_t));
  ::close(pids[0]);
  CHECK(seen[0] != getpid());
  CHECK(seen[1] == seen[0]);
  CHECK(seen[2] == seen[0]);
  // a hang after a clean file: the one deadline names the file it hung on, and ends the child
  set_preflight_timeout(1);
  const auto start = std::chrono::steady_clock::now();
  CHECK(message({clean, hang, hang}) ==
        "b.h5: damaged HDF5 file: the HDF5 library did not finish reading its metadata within 1 s");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1900));
  set_preflight_timeout(60);
  int status = 0;
  CHECK(waitpid(-1, &status, WNOHANG) == -1); // no child left: all were reaped
  CHECK(errno == ECHILD);
  // InputFiles: two real files checked at once, then opened without a further check
  InputFiles in;
  in.preflight({{testdata("h5py_strings.h5"), ""}, {testdata("mha.h5"), ""}, {"-", ""}, {"/no/such/file.h5", ""}});
  CHECK(std::get<std::string>(*in.attribute(testdata("h5py_strings.h5"), "/g", "activation")) == "gelu");
  CHECK(in.open({testdata("mha.h5"), "q5"}).shape() == Shape{2, 5, 16});
}

TEST_CASE("preflight_all runs `meanwhile` in the parent while the child reads; a throw from it ends the child") {
  // The child's open waits for a byte the parent writes from `meanwhile`: without the overlap the
  // child would wait out the time limit and the preflight would fail.
  int go[2];
  REQUIRE(pipe(go) == 0);
  const pid_t parent = getpid();
  int calls = 0;
  const auto waits_for_parent = [&go]() -> std::int64_t {
    char c = 0;
    if (::read(go[0], &c, 1) != 1 || c != 'g') _exit(2);
    return -1;
  };
  set_preflight_timeout(5);
  preflight_all({waits_for_parent}, {"a.h5"}, [&] {
    ++calls;
    CHECK(getpid() == parent);
    CHECK(::write(go[1], "g", 1) == 1);
  });
  CHECK(calls == 1);
  preflight_all({}, {}, [&] { ++calls; }); // nothing to check: at once
  CHECK(calls == 2);
  ::close(go[0]);
  ::close(go[1]);
  // a throw: the (hanging) child is killed at once and reaped, and the exception passes on
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(preflight_all({[]() -> std::int64_t {
                                       for (;;) pause();
                                     }},
                                     {"a.h5"}, [] { throw std::runtime_error("meanwhile failed"); }),
                       "meanwhile failed", std::runtime_error);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  set_preflight_timeout(60);
  int status = 0;
  CHECK(waitpid(-1, &status, WNOHANG) == -1);
  CHECK(errno == ECHILD);
  // InputFiles: with files to check it runs during their check; with none (stdin, a missing file), at once
  for (const std::vector<TensorRef>& refs : {std::vector<TensorRef>{{testdata("mha.h5"), ""}},
                                             std::vector<TensorRef>{{"-", ""}, {"/no/such/file.h5", ""}}}) {
    InputFiles in;
    calls = 0;
    in.preflight(refs, [&] { ++calls; });
    CHECK(calls == 1);
  }
}

TEST_CASE(
    "InputFiles: the preflight reads the part of a file a run names; another part is checked before it is touched") {
  // /b/y's values lie in an external file, y.bin in the working directory, here a FIFO nobody
  // writes: reading it never ends, as a damaged file can make HDF5 loop. /a is clean.
  const test::TempDir d;
  REQUIRE(mkfifo(d.file("y.bin").c_str(), 0600) == 0);
  const std::filesystem::path was = std::filesystem::current_path();
  std::filesystem::current_path(d.path);
  set_preflight_timeout(0.3);
  const std::string f = testdata("h5py_external.h5");
  const std::string hang = f + ": damaged HDF5 file: the HDF5 library did not finish reading its metadata within 0.3 s";
  const auto message = [](const std::function<void()>& access) -> std::string {
    try {
      access();
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  };
  {
    InputFiles in;
    in.preflight({{f, "a/x"}});
    CHECK(in.open({f, "/a/x"}).shape() == Shape{2, 3});
    CHECK(in.kind_of(f, "/a") == ObjectKind::Group); // the groups on the way were read
    CHECK(std::get<std::int64_t>(*in.attribute(f, "/a", "num_heads")) == 2);
    CHECK(!in.attribute(f, "/", "default"));
    CHECK(message([&] { in.open({f, "/b/y"}); }) == hang); // outside: checked first, and refused
  }
  {
    InputFiles in;
    CHECK(in.list_datasets(f, "/a") == std::vector<std::string>{"/a/x"});
    CHECK(message([&] { in.list_datasets(f); }) == hang); // the whole file
  }
  {
    InputFiles in; // a name that is not there: the tool lists the whole file, so all of it is read
    CHECK(message([&] { in.open({f, "/a/nothing"}); }) == hang);
  }
  {
    InputFiles in;
    CHECK(message([&] { in.preflight({{f, ""}}); }) == hang);
  }
  std::filesystem::current_path(was);
  set_preflight_timeout(60);
}
