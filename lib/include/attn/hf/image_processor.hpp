// A Hugging Face image processor's settings (preprocessor_config.json, ViTImageProcessor's keys):
// how an image becomes pixel_values. The pixels themselves are view/pixel_values.hpp's.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace attn::hf {

// Pillow's resampling filters by their numbers (Image.Resampling).
enum class Resample { Nearest = 0, Lanczos = 1, Bilinear = 2, Bicubic = 3, Box = 4, Hamming = 5 };

struct ImageProcessor {
  bool resize = true;                     // do_resize
  std::int64_t height = 224, width = 224; // size: {"height", "width"}
  Resample resample = Resample::Bilinear;
  bool rescale = true;                                           // do_rescale
  double rescale_factor = 1.0 / 255;                             // rescale_factor
  bool normalize = true;                                         // do_normalize
  std::array<double, 3> mean{0.5, 0.5, 0.5}, std{0.5, 0.5, 0.5}; // image_mean, image_std
  std::string source;                                            // the file read, or what the defaults came from
};

// preprocessor_config.json: the keys above, ViTImageProcessor's defaults for those absent. A size
// as shortest_edge, a resample filter other than Pillow's six, a mean or std that is not three
// numbers (std positive), or an image_processor_type other than ViTImageProcessor's family is an
// Error naming the file and the key.
ImageProcessor read_image_processor(const std::string& path);

} // namespace attn::hf
