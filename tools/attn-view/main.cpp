// attn-view: look at tensors (CONTRACT.md section 5). A 2-D slice as a heatmap in the terminal,
// as numbers (--values) or as a PNG (--png), and --stats. Writes no HDF5.
#include "cli.hpp"

#include "attn/core/error.hpp"
#include "attn/view/image.hpp"
#include "attn/view/pixel_values.hpp"
#include "attn/view/view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sys/ioctl.h>
#include <unistd.h>
#include <variant>

namespace {

struct Options {
  std::string tensor;
  std::vector<std::int64_t> index;
  bool values = false, stats = false;
  std::string png, labels_x, labels_y, labels_from;
  std::int64_t row = 0;
  std::string colour = "auto";
  std::int64_t width = 0; // 0: the terminal's
  std::string over_image; // --over-image: a ViT's patch attention over its image
  std::int64_t query = 0;
  std::string grid;
};

// --over-image: row `query` of the (n, n) slice over keys 1..n-1, the patches of a gh x gw grid
// (--grid GHxGW, or the square that n - 1 is), as a picture over the image.
attn::TensorD patch_grid(const Options& o, const attn::TensorD& slice, const std::string& label) {
  const std::int64_t n = slice.dim(0), m = slice.dim(1);
  if (o.query >= n) throw attn::Error(fmt::format("--query {} is outside the {} queries of {}", o.query, n, label));
  std::int64_t gh = 0, gw = 0;
  if (!o.grid.empty()) {
    char x = 0;
    char tail = 0;
    if (std::sscanf(o.grid.c_str(), "%ld%c%ld%c", &gh, &x, &gw, &tail) != 3 || (x != 'x' && x != 'X') || gh <= 0 ||
        gw <= 0)
      throw attn::UsageError(fmt::format("--grid '{}': expected GHxGW, the patch rows and columns (as 14x14)", o.grid));
  } else {
    gh = gw = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(m - 1))));
    if (gh * gw != m - 1)
      throw attn::Error(
          fmt::format("{}: {} keys are not the class token and a square grid of patches; give --grid GHxGW", label, m));
  }
  if (1 + gh * gw != m)
    throw attn::Error(
        fmt::format("{}: {} keys, but the class token and a {} x {} grid are {}", label, m, gh, gw, 1 + gh * gw));
  attn::TensorD grid(attn::Shape{gh, gw});
  for (std::int64_t i = 0; i < gh * gw; ++i) grid.data()[i] = slice.data()[o.query * m + 1 + i];
  return grid;
}

// Colour when asked, or (auto) when standard output is a terminal that is not "dumb" and NO_COLOR
// is unset or empty (no-color.org).
bool use_colour(const std::string& mode) {
  if (mode != "auto") return mode == "always";
  const char* no_colour = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  return isatty(STDOUT_FILENO) && !(no_colour && *no_colour) && term && *term && std::string(term) != "dumb";
}

// --width, else $COLUMNS, else the terminal's width, else 80.
std::int64_t text_width(std::int64_t flag) {
  if (flag > 0) return flag;
  if (const char* columns = std::getenv("COLUMNS")) {
    char* end = nullptr;
    const long v = std::strtol(columns, &end, 10);
    if (end != columns && *end == '\0' && v > 0) return v;
  }
  winsize ws{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

void run(const Options& o, attn::cli::Tool& tool) {
  const attn::h5::TensorRef ref = tool.input_ref(o.tensor);
  if (!o.png.empty()) {
    if (o.png == "-" && (o.stats || o.values))
      throw attn::UsageError("--png - and the text of --stats/--values cannot share standard output");
    tool.check_file_output(o.png, "PNG");
  }
  if (!o.over_image.empty() && o.png.empty()) throw attn::UsageError("--over-image draws into --png FILE: give one");
  if (o.over_image.empty()) tool.forbid("attn-view without --over-image", {"--query", "--grid"});
  const attn::h5::Dataset ds = tool.inputs().open(ref);
  const bool draw = !o.png.empty() || o.values || !o.stats;
  if (ds.rank() == 1 && draw)
    throw attn::Error(fmt::format("{}: is 1-D, shape {}; attn-view draws 2-D slices of tensors of rank 2 or more "
                                  "(--stats alone summarises it)",
                                  ds.label(), attn::shape_str(ds.shape())));
  const bool index_given = tool.given("--index");
  const attn::Shape index = attn::view::slice_index(ds, index_given ? std::optional(o.index) : std::nullopt);
  // The slice's shape (rows, columns); a 1-D tensor is one row.
  const attn::Shape slice_shape{ds.rank() >= 2 ? ds.shape()[ds.rank() - 2] : 1, ds.shape().back()};
  // --stats of the whole tensor reads it slice by slice itself; the picked slice is read only when
  // something shows it.
  const bool whole_stats = o.stats && !index_given && ds.rank() > 2;
  attn::cli::Stopwatch clock;
  attn::TensorD slice;
  if (draw || !whole_stats) {
    slice = ds.read_slice(index);
    tool.log("read {} {} slice {} in {:.3f} s", ds.label(), attn::shape_str(ds.shape()), attn::shape_str(slice.shape()),
             clock.seconds());
  }
  const std::string where = index.empty() ? "" : fmt::format("[{}]", fmt::join(index, ", "));
  const std::string title =
      fmt::format("{}{}{} {}", ds.label(), where.empty() ? "" : " ", where, attn::shape_str(slice_shape));

  std::vector<std::string> labels_x, labels_y;
  if (!o.labels_x.empty()) labels_x = attn::view::read_labels(o.labels_x, slice_shape[1], "--labels-x");
  if (!o.labels_y.empty()) labels_y = attn::view::read_labels(o.labels_y, slice_shape[0], "--labels-y");
  if (!o.labels_from.empty()) { // a token file's pieces on both axes (an axis with its own flag keeps it)
    attn::h5::TensorRef ref = tool.input_ref(o.labels_from);
    if (ref.name.empty()) ref.name = "pieces";
    const attn::h5::Strings pieces = tool.inputs().read_strings(ref);
    const auto attr = tool.inputs().attribute(ref.path, attn::h5::normalize_path(ref.name), "byte_level");
    const bool byte_level = attr && std::holds_alternative<std::int64_t>(*attr) && std::get<std::int64_t>(*attr) != 0;
    if (o.labels_x.empty())
      labels_x = attn::view::labels_from_pieces(pieces, o.row, byte_level, slice_shape[1], "--labels-from");
    if (o.labels_y.empty())
      labels_y = attn::view::labels_from_pieces(pieces, o.row, byte_level, slice_shape[0], "--labels-from");
  }
  const attn::view::TextOptions text{use_colour(o.colour), text_width(o.width)};

  if (o.stats) {
    // The picked slice with its per-query entropy, or the whole tensor summarised.
    if (!whole_stats) {
      attn::view::StatsBuilder b(ds.rank() == 1 ? ds.shape() : slice.shape());
      b.add(slice.data(), slice.dim(0), slice.dim(1));
      const auto entropy = attn::view::row_entropy(slice);
      fmt::print("{}", attn::view::stats_text(ds.label(), ds.type_name(), ds.shape(), where, b.finish(), &entropy));
    } else {
      std::optional<attn::cli::Progress> progress;
      const auto stats = attn::view::summarise(ds, [&](std::int64_t done, std::int64_t total) {
        if (!progress) progress.emplace(tool, "slices", total);
        progress->update(done);
      });
      progress.reset(); // ends the progress line before the report
      fmt::print("{}", attn::view::stats_text(ds.label(), ds.type_name(), ds.shape(), "", stats, nullptr));
    }
  }
  if (o.values) fmt::print("{}\n{}", title, attn::view::values_text(slice, labels_x, labels_y, text));
  if (!o.over_image.empty()) {
    const attn::TensorD grid = patch_grid(o, slice, title);
    const attn::RgbImage photo = attn::read_png_rgb(o.over_image);
    attn::image::Image img;
    img.width = photo.width, img.height = photo.height, img.rgb = photo.rgb;
    const std::string heading = fmt::format("{} query {}", title, o.query);
    attn::image::write_png(attn::image::render_over_image(img, grid, heading), o.png);
    tool.log("wrote {} in {:.3f} s", o.png == "-" ? "standard output" : o.png, clock.seconds());
  } else if (!o.png.empty()) {
    attn::image::write_png(attn::image::render_heatmap(slice, {title, labels_x, labels_y}), o.png);
    std::vector<std::string> all = labels_x;
    all.insert(all.end(), labels_y.begin(), labels_y.end());
    if (const auto odd = attn::image::undrawable_characters(all); !odd.empty())
      attn::cli::to_stderr(fmt::format("attn-view: note: the PNG's labels show {} character{} outside ASCII as '?' "
                                       "({}{}); --values and the terminal heatmap show them as they are\n",
                                       odd.size(), odd.size() == 1 ? "" : "s",
                                       fmt::join(odd.begin(), odd.begin() + std::min<std::size_t>(odd.size(), 8), " "),
                                       odd.size() > 8 ? " ..." : ""));
    tool.log("wrote {} in {:.3f} s", o.png == "-" ? "standard output" : o.png, clock.seconds());
  }
  if (!o.stats && !o.values && o.png.empty()) {
    std::string heading = title;
    if (!index_given && !index.empty()) heading += "  (--index picks another slice)";
    fmt::print("{}", attn::view::heatmap_text(slice, heading, text));
  }
  std::fflush(stdout);
  if (std::ferror(stdout)) throw attn::Error("cannot write to standard output");
}

} // namespace

int main(int argc, char** argv) {
  attn::cli::Tool tool("attn-view",
                       "Look at a tensor: a 2-D slice as a terminal heatmap, as numbers or as a PNG, and statistics.",
                       /*hdf5_output=*/false);
  Options o;
  auto& app = tool.app();
  app.add_option("tensor,--tensor", o.tensor, "The tensor, PATH[:NAME] ('-' = standard input)")
      ->required()
      ->type_name("PATH[:NAME]");
  app.add_option("--index", o.index,
                 "Leading indices of the 2-D slice, comma-separated (b,h of (b, h, n, m); negative from the end)")
      ->delimiter(',')
      ->type_name("I,J,...");
  app.add_flag("--values", o.values, "Print the numbers of the slice instead of the heatmap");
  app.add_flag("--stats", o.stats,
               "Print shape, min, max, mean, NaN/Inf count, the row-sum check and attention entropy per query");
  app.add_option("--png", o.png, "Write the slice as a PNG heatmap with colour bar and labels ('-' = standard output)")
      ->type_name("FILE");
  app.add_option("--labels-x", o.labels_x, "Column (key) labels: comma-separated, or a file with one label per line")
      ->type_name("LIST|FILE");
  app.add_option("--labels-y", o.labels_y, "Row (query) labels: comma-separated, or a file with one label per line")
      ->type_name("LIST|FILE");
  app.add_option("--labels-from", o.labels_from,
                 "Label both axes with the tokens of a tokenize output (its /pieces), byte-level pieces as text")
      ->type_name("FILE[:NAME]");
  app.add_option("--row", o.row, "The row (sequence) of --labels-from's pieces (default 0)")
      ->check(attn::cli::non_negative());
  app.add_option("--color,--colour", o.colour,
                 "Colour in the terminal: auto (a terminal and no NO_COLOR), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  app.add_option("--over-image", o.over_image,
                 "With --png: a ViT's patch attention (one query's weights over the patches) over its PNG image")
      ->type_name("PNG");
  app.add_option("--query", o.query, "With --over-image: the query row (default 0, the class token)")
      ->check(attn::cli::non_negative());
  app.add_option("--grid", o.grid, "With --over-image: the patch grid GHxGW (default: square)")->type_name("GHxGW");
  app.add_option("--width", o.width, "Terminal columns for the heatmap (default: $COLUMNS or the terminal's)")
      ->check(attn::cli::positive());
  // CLI11 reads a lone "-:NAME" (a dataset of standard input) as a short option; as the value of
  // --tensor it is the positional argument. No other option of attn-view takes a tensor.
  std::vector<std::string> args(argv, argv + argc);
  for (std::size_t i = 1; i < args.size(); ++i)
    if (args[i].rfind("-:", 0) == 0) args[i] = "--tensor=" + args[i];
  std::vector<char*> ptrs;
  for (auto& a : args) ptrs.push_back(a.data());
  return tool.run(argc, ptrs.data(), [&] { run(o, tool); });
}
