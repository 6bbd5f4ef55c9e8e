// Unit tests of lib/src/view/pixel_values.cpp and lib/src/hf/image_processor.cpp: PNGs to RGB as
// Pillow converts them, Pillow's resampling and ViTImageProcessor's arithmetic, to the bit, against
// testdata/vit.h5's /images (tests/golden/make_vit_goldens.py, with Pillow).
#include "attn/core/error.hpp"
#include "attn/h5/h5io.hpp"
#include "attn/hf/image_processor.hpp"
#include "attn/view/pixel_values.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

using namespace attn;

namespace {
Tensor golden(const std::string& name) {
  h5::InputFiles in;
  return in.open({test::testdata("vit.h5"), name}).read_floats<float>(false);
}
} // namespace

TEST_CASE("pixel_values: Pillow's convert, resize and ViTImageProcessor's float32 steps, to the bit") {
  const hf::ImageProcessor proc = hf::read_image_processor(test::testdata("hf/vit_cls/preprocessor_config.json"));
  CHECK(proc.height == 32);
  CHECK(proc.resample == hf::Resample::Bilinear);
  CHECK(proc.mean[1] == 0.456);
  const Tensor want = golden("/images/bilinear"); // (5, 3, 32, 32)
  const char* names[] = {"rgb", "palette", "gray", "rgba", "gray1"};
  for (int i = 0; i < 5; ++i) {
    CAPTURE(names[i]);
    const RgbImage img = read_png_rgb(test::testdata(std::string("images/") + names[i] + ".png"));
    Tensor got(Shape{3, 32, 32});
    pixel_values(got.data(), img, proc);
    CHECK(test::max_abs_diff(got.span(), std::span<const float>(want.data() + i * 3 * 32 * 32, 3 * 32 * 32)) == 0.0);
  }
  for (const char* filter : {"bicubic", "lanczos", "box", "hamming"}) {
    CAPTURE(filter);
    const hf::ImageProcessor p =
        hf::read_image_processor(test::testdata(std::string("images/processor_") + filter + ".json"));
    Tensor got(Shape{3, 32, 32});
    pixel_values(got.data(), read_png_rgb(test::testdata("images/rgb.png")), p);
    CHECK(test::max_abs_diff(got.span(), golden(std::string("/images/rgb_") + filter).span()) == 0.0);
  }
}

TEST_CASE("resize: the same size is the image itself; nearest and 16-bit PNGs are refused by name") {
  const RgbImage img = read_png_rgb(test::testdata("images/rgb.png"));
  CHECK(img.width == 40);
  CHECK(img.height == 36);
  const RgbImage same = resize_like_pillow(img, 40, 36, hf::Resample::Bicubic, "p");
  CHECK(same.rgb == img.rgb);
  CHECK_THROWS_WITH_AS(resize_like_pillow(img, 20, 18, hf::Resample::Nearest, "p.json"),
                       doctest::Contains("p.json: resample 0 (nearest) is not computed"), Error);
  CHECK_THROWS_WITH_AS(read_png_rgb(test::testdata("images/gray16.png")), doctest::Contains("a 16-bit PNG"), Error);
}
