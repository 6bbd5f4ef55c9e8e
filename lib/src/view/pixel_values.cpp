// PNG images into pixel_values: libpng, Pillow's resampling, the processor's arithmetic (pixel_values.hpp).
#include "attn/view/pixel_values.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <memory>

namespace attn {

namespace {

struct PngReadError {
  char message[256] = {};
};

// libpng reports errors by longjmp; these frames hold no C++ objects that need unwinding.
extern "C" void png_read_error(png_structp png, png_const_charp msg) {
  auto* e = static_cast<PngReadError*>(png_get_error_ptr(png));
  std::snprintf(e->message, sizeof e->message, "%s", msg);
  std::longjmp(png_jmpbuf(png), 1);
}
extern "C" void png_read_warning(png_structp, png_const_charp) {}

// Decodes into `rows` (height rows of width * 3 bytes) or fills `err`; returns false on error.
bool decode_png(std::FILE* f, RgbImage& img, PngReadError& err, int& bit_depth_out) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, png_read_error, png_read_warning);
  if (!png) return std::snprintf(err.message, sizeof err.message, "out of memory"), false;
  png_infop info = png_create_info_struct(png);
  std::vector<png_bytep> rows;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_init_io(png, f);
  png_read_info(png, info);
  const int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
  bit_depth_out = depth;
  if (depth == 16) {
    png_destroy_read_struct(&png, &info, nullptr);
    return true; // refused by the caller, naming the depth
  }
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  if (type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  img.width = png_get_image_width(png, info), img.height = png_get_image_height(png, info);
  if (png_get_rowbytes(png, info) != static_cast<png_size_t>(img.width * 3)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return std::snprintf(err.message, sizeof err.message, "unexpected row layout"), false;
  }
  img.rgb.resize(static_cast<std::size_t>(img.width * img.height * 3));
  rows.resize(static_cast<std::size_t>(img.height));
  for (std::int64_t y = 0; y < img.height; ++y) rows[static_cast<std::size_t>(y)] = img.rgb.data() + y * img.width * 3;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

// --- Pillow's resampling (libImaging/Resample.c) ---------------------------------------------------

constexpr int precision_bits = 32 - 8 - 2;

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}

struct Filter {
  double support;
  double (*f)(double);
};

double box_f(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }
double bilinear_f(double x) { return x < 0 ? (x > -1.0 ? 1.0 + x : 0.0) : (x < 1.0 ? 1.0 - x : 0.0); }
double hamming_f(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x *= M_PI;
  return std::sin(x) / x * (0.54 + 0.46 * std::cos(x));
}
double bicubic_f(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double lanczos_f(double x) { return x >= -3.0 && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

// Each output position's first input and count, and its fixed-point weights (precompute_coeffs,
// normalize_coeffs_8bpc).
struct Coefficients {
  std::int64_t ksize = 0;
  std::vector<std::int64_t> bounds; // (out, 2): xmin, count
  std::vector<std::int32_t> k;      // (out, ksize)
};

Coefficients coefficients(std::int64_t in_size, std::int64_t out_size, const Filter& filter) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = scale < 1.0 ? 1.0 : scale, support = filter.support * filterscale;
  Coefficients c;
  c.ksize = static_cast<std::int64_t>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<std::size_t>(out_size * 2));
  c.k.assign(static_cast<std::size_t>(out_size * c.ksize), 0);
  std::vector<double> k(static_cast<std::size_t>(c.ksize));
  for (std::int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale, ss = 1.0 / filterscale;
    double ww = 0.0;
    std::int64_t xmin = static_cast<std::int64_t>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    std::int64_t xmax = static_cast<std::int64_t>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    std::fill(k.begin(), k.end(), 0.0);
    for (std::int64_t x = 0; x < xmax; ++x) {
      const double w = filter.f((static_cast<double>(x + xmin) - center + 0.5) * ss);
      k[static_cast<std::size_t>(x)] = w;
      ww += w;
    }
    for (std::int64_t x = 0; x < xmax; ++x)
      if (ww != 0.0) k[static_cast<std::size_t>(x)] /= ww;
    for (std::int64_t x = 0; x < c.ksize; ++x) {
      const double v = k[static_cast<std::size_t>(x)] * (1 << precision_bits);
      c.k[static_cast<std::size_t>(xx * c.ksize + x)] = static_cast<std::int32_t>(v < 0 ? -0.5 + v : 0.5 + v);
    }
    c.bounds[static_cast<std::size_t>(xx * 2)] = xmin, c.bounds[static_cast<std::size_t>(xx * 2 + 1)] = xmax;
  }
  return c;
}

std::uint8_t clip8(std::int64_t v) {
  v >>= precision_bits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// out (rows, out_w, 3) from rows y0.. of in (.., in_w, 3) along x.
void resample_horizontal(RgbImage& out, const RgbImage& in, std::int64_t y0, const Coefficients& c) {
  for (std::int64_t y = 0; y < out.height; ++y)
    for (std::int64_t x = 0; x < out.width; ++x) {
      const std::int64_t xmin = c.bounds[static_cast<std::size_t>(x * 2)],
                         n = c.bounds[static_cast<std::size_t>(x * 2 + 1)];
      const std::int32_t* k = c.k.data() + x * c.ksize;
      for (int ch = 0; ch < 3; ++ch) {
        std::int64_t ss = std::int64_t{1} << (precision_bits - 1);
        for (std::int64_t i = 0; i < n; ++i)
          ss += static_cast<std::int64_t>(in.rgb[static_cast<std::size_t>(((y0 + y) * in.width + xmin + i) * 3 + ch)]) *
                k[i];
        out.rgb[static_cast<std::size_t>((y * out.width + x) * 3 + ch)] = clip8(ss);
      }
    }
}

// out (out_h, w, 3) from in along y, bounds relative to in's first row.
void resample_vertical(RgbImage& out, const RgbImage& in, const Coefficients& c, std::int64_t shift) {
  for (std::int64_t y = 0; y < out.height; ++y) {
    const std::int64_t ymin = c.bounds[static_cast<std::size_t>(y * 2)] - shift,
                       n = c.bounds[static_cast<std::size_t>(y * 2 + 1)];
    const std::int32_t* k = c.k.data() + y * c.ksize;
    for (std::int64_t x = 0; x < out.width; ++x)
      for (int ch = 0; ch < 3; ++ch) {
        std::int64_t ss = std::int64_t{1} << (precision_bits - 1);
        for (std::int64_t i = 0; i < n; ++i)
          ss +=
              static_cast<std::int64_t>(in.rgb[static_cast<std::size_t>(((ymin + i) * in.width + x) * 3 + ch)]) * k[i];
        out.rgb[static_cast<std::size_t>((y * out.width + x) * 3 + ch)] = clip8(ss);
      }
  }
}

} // namespace

RgbImage read_png_rgb(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) throw Error(fmt::format("{}: cannot open", path));
  unsigned char sig[8] = {};
  if (std::fread(sig, 1, 8, f.get()) != 8 || png_sig_cmp(sig, 0, 8) != 0)
    throw Error(fmt::format("{}: not a PNG file", path));
  std::rewind(f.get());
  RgbImage img;
  PngReadError err;
  int depth = 8;
  if (!decode_png(f.get(), img, err, depth)) throw Error(fmt::format("{}: damaged PNG ({})", path, err.message));
  if (depth == 16)
    throw Error(fmt::format("{}: a 16-bit PNG; the toolkit reads 8-bit ones (as Pillow converts images to RGB for "
                            "an image processor: convert it to 8 bits first)",
                            path));
  return img;
}

RgbImage resize_like_pillow(const RgbImage& in, std::int64_t width, std::int64_t height, hf::Resample filter,
                            const std::string& source) {
  Filter f{};
  switch (filter) {
  case hf::Resample::Box: f = {0.5, box_f}; break;
  case hf::Resample::Bilinear: f = {1.0, bilinear_f}; break;
  case hf::Resample::Hamming: f = {1.0, hamming_f}; break;
  case hf::Resample::Bicubic: f = {2.0, bicubic_f}; break;
  case hf::Resample::Lanczos: f = {3.0, lanczos_f}; break;
  case hf::Resample::Nearest:
    throw Error(fmt::format("{}: resample 0 (nearest) is not computed; bilinear (2), bicubic (3), lanczos (1), box "
                            "(4) and hamming (5) are",
                            source));
  }
  const bool horizontal = width != in.width, vertical = height != in.height;
  const Coefficients ch = coefficients(in.width, width, f), cv = coefficients(in.height, height, f);
  // the input rows the vertical pass reads
  const std::int64_t first = cv.bounds[0], last = cv.bounds[static_cast<std::size_t>(height * 2 - 2)] +
                                                  cv.bounds[static_cast<std::size_t>(height * 2 - 1)];
  RgbImage tmp;
  const RgbImage* src = &in;
  std::int64_t shift = 0;
  if (horizontal) {
    tmp.width = width, tmp.height = last - first;
    tmp.rgb.resize(static_cast<std::size_t>(tmp.width * tmp.height * 3));
    resample_horizontal(tmp, in, first, ch);
    src = &tmp, shift = first;
  }
  if (!vertical) return horizontal ? tmp : in;
  RgbImage out;
  out.width = width, out.height = height;
  out.rgb.resize(static_cast<std::size_t>(width * height * 3));
  resample_vertical(out, *src, cv, shift);
  return out;
}

void pixel_size(const RgbImage& image, const hf::ImageProcessor& p, std::int64_t& height, std::int64_t& width) {
  height = p.resize ? p.height : image.height;
  width = p.resize ? p.width : image.width;
}

void pixel_values(float* out, const RgbImage& image, const hf::ImageProcessor& p) {
  std::int64_t H, W;
  pixel_size(image, p, H, W);
  const RgbImage sized = p.resize ? resize_like_pillow(image, W, H, p.resample, p.source) : image;
  for (int c = 0; c < 3; ++c) {
    const float mean = static_cast<float>(p.mean[static_cast<std::size_t>(c)]),
                sd = static_cast<float>(p.std[static_cast<std::size_t>(c)]);
    for (std::int64_t i = 0; i < H * W; ++i) {
      const std::uint8_t v = sized.rgb[static_cast<std::size_t>(i * 3 + c)];
      float x = p.rescale ? static_cast<float>(static_cast<double>(v) * p.rescale_factor) : static_cast<float>(v);
      if (p.normalize) x = (x - mean) / sd;
      out[c * H * W + i] = x;
    }
  }
}

} // namespace attn
