// A 2-D slice drawn as a PNG picture (attn-view --png): the heatmap in viridis, a title, token
// labels on both axes and a colour bar with its values, in a built-in 5x7 pixel font. Files are
// written and read with libpng.
#pragma once

#include "attn/core/tensor.hpp"
#include "attn/view/view.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attn::image {

using view::Rgb;

// An RGB raster, row-major, 3 bytes per pixel.
struct Image {
  std::int64_t width = 0, height = 0;
  std::vector<std::uint8_t> rgb;

  Image() = default;
  Image(std::int64_t w, std::int64_t h, Rgb fill);
  Rgb at(std::int64_t x, std::int64_t y) const;
  void set(std::int64_t x, std::int64_t y, Rgb c); // ignores pixels outside
  void fill_rect(std::int64_t x, std::int64_t y, std::int64_t w, std::int64_t h, Rgb c);
};

// The 7 rows of a printable ASCII character's 5x7 glyph, bit 4 the leftmost column; any other
// character draws as '?'.
const std::array<std::uint8_t, 7>& glyph(char c);

// Text in the 5x7 font, each font pixel `scale` x `scale`, one column of space between characters
// (6 * scale pixels per character). UTF-8 text: each non-ASCII character draws as '?'.
std::int64_t text_width(std::string_view text, int scale);
// Horizontal, (x, y) the top left corner.
void draw_text(Image& img, std::int64_t x, std::int64_t y, std::string_view text, int scale, Rgb colour);
// Rotated a quarter turn anticlockwise (reading bottom to top), (x, y) the top left corner of its
// box of 7 * scale by text_width pixels; the text ends at the top.
void draw_text_up(Image& img, std::int64_t x, std::int64_t y, std::string_view text, int scale, Rgb colour);

struct HeatmapOptions {
  std::string title;                 // above the map
  std::vector<std::string> labels_x; // one per column (keys), or empty for indices
  std::vector<std::string> labels_y; // one per row (queries), or empty for indices
};

// The picture of `m` (n, m): cells of 1 to 64 pixels a side (at most 4:1), so the map is about 1024
// pixels each way (block means when it has more than 2048 cells on a side); labels of every k-th
// cell where they would overlap; NaN/Inf cells in red.
Image render_heatmap(const TensorD& m, const HeatmapOptions& o);

// A patch-attention map over the image it was computed from: `photo` (RGB, the image as given) at
// about 512 pixels on its longer side, greyed, with `grid` (gh, gw) (one query's weights over the
// patches, row by row) in viridis over it at half opacity, each patch's cell covering its share of
// the picture (the weights scaled from 0 to their largest), a title above and a colour bar below.
Image render_over_image(const Image& photo, const TensorD& grid, const std::string& title);

// Writes `img` as an 8-bit RGB PNG to `target` ("-": standard output), atomically
// (attn/tempfile.hpp). Failure is an Error naming the target.
void write_png(const Image& img, const std::string& target);
// Reads an 8-bit RGB or RGBA PNG (tests, and checking what write_png produced).
Image read_png(const std::string& path);

// The characters of `labels` the PNG font cannot draw (it has ASCII only: they are drawn as '?'),
// each once, in order of appearance; empty when there are none.
std::vector<std::string> undrawable_characters(const std::vector<std::string>& labels);

} // namespace attn::image
