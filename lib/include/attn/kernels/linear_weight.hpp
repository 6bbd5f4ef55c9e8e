// A Linear layer's weight W (out, in) as the model holds it in memory: float32, or (from a
// quantized weight file, quantize.hpp) int8 with a float32 scale per block of the input dimension,
// or float16, or bfloat16 (a Hugging Face checkpoint's). blas::linear reads each; an int8 or 16-bit
// weight is never widened in memory, so generation streams 1 or 2 bytes per weight instead of 4.
//
// A float16 or bfloat16 weight gives y the bits of float32 over its values: blas::linear widens
// each value in a register and runs the same FMA chain as for float32. An int8 weight is multiplied in integers
// by each input row quantized to int8 in the same blocks (blas.hpp, linear: the int8 products).
//
// A float32 weight can also be laid out in column tiles (to_tiles): steps of one row (generation
// at batch 1) stream that layout at the memory's rate, while rows of W must be transposed in
// registers (86 MiB of weights, batch 1, 2 threads, interleaved in one process: 46-47 GB/s against
// 38-39, with the memory read at 42-48 GB/s at the time). The bits of every product stay the same.
//
// These are kept in column tiles of 16 output rows, so a kernel reads 16 outputs' weights as one
// contiguous run, with no transposing:
//   16-bit and float32 tiles, k-major:  h[(t * in + k) * 16 + c] = H[16 t + c][k]   (zero past `out`)
//   int8, k in quads (the layout of the CPU's int8 dot products): each block b of B values of a
//   row is padded with zeros to B4 (B rounded up to 4), a row to P = blocks * B4 values, p = b B4 + i
//   for k = b B + i, and
//     q[((t * P / 4 + p / 4) * 16 + c) * 4 + p % 4] = Q[16 t + c][k]
//     s[(t * blocks + b) * 16 + c] = scale[16 t + c][b]
//   (nothing else per weight row: what the int8 dot product needs besides is per input row)
#pragma once

#include "attn/core/half.hpp"
#include "attn/core/tensor.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace attn {

class LinearWeight {
public:
  enum class Format { f32, int8, f16, f32_tiles, bf16 };
  static constexpr std::int64_t tile = 16; // output rows per column tile
  // Where W[row][k] of a (rows, in) matrix sits in the k-major column-tile layout above (also the
  // int8 scales' layout, with `in` the blocks; attention.hpp's KeyTiles are the same with wider
  // tiles).
  static std::size_t tile_index(std::int64_t row, std::int64_t k, std::int64_t in) {
    return static_cast<std::size_t>(((row / tile) * in + k) * tile + row % tile);
  }

  LinearWeight() = default;
  LinearWeight(Tensor w); // NOLINT: a float32 weight converts implicitly
  // q (out, in) in [-127, 127] with scale (out, ceil(in / block)); block 0 means one scale per row.
  static LinearWeight int8(const TensorI& q, const Tensor& scale, std::int64_t block);
  static LinearWeight int8(const std::int8_t* q, const Shape& shape, const Tensor& scale, std::int64_t block);
  // The same values left row-major where they are (`q`, kept alive by `owner`: a mapped weight
  // file's bytes), only the scales laid out in tiles: no pass over the values before they are used
  // (blas.hpp: generation's steps read the rows in place; a product of many rows lays them out
  // into tiles as it runs). For blocks of a multiple of 32 values that divide `in` (int8_rows_fit).
  static LinearWeight int8_rows(std::shared_ptr<const void> owner, const std::int8_t* q, const Shape& shape,
                                const Tensor& scale, std::int64_t block);
  static bool int8_rows_fit(const Shape& shape, std::int64_t block);
  // bits (out * in) float16 values, row-major.
  static LinearWeight f16(const std::vector<std::uint16_t>& bits, std::int64_t out, std::int64_t in);
  // bits (out * in) float16 or bfloat16 values, row-major (at any address: a mapped file's).
  // `rows_done(first, count)`, when given, is called (from the BLAS threads) as each block of rows
  // has been laid out, so that a mapped file's pages can be let go as they are read. `nonfinite`,
  // when given, is set when a value is NaN or Inf (the layout checks them as it copies).
  static LinearWeight half_rows(HalfKind kind, const void* bits, std::int64_t out, std::int64_t in,
                                const std::function<void(std::int64_t, std::int64_t)>& rows_done = {},
                                bool* nonfinite = nullptr);
  // The same bits left row-major where they are (`bits`, kept alive by `owner`: a mapped weight
  // file's): no pass over them (their values are checked by half_all_finite, which the loaders
  // leave to the first product: defer_check). blas.hpp
  // widens them as each product runs: for few rows in registers (a transposing tile over the rows
  // as they are), for many into its packed panels. For runs of few steps (a prompt and a token);
  // many steps read the tiles half_rows lays out, at the memory's rate (rows in place reached
  // 0.5-0.95x the tiles' rate at batch 1, less the longer the rows: blas.hpp).
  static LinearWeight half_rows_in_place(std::shared_ptr<const void> owner, HalfKind kind, const std::uint16_t* bits,
                                         std::int64_t out, std::int64_t in);
  // The same from bits stored transposed, (in, out) row-major (GPT-2's Conv1D weights).
  static LinearWeight half_transposed(HalfKind kind, const void* bits, std::int64_t out, std::int64_t in,
                                      bool* nonfinite = nullptr);

  // A check of the values left to the first pass that reads them all: a loader's NaN/Inf scan of
  // values it leaves in a mapped file (`check` throws an Error naming the tensor and the index),
  // run by the first product (blas::linear) or the first tensor(), to_tiles(), to_float() or
  // f16_bits() instead of at the load, so that a run reads the values from memory once (the scan
  // leaves them in the cache for the product that follows it) and no pass over all the weights
  // comes before the first token. Runs once (again after it threw); shared by copies. at(),
  // h16_at() and the raw pointers do not run it.
  void defer_check(std::function<void()> check);
  void run_check() const;
  // Whether none of the n 16-bit values at bits has an exponent of all ones (Inf, NaN), in blocks
  // on the BLAS threads (the pass faults a mapping's pages in).
  static bool half_all_finite(HalfKind kind, const std::uint16_t* bits, std::int64_t n);

  // A float32 weight laid out in column tiles instead of rows (no-op for the other formats): the
  // same values and the same products' bits; tensor() and data() are then unavailable. True when
  // it converted.
  bool to_tiles();

  Format format() const { return format_; }
  bool quantized() const { return format_ == Format::int8 || half(); }
  bool half() const { return format_ == Format::f16 || format_ == Format::bf16; }
  // int8 or 16-bit values row-major, in place (int8_rows, half_rows_in_place)
  bool in_rows() const { return rows_q8_ != nullptr || rows_h16_ != nullptr; }
  // float32 rows borrowed from a mapped file (h5io.hpp's read_floats_mapped), not copied
  bool mapped() const { return format_ == Format::f32 && f32_.borrowed(); }
  const Shape& shape() const { return shape_; }
  std::int64_t dim(int axis) const { return shape_.at(axis < 0 ? axis + static_cast<int>(shape_.size()) : axis); }
  std::int64_t size() const { return size_; }
  std::int64_t out() const { return shape_.empty() ? 0 : shape_[0]; }
  std::int64_t in() const { return shape_.size() < 2 ? 0 : shape_[1]; }
  std::int64_t block() const { return block_; } // int8: elements per scale (in for a whole row)
  std::int64_t blocks() const { return blocks_; }
  std::int64_t block4() const { return block4_; }              // int8: a block padded to a multiple of 4
  std::int64_t packed_in() const { return blocks_ * block4_; } // int8: P, a packed row's values

  // float32 rows only (init, tests, layouts that rearrange weights); throws Error for the others.
  const Tensor& tensor() const;
  Tensor& tensor();
  float* data() { return tensor().data(); }
  const float* data() const { return tensor().data(); }
  std::span<float> span() { return tensor().span(); }
  std::span<const float> span() const { return tensor().span(); }
  // W' in float32 (a copy; the weight itself for float32).
  Tensor to_float() const;
  // int8 only: the quantized values and scales in quantize.hpp's file layout.
  TensorI int8_values() const;
  Tensor int8_scales() const;
  // float16 or bfloat16 only: the values' bits, row-major.
  std::vector<std::uint16_t> f16_bits() const;

  // The tiles: int8 and 16-bit with 64 bytes of readable padding at the end, float32 without.
  const std::int8_t* q8() const { return q8_.data(); }
  const std::int8_t* q8_rows() const { return rows_q8_; }     // in_rows(): Q[row][k] at row * in + k
  const std::uint16_t* h16_rows() const { return rows_h16_; } // in_rows(): H[row][k] at row * in + k
  const float* scales() const { return scales_.data(); }
  const std::uint16_t* h16() const { return h16_.data(); }
  const float* f32_tiles() const { return t32_.data(); }
  std::uint16_t h16_at(std::int64_t row, std::int64_t k) const { // 16-bit: H[row][k]'s bits
    return rows_h16_ ? rows_h16_[row * in() + k] : h16_[tile_index(row, k, in())];
  }
  // W'[row][k], from any format (the reference loops and packing).
  float at(std::int64_t row, std::int64_t k) const;
  std::int8_t int8_at(std::int64_t row, std::int64_t k) const; // int8: Q[row][k]
  float int8_scale(std::int64_t row, std::int64_t b) const;    // int8: the scale of block b of the row

private:
  // An int8 weight's format, shape, block (0: the row) and tiled scales; its values not yet set.
  static LinearWeight int8_with_scales(const Shape& shape, const Tensor& scale, std::int64_t block);
  static LinearWeight half_strided(HalfKind kind, const void* bits, std::int64_t out, std::int64_t in, std::int64_t rs,
                                   std::int64_t ks, const std::function<void(std::int64_t, std::int64_t)>& rows_done,
                                   bool* nonfinite);
  Format format_ = Format::f32;
  Shape shape_;
  std::int64_t size_ = 0, block_ = 0, blocks_ = 0, block4_ = 0;
  Tensor f32_;
  WeightBuffer<std::int8_t> q8_;
  WeightBuffer<float> scales_;
  WeightBuffer<std::uint16_t> h16_;
  Tensor t32_;                              // (tiles * 16, in) holding the tiles: no padding past the last
  const std::int8_t* rows_q8_ = nullptr;    // int8_rows: the values where they are
  const std::uint16_t* rows_h16_ = nullptr; // half_rows_in_place: the bits where they are
  std::shared_ptr<const void> owner_;       // and what keeps them there
  struct DeferredCheck;
  std::shared_ptr<DeferredCheck> check_; // defer_check's, until it has passed
};

// Rows [first, first + count) of a weight: a projection's part of a packed in_proj_weight.
struct WeightRows {
  const LinearWeight* w = nullptr;
  std::int64_t first = 0, count = 0;
  WeightRows() = default;
  WeightRows(const LinearWeight& weight) : w(&weight), first(0), count(weight.out()) {} // NOLINT
  WeightRows(const LinearWeight& weight, std::int64_t first_row, std::int64_t rows)
      : w(&weight), first(first_row), count(rows) {}
  std::int64_t in() const { return w->in(); }
  const float* data() const { return w->data() + first * in(); } // float32 rows only
};

} // namespace attn
