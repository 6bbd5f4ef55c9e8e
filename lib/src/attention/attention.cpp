// The attention kernel: blocked online softmax over row blocks, the dispatch to each instruction
// set's tiles, and the float64 reference (attention.hpp).
#include "attn/attention/attention.hpp"

#include "attn/core/error.hpp"
#include "attn/core/half.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/kernels/linear_weight.hpp"
#include "attn/kernels/parallel.hpp"

#include "kernels/isa/attention_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>

#if !defined(__x86_64__)
namespace attn::attention_detail { // no SIMD loops built: the scalar ones serve
const KernelTable* avx512_table() { return nullptr; }
const KernelTable* avx2_table() { return nullptr; }
} // namespace attn::attention_detail
#endif

namespace attn {

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

// Query rows per block and keys per block: a 128 x 256 float score tile (128 KiB) and the
// 128 x dv accumulator stay in L2 while sgemm streams K and V. Measured at b=8, n=m=4096, d=64
// on 2 threads: 64 x 256 gave 135 GFLOP/s, 128 x 256 148, 256 x 256 154 (but fewer tasks to
// share between threads), 128 x 512 140.
constexpr std::int64_t block_q = 128;
constexpr std::int64_t block_k = 256;

// The loops of softmax rows (attention_rows): the AVX2 table when the CPU has it, whatever the
// instruction set of the fused kernel, so the weights' bits stay those of 8-lane sums everywhere.
const attention_detail::KernelTable& row_kernels() {
  static const attention_detail::KernelTable* t =
      blas::isa_available(blas::Isa::avx2) ? attention_detail::avx2_table() : attention_detail::scalar_table();
  return *t;
}

float row_max(const float* x, std::int64_t n) { return row_kernels().row_max(x, n); }
float exp_sum(float* x, std::int64_t n, float max) { return row_kernels().exp_sum(x, n, max); }

// Keeps the k largest finite entries of row (ties broken by the lower key index); the rest -inf.
void keep_top_k(float* row, std::int64_t m, std::int64_t k, std::vector<std::int64_t>& idx) {
  idx.clear();
  for (std::int64_t j = 0; j < m; ++j)
    if (row[j] != neg_inf) idx.push_back(j);
  if (static_cast<std::int64_t>(idx.size()) <= k) return;
  auto better = [row](std::int64_t a, std::int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
  std::nth_element(idx.begin(), idx.begin() + k, idx.end(), better);
  for (auto it = idx.begin() + k; it != idx.end(); ++it) row[*it] = neg_inf;
}

// Softmax of row in place; a row with no allowed key becomes all zeros (never NaN).
void softmax_row(float* row, std::int64_t m) {
  const float mx = row_max(row, m);
  if (mx == neg_inf) {
    std::fill(row, row + m, 0.0f);
    return;
  }
  const float inv = 1.0f / exp_sum(row, m, mx);
  for (std::int64_t j = 0; j < m; ++j) row[j] *= inv;
}

// The unit of parallel work: query rows i0 .. i0+ni-1 of head h of batch item b. Tasks are
// numbered t = (b * heads + h) * blocks + block.
struct QueryBlock {
  std::int64_t b, h, i0, ni;
};

// Tasks of `rows` queries (at most block_q) of one item and head.
std::int64_t query_blocks(const Attention& a, std::int64_t rows) { return (a.n + rows - 1) / rows; }
std::int64_t query_block_tasks(const Attention& a, std::int64_t rows) {
  return a.batch * a.heads * query_blocks(a, rows);
}

QueryBlock query_block(const Attention& a, std::int64_t t, std::int64_t rows) {
  const std::int64_t blocks = query_blocks(a, rows), i0 = (t % blocks) * rows;
  return {t / (a.heads * blocks), (t / blocks) % a.heads, i0, std::min(rows, a.n - i0)};
}

// The blocked path's queries per task. Dot products (the fused kernel): its block_queries, 64,
// whatever the mask; 128 was slower on a Xeon model 85 (attention alone, 2 threads, d = 64, paired
// runs: 8 x 4096 queries 1.09x -> 1.18x, 512 x 512 1.11x -> 1.12x, each against the unpadded
// kernel): a task's scratch (queries, scores and output transposed) then stays nearer L1.
// Other scorers (tiled_block): block_q, or half that where the keys a block sees follow its
// queries (causal: up to its last query; a window alone: a band around them; Mask::key_range).
// A block on the diagonal computes scores its mask then removes, up to half a block x block tile,
// and a block half as tall wastes half as much. The fused kernel gives each query the same bits
// whatever its block (a last block of fewer than few_query_rows queries takes tiled_block).
// Measured when the fused kernel's tasks were 128 queries too (attention alone, 2 threads, d = 64,
// 8 heads, best of 3 runs each): causal over 8 items, n = m = 128 1.28x faster, 256 1.15x, 512
// 1.07x; one item of 2048 1.02x; a window of 128 alone at n = 8192 1.14x. Without such a mask
// half blocks gained nothing (n = m = 512, and 128 queries over 512 keys).
std::int64_t blocked_rows(const Attention& a, bool dot) {
  if (dot) return attention_detail::block_queries;
  return a.mask->causal || a.mask->window_only() ? block_q / 2 : block_q;
}

// Per-thread scratch that lives as long as its thread (OpenMP's pool keeps its threads), so a call
// neither allocates nor zeroes it: decode --generate makes 12 small attention calls per token,
// and a fresh 160 KiB per call and thread cost ~100 page faults per token.
float* thread_scratch(std::size_t slot, std::int64_t count) {
  thread_local std::vector<float> buffers[3];
  std::vector<float>& b = buffers[slot];
  if (b.size() < static_cast<std::size_t>(count)) {
    b.clear();
    b.shrink_to_fit();
    b.resize(static_cast<std::size_t>(count));
  }
  return b.data();
}

bool reference_requested() {
  const char* env = std::getenv("ATTN_REFERENCE");
  return env && *env && std::string(env) != "0";
}

} // namespace

void exp_shifted(float* x, std::int64_t n, float shift) { (void)exp_sum(x, n, shift); }

std::int64_t key_tiles_floats(std::int64_t m, std::int64_t d, std::int64_t width) {
  return (m + width - 1) / width * width * d;
}

namespace {

// Item b's head g of k into its tiles t (key_tiles_floats(m, d, width) floats).
void key_tiles_of(float* t, const float* k, std::int64_t m, std::int64_t ldk, std::int64_t d, std::int64_t width) {
  std::fill_n(t, key_tiles_floats(m, d, width), 0.0f);
  for (std::int64_t j = 0; j < m; ++j)
    for (std::int64_t c = 0; c < d; ++c) t[((j / width) * d + c) * width + j % width] = k[j * ldk + c];
}

} // namespace

void to_key_tiles(float* tiles, const float* k, std::int64_t items, std::int64_t m, std::int64_t ldk,
                  std::int64_t heads, std::int64_t d, std::int64_t width) {
  const std::int64_t per = key_tiles_floats(m, d, width);
  parallel_for(items * heads, blas::threads(), [&](std::int64_t bg) {
    const std::int64_t b = bg / heads, g = bg % heads;
    key_tiles_of(tiles + bg * per, k + b * m * ldk + g * d, m, ldk, d, width);
  });
}

void to_key_tiles(std::uint16_t* tiles, const float* k, std::int64_t items, std::int64_t m, std::int64_t ldk,
                  std::int64_t heads, std::int64_t d, std::int64_t width) {
  const std::int64_t per = key_tiles_floats(m, d, width);
  parallel_shares(items * heads, blas::threads(), [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> t(static_cast<std::size_t>(per)); // a head's float32 tiles, then converted at once
    for (std::int64_t bg = begin; bg < end; ++bg) {
      const std::int64_t b = bg / heads, g = bg % heads;
      key_tiles_of(t.data(), k + b * m * ldk + g * d, m, ldk, d, width);
      floats_to_f16(tiles + bg * per, t.data(), per);
    }
  });
}

// --- scores ----------------------------------------------------------------------------------------

void DotScorer::tile(float* s, std::int64_t lds, std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t ni,
                     std::int64_t j0, std::int64_t nj) const {
  // s = scale * Q[i0 : i0+ni] K[j0 : j0+nj]^T
  blas::gemm(false, true, ni, nj, d_, scale_, q_.at(b, h, i0), q_.row, k_.at(b, h / group_, j0), k_.row, 0.0f, s, lds);
}

double DotScorer::exact(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
  const float* q = q_.at(b, h, i);
  const float* k = k_.at(b, h / group_, j);
  double s = 0;
  for (std::int64_t t = 0; t < d_; ++t) s += static_cast<double>(q[t]) * k[t];
  return s * scale_;
}

AdditiveScorer::AdditiveScorer(const float* qp, const float* kp, std::int64_t n, std::int64_t m, std::vector<float> v)
    : qp_(qp), kp_(kp), n_(n), m_(m), hid_(static_cast<std::int64_t>(v.size())), v_(std::move(v)) {}

void AdditiveScorer::tile(float* s, std::int64_t lds, std::int64_t b, std::int64_t, std::int64_t i0, std::int64_t ni,
                          std::int64_t j0, std::int64_t nj) const {
  const std::int64_t hid = hid_;
  for (std::int64_t r = 0; r < ni; ++r) {
    const float* q = qp_ + (b * n_ + i0 + r) * hid;
    for (std::int64_t c = 0; c < nj; ++c) {
      const float* k = kp_ + (b * m_ + j0 + c) * hid;
      float acc = 0;
      for (std::int64_t t = 0; t < hid; ++t) acc += v_[static_cast<std::size_t>(t)] * std::tanh(q[t] + k[t]);
      s[r * lds + c] = acc;
    }
  }
}

double AdditiveScorer::exact(std::int64_t b, std::int64_t, std::int64_t i, std::int64_t j) const {
  const std::int64_t hid = hid_;
  const float* q = qp_ + (b * n_ + i) * hid;
  const float* k = kp_ + (b * m_ + j) * hid;
  double acc = 0;
  for (std::int64_t t = 0; t < hid; ++t)
    acc += static_cast<double>(v_[static_cast<std::size_t>(t)]) * std::tanh(static_cast<double>(q[t]) + k[t]);
  return acc;
}

// --- kernels ---------------------------------------------------------------------------------------

void attention(const Attention& a) {
  const bool edited = a.edit_scores || a.edit_weights; // the reference has no edits: rows then
  if (reference_requested() && !edited) return attention_reference(a);
  if (a.weights.data || a.scores.data || a.mask->top_k > 0 || !a.v.data || edited) return attention_rows(a);
  return attention_blocked(a);
}

namespace {

// The fused kernel's loops for an instruction set: the scalar ones where the CPU lacks it.
const attention_detail::KernelTable& fused_kernels(blas::Isa isa) {
  const attention_detail::KernelTable* t = nullptr;
  if (blas::isa_available(isa)) switch (isa) {
    case blas::Isa::avx512: t = attention_detail::avx512_table(); break;
    case blas::Isa::avx2: t = attention_detail::avx2_table(); break;
    case blas::Isa::scalar: break;
    }
  return t ? *t : *attention_detail::scalar_table();
}

// What the fused kernel's mask callback needs: the mask and the task's place in it.
struct MaskedBlock {
  const Mask* mask;
  std::int64_t b, h, i0, ni;
};

void mask_fused_step(const void* ctx, float* st, long ld, long j0, long nj) {
  const MaskedBlock& m = *static_cast<const MaskedBlock*>(ctx);
  if (m.mask->needs_elementwise(m.b, m.i0, m.ni, j0, nj))
    apply_mask_transposed(st, ld, *m.mask, m.b, m.h, m.i0, m.ni, j0, nj);
}

// One query block with dot-product scores, on the fused kernel.
void fused_block(const Attention& a, const DotScorer& dot, const QueryBlock& qb,
                 const attention_detail::KernelTable& kernels) {
  const auto [b, h, i0, ni] = qb;
  const MaskedBlock mb{a.mask, b + a.mask_batch, h, i0, ni};
  std::int64_t lo, hi;
  a.mask->key_range(mb.b, i0, i0 + ni, lo, hi);
  // scratch, 64-byte aligned
  float* scratch = thread_scratch(2, attention_detail::scratch_floats(dot.d(), a.dv) + 16);
  scratch += (16 - reinterpret_cast<std::uintptr_t>(scratch) / sizeof(float) % 16) % 16;
  const attention_detail::DotTask task{dot.q().at(b, h, i0),
                                       dot.q().row,
                                       dot.k().at(b, h / dot.kv_group(), 0),
                                       dot.k().row,
                                       a.v.at(b, h / a.kv_group, 0),
                                       a.v.row,
                                       dot.d(),
                                       a.dv,
                                       ni,
                                       lo,
                                       hi,
                                       dot.scale(),
                                       a.out.at(b, h, i0),
                                       a.out.row,
                                       scratch,
                                       &mask_fused_step,
                                       &mb};
  kernels.dot_task(task);
}

// One query block of any scorer, or of dot-product scores with fewer than few_query_rows queries:
// score tiles by the scorer, or by the kernels' few_scores for dot products (K read in place,
// where sgemm packed it on every call: a decoding step spent more time in OpenBLAS's copy
// routines than in its kernel); P V by few_values for few queries, else sgemm.
void tiled_block(const Attention& a, const DotScorer* dot, const QueryBlock& qb,
                 const attention_detail::KernelTable& kernels) {
  const Mask& mk = *a.mask;
  const auto [b, h, i0, ni] = qb;
  // scratch: score tile (rows x block_k) | accumulator (rows x dv) | row max | row sum
  const std::int64_t rows = std::min(block_q, a.n);
  float* s = thread_scratch(0, rows * (block_k + a.dv + 2));
  float* acc = s + rows * block_k;
  float* row_mx = acc + rows * a.dv;
  float* row_sum = row_mx + rows;
  std::fill_n(row_mx, ni, neg_inf);
  std::fill_n(row_sum, ni, 0.0f);
  std::fill_n(acc, ni * a.dv, 0.0f);
  std::int64_t lo, hi;
  const std::int64_t mb = b + a.mask_batch;
  mk.key_range(mb, i0, i0 + ni, lo, hi);
  for (std::int64_t j0 = lo; j0 < hi; j0 += block_k) {
    const std::int64_t nj = std::min(block_k, hi - j0);
    if (const KeyTiles* kt = dot ? &dot->key_tiles() : nullptr; kt && kt->f16 && j0 % 16 == 0)
      kernels.few_scores_tiles_f16(dot->q().at(b, h, i0), dot->q().row, kt->at_f16(b, h / dot->kv_group()), kt->width,
                                   j0, dot->d(), ni, nj, dot->scale(), s, block_k);
    else if (kt && kt->data && j0 % 16 == 0)
      kernels.few_scores_tiles(dot->q().at(b, h, i0), dot->q().row, kt->at(b, h / dot->kv_group()), kt->width, j0,
                               dot->d(), ni, nj, dot->scale(), s, block_k);
    else if (dot)
      kernels.few_scores(dot->q().at(b, h, i0), dot->q().row, dot->k().at(b, h / dot->kv_group(), j0), dot->k().row,
                         dot->d(), ni, nj, dot->scale(), s, block_k);
    else
      a.scorer->tile(s, block_k, b, h, i0, ni, j0, nj);
    if (mk.needs_elementwise(mb, i0, ni, j0, nj)) apply_mask(s, block_k, mk, mb, h, i0, ni, j0, nj);
    for (std::int64_t r = 0; r < ni; ++r) {
      float* row = s + r * block_k;
      // The row's own keys of the block: up to its last allowed one (causal, lengths), so that its
      // sums are those of the row computed alone (a decoding step), not changed in their rounding by
      // the masked keys of the rows after it (speculative.hpp's exactness).
      std::int64_t row_lo, row_hi;
      mk.key_range(mb, i0 + r, i0 + r + 1, row_lo, row_hi);
      const std::int64_t nr = std::clamp<std::int64_t>(row_hi - j0, 0, nj);
      std::fill(row + nr, row + nj, 0.0f);
      if (nr == 0) continue; // every key of the block after the row's: as if the block did not exist
      const float mx = std::max(row_mx[r], row_max(row, nr));
      if (mx == neg_inf) { // nothing allowed yet: contributes nothing
        std::fill(row, row + nr, 0.0f);
        continue;
      }
      const float rescale = std::exp(row_mx[r] - mx); // 0 when the row had no key so far
      row_sum[r] = row_sum[r] * rescale + exp_sum(row, nr, mx);
      if (rescale != 1.0f)
        for (std::int64_t c = 0; c < a.dv; ++c) acc[r * a.dv + c] *= rescale;
      row_mx[r] = mx;
    }
    // acc (ni, dv) += P (ni, nj) V[j0 : j0+nj] (nj, dv)
    if (ni < few_query_rows && a.v_f16.data)
      kernels.few_values_f16(s, block_k, ni, nj, a.v_f16.at(b, h / a.kv_group, j0), a.v_f16.row, a.dv, acc, a.dv);
    else if (ni < few_query_rows)
      kernels.few_values(s, block_k, ni, nj, a.v.at(b, h / a.kv_group, j0), a.v.row, a.dv, acc, a.dv);
    else
      blas::gemm(false, false, ni, a.dv, nj, 1.0f, s, block_k, a.v.at(b, h / a.kv_group, j0), a.v.row, 1.0f, acc, a.dv);
  }
  for (std::int64_t r = 0; r < ni; ++r) {
    float* o = a.out.at(b, h, i0 + r);
    const float inv = row_sum[r] > 0 ? 1.0f / row_sum[r] : 0.0f; // a row that saw no key is 0
    for (std::int64_t c = 0; c < a.dv; ++c) o[c] = acc[r * a.dv + c] * inv;
  }
}

} // namespace

std::int64_t key_tile_width(bool f16) {
  const attention_detail::KernelTable& t = fused_kernels(blas::linear_isa());
  return 16 * (f16 ? t.key_tiles_f16 : t.key_tiles);
}

// FlashAttention's forward pass on the CPU (Dao et al. 2022; PyTorch's cpu_flash_attention): for
// each query block, stream key blocks, keep each row's running max and sum, rescale the
// accumulator when the max grows, and divide by the sum at the end.
void attention_blocked(const Attention& a) { attention_blocked_on(blas::linear_isa(), a); }

void attention_blocked_on(blas::Isa isa, const Attention& a) {
  const auto* dot = dynamic_cast<const DotScorer*>(a.scorer);
  const attention_detail::KernelTable& kernels = fused_kernels(isa);
  const std::int64_t rows = blocked_rows(a, dot != nullptr), tasks = query_block_tasks(a, rows);
  if (!dot) blas::load_openblas(); // tiled_block's P V of many rows, inside the parallel region
#pragma omp parallel for schedule(dynamic) num_threads(blas::threads())
  for (std::int64_t t = 0; t < tasks; ++t) {
    const QueryBlock qb = query_block(a, t, rows);
    if (dot && qb.ni >= few_query_rows)
      fused_block(a, *dot, qb, kernels);
    else
      tiled_block(a, dot, qb, kernels);
  }
}

// Query blocks with their full score rows: raw scores, masks, top-k, softmax, weights, P V.
void attention_rows(const Attention& a) {
  const Mask& mk = *a.mask;
  const std::int64_t tasks = query_block_tasks(a, block_q);
  blas::load_openblas(); // P V below, inside the parallel region, where an error cannot leave
#pragma omp parallel num_threads(blas::threads())
  {
    // The score rows live in the weights output when it is wanted (softmax in place, no copy),
    // else in per-thread scratch.
    float* scratch = a.weights.data ? nullptr : thread_scratch(1, std::min(block_q, a.n) * a.m);
    std::vector<std::int64_t> idx;
#pragma omp for schedule(dynamic)
    for (std::int64_t t = 0; t < tasks; ++t) {
      const auto [b, h, i0, ni] = query_block(a, t, block_q);
      float* s = a.weights.data ? a.weights.at(b, h, i0) : scratch;
      const std::int64_t lds = a.weights.data ? a.weights.row : a.m;
      a.scorer->tile(s, lds, b, h, i0, ni, 0, a.m);
      if (a.edit_scores) a.edit_scores(b, h, i0, ni, s, lds);
      if (a.scores.data)
        for (std::int64_t r = 0; r < ni; ++r) std::copy_n(s + r * lds, a.m, a.scores.at(b, h, i0 + r));
      const std::int64_t mb = b + a.mask_batch;
      if (mk.needs_elementwise(mb, i0, ni, 0, a.m)) apply_mask(s, lds, mk, mb, h, i0, ni, 0, a.m);
      for (std::int64_t r = 0; r < ni; ++r) {
        float* row = s + r * lds;
        if (mk.top_k > 0) keep_top_k(row, a.m, mk.top_k, idx);
        softmax_row(row, a.m);
      }
      if (a.edit_weights) a.edit_weights(b, h, i0, ni, s, lds);
      if (a.out.data) // out (ni, dv) = P (ni, m) V (m, dv)
        blas::gemm(false, false, ni, a.dv, a.m, 1.0f, s, lds, a.v.at(b, h / a.kv_group, 0), a.v.row, 0.0f,
                   a.out.at(b, h, i0), a.out.row);
    }
  }
}

// The definitions, one query at a time, in double precision.
void attention_reference(const Attention& a) {
  const Mask& mk = *a.mask;
  std::vector<double> w(static_cast<std::size_t>(a.m));
  std::vector<float> rowf(static_cast<std::size_t>(a.m));
  std::vector<std::int64_t> idx;
  for (std::int64_t b = 0; b < a.batch; ++b)
    for (std::int64_t h = 0; h < a.heads; ++h)
      for (std::int64_t i = 0; i < a.n; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < a.m; ++j) {
          const double raw = a.scorer->exact(b, h, i, j);
          if (a.scores.data) a.scores.at(b, h, i)[j] = static_cast<float>(raw);
          double s = -std::numeric_limits<double>::infinity();
          const std::int64_t mb = b + a.mask_batch;
          if (mk.allowed(mb, h, i, j))
            s = raw + (mk.bias ? mk.bias->at(mb, h, i, j) : 0.0) + mk.alibi_term(h, i, j) + mk.relative_term(h, i, j);
          w[static_cast<std::size_t>(j)] = s;
        }
        if (mk.top_k > 0) { // select on the float scores, as the fast paths do
          for (std::int64_t j = 0; j < a.m; ++j)
            rowf[static_cast<std::size_t>(j)] = static_cast<float>(w[static_cast<std::size_t>(j)]);
          keep_top_k(rowf.data(), a.m, mk.top_k, idx);
          for (std::int64_t j = 0; j < a.m; ++j)
            if (rowf[static_cast<std::size_t>(j)] == neg_inf)
              w[static_cast<std::size_t>(j)] = -std::numeric_limits<double>::infinity();
        }
        for (double s : w) mx = std::max(mx, s);
        double sum = 0;
        for (double& s : w) {
          s = mx == -std::numeric_limits<double>::infinity() ? 0.0 : std::exp(s - mx);
          sum += s;
        }
        for (double& s : w) s = sum > 0 ? s / sum : 0.0;
        if (a.weights.data)
          for (std::int64_t j = 0; j < a.m; ++j)
            a.weights.at(b, h, i)[j] = static_cast<float>(w[static_cast<std::size_t>(j)]);
        if (a.out.data)
          for (std::int64_t c = 0; c < a.dv; ++c) {
            double o = 0;
            for (std::int64_t j = 0; j < a.m; ++j)
              o += w[static_cast<std::size_t>(j)] * a.v.at(b, h / a.kv_group, j)[c];
            a.out.at(b, h, i)[c] = static_cast<float>(o);
          }
      }
}

} // namespace attn
