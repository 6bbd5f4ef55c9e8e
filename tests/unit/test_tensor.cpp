#include "attn/error.hpp"
#include "attn/tensor.hpp"

#include <doctest/doctest.h>

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
