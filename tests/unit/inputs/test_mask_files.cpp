// Unit tests of lib/src/inputs/mask_files.cpp, stack_input.cpp, prompts.cpp and qkv.cpp: masks,
// token ids, prompts and q/k/v read from files and checked, each error naming the dataset.
#include "attn/core/error.hpp"
#include "attn/inputs/mask_files.hpp"
#include "attn/inputs/prompts.hpp"
#include "attn/inputs/qkv.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

using namespace attn;

namespace {

// path:/name holding `t` (written as `type`).
template <typename T>
void write(const std::string& path, const std::string& name, const BasicTensor<T>& t, h5::OutType type) {
  h5::OutputFile out({path, name}, name, {"test", "test"});
  out.write(name, t, type);
  out.commit();
}

} // namespace

TEST_CASE("mask files: lengths and key padding become the mask's padding; bad values name the dataset") {
  test::TempDir dir;
  const std::string f = dir.file("m.h5");
  write(f, "len", TensorI(Shape{2}, std::vector<std::int64_t>{3, 1}), h5::OutType::I64);
  write(f, "kpm", TensorI(Shape{2, 4}, std::vector<std::int64_t>{0, 0, 1, 0, 1, 0, 0, 0}), h5::OutType::I64);
  write(f, "badlen", TensorI(Shape{2}, std::vector<std::int64_t>{3, 5}), h5::OutType::I64);
  h5::InputFiles in;
  MaskFiles files;
  files.causal = true;
  files.lengths = h5::TensorRef{f, "len"};
  const Mask a = load_mask(in, files, 2, 1, 4, 4);
  CHECK(a.causal);
  CHECK(!a.padding(0, 2));
  CHECK(a.padding(0, 3));
  CHECK(a.padding(1, 1));
  MaskFiles kp;
  kp.key_padding = h5::TensorRef{f, "kpm"};
  const Mask b = load_mask(in, kp, 2, 1, 4, 4);
  CHECK(b.padding(0, 2));
  CHECK(!b.padding(0, 3));
  CHECK(b.padding(1, 0));
  MaskFiles bad;
  bad.lengths = h5::TensorRef{f, "badlen"};
  CHECK_THROWS_WITH_AS(load_mask(in, bad, 2, 1, 4, 4), doctest::Contains("badlen"), Error);
  CHECK_THROWS_WITH_AS(load_mask(in, bad, 2, 1, 4, 4), doctest::Contains("5"), Error);
}

TEST_CASE("prompts: ids within the vocabulary, lengths within the columns") {
  test::TempDir dir;
  const std::string f = dir.file("p.h5");
  write(f, "ids", TensorI(Shape{2, 3}, std::vector<std::int64_t>{4, 5, 6, 7, 99, 99}), h5::OutType::I64);
  write(f, "len", TensorI(Shape{2}, std::vector<std::int64_t>{3, 1}), h5::OutType::I64);
  write(f, "long", TensorI(Shape{2}, std::vector<std::int64_t>{3, 4}), h5::OutType::I64);
  h5::InputFiles in;
  const h5::Dataset ids = in.open({f, "ids"}), len = in.open({f, "len"}), too_long = in.open({f, "long"});
  const Prompts p = load_prompts(ids, &len, 10); // 99 lies beyond row 1's length: never read
  CHECK(p.items() == 2);
  CHECK(p.batched);
  CHECK(p.lengths == std::vector<std::int64_t>{3, 1});
  CHECK_THROWS_WITH_AS(load_prompts(ids, nullptr, 10), doctest::Contains("99"), Error);
  CHECK_THROWS_WITH_AS(load_prompts(ids, &too_long, 10), doctest::Contains("long"), Error);
}

TEST_CASE("check_qkv: one batch, keys and values of one length; messages name the arguments") {
  test::TempDir dir;
  const std::string f = dir.file("x.h5");
  write(f, "q", test::random_tensor({2, 3, 4}, 1), h5::OutType::F32);
  write(f, "k", test::random_tensor({2, 5, 4}, 2), h5::OutType::F32);
  write(f, "v", test::random_tensor({2, 5, 6}, 3), h5::OutType::F32);
  write(f, "v4", test::random_tensor({2, 4, 6}, 4), h5::OutType::F32);
  write(f, "k3", test::random_tensor({3, 5, 4}, 5), h5::OutType::F32);
  h5::InputFiles in;
  const h5::SequenceReader q(in.open({f, "q"}), false, "queries"), k(in.open({f, "k"}), false, "keys"),
      v(in.open({f, "v"}), false, "values"), v4(in.open({f, "v4"}), false, "values"),
      k3(in.open({f, "k3"}), false, "keys");
  CHECK_NOTHROW(check_qkv(q, k, &v, "Q", "K", "V"));
  CHECK_NOTHROW(check_qkv(q, k, nullptr, "Q", "K", ""));
  CHECK_THROWS_WITH_AS(check_qkv(q, k3, nullptr, "Q", "K3", ""), "batch sizes differ: Q has 2, K3 has 3", Error);
  CHECK_THROWS_WITH_AS(check_qkv(q, k, &v4, "Q", "K", "V4"),
                       "keys and values differ in length: K has 5 positions, V4 has 4", Error);
}
