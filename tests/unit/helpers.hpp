// Shared helpers of the unit tests.
#pragma once

#include "attn/core/random.hpp"
#include "attn/core/tensor.hpp"
#include "attn/h5/h5io.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace test {

inline std::string testdata(const std::string& name) { return std::string(ATTN_TESTDATA) + "/" + name; }

// A fresh empty directory, removed at the end of the scope.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char templ[] = "/tmp/attn-unit-XXXXXX";
    path = ::mkdtemp(templ);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::size_t count() const {
    std::size_t n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(path)) ++n;
    return n;
  }
};

// The file mapped at address p (/proc/self/maps), "" for anonymous memory, "-" when nothing is.
inline std::string mapped_path(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || a < lo || a >= hi) continue;
    const auto slash = line.find('/'); // the path, after range, perms, offset, device and inode
    return slash == std::string::npos ? "" : line.substr(slash);
  }
  return "-";
}

// A tensor of `shape` with N(0, scale^2) values from a seeded stream.
inline attn::Tensor random_tensor(attn::Shape shape, std::uint64_t seed, double scale = 1.0) {
  attn::Tensor t(std::move(shape));
  attn::Rng rng(seed);
  for (auto& x : t.span()) x = static_cast<float>(scale * rng.normal());
  return t;
}

// Largest |a - b| over two equally long ranges.
template <typename A, typename B> double max_abs_diff(const A& a, const B& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

} // namespace test
