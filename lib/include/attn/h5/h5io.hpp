// Tensor files: CONTRACT.md section 1, in one place.
//
//   PATH[:NAME]   PATH "-" is standard input (read once, held as an HDF5 file image and shared by
//                 every "-" argument) or standard output (written as one file image).
//   Resolution    NAME names a dataset, or a group that resolves through its `default` attribute
//                 (followed through nested groups). Without NAME: the file's only dataset, else the
//                 root's `default`, else an error listing the datasets present.
//   Outputs       written to a temporary file and renamed on success (or streamed to standard
//                 output); root attributes `creator`, `command` and `default`; `-o FILE:NAME` keeps
//                 FILE's other datasets and writes further outputs beside NAME.
//
// HDF5's own error printing is silenced; every HDF5 call is checked and becomes an attn::Error
// naming the file and dataset.
#pragma once

#include "attn/core/half.hpp"
#include "attn/core/tensor.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace attn {
class StagedOutput; // tempfile.hpp
class MappedRange;  // mapped_range.hpp
} // namespace attn

namespace attn::h5 {

// --- names -----------------------------------------------------------------------------------

struct TensorRef {
  std::string path; // "-" = standard input or output
  std::string name; // dataset or group inside the file, "" = resolve by the contract's rule
  std::string str() const { return name.empty() ? path : path + ":" + name; }
};

// How errors name an input path: "standard input" for "-", else the path itself.
inline std::string input_label(const std::string& path) { return path == "-" ? "standard input" : path; }

// Splits "PATH[:NAME]". When the whole argument names an existing file it is all PATH; otherwise
// it splits at the first ':'. Throws UsageError for an empty PATH.
TensorRef parse_tensor_ref(std::string_view arg);

// An object path as HDF5 names it: "/a/b" for "a/b", "/a/b/", "//a//b"; "/" for "" and "/".
std::string normalize_path(std::string_view name);
// The group above `path` ("/" for a top-level object).
std::string parent_of(const std::string& path);
// `member` of `group`, normalized (a member starting with '/' is absolute).
std::string join_path(const std::string& group, std::string_view member);
// `path` lies below `group` (both normalized): "/a/b" below "/a", every path but "/" below "/".
bool is_under(const std::string& path, const std::string& group);
// Names for a message: the first 12, comma-separated, then ", ... (N in all)"; "none" when empty.
std::string list_names(const std::vector<std::string>& names);

// --- reading ---------------------------------------------------------------------------------

enum class ElemKind { Float, Integer, Bool };

// What an object path inside a file names.
enum class ObjectKind { Missing, Dataset, Group, Other };

// An attribute's value: an integer, a real number, a string, a bool (HDF5's enum type, as h5py
// writes Python's True and False), or a list of integers (a 1-D integer attribute: a config's
// eos_token_id list).
using AttrValue = std::variant<std::int64_t, double, std::string, bool, std::vector<std::int64_t>>;

// RAII owner of an HDF5 identifier.
class Handle {
public:
  Handle() = default;
  explicit Handle(std::int64_t id) : id_(id) {}
  ~Handle();
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  std::int64_t get() const { return id_; }
  std::int64_t release() {
    std::int64_t id = id_;
    id_ = -1;
    return id;
  }
  bool valid() const { return id_ >= 0; }

private:
  std::int64_t id_ = -1;
};

// One resolved, open input dataset. Stays valid while its InputFiles lives.
class Dataset {
public:
  Dataset(Handle ds, std::string label);
  const std::string& label() const { return label_; } // "file.h5:/q"
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  ElemKind kind() const { return kind_; }
  const std::string& type_name() const { return type_name_; } // "float32", "int64", "bool", ...
  // A weight's values: NaN or Inf in them is an error without the --allow-nonfinite advice, which
  // applies to input tensors only.
  void mark_weight() { weight_ = true; }

  // The whole float dataset (float16/32/64) as T. An integer or bool dataset is an error, and so
  // is NaN or Inf unless allow_nonfinite (the message gives the first bad index).
  template <typename T> BasicTensor<T> read_floats(bool allow_nonfinite) const;
  // As read_floats<float>, but float32 stored in one block of a file on disk is not copied: the
  // tensor borrows a private mapping of those bytes (mapped_range.hpp), so a model's weights take
  // no fresh memory. It behaves as a copy: written in place, it changes neither the file nor any
  // other read. Other data (another type, chunks, standard input) is read as read_floats reads it.
  Tensor read_floats_mapped(bool allow_nonfinite) const;
  // Rows [first, first + count) along axis 0, borrowed in the same way, for reading (a write copies
  // the page it writes); an empty tensor when their bytes cannot be mapped (then read them).
  Tensor map_float_rows(std::int64_t first, std::int64_t count, bool allow_nonfinite) const;
  // Rows [first, first + count) along axis 0 into `out` (count * prod(shape[1:]) values).
  template <typename T>
  void read_float_rows(std::int64_t first, std::int64_t count, T* out, bool allow_nonfinite) const;
  // The whole integer or bool dataset as int64 (ids, lengths, masks). A float dataset is an error.
  TensorI read_ints() const;
  // The whole integer dataset as int8 (quantized weights): an int8 dataset as it is stored, a wider
  // one checked to lie in [-128, 127] (an Error naming the first value outside).
  std::vector<std::int8_t> read_int8s() const;
  // float16 or bfloat16 stored in exactly the IEEE layout (little-endian, as the tools and h5py
  // write them): that kind, and the values' bits as stored; other datasets: nullopt, and an Error.
  std::optional<HalfKind> half_layout() const { return half_; }
  std::vector<std::uint16_t> read_half_bits() const;
  // The same bits borrowed from a mapping of the file where they lie there in one block (as
  // read_floats_mapped: no copy, no fresh memory), else read into `owned`.
  struct HalfBits {
    const std::uint16_t* data = nullptr;
    std::shared_ptr<MappedRange> mapped;
    std::vector<std::uint16_t> owned;
  };
  HalfBits map_half_bits() const;
  // An int8 dataset's bytes, row-major, mapped from the file where they lie contiguous in it; null
  // when they cannot be (chunked, compressed, not a file on disk): then read_int8s.
  std::shared_ptr<MappedRange> map_int8s() const;
  // Rows [first, first + count) along the first axis of an int8 dataset, as stored.
  void read_int8_rows(std::int64_t first, std::int64_t count, std::int8_t* out) const;
  // The first n values along the last axis (index 0 on the others; n at most that axis' size),
  // read and dropped as the tools read the values: float data as float and as double (float16 and
  // bfloat16 as their stored bits), int8 as int8; other data is an Error. The preflight's one pass
  // through HDF5's read and conversion path of a large contiguous dataset (h5guard.cpp).
  void read_head(std::int64_t n) const;
  // The 2-D slice (shape[-2], shape[-1]) at `leading`, one index per leading axis (rank - 2 of
  // them), as doubles whatever the element type (float, integer or bool), NaN and Inf included.
  // A 1-D dataset reads as one row (1, m). Wrong count or range of indices is an Error.
  TensorD read_slice(const Shape& leading) const;

  // Throws Error unless lo <= rank <= hi; `expect` describes the layout ("(batch, seq, features)").
  void require_rank(int lo, int hi, std::string_view expect) const;

  // Is the data one contiguous block in this file (no chunks, filters or external files)? Its
  // extent was then checked against the file's size when the dataset was opened.
  bool contiguous() const;

private:
  void check_contiguous_data_in_file(std::int64_t bytes) const;
  std::optional<std::uint64_t> float32_offset() const;
  // The file's bytes [offset, offset + bytes) in a private mapping (MappedRange), or null when the
  // file is not on disk (an image in memory) or the mapping fails.
  std::shared_ptr<MappedRange> map_file_bytes(std::uint64_t offset, std::size_t bytes) const;
  // Values [first, first + numel(shape)) in the file's order, borrowed from such a mapping and
  // checked for NaN and Inf unless allowed, as `shape`; an empty tensor when they cannot be mapped.
  Tensor map_values(std::int64_t first, Shape shape, bool allow_nonfinite) const;
  Handle ds_;
  std::string label_;
  bool weight_ = false;
  Shape shape_;
  ElemKind kind_ = ElemKind::Float;
  std::string type_name_;
  void read_half_rows(std::int64_t mspace, std::int64_t fspace, std::uint16_t* out) const;
  std::optional<HalfKind> half_; // read as bits and widened here: HDF5's own conversion of 2-byte
                                 // floats is a bit-by-bit loop (1.5 s for a 45 MB float16 model)
};

// --- the (batch, seq, features) convention (CONTRACT.md section 1) ---------------------------

// A sequence tensor read as (batch, seq, features): a 2-D (seq, features) dataset is batch 1.
// `what` names it in the rank error ("queries").
template <typename T> struct Sequence {
  BasicTensor<T> x; // (batch, seq, features)
  bool batched;     // the dataset had the batch axis
};
template <typename T> Sequence<T> read_sequence(const Dataset& ds, bool allow_nonfinite, std::string_view what);

// The same read items at a time, so a long batch streams through in chunks (hyperslabs).
class SequenceReader {
public:
  SequenceReader(Dataset ds, bool allow_nonfinite, std::string_view what);
  std::int64_t items() const { return batched_ ? ds_.shape()[0] : 1; }
  std::int64_t len() const { return ds_.shape()[batched_ ? 1 : 0]; }      // n
  std::int64_t features() const { return ds_.shape()[batched_ ? 2 : 1]; } // d
  bool batched() const { return batched_; }
  const std::string& label() const { return ds_.label(); }
  // Items [first, first + count) as (count, n, d).
  Tensor read(std::int64_t first, std::int64_t count) const;
  // The same for reading only: float32 in the file is borrowed from a private mapping of it
  // (Dataset::map_float_rows: no copy and no fresh memory), other data is read.
  Tensor read_mapped(std::int64_t first, std::int64_t count) const;
  // The mapped items alone, or an empty tensor when their bytes cannot be mapped.
  Tensor map(std::int64_t first, std::int64_t count) const;
  // The same into `out` (count * n * d floats): a loop over groups of items reuses one buffer.
  void read(std::int64_t first, std::int64_t count, float* out) const;

private:
  Dataset ds_;
  bool allow_nonfinite_, batched_;
};

// A reader's items group after group, for reading only: borrowed from a private mapping of the file
// where they can be (SequenceReader::map: no copy and no fresh memory), else read into one buffer
// of `most` items, allocated at the first group that needs it and reused by the others.
class GroupReader {
public:
  GroupReader(const SequenceReader& r, std::int64_t most) : r_(r), most_(most) {}
  // Items [first, first + count) (count <= most) as (count, n, d), valid until the next read.
  const float* read(std::int64_t first, std::int64_t count);

private:
  const SequenceReader& r_;
  std::int64_t most_;
  Tensor mapped_, buffer_;
};

// A dataset of variable-length strings (tokenize's /pieces): its values in C order.
struct Strings {
  Shape shape;
  std::vector<std::string> values;
  std::string label; // "file.h5:/pieces"
};

// The input files of one run. Each path is opened once (read-only); standard input is read once.
class InputFiles {
public:
  InputFiles();
  ~InputFiles();
  InputFiles(const InputFiles&) = delete;
  InputFiles& operator=(const InputFiles&) = delete;

  // Holds `image`, the bytes of an HDF5 file, as the input file `path` (standard input is "-").
  // Empty or not HDF5 is an Error.
  void add_image(const std::string& path, const std::vector<char>& image);
  // Resolves `ref` to a dataset by the rule above and opens it.
  Dataset open(const TensorRef& ref);
  // Runs the damaged-file preflights (h5guard.hpp) of the HDF5 files `refs` name, each of the
  // part its name gives (the whole file when it gives none), side by side, so that opening them
  // later does not check them one after another. Paths that are not regular HDF5 files ("-", a
  // missing file) are left for open() to report. `meanwhile`, when given, runs while they are
  // checked (or at once when there is nothing to check).
  void preflight(const std::vector<TensorRef>& refs, const std::function<void()>& meanwhile = {});
  // The dataset paths (absolute, e.g. "/layers/0/w") of file `path` under group `group` (an
  // absolute path; "/": the whole file), sorted.
  std::vector<std::string> list_datasets(const std::string& path, const std::string& group = "/");
  // What `object` (an absolute path such as "/encoder/norm") names in file `path`.
  ObjectKind kind_of(const std::string& path, const std::string& object);
  // The attribute `name` of `object`, or nullopt when it has none. An attribute that is not a
  // single number or string, or a 1-D list of integers, is an Error.
  std::optional<AttrValue> attribute(const std::string& path, const std::string& object, const std::string& name);
  // The strings of dataset ref.name, (b, n) or (n,), their global heap checked first (h5guard.hpp);
  // another type is an Error naming the dataset.
  Strings read_strings(const TensorRef& ref);
  // The names of `object`'s attributes, in name order.
  std::vector<std::string> attribute_names(const std::string& path, const std::string& object);

private:
  // What an access reads of a file: an object (with the groups on the way to it), or an object
  // and everything under it.
  enum class Reach { Object, Subtree };
  // The open file `path`, opened at the first call; a preflight of `object` (an absolute path) and
  // what it reaches runs first unless an earlier one covered it.
  std::int64_t file(const std::string& path, const std::string& object = "/", Reach reach = Reach::Subtree);
  bool covered(const std::string& path, const std::string& object, Reach reach) const;
  std::map<std::string, Handle> files_;
  std::map<std::string, std::string> broken_;               // files HDF5 failed to walk: path -> the error
  std::map<std::string, std::vector<std::string>> checked_; // path -> the scopes whose preflight passed
};

// The scalar attribute `name` of the open object `obj` (an HDF5 id), as InputFiles::attribute
// reads it; `where` ("file.h5:/group") labels the errors. The damaged-file preflight
// (h5guard.hpp) reads every attribute through it.
std::optional<AttrValue> read_attribute(std::int64_t obj, const std::string& name, const std::string& where);

// Checks NaN/Inf and throws Error naming the first bad C-order index; with `flag_advice`, the
// message adds "(pass --allow-nonfinite to accept it)" (input tensors; never a weight's value).
template <typename T>
void check_finite(const T* data, const Shape& shape, std::int64_t first_flat, std::int64_t count,
                  const std::string& label, bool flag_advice = true);

// --- writing ---------------------------------------------------------------------------------

// Output element types. F16 and BF16 (half.hpp) are HDF5 floating-point types of 2 bytes with
// binary16's and bfloat16's layouts (the first as h5py writes numpy's float16), so h5dump and
// h5py read them as numbers; values are rounded to them to nearest, ties to even.
// I8 stores int8 (quantized weights, from int64 values in range).
enum class OutType { F32, F64, I64, F16, BF16, I8 };
// "f32" | "f64" | "i64" | "f16" | "bf16" | "i8"
OutType parse_out_type(std::string_view s);

struct Provenance {
  std::string creator; // "pe-gen 0.1.0"
  std::string command; // the full argument vector, shell-quoted
};

// Checks an output target before any work is done: HDF5 (or another binary `format`) to a
// terminal and an output naming one of the inputs are UsageErrors; a missing directory is an Error.
void check_output_target(const TensorRef& target, const std::vector<TensorRef>& inputs,
                         std::string_view format = "HDF5");

class OutputFile;

// Rows of a (b, n) string dataset of an OutputFile (OutputFile::create_strings).
class StringsWriter {
public:
  // The region rows [first, first + count) x columns [0, cols): count * cols strings, C order (an
  // empty one is stored as a null string).
  void write_region(std::int64_t first, std::int64_t count, std::int64_t cols,
                    const std::vector<std::string_view>& values);

private:
  friend class OutputFile;
  StringsWriter(std::int64_t ds, Shape shape, std::string label)
      : ds_(ds), shape_(std::move(shape)), label_(std::move(label)) {}
  std::int64_t ds_;
  Shape shape_;
  std::string label_;
};

// Incremental writes into one dataset of an OutputFile (for outputs produced batch by batch).
class DatasetWriter {
public:
  template <typename T> void write_rows(std::int64_t first, std::int64_t count, const T* data);
  // The region rows [first, first + count) x columns [0, cols) of a 2-D int64 dataset.
  void write_region(std::int64_t first, std::int64_t count, std::int64_t cols, const std::int64_t* data);
  // The one value of a scalar (rank 0) dataset.
  template <typename T> void write_scalar(const T* data);
  // Items [first, first + count) of a (B, ...) output made by OutputFile::create_items: rows of
  // axis 0, or the whole dataset when its batch axis was dropped (one item).
  template <typename T> void write_items(std::int64_t first, std::int64_t count, const T* data) {
    if (count == 0) return; // an MPI rank without items
    if (unbatched_ && shape_.empty()) {
      write_scalar(data); // a (B,) output of a 2-D input: one number
    } else if (unbatched_) {
      write_rows(0, shape_.at(0), data);
    } else {
      write_rows(first, count, data);
    }
    items_written();
  }

private:
  friend class OutputFile;
  DatasetWriter(std::int64_t ds, Shape shape, std::string label, OutType type, bool unbatched = false)
      : ds_(ds), shape_(std::move(shape)), label_(std::move(label)), type_(type), unbatched_(unbatched) {}
  // The 2-byte file values of data[0..count) when the dataset is F16 or BF16.
  template <typename T> std::vector<std::uint16_t> to_half_bits(const T* data, std::int64_t count) const;
  void items_written() const; // StagedOutput::start_writeback
  std::int64_t ds_;
  Shape shape_;
  std::string label_;
  OutType type_;
  bool unbatched_;
  StagedOutput* staged_ = nullptr; // the file's temporary file (none under MPI)
};

// An output file: written to a temporary file, published by commit(). Under MPI (mpi.hpp) every
// rank opens the same file and writes its own items; every call but the DatasetWriter's writes is
// then collective, made by all ranks in the same order.
class OutputFile {
public:
  // `target`: "-" or FILE[:NAME]. `primary`: the standard name of the run's primary dataset ("pe").
  OutputFile(const TensorRef& target, std::string primary, Provenance prov);
  ~OutputFile(); // discards everything unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Creates the dataset with standard name `std_name` (e.g. "sin", "weights/layer0").
  DatasetWriter create(std::string_view std_name, const Shape& shape, OutType type);
  // With batched false (the input had no batch axis, see Sequence) the leading axis of size 1 is
  // dropped: 2-D in, 2-D out.
  template <typename T>
  void write(std::string_view std_name, const BasicTensor<T>& t, OutType type, bool batched = true) {
    create_items(std_name, t.shape(), type, batched).write_items(0, t.dim(0), t.data());
  }
  // A (B, ...) output written items at a time (DatasetWriter::write_items); with batched false,
  // B = 1 and the file's dataset has no batch axis.
  DatasetWriter create_items(std::string_view std_name, const Shape& shape, OutType type, bool batched = true);
  // A right-padded (b, n) int64 dataset (tokenize's ids) in chunks of kTileRows x kTileCols,
  // shuffled and deflated, its padding `fill`: a tile never written (all padding) is not stored
  // and reads as `fill`, so writing and room follow the tokens, not b x n.
  static constexpr std::int64_t kTileRows = 256, kTileCols = 64;
  DatasetWriter create_padded(std::string_view std_name, const Shape& shape, std::int64_t fill);
  // The same for variable-length UTF-8 strings (empty past each row's length).
  StringsWriter create_strings(std::string_view std_name, const Shape& shape);
  // Sets attribute `name` on the group `std_group` (a standard name like the datasets'; "" is the
  // group that holds the primary dataset), creating the group when needed.
  void set_attribute(std::string_view std_group, const std::string& name, const AttrValue& value);
  // Writes the attributes, closes the file and publishes it atomically.
  void commit();

  // Where standard name `std_name` lands inside the file ("/exp1/sin" for -o f.h5:/exp1/out).
  std::string dataset_path(std::string_view std_name) const;

private:
  // The path and label of a new tiled (b, n) dataset, an existing one of the name removed.
  std::pair<std::string, std::string> prepare_tiled(std::string_view std_name, const Shape& shape);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Under MPI: closes the files of OutputFiles that a failure left uncommitted (collective; every
// rank calls it once the ranks agreed to stop, mpi::fail_together).
void close_abandoned_outputs();

} // namespace attn::h5
