// Looking at tensors (attn-view, CONTRACT.md section 5): statistics, a viridis colour scale, and a
// 2-D slice drawn as text, either a heatmap of Unicode half blocks in 24-bit colour (or plain
// characters) or a table of numbers. The PNG form is in attn/image.hpp.
#pragma once

#include "attn/core/tensor.hpp"
#include "attn/h5/h5io.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace attn::view {

// --- statistics --------------------------------------------------------------------------------

// Rows whose sum is within this of 1 pass the row-sum check of attention weights.
inline constexpr double row_sum_tolerance = 1e-4;

// Summary of a tensor, or of one 2-D slice of it, seen as rows along its last axis (for attention
// weights (b, h, n, m): one row per query, summing to 1 over the m keys).
struct Stats {
  Shape shape;             // of what was summarised
  std::int64_t count = 0;  // values
  std::int64_t finite = 0; // of them, finite
  double min = 0, max = 0; // over the finite values
  double mean = 0;         // over the finite values
  std::int64_t nan = 0, inf = 0;
  std::int64_t first_nonfinite = -1; // flat index, or -1
  // Rows along the last axis.
  std::int64_t rows = 0;
  std::int64_t zero_rows = 0;  // all zero: fully masked queries (CONTRACT.md section 2)
  std::int64_t rows_off = 0;   // other rows whose sum is not within row_sum_tolerance of 1
  double worst_sum_error = 0;  // max |sum - 1| over the non-zero rows
  std::int64_t worst_row = -1; // its row index (flat over the leading axes), or -1
  bool nonnegative = true;     // every value >= 0 (NaN counts as not)
  // Entropy -sum p ln p (nats) of each non-zero row, when every row is a distribution
  // (nonnegative, finite, summing to 1 or all zero). Uniform over m keys gives ln m.
  bool distributions() const { return nan + inf == 0 && nonnegative && rows_off == 0; }
  double entropy_min = 0, entropy_mean = 0, entropy_max = 0;
};

// Accumulates Stats over the 2-D slices of a tensor, in C order.
class StatsBuilder {
public:
  explicit StatsBuilder(Shape shape);
  // The next `rows` rows of `cols` values (C order continues from the previous call).
  void add(const double* data, std::int64_t rows, std::int64_t cols);
  Stats finish() const;

private:
  Stats s_;
  double sum_ = 0, entropy_sum_ = 0;
  std::int64_t entropy_rows_ = 0, seen_ = 0;
};

// Stats of a whole dataset of any rank, read one 2-D slice at a time (a 1-D dataset is one row).
// `progress(done, total)` is called after each slice when given.
Stats summarise(const h5::Dataset& ds, const std::function<void(std::int64_t done, std::int64_t total)>& progress = {});

// -sum p ln p per row (nats; 0 ln 0 = 0). Meaningful for rows that are distributions.
std::vector<double> row_entropy(const TensorD& m);

// The report attn-view --stats prints for tensor `label` of element `type` and `shape`: `s` covers
// the whole tensor, or the slice `slice` ("[0, 1]") when not empty. Per-query entropy is listed
// when `per_row` is given, else summarised.
std::string stats_text(const std::string& label, const std::string& type, const Shape& shape, const std::string& slice,
                       const Stats& s, const std::vector<double>* per_row);

// The leading indices of a 2-D slice of `ds` from --index: one per leading axis (rank - 2),
// negative ones counting from the end as in NumPy; nullopt (not given) picks the first slice.
// A wrong count or an index out of range is an Error naming the axis and its size.
Shape slice_index(const h5::Dataset& ds, const std::optional<std::vector<std::int64_t>>& given);

// --- colour ------------------------------------------------------------------------------------

struct Rgb {
  std::uint8_t r, g, b;
  bool operator==(const Rgb&) const = default;
};

// matplotlib's viridis (perceptually uniform, readable in grey and by colour-blind readers) at
// t in [0, 1] (clamped).
Rgb viridis(double t);
// The colour of non-finite values (NaN, Inf): bright red, outside viridis.
inline constexpr Rgb nonfinite_colour{230, 30, 30};

// The colour scale's range: min and max of the finite values (lo == hi when constant; {0, 1}
// when there are none).
struct Range {
  double lo = 0, hi = 1;
  // Position of v in the range, in [0, 1] (0.5 for a constant tensor).
  double position(double v) const;
};
Range finite_range(const TensorD& m);

// Block means over `factor` x `factor` cells (edge blocks may be smaller); a block holding NaN or
// Inf becomes NaN, so the problem stays visible.
TensorD pool(const TensorD& m, std::int64_t factor);
// The smallest block size that makes `cols` columns fit `width`.
std::int64_t fit_factor(std::int64_t cols, std::int64_t width);

// --- text --------------------------------------------------------------------------------------

struct TextOptions {
  bool colour = true;      // 24-bit ANSI colour and half blocks; else plain characters
  std::int64_t width = 80; // terminal columns
};

// The heatmap of `m` (n, m) under `title`: in colour one character per column and two rows per
// line (upper half block: foreground, lower: background); plain, two characters per cell from the
// ramp " .:-=+*#%@" ('!' for NaN/Inf). Pooled to fit the width, said in the title line; ends with
// the colour scale and its range.
std::string heatmap_text(const TensorD& m, const std::string& title, const TextOptions& o);

// The numbers of `m` as a table with column and row headers (labels, or indices when empty), each
// on its colour's background when o.colour.
std::string values_text(const TensorD& m, const std::vector<std::string>& labels_x,
                        const std::vector<std::string>& labels_y, const TextOptions& o);

// Labels from a token file's pieces (tokenize's /pieces, (b, n) or (n,)): row `row`'s tokens as
// text (text::display_piece; byte-level when the dataset's byte_level attribute says so), one per
// position of an axis of `size`; `flag` and the dataset name the errors.
std::vector<std::string> labels_from_pieces(const h5::Strings& pieces, std::int64_t row, bool byte_level,
                                            std::int64_t size, const std::string& flag);

// Token labels of an axis of `size` entries: one per line of the file `arg` when it names one,
// else `arg` split at commas. A count other than `size` is an Error naming `flag`.
std::vector<std::string> read_labels(const std::string& arg, std::int64_t size, const std::string& flag);

} // namespace attn::view
