// The weight-file layer: module groups, attributes from the nearest ancestor, shape checks with
// messages naming the dataset and both shapes, and the writer's layout.
#include "attn/core/error.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/weights/quantize.hpp"
#include "attn/weights/weights.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

using namespace attn;

namespace {

// A file with /enc/layers/0/w (2, 3) and attributes num_heads on /, /enc/layers/0 and act on /enc.
std::string write_model(const test::TempDir& dir, const std::string& name = "model.h5") {
  const std::string path = dir.file(name);
  h5::OutputFile out({path, ""}, "enc/layers/0/w", {"test", "test"});
  WeightWriter root(out);
  const WeightWriter layer = root.child("enc").child("layers").child("0");
  layer.write("w", Tensor(Shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6}));
  layer.write("empty", Tensor()); // skipped
  root.attr("num_heads", std::int64_t{8});
  layer.attr("num_heads", std::int64_t{2});
  root.child("enc").attr("activation", std::string("gelu"));
  root.child("enc").attr("layer_norm_eps", 1e-6);
  out.commit();
  return path;
}

} // namespace

TEST_CASE("weights: attributes come from the group or its nearest ancestor") {
  test::TempDir dir;
  const std::string path = write_model(dir);
  h5::InputFiles in;
  const WeightGroup root = WeightGroup::open(in, {path, ""});
  const WeightGroup enc = WeightGroup::open(in, {path, "/enc"});
  const WeightGroup layer = enc.child("layers/0");
  CHECK(layer.path() == "/enc/layers/0");
  CHECK(layer.attr_int("num_heads") == 2);          // its own
  CHECK(enc.attr_int("num_heads") == 8);            // the root's
  CHECK(layer.attr_string("activation") == "gelu"); // an ancestor's
  CHECK(layer.attr_real("layer_norm_eps") == doctest::Approx(1e-6));
  CHECK(layer.attr_real("num_heads") == 2.0);
  CHECK_FALSE(root.attr_string("activation").has_value());
  CHECK_FALSE(layer.attr_int("norm_first").has_value());
  CHECK_THROWS_WITH_AS(layer.attr_int("activation"),
                       doctest::Contains("/enc attribute activation = 'gelu': expected an integer"), Error);
  CHECK_THROWS_WITH_AS(layer.attr_int("layer_norm_eps"), doctest::Contains("expected an integer"), Error);
}

TEST_CASE("weights: datasets are read with their shape checked") {
  test::TempDir dir;
  const std::string path = write_model(dir);
  h5::InputFiles in;
  const WeightGroup layer = WeightGroup::open(in, {path, "enc/layers/0"});
  CHECK(layer.has("w"));
  CHECK_FALSE(layer.has("empty"));
  CHECK_FALSE(layer.has("missing"));
  CHECK(layer.shape("w") == Shape{2, 3});
  const Tensor w = layer.read("w", {2, 3});
  CHECK(w[5] == 6.0f);
  CHECK(layer.read_optional("bias", {3}).size() == 0);
  CHECK_THROWS_WITH_AS(layer.read("w", {3, 2}, "E = 2"),
                       doctest::Contains("model.h5:/enc/layers/0/w: expected shape (3, 2) (E = 2), got (2, 3)"), Error);
  CHECK_THROWS_WITH_AS(layer.read("bias", {3}),
                       doctest::Contains("missing dataset /enc/layers/0/bias (expected shape (3,))"), Error);
  CHECK_THROWS_WITH_AS(WeightGroup::open(in, {path, "/nope"}), doctest::Contains("no group '/nope'"), Error);
  CHECK_THROWS_WITH_AS(WeightGroup::open(in, {path, "/enc/layers/0/w"}), doctest::Contains("is not a group"), Error);
}

TEST_CASE("weights: float32 ones borrowed from the file's mapping, Linear ones in tiles when the group says so") {
  test::TempDir dir;
  const std::string path = write_model(dir);
  h5::InputFiles in;
  WeightGroup enc = WeightGroup::open(in, {path, "enc"});
  const Tensor mapped = enc.child("layers/0").read("w", {2, 3});
  CHECK(mapped.borrowed());
  const LinearWeight rows = enc.child("layers/0").read_linear("w", {2, 3});
  CHECK(rows.format() == LinearWeight::Format::f32);
  CHECK(rows.tensor().borrowed());
  enc.set_linear_tiles(true);
  const WeightGroup layer = enc.child("layers/0"); // inherits it
  const LinearWeight tiled = layer.read_linear("w", {2, 3});
  CHECK(tiled.format() == LinearWeight::Format::f32_tiles);
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t k = 0; k < 3; ++k) CHECK(tiled.at(r, k) == mapped[r * 3 + k]);
  CHECK(layer.read("w", {2, 3}).borrowed()); // other reads as before
  CHECK(std::vector<float>(mapped.data(), mapped.data() + 6) == std::vector<float>{1, 2, 3, 4, 5, 6}); // not written
  CHECK_THROWS_WITH_AS(layer.read_linear("w", {3, 2}), doctest::Contains("expected shape (3, 2)"), Error);
  // few steps read mapped float32 weights where they are (blas::f32_steps_in_place); more, tiles
  for (const std::int64_t steps : {std::int64_t{128}, std::int64_t{257}}) {
    CAPTURE(steps);
    enc.set_linear_tiles(true, 1, steps);
    const LinearWeight w = enc.child("layers/0").read_linear("w", {2, 3});
    const bool in_place = blas::f32_steps_in_place(1, steps);
    CHECK(in_place == (steps == 128 && blas::tile_rows() >= 1));
    CHECK(w.format() == (in_place ? LinearWeight::Format::f32 : LinearWeight::Format::f32_tiles));
    CHECK(w.mapped() == in_place);
    for (std::int64_t r = 0; r < 2; ++r)
      for (std::int64_t k = 0; k < 3; ++k) CHECK(w.at(r, k) == mapped[r * 3 + k]);
  }
}

TEST_CASE("weights: int8 ones stay where they are mapped for steps of few rows, in tiles for steps of more") {
  test::TempDir dir;
  const std::string path = dir.file("int8.h5");
  const Tensor w = test::random_tensor({40, 64}, 7);
  const Int8Weight q = quantize_int8(w, 32);
  {
    h5::OutputFile out({path, ""}, "w", {"test", "test"});
    write_int8_weight(out, "w", q.q, q.scale, 32);
    out.commit();
  }
  const Tensor values = dequantize_int8(q.q, q.scale, 32, "w");
  const bool kernel_reads_rows = blas::int8_rows_in_place({40, 64}, 32);
  struct Case {
    bool tiles;
    std::int64_t step_rows;
    bool in_rows;
  };
  for (const Case c : {Case{false, 1, kernel_reads_rows}, // few steps or a prompt's rows: in place
                       Case{true, 1, kernel_reads_rows && blas::int8_steps_in_place(1)},
                       Case{true, 4, kernel_reads_rows && blas::int8_steps_in_place(4)},
                       Case{true, 8, false}}) { // beams of 8: laid out once, not by each step
    CAPTURE(c.tiles);
    CAPTURE(c.step_rows);
    h5::InputFiles in;
    WeightGroup g = WeightGroup::open(in, {path, ""});
    g.set_linear_tiles(c.tiles, c.step_rows);
    const LinearWeight lw = g.read_linear("w", {40, 64});
    CHECK(lw.format() == LinearWeight::Format::int8);
    CHECK(lw.in_rows() == c.in_rows);
    for (std::int64_t r = 0; r < 40; r += 13)
      for (std::int64_t k = 0; k < 64; k += 5) CHECK(lw.at(r, k) == values[r * 64 + k]);
  }
  // with VNNI (every CPU the project runs on has AVX-512 or AVX2): steps of 1..4 rows read rows
  CHECK(blas::int8_steps_in_place(1) == blas::int8_steps_in_place(4));
  CHECK_FALSE(blas::int8_steps_in_place(5));
}

TEST_CASE("weights: a writer into -o FILE:GROUP puts the module under GROUP") {
  test::TempDir dir;
  const std::string path = dir.file("w.h5");
  {
    h5::OutputFile out({path, "/exp/run1/layers/0/w"}, "layers/0/w", {"test", "test"});
    WeightWriter root(out);
    root.child("layers").child("0").write("w", Tensor(Shape{1}, std::vector<float>{3}));
    root.write("top", Tensor(Shape{1}, std::vector<float>{4}));
    root.attr("num_heads", std::int64_t{1});
    out.commit();
  }
  h5::InputFiles in;
  const WeightGroup g = WeightGroup::open(in, {path, "/exp/run1"});
  CHECK(g.read("layers/0/w", {1})[0] == 3.0f);
  CHECK(g.read("top", {1})[0] == 4.0f);
  CHECK(g.attr_int("num_heads") == 1);
  CHECK(in.attribute(path, "/exp/run1", "num_heads").has_value());
}
