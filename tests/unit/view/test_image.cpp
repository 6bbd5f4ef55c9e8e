// Unit tests of lib/src/view/image.cpp.
#include "attn/core/error.hpp"
#include "attn/view/image.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <limits>
#include <set>
#include <tuple>

using namespace attn;
using namespace attn::image;

TEST_CASE("font: glyphs of printable ASCII, '?' for anything else") {
  // 'T': a full top row, then the middle column.
  const auto& t = glyph('T');
  CHECK(t[0] == 0b11111);
  for (int r = 1; r < 7; ++r) CHECK(t[r] == 0b00100);
  CHECK(glyph('\n') == glyph('?'));
  CHECK(glyph(static_cast<char>(0xC3)) == glyph('?'));
  for (char c = '!'; c <= '~'; ++c) { // every visible character has ink
    int ink = 0;
    for (auto row : glyph(c)) ink += row;
    CHECK_MESSAGE(ink > 0, "glyph '" << c << "' is blank");
  }
  CHECK(text_width("ab", 1) == 11);
  CHECK(text_width("\xC3\x89t\xC3\xA9", 2) == 34); // "Été": 3 characters
}

TEST_CASE("text is drawn upright and turned a quarter anticlockwise") {
  Image img(20, 20, {255, 255, 255});
  draw_text(img, 2, 3, "T", 1, {0, 0, 0});
  CHECK(img.at(2, 3) == Rgb{0, 0, 0}); // top left of the bar
  CHECK(img.at(6, 3) == Rgb{0, 0, 0}); // top right
  CHECK(img.at(4, 9) == Rgb{0, 0, 0}); // bottom of the stem
  CHECK(img.at(2, 9) == Rgb{255, 255, 255});
  Image up(20, 20, {255, 255, 255});
  draw_text_up(up, 0, 0, "T", 1, {0, 0, 0}); // box 7 wide, 5 tall: the bar runs up the left side
  for (int y = 0; y < 5; ++y) CHECK(up.at(0, y) == Rgb{0, 0, 0});
  CHECK(up.at(6, 2) == Rgb{0, 0, 0}); // the stem's end, at the right
  CHECK(up.at(6, 0) == Rgb{255, 255, 255});
}

TEST_CASE("PNG: a heatmap written with libpng reads back with its size and the data's colours") {
  test::TempDir dir;
  // 8x8, value = row: each row one colour, rising down the map; one NaN.
  TensorD m(Shape{8, 8});
  for (int i = 0; i < 64; ++i) m[i] = i / 8;
  m[63] = std::numeric_limits<double>::quiet_NaN();
  const Image img = render_heatmap(m, {"title", {"a", "b", "c", "d", "e", "f", "g", "h"}, {}});
  const std::string f = dir.file("map.png");
  write_png(img, f);
  CHECK(dir.count() == 1); // no temporary file left
  const Image back = read_png(f);
  CHECK(back.width == img.width);
  CHECK(back.height == img.height);
  CHECK(back.rgb == img.rgb);
  CHECK(back.width >= 8 * 64); // 64-pixel cells: readable at 8x8
  // Sample the centre of each cell of column 0: the colours follow the data, viridis(row / 7).
  std::set<std::tuple<int, int, int>> colours;
  std::int64_t map_x = -1, map_y = -1;
  for (std::int64_t y = 0; y < back.height && map_x < 0; ++y)
    for (std::int64_t x = 0; x < back.width; ++x)
      if (back.at(x, y) == view::viridis(0)) {
        map_x = x;
        map_y = y;
        break;
      }
  REQUIRE(map_x >= 0);
  for (int row = 0; row < 8; ++row) {
    const Rgb c = back.at(map_x + 32, map_y + row * 64 + 32);
    CHECK(c == view::viridis(row / 7.0));
    colours.insert({c.r, c.g, c.b});
  }
  CHECK(colours.size() == 8);
  CHECK(back.at(map_x + 7 * 64 + 32, map_y + 7 * 64 + 32) == view::nonfinite_colour);
  // A large map shrinks its cells: 512x512 at 2 pixels a cell.
  const Image big = render_heatmap(TensorD(Shape{512, 512}), {"big", {}, {}});
  CHECK(big.width >= 1024);
  CHECK(big.width < 1400);
}

TEST_CASE("PNG: a missing directory is an error and leaves nothing; unreadable files are errors") {
  test::TempDir dir;
  Image img(4, 4, {1, 2, 3});
  CHECK_THROWS_AS(write_png(img, dir.file("no/such/map.png")), Error);
  CHECK(dir.count() == 0);
  const std::string text = dir.file("x.png");
  { std::ofstream(text) << "not a png"; }
  CHECK_THROWS_WITH_AS(read_png(text), doctest::Contains("not a readable PNG"), Error);
}
