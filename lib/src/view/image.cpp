// PNG pictures of attention maps with libpng: viridis colours, a colour bar, token labels
// (image.hpp).
#include "attn/view/image.hpp"

#include "attn/core/error.hpp"
#include "attn/sys/tempfile.hpp"

#include <fmt/format.h>
#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace attn::image {

Image::Image(std::int64_t w, std::int64_t h, Rgb fill) : width(w), height(h), rgb(static_cast<std::size_t>(w * h * 3)) {
  for (std::int64_t i = 0; i < w * h; ++i) {
    rgb[i * 3] = fill.r;
    rgb[i * 3 + 1] = fill.g;
    rgb[i * 3 + 2] = fill.b;
  }
}

Rgb Image::at(std::int64_t x, std::int64_t y) const {
  const std::uint8_t* p = &rgb[static_cast<std::size_t>((y * width + x) * 3)];
  return {p[0], p[1], p[2]};
}

void Image::set(std::int64_t x, std::int64_t y, Rgb c) {
  if (x < 0 || y < 0 || x >= width || y >= height) return;
  std::uint8_t* p = &rgb[static_cast<std::size_t>((y * width + x) * 3)];
  p[0] = c.r;
  p[1] = c.g;
  p[2] = c.b;
}

void Image::fill_rect(std::int64_t x, std::int64_t y, std::int64_t w, std::int64_t h, Rgb c) {
  for (std::int64_t yy = y; yy < y + h; ++yy)
    for (std::int64_t xx = x; xx < x + w; ++xx) set(xx, yy, c);
}

// --- text --------------------------------------------------------------------------------------

namespace {

// The characters to draw for UTF-8 `text`: ASCII as is, every other character as '?'.
std::string drawable(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c >= 0xC0) {
      out += '?'; // a lead byte; its continuation bytes (0x80-0xBF) are skipped
    }
  }
  return out;
}

constexpr int advance = 6; // font pixels per character: 5 and a space

} // namespace

std::int64_t text_width(std::string_view text, int scale) {
  const auto n = static_cast<std::int64_t>(drawable(text).size());
  return n == 0 ? 0 : (n * advance - 1) * scale;
}

void draw_text(Image& img, std::int64_t x, std::int64_t y, std::string_view text, int scale, Rgb colour) {
  const std::string s = drawable(text);
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto& g = glyph(s[i]);
    const std::int64_t x0 = x + static_cast<std::int64_t>(i) * advance * scale;
    for (int r = 0; r < 7; ++r)
      for (int c = 0; c < 5; ++c)
        if (g[r] & (1 << (4 - c))) img.fill_rect(x0 + c * scale, y + r * scale, scale, scale, colour);
  }
}

void draw_text_up(Image& img, std::int64_t x, std::int64_t y, std::string_view text, int scale, Rgb colour) {
  const std::string s = drawable(text);
  const std::int64_t length = text_width(text, scale);
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto& g = glyph(s[i]);
    // Character i runs upwards from the bottom of the box: its column c lies at height
    // (i * advance + c) * scale from the bottom, its row r at r * scale from the left.
    for (int r = 0; r < 7; ++r)
      for (int c = 0; c < 5; ++c)
        if (g[r] & (1 << (4 - c))) {
          const std::int64_t up = (static_cast<std::int64_t>(i) * advance + c + 1) * scale;
          img.fill_rect(x + r * scale, y + length - up, scale, scale, colour);
        }
  }
}

// --- the heatmap picture -----------------------------------------------------------------------

namespace {

constexpr Rgb paper{255, 255, 255}, ink{30, 30, 30}, frame{120, 120, 120};

// Short number for the colour bar: 4 significant digits.
std::string tick(double v) { return fmt::format("{:.4g}", v); }

// Labels `height` pixels tall on cells of `cell` pixels: every k-th, k the smallest step from 1,
// 2, 5, 10, 20, 50, ... that leaves at least a label's height between them (every label when it fits).
std::int64_t label_step(std::int64_t cell, std::int64_t height) {
  for (std::int64_t base = 1;; base *= 10)
    for (std::int64_t k : {base, 2 * base, 5 * base})
      if (k * cell >= (k == 1 ? height : 2 * height)) return k;
}

} // namespace

Image render_heatmap(const TensorD& m, const HeatmapOptions& o) {
  const std::int64_t factor = view::fit_factor(std::max(m.dim(0), m.dim(1)), 2048);
  const TensorD p = view::pool(m, factor);
  const std::int64_t n = p.dim(0), k = p.dim(1);
  const view::Range range = view::finite_range(m);
  // Cells of 1 to 64 pixels filling about 1024 on each side, at most 4 times as long as wide.
  std::int64_t cell_w = std::clamp<std::int64_t>(1024 / k, 1, 64), cell_h = std::clamp<std::int64_t>(1024 / n, 1, 64);
  cell_w = std::min(cell_w, 4 * cell_h);
  cell_h = std::min(cell_h, 4 * cell_w);
  const int scale = std::min(cell_w, cell_h) >= 16 ? 2 : 1; // label font scale
  const int title_scale = 2, bar_scale = 2;
  const std::int64_t pad = 12, glyph_h = 7 * scale;

  // Labels of the pooled cells: the first label of each block, or indices.
  auto label = [&](const std::vector<std::string>& labels, std::int64_t i) {
    return labels.empty() ? std::to_string(i * factor) : labels[static_cast<std::size_t>(i * factor)];
  };
  const std::int64_t step_y = label_step(cell_h, glyph_h + 3 * scale), step_x = label_step(cell_w, glyph_h + 3 * scale);
  std::int64_t label_w = 0, label_h = 0;
  for (std::int64_t i = 0; i < n; i += step_y) label_w = std::max(label_w, text_width(label(o.labels_y, i), scale));
  for (std::int64_t j = 0; j < k; j += step_x) label_h = std::max(label_h, text_width(label(o.labels_x, j), scale));

  const std::int64_t map_w = cell_w * k, map_h = cell_h * n;
  const std::int64_t title_h = 7 * title_scale;
  const std::int64_t map_x = pad + label_w + 6, map_y = pad + title_h + pad;
  const std::int64_t bar_x = map_x + map_w + 24, bar_w = 18, bar_h = std::max<std::int64_t>(map_h, 200);
  const double tick_values[] = {range.hi, (3 * range.hi + range.lo) / 4, (range.hi + range.lo) / 2,
                                (range.hi + 3 * range.lo) / 4, range.lo};
  std::int64_t tick_w = 0;
  for (double v : tick_values) tick_w = std::max(tick_w, text_width(tick(v), bar_scale));
  const std::int64_t width = std::max(bar_x + bar_w + 6 + tick_w + pad, pad + text_width(o.title, title_scale) + pad);
  const std::int64_t height = std::max(map_y + map_h + 6 + label_h, map_y + bar_h + 7 * bar_scale) + pad;
  Image img(width, height, paper);

  draw_text(img, pad, pad, o.title, title_scale, ink);
  // The map, framed.
  img.fill_rect(map_x - 1, map_y - 1, map_w + 2, map_h + 2, frame);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < k; ++j) {
      const double v = p[i * k + j];
      const Rgb c = std::isfinite(v) ? view::viridis(range.position(v)) : view::nonfinite_colour;
      img.fill_rect(map_x + j * cell_w, map_y + i * cell_h, cell_w, cell_h, c);
    }
  // Row labels right-aligned left of the map, column labels upright below it, centred on cells.
  for (std::int64_t i = 0; i < n; i += step_y) {
    const std::string s = label(o.labels_y, i);
    draw_text(img, map_x - 6 - text_width(s, scale), map_y + i * cell_h + (cell_h - glyph_h) / 2, s, scale, ink);
  }
  for (std::int64_t j = 0; j < k; j += step_x) {
    const std::string s = label(o.labels_x, j);
    draw_text_up(img, map_x + j * cell_w + (cell_w - glyph_h) / 2, map_y + map_h + 6 + label_h - text_width(s, scale),
                 s, scale, ink);
  }
  // The colour bar: high at the top, with five values.
  img.fill_rect(bar_x - 1, map_y - 1, bar_w + 2, bar_h + 2, frame);
  for (std::int64_t y = 0; y < bar_h; ++y)
    img.fill_rect(bar_x, map_y + y, bar_w, 1,
                  view::viridis(1.0 - static_cast<double>(y) / std::max<std::int64_t>(bar_h - 1, 1)));
  // Values beside the bar, each centred on its height (no tick marks, which read as minus signs).
  for (int t = 0; t < 5; ++t) {
    const std::int64_t y = map_y + (bar_h - 1) * t / 4;
    draw_text(img, bar_x + bar_w + 6, y - 7 * bar_scale / 2, tick(tick_values[t]), bar_scale, ink);
  }
  return img;
}

// --- PNG files ---------------------------------------------------------------------------------

namespace {

// libpng reports errors by longjmp; these run in frames without C++ objects that need
// destruction, and turn the error into a message the caller throws.
struct PngError {
  char message[256] = "";
};

extern "C" void png_error_to_message(png_structp png, png_const_charp msg) {
  auto* e = static_cast<PngError*>(png_get_error_ptr(png));
  std::snprintf(e->message, sizeof e->message, "%s", msg);
  png_longjmp(png, 1);
}

extern "C" void png_ignore_warning(png_structp, png_const_charp) {}

// Returns false with err->message set on failure.
bool write_png_file(std::FILE* f, const Image& img, PngError* err) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, err, png_error_to_message, png_ignore_warning);
  if (!png) {
    std::snprintf(err->message, sizeof err->message, "out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    if (!err->message[0]) std::snprintf(err->message, sizeof err->message, "out of memory");
    return false;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, static_cast<png_uint_32>(img.width), static_cast<png_uint_32>(img.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (std::int64_t y = 0; y < img.height; ++y)
    png_write_row(png, const_cast<png_bytep>(&img.rgb[static_cast<std::size_t>(y * img.width * 3)]));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

// Reads into `rows` (width * height * 4 RGBA bytes, sized here); false with err->message on failure.
bool read_png_file(std::FILE* f, std::vector<std::uint8_t>* rgba, png_uint_32* w, png_uint_32* h, PngError* err) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, err, png_error_to_message, png_ignore_warning);
  if (!png) return false;
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_init_io(png, f);
  png_read_info(png, info);
  *w = png_get_image_width(png, info);
  *h = png_get_image_height(png, info);
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_gray_to_rgb(png);
  png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
  png_read_update_info(png, info);
  rgba->resize(static_cast<std::size_t>(*w) * *h * 4);
  for (png_uint_32 y = 0; y < *h; ++y) png_read_row(png, rgba->data() + static_cast<std::size_t>(y) * *w * 4, nullptr);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

} // namespace

Image render_over_image(const Image& photo, const TensorD& grid, const std::string& title) {
  const std::int64_t gh = grid.dim(0), gw = grid.dim(1);
  // nearest-neighbour scaling to about 512 pixels on the longer side
  const double zoom = 512.0 / static_cast<double>(std::max(photo.width, photo.height));
  const std::int64_t W = std::max<std::int64_t>(1, std::llround(photo.width * zoom)),
                     H = std::max<std::int64_t>(1, std::llround(photo.height * zoom));
  double hi = 0;
  for (double v : grid.span())
    if (std::isfinite(v)) hi = std::max(hi, v);
  const int title_scale = text_width(title, 2) <= W ? 2 : 1; // a long title in the small font
  const std::int64_t pad = 12, title_h = 7 * 2 + 2 * pad, bar_h = 16;
  Image img(W + 2 * pad, title_h + H + pad + bar_h + 7 * 2 + 2 * pad, Rgb{255, 255, 255});
  draw_text(img, pad, pad, title, title_scale, Rgb{0, 0, 0});
  for (std::int64_t y = 0; y < H; ++y)
    for (std::int64_t x = 0; x < W; ++x) {
      const Rgb p =
          photo.at(std::min(photo.width - 1, x * photo.width / W), std::min(photo.height - 1, y * photo.height / H));
      const double grey = 0.299 * p.r + 0.587 * p.g + 0.114 * p.b;
      const double v = grid.data()[(y * gh / H) * gw + x * gw / W];
      const Rgb c = std::isfinite(v) ? view::viridis(hi > 0 ? v / hi : 0.0) : view::nonfinite_colour;
      const auto blend = [grey](std::uint8_t channel) {
        return static_cast<std::uint8_t>(std::lround(0.5 * grey + 0.5 * channel));
      };
      const Rgb out{blend(c.r), blend(c.g), blend(c.b)};
      img.set(pad + x, title_h + y, out);
    }
  // the colour bar: 0 .. the largest weight
  const std::int64_t bar_y = title_h + H + pad;
  for (std::int64_t x = 0; x < W; ++x)
    img.fill_rect(pad + x, bar_y, 1, bar_h,
                  view::viridis(static_cast<double>(x) / static_cast<double>(std::max<std::int64_t>(W - 1, 1))));
  draw_text(img, pad, bar_y + bar_h + 4, "0", 2, Rgb{0, 0, 0});
  const std::string top = fmt::format("{:.3g}", hi);
  draw_text(img, pad + W - text_width(top, 2), bar_y + bar_h + 4, top, 2, Rgb{0, 0, 0});
  return img;
}

void write_png(const Image& img, const std::string& target) {
  const std::string label = target == "-" ? "standard output" : target;
  StagedOutput out(target);
  std::FILE* f = std::fopen(out.path().c_str(), "wb");
  if (!f) throw Error(fmt::format("cannot write {}: {}", label, std::strerror(errno)));
  PngError err;
  const bool ok = write_png_file(f, img, &err);
  const bool closed = std::fclose(f) == 0;
  if (!ok) throw Error(fmt::format("cannot write {}: {}", label, err.message));
  if (!closed) throw Error(fmt::format("cannot write {}: {}", label, std::strerror(errno)));
  out.commit();
}

Image read_png(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(fmt::format("{}: {}", path, std::strerror(errno)));
  std::vector<std::uint8_t> rgba;
  png_uint_32 w = 0, h = 0;
  PngError err;
  const bool ok = read_png_file(f, &rgba, &w, &h, &err);
  std::fclose(f);
  if (!ok) throw Error(fmt::format("{}: not a readable PNG file ({})", path, err.message));
  Image img(w, h, Rgb{0, 0, 0});
  for (std::size_t i = 0; i < static_cast<std::size_t>(w) * h; ++i) std::copy_n(&rgba[i * 4], 3, &img.rgb[i * 3]);
  return img;
}

std::vector<std::string> undrawable_characters(const std::vector<std::string>& labels) {
  std::vector<std::string> out;
  for (const std::string& l : labels)
    for (std::size_t i = 0; i < l.size();) {
      const unsigned char c = static_cast<unsigned char>(l[i]);
      const std::size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (c >= 0x80) {
        const std::string ch = l.substr(i, len);
        if (std::find(out.begin(), out.end(), ch) == out.end()) out.push_back(ch);
      }
      i += len;
    }
  return out;
}

} // namespace attn::image
