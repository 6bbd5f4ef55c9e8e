// Unit tests of the HDF5 layer (lib/src/h5/: references, reads, sequences, input and output files).
#include "attn/core/error.hpp"
#include "attn/h5/h5io.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

using namespace attn;
using namespace attn::h5;
using test::testdata;

TEST_CASE("check_finite over the threads names the first value that is not finite") {
  // 2^19 values (scanned over the threads): an Inf in a late block, a NaN in an earlier one
  std::vector<float> v(std::size_t(1) << 19, 1.0f);
  const Shape shape{512, 1024};
  CHECK_NOTHROW(h5::check_finite(v.data(), shape, 0, std::int64_t(v.size()), "x"));
  v[400000] = std::numeric_limits<float>::infinity();
  v[9000] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(h5::check_finite(v.data(), shape, 0, std::int64_t(v.size()), "x"),
                       doctest::Contains("x: NaN at index [8, 808]"), Error);
  v[9000] = 1.0f;
  CHECK_THROWS_WITH_AS(h5::check_finite(v.data(), shape, 0, std::int64_t(v.size()), "x"),
                       doctest::Contains("x: Inf at index [390, 640]"), Error);
}

TEST_CASE("PATH[:NAME] splits at the first colon unless the whole argument is a file") {
  auto r = parse_tensor_ref("x.h5:/layers/0/attn");
  CHECK(r.path == "x.h5");
  CHECK(r.name == "/layers/0/attn");
  CHECK(parse_tensor_ref("-:weights").path == "-");
  CHECK(parse_tensor_ref("-:weights").name == "weights");
  CHECK(parse_tensor_ref("plain.h5").name.empty());
  CHECK_THROWS_AS(parse_tensor_ref(":x"), UsageError);
  test::TempDir dir;
  const std::string odd = dir.file("a:b.h5");
  std::ofstream(odd) << "x";
  CHECK(parse_tensor_ref(odd).path == odd);
  CHECK(parse_tensor_ref(odd).name.empty());
}

TEST_CASE("is_under: a path below a group, never the group itself or a sibling sharing its prefix") {
  CHECK(is_under("/a/b", "/a"));
  CHECK(is_under("/a/b/c", "/a"));
  CHECK(is_under("/a", "/"));
  CHECK_FALSE(is_under("/a", "/a"));
  CHECK_FALSE(is_under("/ab", "/a"));
  CHECK_FALSE(is_under("/", "/"));
}

TEST_CASE("reads every float type h5py writes, as float and as double") {
  InputFiles in;
  const std::string f = testdata("h5py_inputs.h5");
  auto ref = in.open({f, "f64"}).read_floats<double>(false);
  CHECK(ref.shape() == Shape{2, 3, 4});
  CHECK(ref[0] == -1.0);
  for (const char* name : {"f16", "f32", "f64"}) {
    Dataset ds = in.open({f, name});
    CHECK(ds.kind() == ElemKind::Float);
    auto t = ds.read_floats<float>(false);
    CHECK(t.shape() == Shape{2, 3, 4});
    CHECK(test::max_abs_diff(t.span(), ref.span()) == 0.0); // values are exact in float16
  }
  CHECK(in.open({f, "f16"}).type_name() == "float16");
}

TEST_CASE("reads integer and h5py bool datasets as int64; refuses the wrong kind") {
  InputFiles in;
  const std::string f = testdata("h5py_inputs.h5");
  auto i32 = in.open({f, "i32"}).read_ints();
  CHECK(std::vector<std::int64_t>(i32.span().begin(), i32.span().end()) ==
        std::vector<std::int64_t>{3, -1, 7, 0, 2, 9});
  CHECK(in.open({f, "u8"}).read_ints()[2] == 255);
  Dataset b = in.open({f, "bool"});
  CHECK(b.kind() == ElemKind::Bool);
  CHECK(b.type_name() == "bool");
  auto bools = b.read_ints();
  CHECK(std::vector<std::int64_t>(bools.span().begin(), bools.span().end()) ==
        std::vector<std::int64_t>{1, 0, 1, 0, 0, 1});
  CHECK_THROWS_WITH_AS(in.open({f, "i32"}).read_floats<float>(false),
                       doctest::Contains("h5py_inputs.h5:/i32: holds int32 data; expected a float tensor"), Error);
  CHECK_THROWS_WITH_AS(in.open({f, "f32"}).read_ints(), doctest::Contains("holds float32 data; expected integers"),
                       Error);
}

TEST_CASE("NaN and Inf are errors naming the first bad index, unless allowed") {
  InputFiles in;
  const std::string f = testdata("h5py_inputs.h5");
  CHECK_THROWS_WITH_AS(in.open({f, "nan"}).read_floats<float>(false), doctest::Contains("/nan: NaN at index [1, 0]"),
                       Error);
  CHECK_THROWS_WITH_AS(in.open({f, "inf"}).read_floats<float>(false), doctest::Contains("/inf: Inf at index [1, 1]"),
                       Error);
  CHECK(std::isnan(in.open({f, "nan"}).read_floats<float>(true)[2]));
}

TEST_CASE("read_floats_mapped: float32 in a file is borrowed from a private mapping and behaves as a copy") {
  test::TempDir dir;
  const std::string f = dir.file("w.h5");
  Tensor w = test::random_tensor({100, 50}, 1);
  {
    OutputFile out({f, ""}, "w", {"t", ""});
    out.write("w", w, OutType::F32);
    out.write("w64", w, OutType::F64);
    out.write("w16", w, OutType::F16);
    out.commit();
  }
  const auto bytes_of = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string file_bytes = bytes_of(f);
  Tensor m;
  {
    InputFiles in;
    m = in.open({f, "w"}).read_floats_mapped(false);
    CHECK(m.borrowed());
    CHECK(m.shape() == Shape{100, 50});
    CHECK(test::mapped_path(m.data()) == std::filesystem::canonical(f).string());
    CHECK(test::max_abs_diff(m.span(), w.span()) == 0.0);
    // written in place: this tensor's own pages; the file and a second read keep the values
    m[0] = 1e6f, m[4999] = -1e6f;
    const Tensor again = in.open({f, "w"}).read_floats_mapped(false);
    CHECK(again.borrowed());
    CHECK(again.data() != m.data());
    CHECK(again[0] == w[0]);
    CHECK(again[4999] == w[4999]);
    // other types are read as read_floats reads them
    for (const char* other : {"w64", "w16"}) {
      const Tensor t = in.open({f, other}).read_floats_mapped(false);
      CHECK_FALSE(t.borrowed());
      CHECK(test::max_abs_diff(t.span(), in.open({f, other}).read_floats<float>(false).span()) == 0.0);
    }
  } // the file closed: the mapping stays with the tensor
  CHECK(m[1] == w[1]);
  CHECK(m[0] == 1e6f);
  CHECK(bytes_of(f) == file_bytes);
  const float* p = m.data();
  m = Tensor();
  CHECK(test::mapped_path(p) != std::filesystem::canonical(f).string()); // unmapped with its last tensor

  // A file held in memory (standard input) is read.
  InputFiles in;
  in.add_image("-", std::vector<char>(file_bytes.begin(), file_bytes.end()));
  const Tensor from_image = in.open({"-", "w"}).read_floats_mapped(false);
  CHECK_FALSE(from_image.borrowed());
  CHECK(test::max_abs_diff(from_image.span(), w.span()) == 0.0);
  // Data at an offset that is not a float's multiple (h5py packs small datasets so) is read too.
  const Tensor odd = in.open({testdata("h5py_inputs.h5"), "inf"}).read_floats_mapped(true);
  CHECK_FALSE(odd.borrowed());
  CHECK(std::isinf(odd[3]));
}

TEST_CASE("NaN and Inf anywhere in a large float dataset: the first one's index, mapped or read") {
  test::TempDir dir;
  const std::string f = dir.file("big.h5");
  Tensor x = test::random_tensor({3, 10000}, 2);
  x[2 * 10000 + 9000] = -std::numeric_limits<float>::infinity();
  x[2 * 10000 + 9500] = std::numeric_limits<float>::quiet_NaN();
  x[10000 + 4097] = -std::numeric_limits<float>::quiet_NaN();
  {
    OutputFile out({f, ""}, "x", {"t", ""});
    out.write("x", x, OutType::F32);
    out.write("x64", x, OutType::F64);
    out.commit();
  }
  InputFiles in;
  CHECK_THROWS_WITH_AS(in.open({f, "x"}).read_floats_mapped(false), doctest::Contains("/x: NaN at index [1, 4097]"),
                       Error);
  CHECK_THROWS_WITH_AS(in.open({f, "x"}).read_floats<float>(false), doctest::Contains("/x: NaN at index [1, 4097]"),
                       Error);
  CHECK_THROWS_WITH_AS(in.open({f, "x64"}).read_floats<double>(false),
                       doctest::Contains("/x64: NaN at index [1, 4097]"), Error);
  CHECK_THROWS_WITH_AS(in.open({f, "x"}).read_float_rows<float>(2, 1, x.data(), false),
                       doctest::Contains("/x: Inf at index [2, 9000]"), Error);
  CHECK(in.open({f, "x"}).read_floats_mapped(true).borrowed());
}

TEST_CASE("strings, compounds, scalars and empty dimensions are refused") {
  InputFiles in;
  const std::string f = testdata("h5py_inputs.h5");
  CHECK_THROWS_WITH_AS(in.open({f, "string"}), doctest::Contains("holds string data"), Error);
  CHECK_THROWS_WITH_AS(in.open({f, "compound"}), doctest::Contains("holds compound data"), Error);
  CHECK_THROWS_WITH_AS(in.open({f, "scalar"}), doctest::Contains("is a scalar"), Error);
  CHECK_THROWS_WITH_AS(in.open({f, "empty"}), doctest::Contains("shape (0, 4) has a dimension of size 0"), Error);
  Dataset r5 = in.open({f, "rank5"});
  CHECK_THROWS_WITH_AS(r5.require_rank(2, 3, "(batch, seq, features)"),
                       doctest::Contains("expected (batch, seq, features), got shape (1, 1, 1, 1, 2)"), Error);
}

TEST_CASE("resolution: names, groups through default, the only dataset, the root default") {
  InputFiles in;
  const std::string f = testdata("h5py_inputs.h5");
  CHECK(in.open({f, ""}).label() == f + ":/model/layer/w");      // root default -> model -> layer -> w
  CHECK(in.open({f, "model"}).label() == f + ":/model/layer/w"); // group default, nested
  CHECK(in.open({f, "/model/layer/other"}).label() == f + ":/model/layer/other");
  CHECK(in.open({testdata("h5py_single.h5"), ""}).label() == testdata("h5py_single.h5") + ":/deep/inside/only");
  CHECK_THROWS_WITH_AS(in.open({f, "dangling"}),
                       doctest::Contains("default 'missing' of group '/dangling' names nothing present"), Error);
  CHECK_THROWS_WITH_AS(in.open({f, "nope"}),
                       doctest::Contains("no dataset or group '/nope' (datasets: /bool, /compound"), Error);
  CHECK_THROWS_WITH_AS(in.open({testdata("h5py_ambiguous.h5"), ""}),
                       doctest::Contains("holds several datasets and no root 'default'; name one as "
                                         "PATH:NAME (datasets: /a, /b)"),
                       Error);
}

TEST_CASE("missing, non-HDF5 and truncated files are clear errors") {
  InputFiles in;
  test::TempDir dir;
  CHECK_THROWS_WITH_AS(in.open({dir.file("none.h5"), ""}), doctest::Contains("none.h5: no such file"), Error);
  std::ofstream(dir.file("text.h5")) << "hello";
  CHECK_THROWS_WITH_AS(in.open({dir.file("text.h5"), ""}), doctest::Contains("text.h5: not an HDF5 file"), Error);
  std::ofstream(dir.file("empty.h5"));
  CHECK_THROWS_WITH_AS(in.open({dir.file("empty.h5"), ""}), doctest::Contains("is empty"), Error);
  std::ifstream src(testdata("h5py_inputs.h5"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(src)), {});
  std::ofstream(dir.file("trunc.h5"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CHECK_THROWS_AS(in.open({dir.file("trunc.h5"), "f32"}).read_floats<float>(false), Error);
}

TEST_CASE("outputs: attributes, default chain, merge into an existing file, atomicity") {
  test::TempDir dir;
  const std::string f = dir.file("out.h5");
  Tensor pe(Shape{2, 3});
  for (int i = 0; i < 6; ++i) pe[i] = static_cast<float>(i);
  {
    OutputFile out({f, ""}, "pe", {"test 1", "test --x"});
    out.write("pe", pe, OutType::F32);
    out.write("extra", TensorI(Shape{2}, {7, 8}), OutType::I64);
    CHECK(dir.count() == 1); // only the temporary file so far
    out.commit();
  }
  CHECK(dir.count() == 1);
  {
    InputFiles in;
    auto back = in.open({f, ""}); // several datasets: resolved by the root default
    CHECK(back.label() == f + ":/pe");
    CHECK(test::max_abs_diff(back.read_floats<float>(false).span(), pe.span()) == 0.0);
    CHECK(in.open({f, "extra"}).read_ints()[1] == 8);
  }
  // -o FILE:/exp1/out keeps /pe and /extra, writes siblings beside NAME, points default at it.
  {
    OutputFile out({f, "/exp1/out"}, "output", {"test 2", "test --y"});
    CHECK(out.dataset_path("output") == "/exp1/out");
    CHECK(out.dataset_path("weights") == "/exp1/weights");
    out.write("output", pe, OutType::F64);
    out.write("weights", pe, OutType::F32);
    out.commit();
  }
  {
    InputFiles in;
    CHECK(in.open({f, ""}).label() == f + ":/exp1/out");
    CHECK(in.list_datasets(f) == std::vector<std::string>{"/exp1/out", "/exp1/weights", "/extra", "/pe"});
    CHECK(in.open({f, "exp1/out"}).type_name() == "float64");
  }
  // Replacing a dataset that exists.
  {
    OutputFile out({f, "/pe"}, "pe", {"test 3", ""});
    out.write("pe", TensorD(Shape{1, 1}, {5.0}), OutType::F64);
    out.commit();
  }
  {
    InputFiles in;
    CHECK(in.open({f, "pe"}).shape() == Shape{1, 1});
    CHECK(in.list_datasets(f).size() == 4);
  }
  // An uncommitted output leaves neither the target nor a temporary file.
  {
    OutputFile out({dir.file("never.h5"), ""}, "pe", {"t", ""});
    out.write("pe", pe, OutType::F32);
  }
  CHECK(dir.count() == 1);
}

TEST_CASE("read_head: the first values of a float dataset of any type and rank, nothing else") {
  InputFiles in;
  const std::string f = testdata("h5py_inputs.h5");
  for (const auto& [file, name] : std::vector<std::pair<std::string, std::string>>{{f, "f16"},
                                                                                   {f, "f32"},
                                                                                   {f, "f64"},
                                                                                   {f, "inf"},
                                                                                   {f, "nan"},
                                                                                   {f, "rank5"},
                                                                                   {f, "model/layer/other"},
                                                                                   {testdata("half.h5"), "bf16_h5py"},
                                                                                   {testdata("half.h5"), "f16_h5py"}})
    for (std::int64_t n : {1, 3, 64}) {
      INFO(name << " n=" << n);
      CHECK_NOTHROW(in.open({file, name}).read_head(n));
    }
  CHECK_THROWS_WITH_AS(in.open({f, "i32"}).read_head(4), doctest::Contains("holds int32 data"), Error);
  CHECK_THROWS_WITH_AS(in.open({f, "bool"}).read_head(4), doctest::Contains("holds bool data"), Error);
}

TEST_CASE("rows are read and written as hyperslabs") {
  test::TempDir dir;
  const std::string f = dir.file("rows.h5");
  Tensor x(Shape{3, 2});
  for (int i = 0; i < 6; ++i) x[i] = static_cast<float>(i + 1);
  {
    OutputFile out({f, ""}, "x", {"t", ""});
    auto w = out.create("x", Shape{3, 2}, OutType::F32);
    w.write_rows(2, 1, x.data() + 4);
    w.write_rows(0, 2, x.data());
    out.commit();
  }
  InputFiles in;
  Dataset ds = in.open({f, ""});
  std::vector<double> row(2);
  ds.read_float_rows(1, 1, row.data(), false);
  CHECK(row == std::vector<double>{3, 4});
  CHECK(test::max_abs_diff(ds.read_floats<float>(false).span(), x.span()) == 0.0);
  CHECK_THROWS_AS(ds.read_float_rows(2, 2, row.data(), false), Error);
}

namespace {
// Descriptors of this process open on a temporary file of `target` (".NAME.XXXXXX.tmp" beside it).
int fds_on_temp_of(const std::string& target) {
  const std::filesystem::path t(target);
  const std::string prefix = fmt::format("{}/.{}.", t.parent_path().string(), t.filename().string());
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string to = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && to.starts_with(prefix) && to.ends_with(".tmp")) ++n;
  }
  return n;
}
} // namespace

TEST_CASE("items written over an existing file start their writeback; a new file's do not") {
  test::TempDir dir;
  const std::string f = dir.file("items.h5");
  Tensor x(Shape{2, 3});
  for (int i = 0; i < 6; ++i) x[i] = static_cast<float>(i);
  for (const bool exists : {false, true}) {
    CAPTURE(exists);
    {
      OutputFile out({f, ""}, "x", {"t", ""});
      auto w = out.create_items("x", Shape{2, 3}, OutType::F32, true);
      w.write_items(0, 1, x.data());
      // HDF5's descriptor, and over an existing file StagedOutput::start_writeback's
      CHECK(fds_on_temp_of(f) == (exists ? 2 : 1));
      w.write_items(1, 1, x.data() + 3);
      CHECK(fds_on_temp_of(f) == (exists ? 2 : 1)); // opened once
      out.commit();
    }
    CHECK(fds_on_temp_of(f) == 0);
    InputFiles in;
    CHECK(test::max_abs_diff(in.open({f, "x"}).read_floats<float>(false).span(), x.span()) == 0.0);
  }
}

TEST_CASE("SequenceReader: items of a batch, or the one sequence, into a new tensor or a reused buffer") {
  test::TempDir dir;
  const std::string f = dir.file("seq.h5");
  Tensor x(Shape{3, 2, 2});
  for (int i = 0; i < 12; ++i) x[i] = static_cast<float>(i + 1);
  {
    OutputFile out({f, ""}, "x", {"t", ""});
    out.write("x", x, OutType::F32);
    Tensor one(Shape{2, 2});
    for (int i = 0; i < 4; ++i) one[i] = static_cast<float>(-i);
    out.write("one", one, OutType::F32);
    out.commit();
  }
  InputFiles in;
  const SequenceReader batch(in.open({f, "x"}), false, "inputs");
  CHECK(batch.items() == 3);
  const Tensor t = batch.read(1, 2);
  CHECK(t.shape() == Shape{2, 2, 2});
  CHECK(std::vector<float>(t.span().begin(), t.span().end()) == std::vector<float>{5, 6, 7, 8, 9, 10, 11, 12});
  std::vector<float> buffer(12, 99.0f); // a group's buffer, read into again: only count * n * d values change
  batch.read(0, 2, buffer.data());
  batch.read(2, 1, buffer.data());
  CHECK(buffer == std::vector<float>{9, 10, 11, 12, 5, 6, 7, 8, 99, 99, 99, 99});
  const SequenceReader single(in.open({f, "one"}), false, "inputs");
  CHECK(single.items() == 1);
  single.read(0, 1, buffer.data());
  CHECK(std::vector<float>(buffer.begin(), buffer.begin() + 5) == std::vector<float>{0, -1, -2, -3, 5});
}

TEST_CASE("SequenceReader::map and read_mapped: items borrowed from a mapping of the file, or read") {
  test::TempDir dir;
  const std::string f = dir.file("seq.h5");
  Tensor x = test::random_tensor({5, 3, 4}, 3);
  x[4 * 12 + 7] = std::numeric_limits<float>::quiet_NaN(); // item 4, position 1, feature 3
  {
    OutputFile out({f, ""}, "x", {"t", ""});
    out.write("x", x, OutType::F32);
    out.write("x16", x, OutType::F16);
    Tensor one = test::random_tensor({3, 4}, 4);
    out.write("one", one, OutType::F32);
    out.commit();
  }
  InputFiles in;
  const SequenceReader batch(in.open({f, "x"}), false, "inputs");
  const Tensor items = batch.map(1, 3);
  CHECK(items.borrowed());
  CHECK(items.shape() == Shape{3, 3, 4});
  CHECK(test::mapped_path(items.data()) == std::filesystem::canonical(f).string());
  CHECK(std::memcmp(items.data(), batch.read(1, 3).data(), 36 * sizeof(float)) == 0);
  CHECK(std::memcmp(items.data(), x.data() + 12, 36 * sizeof(float)) == 0);
  CHECK(batch.read_mapped(1, 3).borrowed());
  CHECK_THROWS_WITH_AS(batch.map(3, 2), doctest::Contains("/x: NaN at index [4, 1, 3]"), Error);
  CHECK_THROWS_WITH_AS(batch.read_mapped(3, 2), doctest::Contains("/x: NaN at index [4, 1, 3]"), Error);
  CHECK_THROWS_AS(batch.map(4, 2), Error); // past the last item
  const SequenceReader allowed(in.open({f, "x"}), true, "inputs");
  CHECK(std::isnan(allowed.map(4, 1)[7]));
  // The one sequence of an (n, d) dataset, as (1, n, d).
  const SequenceReader single(in.open({f, "one"}), false, "inputs");
  const Tensor one = single.read_mapped(0, 1);
  CHECK(one.borrowed());
  CHECK(one.shape() == Shape{1, 3, 4});
  CHECK(std::memcmp(one.data(), single.read(0, 1).data(), 12 * sizeof(float)) == 0);
  // float16 is not mapped: read, with the same values as read()
  const SequenceReader half(in.open({f, "x16"}), true, "inputs");
  CHECK(half.map(0, 2).size() == 0);
  const Tensor h = half.read_mapped(0, 2);
  CHECK_FALSE(h.borrowed());
  CHECK(std::memcmp(h.data(), half.read(0, 2).data(), 24 * sizeof(float)) == 0);
}

TEST_CASE("GroupReader: groups of items mapped from the file, or read into one buffer for every group") {
  test::TempDir dir;
  const std::string f = dir.file("seq.h5");
  const Tensor x = test::random_tensor({5, 3, 4}, 5);
  {
    OutputFile out({f, ""}, "x", {"t", ""});
    out.write("x", x, OutType::F32);
    out.write("x16", x, OutType::F16);
    out.commit();
  }
  InputFiles in;
  const SequenceReader f32(in.open({f, "x"}), false, "inputs"), f16(in.open({f, "x16"}), false, "inputs");
  GroupReader mapped(f32, 2), read(f16, 2);
  std::vector<const float*> buffers;
  for (std::int64_t first = 0; first < 5; first += 2) {
    const std::int64_t count = std::min<std::int64_t>(2, 5 - first);
    const float* m = mapped.read(first, count);
    CHECK(test::mapped_path(m) == std::filesystem::canonical(f).string());
    CHECK(std::memcmp(m, x.data() + first * 12, std::size_t(count * 12) * sizeof(float)) == 0);
    const float* r = read.read(first, count);
    CHECK(std::memcmp(r, f16.read(first, count).data(), std::size_t(count * 12) * sizeof(float)) == 0);
    buffers.push_back(r);
  }
  CHECK(buffers[0] == buffers[1]); // one buffer for every group
  CHECK(buffers[1] == buffers[2]);
  CHECK_THROWS_AS(mapped.read(0, 3), std::logic_error); // more than a group holds
}

TEST_CASE("output checks: an input as output, a missing directory") {
  test::TempDir dir;
  const std::string in = testdata("h5py_single.h5");
  CHECK_THROWS_AS(check_output_target({in, "x"}, {{in, ""}}), UsageError);
  CHECK_THROWS_WITH_AS(check_output_target({dir.file("no/such/x.h5"), ""}, {}), doctest::Contains("no such directory"),
                       Error);
  CHECK_NOTHROW(check_output_target({dir.file("ok.h5"), ""}, {{in, ""}}));
  CHECK_THROWS_AS(OutputFile({dir.file("no/x.h5"), ""}, "pe", {"t", ""}), Error);
}

TEST_CASE("read_slice: any 2-D slice of any element type as doubles, its index checked") {
  InputFiles in;
  const std::string f = testdata("h5py_inputs.h5");
  Dataset f16 = in.open({f, "f16"}); // (2, 3, 4): -1 + 0.125 * flat
  auto s = f16.read_slice({1});
  CHECK(s.shape() == Shape{3, 4});
  CHECK(s[0] == 0.5);
  CHECK(s[11] == 1.875);
  CHECK(in.open({f, "i32"}).read_slice({})[1] == -1.0);
  CHECK(in.open({f, "u8"}).read_slice({})[2] == 255.0);
  auto bools = in.open({f, "bool"}).read_slice({});
  CHECK(std::vector<double>(bools.span().begin(), bools.span().end()) == std::vector<double>{1, 0, 1, 0, 0, 1});
  auto nan = in.open({f, "nan"}).read_slice({});
  CHECK(std::isnan(nan[2])); // non-finite values are read, not refused
  auto row = in.open({f, "i64"}).read_slice({});
  CHECK(row.shape() == Shape{1, 2});
  auto deep = in.open({f, "rank5"}).read_slice({0, 0, 0});
  CHECK(deep.shape() == Shape{1, 2});
  CHECK_THROWS_WITH_AS(f16.read_slice({2}), doctest::Contains("index 2 is out of range for axis 0 of shape (2, 3, 4)"),
                       Error);
  CHECK_THROWS_WITH_AS(f16.read_slice({0, 0}), doctest::Contains("takes 1 leading index to pick a 2-D slice, got 2"),
                       Error);
}
