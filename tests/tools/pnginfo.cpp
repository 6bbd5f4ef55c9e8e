// pnginfo FILE [X Y]: prints "WIDTH HEIGHT COLOURS" of a PNG (COLOURS: distinct RGB values), or
// with X Y the pixel there as "R G B". Decodes with libpng (lib/image), for the CLI tests.
#include "attn/core/error.hpp"
#include "attn/view/image.hpp"

#include <fmt/format.h>

#include <set>
#include <string>
#include <tuple>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    fmt::print(stderr, "usage: pnginfo FILE [X Y]\n");
    return 2;
  }
  try {
    const attn::image::Image img = attn::image::read_png(argv[1]);
    if (argc == 4) {
      const auto c = img.at(std::stoll(argv[2]), std::stoll(argv[3]));
      fmt::print("{} {} {}\n", c.r, c.g, c.b);
      return 0;
    }
    std::set<std::tuple<int, int, int>> colours;
    for (std::int64_t y = 0; y < img.height; ++y)
      for (std::int64_t x = 0; x < img.width; ++x) {
        const auto c = img.at(x, y);
        colours.insert({c.r, c.g, c.b});
      }
    fmt::print("{} {} {}\n", img.width, img.height, colours.size());
  } catch (const std::exception& e) {
    fmt::print(stderr, "pnginfo: {}\n", e.what());
    return 1;
  }
  return 0;
}
