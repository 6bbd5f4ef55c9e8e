// Images into pixel_values as a Hugging Face image processor makes them (hf/image_processor.hpp):
// a PNG read and converted to RGB as Pillow's Image.convert("RGB") does, resized with Pillow's
// resampling (its 8-bit fixed-point convolution, so the pixels are Pillow's), rescaled and
// normalised in float32 as transformers' image_transforms do.
#pragma once

#include "attn/core/tensor.hpp"
#include "attn/hf/image_processor.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace attn {

struct RgbImage {
  std::int64_t width = 0, height = 0;
  std::vector<std::uint8_t> rgb; // (height, width, 3)
};

// An 8-bit (or 1, 2, 4-bit grey or palette) PNG as RGB: grey replicated, palette colours looked up,
// alpha dropped (Pillow's convert("RGB"); no gamma applied). A 16-bit PNG is refused (Pillow
// opens those in modes whose RGB conversion clips rather than scales), as is anything not a PNG;
// each error names the file.
RgbImage read_png_rgb(const std::string& path);

// The image resized to width x height as Pillow's Image.resize with `filter` does (Lanczos,
// bilinear, bicubic, box, Hamming: a horizontal then a vertical pass of 8-bit fixed-point
// convolutions with support scaled by the reduction); nearest is refused (Error naming `source`).
RgbImage resize_like_pillow(const RgbImage& in, std::int64_t width, std::int64_t height, hf::Resample filter,
                            const std::string& source);

// out (3, H, W): the processor's steps on the image: resize (when do_resize), then per channel
// x = float32(v * rescale_factor) (when do_rescale), then (x - mean) / std in float32 (when
// do_normalize).
void pixel_values(float* out, const RgbImage& image, const hf::ImageProcessor& p);
// The size pixel_values makes of `image`: the processor's, or the image's own without do_resize.
void pixel_size(const RgbImage& image, const hf::ImageProcessor& p, std::int64_t& height, std::int64_t& width);

} // namespace attn
