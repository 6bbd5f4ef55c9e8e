// attn-view's maths: slices, statistics, row sums, entropy, text heatmaps (view.hpp).
#include "attn/view/view.hpp"

#include "attn/text/tokenizer.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <limits>

namespace attn::view {

// --- statistics --------------------------------------------------------------------------------

StatsBuilder::StatsBuilder(Shape shape) {
  s_.shape = std::move(shape);
  s_.min = std::numeric_limits<double>::infinity();
  s_.max = -std::numeric_limits<double>::infinity();
  s_.entropy_min = std::numeric_limits<double>::infinity();
  s_.entropy_max = -std::numeric_limits<double>::infinity();
}

void StatsBuilder::add(const double* data, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r, ++s_.rows) {
    const double* row = data + r * cols;
    double sum = 0, entropy = 0;
    bool zero = true;
    for (std::int64_t j = 0; j < cols; ++j) {
      const double v = row[j];
      if (!std::isfinite(v)) {
        (std::isnan(v) ? s_.nan : s_.inf)++;
        if (s_.first_nonfinite < 0) s_.first_nonfinite = seen_ + r * cols + j;
        s_.nonnegative = s_.nonnegative && v > 0;
        zero = false;
        continue;
      }
      s_.min = std::min(s_.min, v);
      s_.max = std::max(s_.max, v);
      sum_ += v;
      ++s_.finite;
      sum += v;
      zero = zero && v == 0;
      if (v < 0) s_.nonnegative = false;
      if (v > 0) entropy -= v * std::log(v);
    }
    if (zero) {
      ++s_.zero_rows;
      continue;
    }
    const double error = std::abs(sum - 1);
    if (!(error <= row_sum_tolerance)) ++s_.rows_off;
    if (!(error <= s_.worst_sum_error) || s_.worst_row < 0) {
      s_.worst_sum_error = std::isfinite(error) ? error : std::numeric_limits<double>::infinity();
      s_.worst_row = s_.rows;
    }
    s_.entropy_min = std::min(s_.entropy_min, entropy);
    s_.entropy_max = std::max(s_.entropy_max, entropy);
    entropy_sum_ += entropy;
    ++entropy_rows_;
  }
  seen_ += rows * cols;
  s_.count = seen_;
}

Stats StatsBuilder::finish() const {
  Stats s = s_;
  if (s.finite == 0) s.min = s.max = 0;
  s.mean = s.finite ? sum_ / static_cast<double>(s.finite) : 0;
  if (entropy_rows_ == 0) {
    s.entropy_min = s.entropy_max = 0;
  } else {
    s.entropy_mean = entropy_sum_ / static_cast<double>(entropy_rows_);
  }
  return s;
}

Stats summarise(const h5::Dataset& ds, const std::function<void(std::int64_t, std::int64_t)>& progress) {
  const Shape& shape = ds.shape();
  const int lead = std::max(ds.rank() - 2, 0);
  StatsBuilder stats(shape);
  Shape index(static_cast<std::size_t>(lead), 0);
  std::int64_t slices = 1, done = 0;
  for (int a = 0; a < lead; ++a) slices *= shape[a]; // no overflow: the whole count fits in 64 bits
  for (;;) {
    const TensorD slice = ds.read_slice(index);
    stats.add(slice.data(), slice.dim(0), slice.dim(1));
    if (progress) progress(++done, slices);
    // The next leading index in C order.
    int a = lead - 1;
    while (a >= 0 && ++index[a] == shape[a]) index[a--] = 0;
    if (a < 0) break;
  }
  return stats.finish();
}

Shape slice_index(const h5::Dataset& ds, const std::optional<std::vector<std::int64_t>>& given) {
  const int lead = std::max(ds.rank() - 2, 0);
  if (!given) return Shape(static_cast<std::size_t>(lead), 0);
  if (static_cast<int>(given->size()) != lead)
    throw Error(fmt::format("--index {}: {} has shape {}, so --index takes {} ind{} (the axes before the last two)",
                            fmt::join(*given, ","), ds.label(), shape_str(ds.shape()), lead,
                            lead == 1 ? "ex" : "ices"));
  Shape index = *given;
  for (int a = 0; a < lead; ++a) {
    const std::int64_t size = ds.shape()[a];
    if (index[a] < -size || index[a] >= size)
      throw Error(fmt::format("--index {}: index {} is out of range for axis {} of {} (size {}, shape {})",
                              fmt::join(*given, ","), index[a], a, ds.label(), size, shape_str(ds.shape())));
    if (index[a] < 0) index[a] += size;
  }
  return index;
}

std::vector<double> row_entropy(const TensorD& m) {
  std::vector<double> h(static_cast<std::size_t>(m.dim(0)), 0.0);
  for (std::int64_t i = 0; i < m.dim(0); ++i) {
    const double* row = m.data() + i * m.dim(1);
    for (std::int64_t j = 0; j < m.dim(1); ++j)
      if (row[j] > 0) h[i] -= row[j] * std::log(row[j]);
  }
  return h;
}

namespace {

// Shortest round-trip-ish form for reports: 6 significant digits.
std::string num(double v) { return fmt::format("{:.6g}", v); }

} // namespace

std::string stats_text(const std::string& label, const std::string& type, const Shape& shape, const std::string& slice,
                       const Stats& s, const std::vector<double>* per_row) {
  std::string out;
  auto line = [&](std::string_view key, const std::string& value) { out += fmt::format("{:<10}{}\n", key, value); };
  line("tensor", fmt::format("{} {} {}", label, type, shape_str(shape)));
  if (!slice.empty()) line("slice", fmt::format("{} {}", slice, shape_str(s.shape)));
  line("values", fmt::format("{} ({} finite)", s.count, s.finite));
  line("min", num(s.min));
  line("max", num(s.max));
  line("mean", num(s.mean));
  std::string bad = fmt::format("{} NaN, {} Inf", s.nan, s.inf);
  if (s.first_nonfinite >= 0) bad += fmt::format(" (first at {})", index_str(s.shape, s.first_nonfinite));
  line("nonfinite", bad);
  const std::int64_t m = s.shape.back();
  const Shape row_shape(s.shape.begin(), s.shape.end() - 1);
  auto row_name = [&](std::int64_t r) { return row_shape.empty() ? std::string("[0]") : index_str(row_shape, r); };
  std::string sums;
  if (s.rows_off == 0 && s.nan + s.inf == 0) {
    sums = fmt::format("{} rows of {}: all sum to 1 within {:g}", s.rows, m, row_sum_tolerance);
  } else {
    sums = fmt::format("{} rows of {}: {} do not sum to 1 within {:g}", s.rows, m, s.rows_off, row_sum_tolerance);
  }
  if (s.worst_row >= 0)
    sums += fmt::format(" (worst |sum - 1| = {:.3g} at row {})", s.worst_sum_error, row_name(s.worst_row));
  if (s.zero_rows) sums += fmt::format("; {} all-zero rows (fully masked queries)", s.zero_rows);
  line("row sums", sums);
  if (!s.distributions()) {
    line("entropy", "not shown: the rows are not probability distributions (attention weights)");
    return out;
  }
  const std::string uniform = fmt::format("nats; uniform over {} keys = {}", m, num(std::log(static_cast<double>(m))));
  if (s.rows == s.zero_rows) {
    line("entropy", "not shown: every row is zero");
  } else if (per_row == nullptr) {
    line("entropy", fmt::format("min {}, mean {}, max {} ({})", num(s.entropy_min), num(s.entropy_mean),
                                num(s.entropy_max), uniform));
  } else {
    line("entropy", fmt::format("per query ({}):", uniform));
    for (std::size_t i = 0; i < per_row->size(); ++i) out += fmt::format("  {:>6} {}\n", i, num((*per_row)[i]));
  }
  return out;
}

// --- colour ------------------------------------------------------------------------------------

namespace {

constexpr std::array<Rgb, 256> viridis_table{{
#include "view/viridis_table.inc"
}};

} // namespace

Rgb viridis(double t) {
  if (!(t > 0)) return viridis_table.front();
  if (t >= 1) return viridis_table.back();
  // Linear interpolation between the 256 entries.
  const double x = t * 255;
  const int i = static_cast<int>(x);
  const double f = x - i;
  const Rgb a = viridis_table[i], b = viridis_table[std::min(i + 1, 255)];
  auto mix = [f](std::uint8_t u, std::uint8_t v) { return static_cast<std::uint8_t>(std::lround(u + (v - u) * f)); };
  return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
}

double Range::position(double v) const {
  if (!(hi > lo)) return 0.5;
  return std::clamp((v - lo) / (hi - lo), 0.0, 1.0);
}

Range finite_range(const TensorD& m) {
  Range r{std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (double v : m.span()) {
    if (!std::isfinite(v)) continue;
    r.lo = std::min(r.lo, v);
    r.hi = std::max(r.hi, v);
  }
  if (r.lo > r.hi) return {0, 1};
  return r;
}

TensorD pool(const TensorD& m, std::int64_t factor) {
  if (factor <= 1) return m;
  const std::int64_t n = m.dim(0), k = m.dim(1);
  const std::int64_t pn = (n + factor - 1) / factor, pk = (k + factor - 1) / factor;
  TensorD out(Shape{pn, pk});
  for (std::int64_t bi = 0; bi < pn; ++bi)
    for (std::int64_t bj = 0; bj < pk; ++bj) {
      double sum = 0;
      std::int64_t cells = 0;
      for (std::int64_t i = bi * factor; i < std::min(n, (bi + 1) * factor); ++i)
        for (std::int64_t j = bj * factor; j < std::min(k, (bj + 1) * factor); ++j, ++cells)
          sum += std::isfinite(m[i * k + j]) ? m[i * k + j] : std::numeric_limits<double>::quiet_NaN();
      out[bi * pk + bj] = sum / static_cast<double>(cells);
    }
  return out;
}

std::int64_t fit_factor(std::int64_t cols, std::int64_t width) {
  width = std::max<std::int64_t>(width, 1);
  return std::max<std::int64_t>(1, (cols + width - 1) / width);
}

// --- text --------------------------------------------------------------------------------------

namespace {

constexpr std::string_view ramp = " .:-=+*#%@";

Rgb colour_of(double v, const Range& r) { return std::isfinite(v) ? viridis(r.position(v)) : nonfinite_colour; }

char ramp_char(double v, const Range& r) {
  if (!std::isfinite(v)) return '!';
  const auto i = static_cast<std::size_t>(std::lround(r.position(v) * (ramp.size() - 1)));
  return ramp[std::min(i, ramp.size() - 1)];
}

std::string fg(Rgb c) { return fmt::format("\x1b[38;2;{};{};{}m", c.r, c.g, c.b); }
std::string bg(Rgb c) { return fmt::format("\x1b[48;2;{};{};{}m", c.r, c.g, c.b); }
constexpr std::string_view reset = "\x1b[0m";
constexpr std::string_view upper_half = "\u2580"; // ▀

// The scale line: "lo <gradient> hi".
std::string scale_line(const Range& r, const TextOptions& o) {
  std::string s = num(r.lo) + " ";
  if (o.colour) {
    for (int i = 0; i < 32; ++i) s += bg(viridis(i / 31.0)) + " ";
    s += std::string(reset);
  } else {
    for (char c : ramp) s += std::string(2, c == ' ' ? ' ' : c);
  }
  return s + " " + num(r.hi) +
         (o.colour ? "   NaN/Inf: " + bg(nonfinite_colour) + "  " + std::string(reset) : "   NaN/Inf: !!") + "\n";
}

} // namespace

std::string heatmap_text(const TensorD& m, const std::string& title, const TextOptions& o) {
  const Range r = finite_range(m);
  // Colour: one column per character. Plain: two characters per cell, so cells look square.
  const std::int64_t factor = fit_factor(m.dim(1), o.colour ? o.width : o.width / 2);
  const TensorD p = pool(m, factor);
  const std::int64_t n = p.dim(0), k = p.dim(1);
  std::string out = title;
  if (factor > 1) out += fmt::format("  [shown as means of {}x{} blocks]", factor, factor);
  out += "\n";
  if (o.colour) {
    for (std::int64_t i = 0; i < n; i += 2) {
      for (std::int64_t j = 0; j < k; ++j) {
        out += fg(colour_of(p[i * k + j], r));
        out += i + 1 < n ? bg(colour_of(p[(i + 1) * k + j], r)) : std::string("\x1b[49m");
        out += upper_half;
      }
      out += std::string(reset) + "\n";
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = 0; j < k; ++j) out += std::string(2, ramp_char(p[i * k + j], r));
      out += "\n";
    }
  }
  return out + scale_line(r, o);
}

std::string values_text(const TensorD& m, const std::vector<std::string>& labels_x,
                        const std::vector<std::string>& labels_y, const TextOptions& o) {
  const std::int64_t n = m.dim(0), k = m.dim(1);
  const Range r = finite_range(m);
  auto x_label = [&](std::int64_t j) { return labels_x.empty() ? std::to_string(j) : labels_x[j]; };
  auto y_label = [&](std::int64_t i) { return labels_y.empty() ? std::to_string(i) : labels_y[i]; };
  std::size_t cell = 10, head = 1;
  for (std::int64_t j = 0; j < k; ++j) cell = std::max(cell, x_label(j).size() + 1);
  for (std::int64_t i = 0; i < n; ++i) head = std::max(head, y_label(i).size());
  std::string out = std::string(head, ' ');
  for (std::int64_t j = 0; j < k; ++j) out += fmt::format("{:>{}}", x_label(j), cell);
  out += "\n";
  for (std::int64_t i = 0; i < n; ++i) {
    out += fmt::format("{:<{}}", y_label(i), head);
    for (std::int64_t j = 0; j < k; ++j) {
      const double v = m[i * k + j];
      const std::string text = fmt::format("{:>{}}", fmt::format("{:.4g}", v), cell);
      if (!o.colour) {
        out += text;
        continue;
      }
      const Rgb c = colour_of(v, r);
      // Dark text on light cells, light text on dark ones (ITU-R BT.601 luma).
      const bool light = 0.299 * c.r + 0.587 * c.g + 0.114 * c.b > 128;
      out += bg(c) + fg(light ? Rgb{0, 0, 0} : Rgb{255, 255, 255}) + text + std::string(reset);
    }
    out += "\n";
  }
  return out;
}

std::vector<std::string> read_labels(const std::string& arg, std::int64_t size, const std::string& flag) {
  std::vector<std::string> labels;
  std::ifstream file(arg);
  std::string source;
  if (file) {
    for (std::string line; std::getline(file, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      labels.push_back(line);
    }
    // A final empty line is the file's last newline, not a label.
    while (!labels.empty() && labels.back().empty() && static_cast<std::int64_t>(labels.size()) > size)
      labels.pop_back();
    source = fmt::format("{} ({}, one label per line)", flag, arg);
  } else {
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = arg.find(',', start);
      labels.push_back(arg.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    source = flag;
  }
  if (static_cast<std::int64_t>(labels.size()) != size)
    throw Error(fmt::format("{} gives {} labels; the axis has {}", source, labels.size(), size));
  return labels;
}

} // namespace attn::view

namespace attn::view {

std::vector<std::string> labels_from_pieces(const h5::Strings& pieces, std::int64_t row, bool byte_level,
                                            std::int64_t size, const std::string& flag) {
  const std::int64_t rows = pieces.shape.size() == 2 ? pieces.shape[0] : 1, n = pieces.shape.back();
  if (row < 0 || row >= rows)
    throw Error(fmt::format("--row {} is outside the {} rows of {}", row, rows, pieces.label));
  if (n != size) throw Error(fmt::format("{} ({}) gives {} labels; the axis has {}", flag, pieces.label, n, size));
  std::vector<std::string> out;
  for (std::int64_t j = 0; j < n; ++j) out.push_back(text::display_piece(pieces.values[row * n + j], byte_level));
  return out;
}

} // namespace attn::view
