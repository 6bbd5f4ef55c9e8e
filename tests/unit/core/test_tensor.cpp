// Unit tests of lib/src/core/tensor.cpp.
#include "attn/core/error.hpp"
#include "attn/core/tensor.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

using namespace attn;

TEST_CASE("checked_numel counts elements and rejects bad shapes") {
  CHECK(checked_numel({2, 3, 4}, "x") == 24);
  CHECK_THROWS_AS(checked_numel({2, 0}, "x"), UsageError);
  CHECK_THROWS_AS(checked_numel({-1}, "x"), UsageError);
  CHECK_THROWS_WITH_AS(checked_numel({1LL << 40, 1LL << 40}, "--shape"),
                       doctest::Contains("more elements than fit in 64 bits"), UsageError);
}

TEST_CASE("shape and index strings read like NumPy") {
  CHECK(shape_str({2, 16, 64}) == "(2, 16, 64)");
  CHECK(shape_str({5}) == "(5,)");
  CHECK(index_str({2, 3, 4}, 0) == "[0, 0, 0]");
  CHECK(index_str({2, 3, 4}, 23) == "[1, 2, 3]");
  CHECK(index_str({2, 3, 4}, 13) == "[1, 0, 1]");
}

TEST_CASE("tensors allocate zeroed, view batches and reshape") {
  Tensor t(Shape{2, 3});
  CHECK(t.size() == 6);
  CHECK(t[5] == 0.0f);
  for (int i = 0; i < 6; ++i) t[i] = static_cast<float>(i);
  CHECK(t.batch(1)[0] == 3.0f);
  CHECK(t.batch(1).size() == 3);
  t.reshape({1, 2, 3});
  CHECK(t.rank() == 3);
  CHECK(t.dim(-1) == 3);
  CHECK_THROWS_AS(t.reshape({4}), Error);
  CHECK_THROWS_AS(TensorI(Shape{2}, std::vector<std::int64_t>{1, 2, 3}), Error);
}

TEST_CASE("a tensor larger than memory is an error before allocation") {
  CHECK_THROWS_WITH_AS(Tensor(Shape{1LL << 20, 1LL << 20, 1LL << 4}), doctest::Contains("GiB of memory is available"),
                       Error);
}

TEST_CASE("a memory budget caps what tensors may allocate, below what is available") {
  attn::set_memory_budget(1 << 20);
  CHECK_THROWS_WITH_AS(attn::Tensor(attn::Shape{512, 1024}), doctest::Contains("needs 0.0 GiB but only 0.0 GiB"),
                       attn::Error);
  CHECK(attn::Tensor(attn::Shape{256, 1023}).size() == 256 * 1023);
  attn::set_memory_budget(0);
  CHECK(attn::Tensor(attn::Shape{512, 1024}).size() == 512 * 1024);
}

namespace {

// The VmFlags of the mapping that holds p (/proc/self/smaps), or "" when none does.
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

} // namespace

TEST_CASE("weight storage: small weights packed into shared slabs advised as huge pages") {
  std::vector<std::pair<char*, std::size_t>> bufs;
  for (std::size_t bytes : {std::size_t{1}, std::size_t{100}, std::size_t{512} << 10, std::size_t{3} << 20,
                            std::size_t{40} << 20, std::size_t{64}})
    bufs.emplace_back(static_cast<char*>(allocate_weight_storage(bytes)), bytes);
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    auto [p, n] = bufs[i];
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
    std::memset(p, static_cast<int>(i + 1), n);
    CHECK(vm_flags_of(p).find(" hg") != std::string::npos); // MADV_HUGEPAGE
  }
  for (std::size_t i = 0; i < bufs.size(); ++i) { // no buffer overwrote another
    auto [p, n] = bufs[i];
    CHECK(p[0] == static_cast<char>(i + 1));
    CHECK(p[n - 1] == static_cast<char>(i + 1));
  }
  CHECK(bufs[1].first == bufs[0].first + 64); // packed: the next 64-byte boundary
  for (auto [p, n] : bufs) free_weight_storage(p);
  // The 40 MiB buffer had a slab of its own, so the last 64 bytes began a new one; with all freed,
  // the slab being filled starts again from its beginning.
  char* again = static_cast<char*>(allocate_weight_storage(10));
  CHECK(again == bufs[5].first);
  free_weight_storage(again);
  free_weight_storage(nullptr);

  WeightBuffer<std::uint16_t> v(1000, 7); // as a vector's allocator
  CHECK(v[999] == 7);
}

TEST_CASE("a tensor over borrowed memory keeps its owner alive; a copy owns a block of its own") {
  auto values = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
  std::weak_ptr<std::vector<float>> watch = values;
  {
    Tensor t(Shape{2, 3}, values->data(), values);
    values.reset();
    CHECK_FALSE(watch.expired()); // held by the tensor
    CHECK(t.borrowed());
    CHECK(t.size() == 6);
    CHECK(t.data() == watch.lock()->data());
    CHECK(t.batch(1)[2] == 6.0f);

    Tensor copy = t;
    CHECK_FALSE(copy.borrowed());
    CHECK(copy.data() != t.data());
    copy[0] = 9.0f;
    CHECK(t[0] == 1.0f);

    Tensor moved = std::move(t);
    CHECK(moved.borrowed());
    CHECK(moved.data() == watch.lock()->data());
    CHECK(t.size() == 0); // NOLINT(bugprone-use-after-move): moved from, empty
    Tensor assigned;
    assigned = moved;
    CHECK_FALSE(assigned.borrowed());
    CHECK(assigned[5] == 6.0f);
    CHECK_FALSE(watch.expired());
  }
  CHECK(watch.expired()); // released with the last tensor
  CHECK_FALSE(Tensor(Shape{2}).borrowed());
}
