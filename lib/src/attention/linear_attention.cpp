// Linear-time attention: elu + 1 features, Performer's random features, Linformer's projections
// (linear_attention.hpp).
#include "attn/attention/linear_attention.hpp"

#include "attn/core/names.hpp"

#include "attn/attention/attention.hpp"
#include "attn/core/error.hpp"
#include "attn/core/init.hpp"
#include "attn/core/random.hpp"
#include "attn/kernels/blas.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

namespace attn {

namespace {
constexpr Named<LinearKind> linear_kinds[] = {
    {"linear", LinearKind::Elu}, {"performer", LinearKind::Favor}, {"linformer", LinearKind::Linformer}};
} // namespace

LinearKind parse_linear_kind(std::string_view s) { return parse_named(s, linear_kinds, "linear attention"); }

const char* linear_kind_name(LinearKind kind) { return name_of(kind, linear_kinds); }

// --- parameters ----------------------------------------------------------------------------------

Tensor favor_features(std::int64_t M, std::int64_t d, bool orthogonal, std::uint64_t seed) {
  Rng rng(seed);
  return favor_features(M, d, orthogonal, rng);
}

Tensor favor_features(std::int64_t M, std::int64_t d, bool orthogonal, Rng& rng) {
  Tensor omega(Shape{M, d}, Uninitialized{});
  if (!orthogonal) {
    for (std::int64_t i = 0; i < M * d; ++i) omega.data()[i] = static_cast<float>(rng.normal());
    return omega;
  }
  std::vector<double> block(static_cast<std::size_t>(d * d));
  for (std::int64_t r0 = 0; r0 < M; r0 += d) {
    for (double& x : block) x = rng.normal();
    // Modified Gram-Schmidt over the rows: row i made orthogonal to rows 0..i-1, then unit length.
    for (std::int64_t i = 0; i < d; ++i) {
      double* ri = block.data() + i * d;
      for (std::int64_t j = 0; j < i; ++j) {
        const double* rj = block.data() + j * d;
        double dot = 0;
        for (std::int64_t c = 0; c < d; ++c) dot += ri[c] * rj[c];
        for (std::int64_t c = 0; c < d; ++c) ri[c] -= dot * rj[c];
      }
      double norm = 0;
      for (std::int64_t c = 0; c < d; ++c) norm += ri[c] * ri[c];
      norm = std::sqrt(norm);
      for (std::int64_t c = 0; c < d; ++c) ri[c] /= norm;
    }
    // Each row's length: that of an independent Gaussian vector (so the rows' lengths are
    // distributed as those of the i.i.d. features).
    for (std::int64_t i = 0; i < d; ++i) {
      double len = 0;
      for (std::int64_t c = 0; c < d; ++c) {
        const double g = rng.normal();
        len += g * g;
      }
      len = std::sqrt(len);
      if (r0 + i < M)
        for (std::int64_t c = 0; c < d; ++c)
          omega.data()[(r0 + i) * d + c] = static_cast<float>(block[i * d + c] * len);
    }
  }
  return omega;
}

LinformerProjections xavier_linformer(std::int64_t k, std::int64_t m, std::uint64_t seed) {
  Rng rng(seed);
  return xavier_linformer(k, m, rng);
}

LinformerProjections xavier_linformer(std::int64_t k, std::int64_t m, Rng& rng) {
  LinformerProjections p;
  p.E = xavier_uniform(k, m, rng);
  p.F = xavier_uniform(k, m, rng);
  return p;
}

void check_linear_mask(const Mask& mask, LinearKind kind, std::string_view source) {
  const std::string form = source.empty() ? fmt::format("--attention {}", linear_kind_name(kind))
                                          : fmt::format("{} = '{}'", source, linear_kind_name(kind));
  const auto refuse = [&](const std::string& message) {
    if (source.empty()) throw UsageError(message);
    throw Error(message);
  };
  if (const char* part = pattern_part(mask))
    refuse(fmt::format("{} applies {} and key padding only, not {} (its cost is linear because no (n, m) score "
                       "matrix is formed)",
                       form, source.empty() ? "--causal" : "a causal mask", part));
  if (kind == LinearKind::Linformer && mask.causal)
    refuse(fmt::format("{} cannot be {}: each projected key mixes every position (Wang et al. 2020, section 4)", form,
                       source.empty() ? "--causal" : "causal"));
}

// --- feature maps --------------------------------------------------------------------------------

namespace {

constexpr std::int64_t block_rows = 64; // keys and queries per block of the sums and the features

// Rows of one item of a view: row r at data + r * ld.
struct Rows {
  const float* data;
  std::int64_t ld;
  const float* at(std::int64_t r) const { return data + r * ld; }
};

// phi of one item's query or key rows, a block at a time: no (n, r) tensor is kept (for n = 16384
// and Performer's M = 256 two of them cost 32 MiB, whose first touch took a third of the time).
// A block's features depend on its rows alone (and, for Performer's keys, on the item's shift), and
// blocks are 64 rows from the item's first, so the bits do not depend on the threads.
class FeatureMap {
public:
  // Performer's exponents that are not finite (|x'|^2 / 2 or omega x' beyond float32: the row's
  // features would be 0 or NaN) set `overflow` to Queries or Keys, for the caller to report.
  enum Overflow : int { None, Queries, Keys };
  FeatureMap(LinearKind kind, const Tensor* omega, float scale, std::int64_t d, std::atomic<int>* overflow)
      : kind_(kind), omega_(omega), root_(std::sqrt(scale)), d_(d), r_(kind == LinearKind::Favor ? omega->dim(0) : d),
        overflow_(overflow) {}
  std::int64_t size() const { return r_; }

  // phi (rows, r) of query rows x (rows, d).
  void queries(Rows x, std::int64_t rows, float* phi) const {
    if (kind_ == LinearKind::Elu) return elu(x, rows, phi);
    favor_exponents(x, rows, phi, nullptr, Queries);
    for (std::int64_t i = 0; i < rows; ++i) favor_exp(phi + i * r_, max_of(phi + i * r_, r_));
  }
  // phi (rows, r) of key rows j0.. of the item's keys x; padded ones (skip) are 0.
  void keys(Rows x, std::int64_t j0, std::int64_t rows, const std::uint8_t* skip, float* phi) const {
    x.data = x.at(j0);
    if (kind_ == LinearKind::Elu) {
      elu(x, rows, phi);
    } else {
      favor_exponents(x, rows, phi, skip ? skip + j0 : nullptr, Keys);
      for (std::int64_t i = 0; i < rows; ++i) favor_exp(phi + i * r_, key_shift_);
    }
    if (skip)
      for (std::int64_t i = 0; i < rows; ++i)
        if (skip[j0 + i]) std::fill_n(phi + i * r_, r_, 0.0f);
  }

  // Performer: the keys' shift, the largest exponent over the item's keys k (m, d) not skipped,
  // so that exp(t - shift) <= 1 (it cancels in the normalisation).
  void set_key_shift(Rows k, std::int64_t m, const std::uint8_t* skip) {
    if (kind_ != LinearKind::Favor) return;
    const std::int64_t blocks = (m + block_rows - 1) / block_rows;
    float best = -std::numeric_limits<float>::infinity();
#pragma omp parallel num_threads(blas::threads()) if (blocks > 1)
    {
      std::vector<float> t(static_cast<std::size_t>(block_rows * r_));
      float mine = -std::numeric_limits<float>::infinity();
#pragma omp for schedule(static)
      for (std::int64_t blk = 0; blk < blocks; ++blk) {
        const std::int64_t j0 = blk * block_rows, rows = std::min(m, j0 + block_rows) - j0;
        favor_exponents({k.at(j0), k.ld}, rows, t.data(), skip ? skip + j0 : nullptr, Keys);
        for (std::int64_t i = 0; i < rows; ++i)
          if (!skip || !skip[j0 + i]) mine = std::max(mine, max_of(t.data() + i * r_, r_));
      }
#pragma omp critical
      best = std::max(best, mine);
    }
    key_shift_ = best;
  }

private:
  // elu(x) + 1: exp over the negative part (vectorised), x + 1 elsewhere.
  void elu(Rows x, std::int64_t rows, float* phi) const {
    for (std::int64_t i = 0; i < rows; ++i) {
      const float* xi = x.at(i);
      float* pi = phi + i * d_;
      for (std::int64_t c = 0; c < d_; ++c) pi[c] = std::min(xi[c], 0.0f);
    }
    exp_shifted(phi, rows * d_, 0.0f);
    for (std::int64_t i = 0; i < rows; ++i) {
      const float* xi = x.at(i);
      float* pi = phi + i * d_;
      for (std::int64_t c = 0; c < d_; ++c)
        if (xi[c] > 0.0f) pi[c] = xi[c] + 1.0f;
    }
  }
  // t (rows, M) = omega x' - |x'|^2 / 2, x' = sqrt(scale) x; a row not skipped whose t is not all
  // finite sets the overflow flag to `side`.
  void favor_exponents(Rows x, std::int64_t rows, float* t, const std::uint8_t* skip, Overflow side) const {
    blas::gemm(false, true, rows, r_, d_, root_, x.data, x.ld, omega_->data(), d_, 0.0f, t, r_);
    for (std::int64_t i = 0; i < rows; ++i) {
      const float* xi = x.at(i);
      double sq = 0;
      for (std::int64_t c = 0; c < d_; ++c) sq += static_cast<double>(xi[c]) * xi[c];
      const float half = static_cast<float>(0.5 * double(root_) * root_ * sq);
      float* ti = t + i * r_;
      float check = 0.0f; // NaN or infinite when a value is
      for (std::int64_t l = 0; l < r_; ++l) {
        ti[l] -= half;
        check += ti[l] * 0.0f;
      }
      if (check != 0.0f && !(skip && skip[i])) overflow_->store(side, std::memory_order_relaxed);
    }
  }
  // t = exp(t - shift) / sqrt(M)
  void favor_exp(float* t, float shift) const {
    exp_shifted(t, r_, shift);
    const float inv_sqrt_m = 1.0f / std::sqrt(static_cast<float>(r_));
    for (std::int64_t l = 0; l < r_; ++l) t[l] *= inv_sqrt_m;
  }
  static float max_of(const float* x, std::int64_t n) { return *std::max_element(x, x + n); }

  LinearKind kind_;
  const Tensor* omega_;
  float root_;
  std::int64_t d_, r_;
  std::atomic<int>* overflow_;
  float key_shift_ = 0;
};

// --- the linear form -----------------------------------------------------------------------------

// Rows of out (n, dv) for the queries of blocks [blk0, blk1) of one item with queries q (n, d),
// keys k (m, d) and values v (m, dv). State S = sum_j phi(k_j) v_j^T (r, dv) and
// z = sum_j phi(k_j) (r) over whole key blocks, always added from block 0 in order; with `causal`, a
// query block adds the keys of its last, partly visible stretch as a masked quadratic tile.
class LinearItem {
public:
  LinearItem(const FeatureMap& phi, Rows q, Rows k, Rows v, const std::uint8_t* skip, std::int64_t n, std::int64_t m,
             std::int64_t dv, bool causal)
      : phi_(phi), q_(q), k_(k), v_(v), skip_(skip), n_(n), m_(m), r_(phi.size()), dv_(dv), causal_(causal),
        S_(static_cast<std::size_t>(r_ * dv), 0.0f), z_(static_cast<std::size_t>(r_), 0.0),
        fk_(static_cast<std::size_t>(2 * block_rows * r_)) {}

  // out: row i at out + i * ldo.
  void run(std::int64_t blk0, std::int64_t blk1, float* out, std::int64_t ldo) {
    const std::int64_t key_blocks = (m_ + block_rows - 1) / block_rows;
    if (!causal_) add_key_blocks(key_blocks);
    std::vector<float> fq(static_cast<std::size_t>(block_rows * r_));
    std::vector<float> tile(static_cast<std::size_t>(block_rows * 2 * block_rows));
    std::vector<double> den(static_cast<std::size_t>(block_rows));
    for (std::int64_t blk = blk0; blk < blk1; ++blk) {
      const std::int64_t i0 = blk * block_rows, i1 = std::min(n_, i0 + block_rows), ni = i1 - i0;
      const std::int64_t p0 = i0 + m_ - n_, p1 = i1 - 1 + m_ - n_; // key positions of the first and last query
      if (causal_) add_key_blocks(p0 + 1 <= 0 ? 0 : (p0 + 1) / block_rows);
      float* o = out + i0 * ldo;
      const float* q = fq.data();
      phi_.queries({q_.at(i0), q_.ld}, ni, fq.data());
      blas::gemm(false, false, ni, dv_, r_, 1.0f, q, r_, S_.data(), dv_, 0.0f, o, ldo);
      for (std::int64_t i = 0; i < ni; ++i) {
        double s = 0;
        for (std::int64_t c = 0; c < r_; ++c) s += static_cast<double>(q[i * r_ + c]) * z_[static_cast<std::size_t>(c)];
        den[static_cast<std::size_t>(i)] = s;
      }
      const std::int64_t j0 = done_ * block_rows, j1 = causal_ ? std::min(p1 + 1, m_) : j0;
      if (j1 > j0) { // keys j0..j1-1 (at most two blocks): query i sees those at j <= p0 + i
        const std::int64_t w = j1 - j0;
        for (std::int64_t jb = j0; jb < j1; jb += block_rows)
          phi_.keys(k_, jb, std::min(m_, jb + block_rows) - jb, skip_, fk_.data() + (jb - j0) * r_);
        float* a = tile.data();
        blas::gemm(false, true, ni, w, r_, 1.0f, q, r_, fk_.data(), r_, 0.0f, a, w);
        for (std::int64_t i = 0; i < ni; ++i) {
          double s = 0;
          for (std::int64_t j = 0; j < w; ++j) {
            if (j0 + j > p0 + i) a[i * w + j] = 0.0f;
            s += a[i * w + j];
          }
          den[static_cast<std::size_t>(i)] += s;
        }
        blas::gemm(false, false, ni, dv_, w, 1.0f, a, w, v_.at(j0), v_.ld, 1.0f, o, ldo);
      }
      for (std::int64_t i = 0; i < ni; ++i) {
        const double dn = den[static_cast<std::size_t>(i)];
        // an infinite normaliser is an overflow: NaN, which check_finite reports
        const float inv = std::isinf(dn) ? std::numeric_limits<float>::quiet_NaN()
                          : dn > 0       ? static_cast<float>(1.0 / dn)
                                         : 0.0f;
        for (std::int64_t c = 0; c < dv_; ++c) o[i * ldo + c] = dn > 0 ? o[i * ldo + c] * inv : 0.0f;
      }
    }
  }

private:
  // Adds key blocks done_..upto-1 to S and z, one block at a time.
  void add_key_blocks(std::int64_t upto) {
    for (; done_ < upto; ++done_) {
      const std::int64_t j0 = done_ * block_rows, rows = std::min(m_, j0 + block_rows) - j0;
      float* fk = fk_.data();
      phi_.keys(k_, j0, rows, skip_, fk);
      blas::gemm(true, false, r_, dv_, rows, 1.0f, fk, r_, v_.at(j0), v_.ld, 1.0f, S_.data(), dv_);
      for (std::int64_t j = 0; j < rows; ++j)
        for (std::int64_t c = 0; c < r_; ++c) z_[static_cast<std::size_t>(c)] += fk[j * r_ + c];
    }
  }

  const FeatureMap& phi_;
  Rows q_, k_, v_;
  const std::uint8_t* skip_;
  std::int64_t n_, m_, r_, dv_;
  bool causal_;
  std::vector<float> S_;
  std::vector<double> z_;
  std::vector<float> fk_; // features of up to two key blocks
  std::int64_t done_ = 0; // key blocks in S and z
};

// w (n, m), row i at w + i * ldw: the implied weights of one item, phi(q_i) . phi(k_j) over the
// keys query i sees, normalised to sum 1 (a row without keys: 0). The keys' features are kept
// whole (m, r): this is only for inputs small enough to have their (n, m) weights written.
void implied_weights(const FeatureMap& phi, Rows q, Rows k, const std::uint8_t* skip, std::int64_t n, std::int64_t m,
                     bool causal, float* w, std::int64_t ldw) {
  const std::int64_t r = phi.size();
  std::vector<float> fk(static_cast<std::size_t>(m * r));
  const std::int64_t key_blocks = (m + block_rows - 1) / block_rows, query_blocks = (n + block_rows - 1) / block_rows;
#pragma omp parallel for schedule(static) num_threads(blas::threads()) if (key_blocks > 1)
  for (std::int64_t blk = 0; blk < key_blocks; ++blk) {
    const std::int64_t j0 = blk * block_rows;
    phi.keys(k, j0, std::min(m, j0 + block_rows) - j0, skip, fk.data() + j0 * r);
  }
#pragma omp parallel num_threads(blas::threads()) if (query_blocks > 1)
  {
    std::vector<float> fq(static_cast<std::size_t>(block_rows * r));
#pragma omp for schedule(static)
    for (std::int64_t blk = 0; blk < query_blocks; ++blk) {
      const std::int64_t i0 = blk * block_rows, i1 = std::min(n, i0 + block_rows);
      phi.queries({q.at(i0), q.ld}, i1 - i0, fq.data());
      blas::gemm(false, true, i1 - i0, m, r, 1.0f, fq.data(), r, fk.data(), r, 0.0f, w + i0 * ldw, ldw);
      for (std::int64_t i = i0; i < i1; ++i) {
        float* row = w + i * ldw;
        if (causal) std::fill(row + std::clamp<std::int64_t>(i + m - n + 1, 0, m), row + m, 0.0f);
        double s = 0;
        for (std::int64_t j = 0; j < m; ++j) s += row[j];
        const float inv = s > 0 ? static_cast<float>(1.0 / s) : 0.0f;
        for (std::int64_t j = 0; j < m; ++j) row[j] = s > 0 ? row[j] * inv : 0.0f;
      }
    }
  }
}

// The padded keys of the mask's item b as flags (m), or empty when none is padded.
std::vector<std::uint8_t> padded_keys(const Mask* mask, std::int64_t b, std::int64_t m) {
  std::vector<std::uint8_t> skip;
  if (!mask || (mask->lengths.empty() && mask->key_padding.empty())) return skip;
  skip.resize(static_cast<std::size_t>(m));
  for (std::int64_t j = 0; j < m; ++j) skip[static_cast<std::size_t>(j)] = mask->padding(b, j) ? 1 : 0;
  return skip;
}

const std::uint8_t* flags_or_null(const std::vector<std::uint8_t>& s) { return s.empty() ? nullptr : s.data(); }

// Every element of the (B, H, rows, width) view x is finite, or an Error: a sum overflowed.
void check_finite(const OutView& x, std::int64_t B, std::int64_t H, std::int64_t rows, std::int64_t width,
                  LinearKind kind) {
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < rows; ++i) {
        const float* row = x.at(b, h, i);
        for (std::int64_t c = 0; c < width; ++c)
          if (!std::isfinite(row[c]))
            throw Error(fmt::format("--attention {}: a sum overflowed float32 (the inputs are too large for its "
                                    "linear form)",
                                    linear_kind_name(kind)));
      }
}

// Performer's features of large but finite queries or keys: |x'|^2 / 2 beyond float32 made every
// such key's features 0 (the output silently 0) or NaN. An Error naming the side instead.
void check_feature_overflow(int side) {
  if (side == FeatureMap::None) return;
  throw Error(
      fmt::format("--attention performer: the {}' feature exponents |x'|^2 / 2 overflow float32 (the {} are too "
                  "large for its random features: scale them down)",
                  side == FeatureMap::Queries ? "queries" : "keys", side == FeatureMap::Queries ? "queries" : "keys"));
}

void kernelised_attention(const LinearAttention& a) {
  const std::int64_t B = a.batch, H = a.heads, items = B * H, n = a.n, m = a.m, d = a.d, dv = a.dv;
  const bool causal = a.mask && a.mask->causal;
  const auto q_rows = [&](std::int64_t b, std::int64_t h) { return Rows{a.q.at(b, h, 0), a.q.row}; };
  const auto k_rows = [&](std::int64_t b, std::int64_t h) { return Rows{a.k.at(b, h / a.kv_group, 0), a.k.row}; };
  std::vector<std::vector<std::uint8_t>> skip(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b) skip[static_cast<std::size_t>(b)] = padded_keys(a.mask, a.mask_batch + b, m);
  // One feature map per (item, head): Performer's key shift is the head's own.
  std::atomic<int> overflow{FeatureMap::None};
  std::vector<FeatureMap> phi(static_cast<std::size_t>(items), FeatureMap(a.kind, a.features, a.scale, d, &overflow));
  for (std::int64_t t = 0; t < items; ++t)
    phi[static_cast<std::size_t>(t)].set_key_shift(k_rows(t / H, t % H), m,
                                                   flags_or_null(skip[static_cast<std::size_t>(t / H)]));
  if (a.out.data) {
    // Tasks: each (item, head)'s query blocks in `parts` stretches (more than one when they are
    // fewer than the threads); a stretch builds its state from key block 0, so the split changes no
    // bits.
    const std::int64_t q_blocks = (n + block_rows - 1) / block_rows;
    const std::int64_t parts = std::clamp<std::int64_t>((blas::threads() + items - 1) / items, 1, q_blocks);
#pragma omp parallel for schedule(dynamic, 1) num_threads(blas::threads()) if (items * parts > 1)
    for (std::int64_t task = 0; task < items * parts; ++task) {
      const std::int64_t t = task / parts, part = task % parts, b = t / H, h = t % H;
      LinearItem item(phi[static_cast<std::size_t>(t)], q_rows(b, h), k_rows(b, h),
                      Rows{a.v.at(b, h / a.kv_group, 0), a.v.row}, flags_or_null(skip[static_cast<std::size_t>(b)]), n,
                      m, dv, causal);
      item.run(part * q_blocks / parts, (part + 1) * q_blocks / parts, a.out.at(b, h, 0), a.out.row);
    }
    check_feature_overflow(overflow.load());
    check_finite(a.out, B, H, n, dv, a.kind);
  }
  if (a.weights.data) {
    for (std::int64_t t = 0; t < items; ++t) {
      const std::int64_t b = t / H, h = t % H;
      implied_weights(phi[static_cast<std::size_t>(t)], q_rows(b, h), k_rows(b, h),
                      flags_or_null(skip[static_cast<std::size_t>(b)]), n, m, causal, a.weights.at(b, h, 0),
                      a.weights.row);
    }
    check_feature_overflow(overflow.load());
    check_finite(a.weights, B, H, n, m, a.kind);
  }
}

void linformer_attention(const LinearAttention& a) {
  const LinformerProjections& p = *a.proj;
  const std::int64_t kp = p.E.dim(0), B = a.batch, H = a.heads, G = a.heads / a.kv_group, n = a.n, m = a.m, d = a.d,
                     dv = a.dv;
  const bool values = a.v.data != nullptr;
  // K' = E K (B, G, k, d) and V' = F V (B, G, k, dv), the padded keys' rows taken as zero.
  Tensor kproj(Shape{B, G, kp, d}, Uninitialized{});
  Tensor vproj(Shape{B, G, kp, std::max<std::int64_t>(dv, 1)}, Uninitialized{});
  std::vector<float> gathered;
  // y (k, width) = P x, x (m, width) with rows x.at(j), the skipped ones zero.
  const auto project = [&](const Tensor& P, Rows x, std::int64_t width, const std::vector<std::uint8_t>& skip,
                           float* y) {
    gathered.resize(static_cast<std::size_t>(m * width));
    for (std::int64_t j = 0; j < m; ++j) {
      float* g = gathered.data() + j * width;
      if (!skip.empty() && skip[static_cast<std::size_t>(j)])
        std::fill_n(g, width, 0.0f);
      else
        std::copy_n(x.at(j), width, g);
    }
    blas::gemm(false, false, kp, width, m, 1.0f, P.data(), m, gathered.data(), width, 0.0f, y, width);
  };
  for (std::int64_t b = 0; b < B; ++b) {
    const std::vector<std::uint8_t> skip = padded_keys(a.mask, a.mask_batch + b, m);
    for (std::int64_t g = 0; g < G; ++g) {
      project(p.E, {a.k.at(b, g, 0), a.k.row}, d, skip, kproj.data() + (b * G + g) * kp * d);
      if (values) project(p.F, {a.v.at(b, g, 0), a.v.row}, dv, skip, vproj.data() + (b * G + g) * kp * dv);
    }
  }
  const OutView kview{kproj.data(), G * kp * d, kp * d, d}, vview{vproj.data(), G * kp * dv, kp * dv, dv};
  check_finite(kview, B, G, kp, d, a.kind);
  if (values) check_finite(vview, B, G, kp, dv, a.kind);

  const DotScorer scorer(a.q, {kproj.data(), G * kp * d, kp * d, d}, d, a.kv_group, a.scale);
  Mask none;
  none.n = n, none.m = kp;
  Attention att;
  att.batch = B, att.heads = H, att.n = n, att.m = kp, att.dv = dv, att.kv_group = a.kv_group;
  att.scorer = &scorer;
  att.mask = &none;
  if (values) att.v = {vproj.data(), G * kp * dv, kp * dv, dv};
  att.out = a.out;
  Tensor probs; // P (B, H, n, k), for the implied weights P F
  if (a.weights.data) {
    probs = Tensor(Shape{B, H, n, kp}, Uninitialized{});
    att.weights = {probs.data(), H * n * kp, n * kp, kp};
  }
  attention(att);
  if (!a.weights.data) return;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::vector<std::uint8_t> skip = padded_keys(a.mask, a.mask_batch + b, m);
    for (std::int64_t h = 0; h < H; ++h) {
      float* w = a.weights.at(b, h, 0);
      const std::int64_t ldw = a.weights.row;
      blas::gemm(false, false, n, m, kp, 1.0f, probs.data() + (b * H + h) * n * kp, kp, p.F.data(), m, 0.0f, w, ldw);
      if (!skip.empty())
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < m; ++j)
            if (skip[static_cast<std::size_t>(j)]) w[i * ldw + j] = 0.0f;
    }
  }
}

} // namespace

void linear_attention(const LinearAttention& a) {
  if (a.mask) check_linear_mask(*a.mask, a.kind, a.source);
  if ((a.out.data != nullptr) != (a.v.data != nullptr))
    throw std::logic_error("linear_attention: out and v go together");
  if (a.heads <= 0 || a.kv_group <= 0 || a.heads % a.kv_group != 0)
    throw std::logic_error("linear_attention: kv_group must divide heads");
  if (a.kind == LinearKind::Favor && !a.features)
    throw std::logic_error("linear_attention: performer without features");
  if (a.kind == LinearKind::Linformer && !a.proj) throw std::logic_error("linear_attention: linformer without E, F");
  if (a.kind == LinearKind::Linformer && a.proj->E.dim(1) != a.m)
    throw Error(fmt::format("Linformer's E and F ({}, {}) project {} keys, not the {} of this call", a.proj->E.dim(0),
                            a.proj->E.dim(1), a.proj->E.dim(1), a.m));
  if (a.batch <= 0) return;
  blas::load_openblas(); // the products below run inside parallel regions, where an error cannot leave
  if (a.kind == LinearKind::Linformer) {
    linformer_attention(a);
  } else {
    kernelised_attention(a);
  }
}

} // namespace attn
