// LinearWeight: a Linear layer's weight as float32, or int8 / float16 in column tiles
// (linear_weight.hpp).
#include "attn/kernels/linear_weight.hpp"

#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/kernels/parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

namespace attn {

namespace {

constexpr std::int64_t T = LinearWeight::tile;
constexpr std::size_t pad_bytes = 64; // a kernel's vector load past the last k stays in the buffer

std::int64_t tiles_of(std::int64_t out) { return (out + T - 1) / T; }

// The fewest `exponent` bits clear in any of the n values: 0 when one has them all set (Inf, NaN).
// A minimum the compiler vectorizes (a scalar flag per value took 11% of a 512-token prompt's
// samples).
__attribute__((target_clones("avx2", "default"))) std::uint16_t fewest_clear(const std::uint16_t* bits, std::int64_t n,
                                                                             std::uint16_t exponent) {
  std::uint16_t fewest = exponent;
#pragma omp simd reduction(min : fewest)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto clear = static_cast<std::uint16_t>(~bits[i] & exponent);
    fewest = clear < fewest ? clear : fewest;
  }
  return fewest;
}

} // namespace

LinearWeight::LinearWeight(Tensor w) : shape_(w.shape()), size_(w.size()), f32_(std::move(w)) {}

LinearWeight LinearWeight::int8(const TensorI& q, const Tensor& scale, std::int64_t block) {
  std::vector<std::int8_t> narrow(static_cast<std::size_t>(q.size()));
  for (std::size_t i = 0; i < narrow.size(); ++i) narrow[i] = static_cast<std::int8_t>(q.data()[i]);
  return int8(narrow.data(), q.shape(), scale, block);
}

LinearWeight LinearWeight::int8_with_scales(const Shape& shape, const Tensor& scale, std::int64_t block) {
  if (shape.size() != 2) throw Error(fmt::format("an int8 Linear weight must be (out, in), got {}", shape_str(shape)));
  const std::int64_t out = shape[0], in = shape[1];
  LinearWeight w;
  w.format_ = Format::int8;
  w.shape_ = shape;
  w.size_ = out * in;
  w.block_ = block > 0 ? block : std::max<std::int64_t>(in, 1);
  w.blocks_ = (in + w.block_ - 1) / w.block_;
  w.block4_ = (w.block_ + 3) / 4 * 4;
  const std::int64_t blocks = w.blocks_;
  if (scale.shape() != Shape{out, blocks})
    throw Error(fmt::format("int8 Linear weight {}: expected scales {}, got {}", shape_str(shape),
                            shape_str({out, blocks}), shape_str(scale.shape())));
  // a tile at a time on the BLAS threads, its rows read side by side (one loop over tile_index
  // per value was 14% of an int8 model's load)
  const std::int64_t tiles = tiles_of(out);
  WeightBuffer<float>& scales = w.scales_;
  scales.resize(static_cast<std::size_t>(tiles * blocks * T) + pad_bytes / sizeof(float)); // unset: all written
  std::fill(scales.end() - pad_bytes / sizeof(float), scales.end(), 0.0f);
  const float* src = scale.data();
  float* dst = scales.data();
  parallel_for(tiles, tiles * blocks * T > (1 << 16) ? blas::threads() : 1, [&](std::int64_t t) {
    const std::int64_t rows = std::min(T, out - t * T);
    float* tile = dst + t * blocks * T; // tile[b * 16 + c] = scale[16 t + c][b]
    for (std::int64_t c = 0; c < T; ++c)
      for (std::int64_t b = 0; b < blocks; ++b) tile[b * T + c] = c < rows ? src[(t * T + c) * blocks + b] : 0.0f;
  });
  return w;
}

LinearWeight LinearWeight::int8(const std::int8_t* q, const Shape& shape, const Tensor& scale, std::int64_t block) {
  LinearWeight w = int8_with_scales(shape, scale, block);
  const std::int64_t out = shape[0], in = shape[1];
  const std::int64_t tiles = tiles_of(out), P = w.packed_in();
  if (w.block4_ == w.block_ && in % w.block_ == 0) {                   // no padding: the rows' quads transposed
    w.q8_.resize(static_cast<std::size_t>(tiles * P * T) + pad_bytes); // unset: every value is written
    std::fill(w.q8_.end() - pad_bytes, w.q8_.end(), std::int8_t{0});
    blas::int8_rows_to_tiles(w.q8_.data(), q, out, in);
    return w;
  }
  w.q8_.assign(static_cast<std::size_t>(tiles * P * T) + pad_bytes, 0);
  for (std::int64_t r = 0; r < out; ++r) {
    std::int8_t* tile = w.q8_.data() + (r / T) * P * T + (r % T) * 4; // p at tile[(p / 4) * 4 T + p % 4]
    for (std::int64_t b = 0; b < w.blocks_; ++b) {
      const std::int8_t* src = q + r * in + b * w.block_;
      std::int8_t* dst = tile + b * w.block4_ * T; // the block's first quad
      const std::int64_t n = std::min(w.block_, in - b * w.block_);
      for (std::int64_t i = 0; i < n; ++i) dst[(i >> 2) * 4 * T + (i & 3)] = src[i];
    }
  }
  return w;
}

bool LinearWeight::int8_rows_fit(const Shape& shape, std::int64_t block) {
  return shape.size() == 2 && shape[1] > 0 && block > 0 && block % 32 == 0 && shape[1] % block == 0;
}

LinearWeight LinearWeight::int8_rows(std::shared_ptr<const void> owner, const std::int8_t* q, const Shape& shape,
                                     const Tensor& scale, std::int64_t block) {
  if (!int8_rows_fit(shape, block))
    throw Error(fmt::format("internal: int8 weight {} with blocks of {} read in place", shape_str(shape), block));
  LinearWeight w = int8_with_scales(shape, scale, block);
  w.rows_q8_ = q;
  w.owner_ = std::move(owner);
  return w;
}

LinearWeight LinearWeight::f16(const std::vector<std::uint16_t>& bits, std::int64_t out, std::int64_t in) {
  if (static_cast<std::int64_t>(bits.size()) != out * in)
    throw Error(fmt::format("float16 Linear weight ({}, {}): {} values", out, in, bits.size()));
  return half_rows(HalfKind::F16, bits.data(), out, in);
}

LinearWeight LinearWeight::half_transposed(HalfKind kind, const void* bits, std::int64_t out, std::int64_t in,
                                           bool* nonfinite) {
  return half_strided(kind, bits, out, in, 1, out, {}, nonfinite);
}

LinearWeight LinearWeight::half_rows(HalfKind kind, const void* bits, std::int64_t out, std::int64_t in,
                                     const std::function<void(std::int64_t, std::int64_t)>& rows_done,
                                     bool* nonfinite) {
  return half_strided(kind, bits, out, in, in, 1, rows_done, nonfinite);
}

LinearWeight LinearWeight::half_rows_in_place(std::shared_ptr<const void> owner, HalfKind kind,
                                              const std::uint16_t* bits, std::int64_t out, std::int64_t in) {
  LinearWeight w;
  w.format_ = kind == HalfKind::F16 ? Format::f16 : Format::bf16;
  w.shape_ = {out, in};
  w.size_ = out * in;
  w.rows_h16_ = bits;
  w.owner_ = std::move(owner);
  return w;
}

bool LinearWeight::half_all_finite(HalfKind kind, const std::uint16_t* bits, std::int64_t n) {
  const std::uint16_t exponent = kind == HalfKind::F16 ? 0x7c00u : 0x7f80u;
  constexpr std::int64_t block = 1 << 18;
  std::atomic<bool> bad = false;
  parallel_for((n + block - 1) / block, blas::threads(), [&](std::int64_t b) {
    if (fewest_clear(bits + b * block, std::min(block, n - b * block), exponent) == 0) bad = true;
  });
  return !bad;
}

struct LinearWeight::DeferredCheck {
  std::once_flag once;
  std::function<void()> check;
};

void LinearWeight::defer_check(std::function<void()> check) {
  check_ = std::make_shared<DeferredCheck>();
  check_->check = std::move(check);
}

void LinearWeight::run_check() const {
  if (check_) std::call_once(check_->once, check_->check);
}

// W[r][k]'s bits at bits + 2 (r rs + k ks) laid out in 16-bit tiles (half_rows, half_transposed).
LinearWeight LinearWeight::half_strided(HalfKind kind, const void* bits, std::int64_t out, std::int64_t in,
                                        std::int64_t rs, std::int64_t ks,
                                        const std::function<void(std::int64_t, std::int64_t)>& rows_done,
                                        bool* nonfinite) {
  LinearWeight w;
  w.format_ = kind == HalfKind::F16 ? Format::f16 : Format::bf16;
  w.shape_ = {out, in};
  w.size_ = out * in;
  const std::int64_t tiles = tiles_of(out);
  w.h16_.resize(static_cast<std::size_t>(tiles * in * T) + pad_bytes / 2); // unset: every value is written below
  const auto* src = static_cast<const unsigned char*>(bits);
  std::uint16_t* h = w.h16_.data();
  std::fill(h + tiles * in * T, h + w.h16_.size(), std::uint16_t{0});
  const std::uint16_t exponent = kind == HalfKind::F16 ? 0x7c00u : 0x7f80u;
  std::atomic<bool> bad = false;
  // Blocks of 64 tiles on the BLAS threads. Row-major rows at an even address (a mapped file's,
  // mostly) are transposed in registers a tile at a time (blas::half_rows_to_tile) and checked a
  // row at a time; others (GPT-2's Conv1D, odd addresses) are copied value by value, a tile's 16
  // rows side by side, its k-major runs written in order (rows past `out` in the last tile: zeros).
  // The first against the second, bfloat16, 2 threads, warm, best of 7: (768, 2048) (rows 4 KiB
  // apart) 0.30 against 0.88-0.94 ms, (2048, 768) 0.12 against 0.27 ms, (32000, 768) 3.8 against
  // 9.5-10.1 ms.
  constexpr std::int64_t block = 64;
  const bool rows_simd = ks == 1 && reinterpret_cast<std::uintptr_t>(bits) % 2 == 0;
  parallel_for((tiles + block - 1) / block, blas::threads(), [&](std::int64_t b) {
    std::uint16_t all = 0;
    for (std::int64_t t = b * block; t < std::min(tiles, (b + 1) * block); ++t) {
      const std::int64_t rows = std::min(T, out - t * T);
      std::uint16_t* dst = h + t * in * T;
      if (rows_simd) {
        const auto* first = reinterpret_cast<const std::uint16_t*>(src) + t * T * rs;
        blas::half_rows_to_tile(dst, first, rs, static_cast<int>(rows), in);
        for (std::int64_t c = 0; c < rows; ++c)
          all |= static_cast<std::uint16_t>(fewest_clear(first + c * rs, in, exponent) == 0);
        continue;
      }
      for (std::int64_t c = 0; c < T; ++c) {
        if (c >= rows) {
          for (std::int64_t k = 0; k < in; ++k) dst[k * T + c] = 0;
          continue;
        }
        const unsigned char* row = src + 2 * static_cast<std::size_t>((t * T + c) * rs);
        for (std::int64_t k = 0; k < in; ++k) {
          std::uint16_t v;
          std::memcpy(&v, row + 2 * k * ks, 2);
          dst[k * T + c] = v;
          all |= static_cast<std::uint16_t>((v & exponent) == exponent);
        }
      }
    }
    if (all) bad = true;
    if (rows_done) rows_done(b * block * T, std::min(out, (b + 1) * block * T) - b * block * T);
  });
  if (nonfinite) *nonfinite = bad;
  return w;
}

// In place when the rows are ours and `out` is a multiple of the tile (a tile of the layout fills
// the bytes of its 16 rows): no fresh pages to touch. Else into a new buffer, the last tile padded,
// from the rows where they are: rows borrowed from a mapped weight file (h5io.hpp) are read, never
// written. decode --generate's 37 weights (86 MiB, 2 threads): 10.7 ms in place, 35 ms from the
// mapped file into new buffers. So generation lays them out as it reads the file (WeightGroup::
// set_linear_tiles), in place of copying the file into memory, which took as long: its load 81 ->
// 79 ms, and the 10 ms of tiling gone from its clock.
bool LinearWeight::to_tiles() {
  if (format_ != Format::f32 || shape_.size() != 2) return false;
  run_check();
  const std::int64_t out = shape_[0], in = shape_[1], tiles = tiles_of(out);
  const bool in_place = out % T == 0 && !f32_.borrowed();
  Tensor t = in_place ? std::move(f32_) : Tensor({tiles * T, in}, Uninitialized{});
  const float* w = in_place ? t.data() : f32_.data();
  float* tiled = t.data();
  parallel_for(tiles, blas::threads(), [w, tiled, in, out, in_place](std::int64_t i) {
    // rows 16 i .. 16 i + 15 (in place: copied first, the tile takes their bytes; the last ones
    // of a partial tile zeros)
    const float* rows = w + i * T * in;
    thread_local std::vector<float> scratch;
    if (in_place || (i + 1) * T > out) {
      const std::int64_t n = std::min(T, out - i * T) * in;
      scratch.assign(rows, rows + n);
      scratch.resize(static_cast<std::size_t>(T * in), 0.0f);
      rows = scratch.data();
    }
    blas::rows_to_tile(tiled + i * T * in, rows, in);
  });
  t32_ = std::move(t);
  f32_ = Tensor();
  format_ = Format::f32_tiles;
  return true;
}

const Tensor& LinearWeight::tensor() const {
  run_check();
  if (format_ != Format::f32)
    throw Error(fmt::format("internal: a {} Linear weight {} read as float32 rows",
                            format_ == Format::int8   ? "int8"
                            : format_ == Format::f16  ? "float16"
                            : format_ == Format::bf16 ? "bfloat16"
                                                      : "float32 tiled",
                            shape_str(shape_)));
  return f32_;
}

Tensor& LinearWeight::tensor() { return const_cast<Tensor&>(static_cast<const LinearWeight*>(this)->tensor()); }

std::int8_t LinearWeight::int8_at(std::int64_t row, std::int64_t k) const {
  if (rows_q8_) return rows_q8_[row * in() + k];
  const std::int64_t p = (k / block_) * block4_ + k % block_, P = packed_in();
  return q8_[static_cast<std::size_t>((row / T) * P * T + ((p / 4) * T + row % T) * 4 + p % 4)];
}

float LinearWeight::int8_scale(std::int64_t row, std::int64_t b) const { return scales_[tile_index(row, b, blocks_)]; }

float LinearWeight::at(std::int64_t row, std::int64_t k) const {
  switch (format_) {
  case Format::f32: break;
  case Format::int8: return static_cast<float>(int8_at(row, k)) * int8_scale(row, k / block_);
  case Format::f16: return f16_to_float(h16_at(row, k));
  case Format::bf16: return bf16_to_float(h16_at(row, k));
  case Format::f32_tiles: return t32_.data()[tile_index(row, k, in())];
  }
  return f32_.data()[row * in() + k];
}

Tensor LinearWeight::to_float() const {
  run_check();
  if (format_ == Format::f32) return f32_;
  Tensor w(shape_, Uninitialized{});
  for (std::int64_t r = 0; r < out(); ++r)
    for (std::int64_t k = 0; k < in(); ++k) w.data()[r * in() + k] = at(r, k);
  return w;
}

TensorI LinearWeight::int8_values() const {
  if (format_ != Format::int8) throw Error("internal: int8_values of a weight that is not int8");
  TensorI q(shape_, Uninitialized{});
  for (std::int64_t r = 0; r < out(); ++r)
    for (std::int64_t k = 0; k < in(); ++k) q.data()[r * in() + k] = int8_at(r, k);
  return q;
}

Tensor LinearWeight::int8_scales() const {
  if (format_ != Format::int8) throw Error("internal: int8_scales of a weight that is not int8");
  Tensor s({out(), blocks_}, Uninitialized{});
  for (std::int64_t r = 0; r < out(); ++r)
    for (std::int64_t b = 0; b < blocks_; ++b) s.data()[r * blocks_ + b] = int8_scale(r, b);
  return s;
}

std::vector<std::uint16_t> LinearWeight::f16_bits() const {
  if (!half()) throw Error("internal: f16_bits of a weight that is not 16-bit");
  run_check();
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(size_));
  for (std::int64_t r = 0; r < out(); ++r)
    for (std::int64_t k = 0; k < in(); ++k) bits[static_cast<std::size_t>(r * in() + k)] = h16_at(r, k);
  return bits;
}

} // namespace attn
