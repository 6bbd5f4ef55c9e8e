// Transformer layers and stacks: norms, feed-forwards, encoder and decoder layers, the forward
// passes (transformer.hpp).
#include "attn/model/transformer.hpp"

#include "attn/core/names.hpp"

#include "attn/attention/posenc.hpp"

#include "attn/core/error.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/kernels/parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

namespace attn {

namespace {
constexpr Named<Activation> activations[] = {{"relu", Activation::Relu},
                                             {"gelu", Activation::Gelu},
                                             {"gelu_tanh", Activation::GeluTanh},
                                             {"silu", Activation::Silu},
                                             {"glu", Activation::Glu},
                                             {"geglu", Activation::Geglu},
                                             {"swiglu", Activation::Swiglu},
                                             {"geglu_tanh", Activation::GegluTanh}};
constexpr Named<NormKind> norm_kinds[] = {{"layer_norm", NormKind::Layer}, {"rms_norm", NormKind::Rms}};
} // namespace

Activation parse_activation(std::string_view s) { return parse_named(s, activations, "activation"); }

bool gated(Activation a) {
  return a == Activation::Glu || a == Activation::Geglu || a == Activation::GegluTanh || a == Activation::Swiglu;
}

NormKind parse_norm_kind(std::string_view s) { return parse_named(s, norm_kinds, "norm"); }

std::string norm_kind_name(NormKind k) { return name_of(k, norm_kinds); }

std::string activation_name(Activation a) { return name_of(a, activations); }

// --- the layers ----------------------------------------------------------------------------------

namespace {

// The sum over a row of f(value), in double, as eight interleaved partial sums added in a fixed
// order at the end: the loop vectorises, where one running sum waited on every add (a row of 512
// took 1.3 us a norm, 19 norms a decoding step).
template <class F> [[gnu::always_inline]] inline double row_sum(const float* row, std::int64_t E, const F& f) {
  double s[8] = {};
  std::int64_t e = 0;
  for (; e + 8 <= E; e += 8)
    for (int j = 0; j < 8; ++j) s[j] += f(row[e + j]);
  for (int j = 0; e < E; ++e, ++j) s[j] += f(row[e]);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

[[gnu::always_inline]] inline void add_row(float* row, const float* add, std::int64_t E) {
  for (std::int64_t e = 0; e < E; ++e) row[e] += add[e];
}

// The norms of one row, built for AVX-512, AVX2 and the baseline, the best the CPU runs chosen as
// the program loads: at two doubles a vector (the baseline's SSE2) the norms took 3.6% of encode's
// samples; a norm of (4096, 512) with its residual, 2 threads: 2.2 ms, 1.65 ms with AVX-512 (encode
// 1.005-1.014x). Each clone computes the same operations in the same order, without contraction
// into FMAs (-ffp-contract=off for this file), so the bits are the same on every CPU.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ATTN_ROW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ATTN_ROW_CLONES
#endif

// row = (row + add - mean) / sqrt(var + eps) * g + b (add may be null).
ATTN_ROW_CLONES void layer_norm_row(float* row, const float* add, const float* g, const float* b, std::int64_t E,
                                    double eps) {
  if (add) add_row(row, add, E);
  const double mean = row_sum(row, E, [](float v) { return double(v); }) / static_cast<double>(E);
  const double sq = row_sum(row, E, [mean](float v) { return (v - mean) * (v - mean); });
  const double inv = 1.0 / std::sqrt(sq / static_cast<double>(E) + eps);
  for (std::int64_t e = 0; e < E; ++e) row[e] = static_cast<float>((row[e] - mean) * inv * g[e] + b[e]);
}

// row = (row + add) / sqrt(mean of squares + eps) * g (add may be null).
ATTN_ROW_CLONES void rms_norm_row(float* row, const float* add, const float* g, std::int64_t E, double eps) {
  if (add) add_row(row, add, E);
  const double sq = row_sum(row, E, [](float v) { return double(v) * v; });
  const double inv = 1.0 / std::sqrt(sq / static_cast<double>(E) + eps);
  for (std::int64_t e = 0; e < E; ++e) row[e] = static_cast<float>(row[e] * inv * g[e]);
}

} // namespace

void layer_norm(float* x, std::int64_t rows, const LayerNorm& ln, double eps, const float* add) {
  const std::int64_t E = ln.weight.size();
  const float* g = ln.weight.data();
  const float* b = ln.bias.data();
  parallel_for(rows, threads_if(rows * E >= (1 << 15)),
               [&](std::int64_t r) { layer_norm_row(x + r * E, add ? add + r * E : nullptr, g, b, E, eps); });
}

void rms_norm(float* x, std::int64_t rows, const LayerNorm& ln, double eps, const float* add) {
  const std::int64_t E = ln.weight.size();
  const float* g = ln.weight.data();
  parallel_for(rows, threads_if(rows * E >= (1 << 15)),
               [&](std::int64_t r) { rms_norm_row(x + r * E, add ? add + r * E : nullptr, g, E, eps); });
}

void normalize(float* x, std::int64_t rows, const LayerNorm& ln, const LayerOptions& opt, const float* add) {
  if (opt.norm == NormKind::Rms)
    rms_norm(x, rows, ln, opt.eps, add);
  else
    layer_norm(x, rows, ln, opt.eps, add);
}

namespace {

// The activations' transcendental parts in +, *, / and bit operations only, so that their loops
// vectorise (this file builds with -fno-trapping-math, letting GCC if-convert the selects) and every
// build gives the same bits: glibc's scalar erf, tanh and exp took 12 ns an element, a quarter of a
// BART or BERT encoder's time; these take about 2.

// e^x for x <= 0, 0 below -87.3: Cephes' expf polynomial on x = k ln2 + r, times 2^k (the
// attention kernel's exp_nonpositive without FMA; about 1 ulp).
inline float exp_nonpositive(float x) {
  float fk = x * 1.44269504088896341f;
  fk = (fk + 12582912.0f) - 12582912.0f; // round to nearest
  float r = x - fk * 0.693359375f;
  r = r - fk * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + (r + 1.0f);
  const float k = fk < -126.0f ? -126.0f : fk;
  const float two_k = std::bit_cast<float>((static_cast<std::int32_t>(k) + 127) << 23);
  return x < -87.3f ? 0.0f : p * two_k;
}

// erf by Abramowitz and Stegun 7.1.26, the form PyTorch's vectorised GELU computes: within 5e-7.
inline float erf_approx(float x) {
  const float a = std::fabs(x), t = 1.0f / (1.0f + 0.3275911f * a);
  float r = 1.061405429f;
  r = r * t + -1.453152027f;
  r = r * t + 1.421413741f;
  r = r * t + -0.284496736f;
  r = r * t + 0.254829592f;
  return std::copysign(1.0f - r * t * exp_nonpositive(-(a * a)), x);
}

// tanh(y) = sign(y) (1 - e) / (1 + e), e = e^(-2|y|): within 2e-7.
inline float tanh_approx(float y) {
  const float e = exp_nonpositive(-2.0f * std::fabs(y));
  return std::copysign((1.0f - e) / (1.0f + e), y);
}

// 1 / (1 + e^-x), from e = e^(-|x|) so that no exponent is positive.
inline float sigmoid_approx(float x) {
  const float e = exp_nonpositive(-std::fabs(x)), s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

// Each function over x[0, n), built like the norms' rows for AVX-512, AVX2 and the baseline (the
// same operations in the same order in each: the same bits on every CPU).
ATTN_ROW_CLONES void gelu_range(float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + erf_approx(x[i] * 0.70710678118654752f));
}
ATTN_ROW_CLONES void gelu_tanh_range(float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + tanh_approx(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  }
}
ATTN_ROW_CLONES void sigmoid_range(float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = sigmoid_approx(x[i]);
}
ATTN_ROW_CLONES void silu_range(float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = x[i] * sigmoid_approx(x[i]);
}

// f(x + begin, end - begin) over contiguous shares.
void map_in_place(float* x, std::int64_t count, int threads, void (*f)(float*, std::int64_t)) {
  parallel_shares(count, threads, [x, f](std::int64_t begin, std::int64_t end) { f(x + begin, end - begin); });
}

} // namespace

// The reference forms of each function beside its fast one: GELU 0.5 v (1 + erf(v / sqrt 2)),
// GELU-tanh 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), sigmoid 1 / (1 + e^-v), SiLU v sigmoid(v).
void activate(float* x, std::int64_t count, Activation act) {
  const int t = threads_if(count >= (1 << 15));
  // One loop per function, so that each vectorises (a switch inside the loop kept ReLU scalar: 9%
  // of an encoder's time).
  switch (act) {
  case Activation::Relu: blas::relu_in_place(x, count, blas::threads()); break;
  case Activation::Gelu:
  case Activation::Geglu: map_in_place(x, count, t, gelu_range); break; // (the gate's GELU (erf))
  case Activation::GeluTanh:
  case Activation::GegluTanh: map_in_place(x, count, t, gelu_tanh_range); break; // T5 v1.1's gated-gelu
  case Activation::Glu: map_in_place(x, count, t, sigmoid_range); break;         // the gate's sigmoid
  case Activation::Silu:
  case Activation::Swiglu: map_in_place(x, count, t, silu_range); break; // (the gate's SiLU)
  }
}

void add_in_place(float* x, const float* y, std::int64_t count) {
  parallel_for(count, threads_if(count >= (1 << 15)), [=](std::int64_t i) { x[i] += y[i]; });
}

namespace {

// x *= y elementwise.
void multiply_in_place(float* x, const float* y, std::int64_t count) {
  parallel_for(count, threads_if(count >= (1 << 15)), [=](std::int64_t i) { x[i] *= y[i]; });
}

} // namespace

void depthwise_conv(float* h, std::int64_t F, const Tensor& w, const Tensor& bias, const FfnSequence& seq) {
  const std::int64_t k = w.dim(1), n = seq.n, before = seq.causal ? k - 1 : (k - 1) / 2;
  if (seq.state && !seq.causal) throw std::logic_error("depthwise_conv: a state is for causal convolutions");
#pragma omp parallel num_threads(blas::threads()) if (seq.batch * n * F * k > (1 << 16))
  {
    std::vector<float> in(static_cast<std::size_t>((n + k - 1) * F)); // the item's positions, padded
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < seq.batch; ++b) {
      float* item = h + b * n * F;
      // in: `before` positions (zero, or the state), the item's n (padded ones 0), zeros after
      std::fill(in.begin(), in.end(), 0.0f);
      if (seq.state) std::copy_n(seq.state + b * (k - 1) * F, (k - 1) * F, in.data());
      for (std::int64_t t = 0; t < n; ++t)
        if (!seq.padding || !seq.padding->padding(b, t)) std::copy_n(item + t * F, F, in.data() + (before + t) * F);
      if (seq.state) std::copy_n(in.data() + n * F, (k - 1) * F, seq.state + b * (k - 1) * F);
      // y_t,c = bias_c + sum_s w_c,s in_{t + s},c  (in_{t + s} is position t + s - before)
      for (std::int64_t t = 0; t < n; ++t) {
        float* y = item + t * F;
        for (std::int64_t c = 0; c < F; ++c) y[c] = bias.size() ? bias.data()[c] : 0.0f;
        for (std::int64_t s = 0; s < k; ++s) {
          const float* x = in.data() + (t + s) * F;
          for (std::int64_t c = 0; c < F; ++c) y[c] += w.data()[c * k + s] * x[c];
        }
      }
    }
  }
}

void feed_forward(float* out, const float* x, const FeedForward& f, Activation act, std::int64_t rows, Tensor& hidden,
                  Tensor& gate, const FfnSequence& seq, const ProbeSite* probe) {
  const std::int64_t F = f.w1.dim(0), E = f.w1.dim(1), Eo = f.w2.dim(0); // f.w1: (F, E), f.w2: (Eo, F)
  if (f.conv_kernel() && seq.batch * seq.n != rows)
    throw std::logic_error("feed_forward: a convolution needs the rows' sequences");
  // (int8 in rows is laid out by each product: all rows at once, as float32)
  const bool int8 = f.w1.format() == LinearWeight::Format::int8 && f.w2.format() == LinearWeight::Format::int8 &&
                    !f.w1.in_rows() && !f.w2.in_rows();
  const bool probed = probe && probe->touches(Act::MlpHidden); // the probe sees every row at once
  const std::int64_t step = int8 && !f.conv_kernel() && !probed ? std::min(rows, ffn_rows) : rows;
  float* h = reserve(hidden, step * F);
  float* g = gated(act) ? reserve(gate, step * F) : nullptr;
  for (std::int64_t r = 0; r < rows; r += step) {
    const std::int64_t n = std::min(step, rows - r);
    const float* xr = x + r * E;
    const float* b1 = f.b1.size() ? f.b1.data() : nullptr;
    if (g) { // h = g(x Wg^T + bg) * (x W1^T + b1)
      blas::linear(h, xr, f.w1, b1, n);
      blas::linear(g, xr, f.wg, f.bg.size() ? f.bg.data() : nullptr, n);
      if (f.conv_kernel()) depthwise_conv(g, F, f.conv_w, f.conv_b, seq);
      activate(g, n * F, act);
      multiply_in_place(h, g, n * F);
    } else if (f.conv_kernel() || act != Activation::Relu) {
      blas::linear(h, xr, f.w1, b1, n);
      if (f.conv_kernel()) depthwise_conv(h, F, f.conv_w, f.conv_b, seq);
      activate(h, n * F, act);
    } else { // ReLU as the product stores h: no pass of its own over h (encode 1.01x)
      blas::linear_relu(h, xr, f.w1, b1, n);
    }
    if (probed) probe->at(Act::MlpHidden, rows_view(h, seq.batch, seq.n, F));
    blas::linear(out + r * Eo, h, f.w2, f.b2.size() ? f.b2.data() : nullptr, n);
  }
}

namespace {

// Self-attention of x (B, n, E) under `mask` (with the stack's positions) into out; `weights`
// (B, H, n, n) or null.
void self_attention(const MhaWeights& w, const LayerOptions& opt, const float* x, float* out, std::int64_t B,
                    std::int64_t n, const Mask& mask, float* weights, MhaScratch& scratch, const ProbeSite* probe) {
  MhaCall call;
  call.scratch = &scratch;
  call.batch = B, call.n = n, call.m = n;
  call.x_q = call.x_k = call.x_v = x;
  call.self_attention = true;
  call.mask = &mask;
  if (opt.positions == LayerPositions::Rope) call.rope = opt.rope;
  call.out = out;
  call.weights = weights;
  call.probe = probe;
  multi_head_attention(w, call);
}

} // namespace

void probe_at(const Probe* probe, std::size_t layer, Act a, float* x, std::int64_t B, std::int64_t n,
              std::int64_t width, const Mask* padding, std::int64_t pos0) {
  if (!probe || !probe->touches(layer, a)) return;
  ActView v = rows_view(x, B, n, width);
  v.pos0 = pos0;
  probe->at(layer, a, v, padding);
}

namespace {

// A layer's attention weights buffer `t`, (B, H, n, m + the module's extra keys); reallocated
// only when the shape changes from layer to layer.
float* weights_buffer(Tensor& t, const MhaWeights& w, std::int64_t B, std::int64_t n, std::int64_t m) {
  const Shape shape{B, w.shape.heads, n, m + w.extra_keys()};
  if (t.shape() != shape) t = Tensor(shape, Uninitialized{});
  return t.data();
}

} // namespace

Mask self_attention_mask(const Mask& base, const LayerOptions& opt, std::int64_t batch, std::int64_t heads) {
  Mask m = mask_items(base, 0, batch, 1, base.n);
  if (opt.sliding_window > 0) m.window = opt.sliding_window - 1; // |p - j| <= W - 1
  if (opt.positions == LayerPositions::Alibi) m.alibi = alibi_slopes(heads);
  if (opt.positions == LayerPositions::Relative) m.relative = opt.relative;
  return m;
}

std::int64_t batch_chunk(std::int64_t tokens, std::int64_t requested, std::int64_t budget) {
  if (requested > 0) return requested;
  return std::max<std::int64_t>(1, budget / std::max<std::int64_t>(tokens, 1));
}

void encoder_forward(const Encoder& enc, float* x, std::int64_t batch, std::int64_t n, const Mask& mask,
                     const LayerWeightsSink& sink, const Probe* probe) {
  const std::int64_t E = enc.embed_dim(), rows = batch * n;
  LayerScratch s(rows, E, enc.opt.parallel_residual);
  const Mask self_mask = self_attention_mask(mask, enc.opt, batch, enc.heads());
  Tensor weights;
  for (std::size_t i = 0; i < enc.layers.size(); ++i) {
    const EncoderLayer& layer = enc.layers[i];
    const ProbeSite site{probe, i, false, &mask, &mask}; // self-attention's and the feed-forward's
    const auto attn = [&](const float* in, float* out) {
      self_attention(layer.self_attn, enc.opt, in, out, batch, n, self_mask,
                     sink ? weights_buffer(weights, layer.self_attn, batch, n, n) : nullptr, s.mha,
                     probe ? &site : nullptr);
      probe_at(probe, i, Act::AttnOut, out, batch, n, E, &mask);
    };
    const auto ffn = [&](const float* in, float* out) {
      feed_forward(out, in, layer.ffn, enc.opt.activation, rows, s.hidden(), s.gate, {batch, n, mask.causal, &mask},
                   probe ? &site : nullptr);
      probe_at(probe, i, Act::MlpOut, out, batch, n, E, &mask);
    };
    probe_at(probe, i, Act::ResidPre, x, batch, n, E, &mask);
    if (enc.opt.parallel_residual) {
      parallel_residual(enc.opt, layer.norm1, layer.norm2, x, rows, E, s, attn, ffn);
    } else {
      residual(enc.opt, layer.norm1, x, rows, E, s, attn);
      probe_at(probe, i, Act::ResidMid, x, batch, n, E, &mask);
      residual(enc.opt, layer.norm2, x, rows, E, s, ffn);
    }
    probe_at(probe, i, Act::ResidPost, x, batch, n, E, &mask);
    if (sink) sink(i, weights);
  }
  if (enc.has_final_norm) normalize(x, rows, enc.norm, enc.opt);
  zero_padding(x, batch, n, E, mask);
  probe_at(probe, Probe::final_layer, Act::Final, x, batch, n, E, &mask);
}

void decoder_forward(const Decoder& dec, float* x, std::int64_t batch, std::int64_t t, const float* memory,
                     std::int64_t s, const Mask& self_mask, const Mask& memory_mask, const DecoderWeightsSink& sink,
                     const Probe* probe) {
  const std::int64_t E = dec.embed_dim(), rows = batch * t;
  LayerScratch sc(rows, E, dec.opt.parallel_residual);
  const Mask self_attn_mask = self_attention_mask(self_mask, dec.opt, batch, dec.heads());
  Tensor self_w, cross_w;
  for (std::size_t i = 0; i < dec.layers.size(); ++i) {
    const DecoderLayer& layer = dec.layers[i];
    const ProbeSite self_site{probe, i, false, &self_mask, &self_mask}, // and the feed-forward's
        cross_site{probe, i, true, &self_mask, &memory_mask};
    const auto attn = [&](const float* in, float* out) {
      self_attention(layer.self_attn, dec.opt, in, out, batch, t, self_attn_mask,
                     sink ? weights_buffer(self_w, layer.self_attn, batch, t, t) : nullptr, sc.mha,
                     probe ? &self_site : nullptr);
      probe_at(probe, i, Act::AttnOut, out, batch, t, E, &self_mask);
    };
    const auto ffn = [&](const float* in, float* out) {
      feed_forward(out, in, layer.ffn, dec.opt.activation, rows, sc.hidden(), sc.gate, {batch, t, true, &self_mask},
                   probe ? &self_site : nullptr);
      probe_at(probe, i, Act::MlpOut, out, batch, t, E, &self_mask);
    };
    probe_at(probe, i, Act::ResidPre, x, batch, t, E, &self_mask);
    if (dec.opt.parallel_residual) { // decoder-only stacks (the loader refuses it with cross-attention)
      parallel_residual(dec.opt, layer.norm1, layer.norm2, x, rows, E, sc, attn, ffn);
      probe_at(probe, i, Act::ResidPost, x, batch, t, E, &self_mask);
      if (sink) sink(i, self_w, cross_w);
      continue;
    }
    residual(dec.opt, layer.norm1, x, rows, E, sc, attn);
    probe_at(probe, i, Act::ResidMid, x, batch, t, E, &self_mask);
    if (dec.has_cross) {
      residual(dec.opt, layer.norm2, x, rows, E, sc, [&](const float* in, float* out) {
        MhaCall call;
        call.batch = batch, call.n = t, call.m = s;
        call.x_q = in, call.x_k = call.x_v = memory;
        call.mask = &memory_mask;
        call.query_padding = &self_mask; // a padded target position's cross weights are 0 too
        call.out = out;
        call.weights = sink ? weights_buffer(cross_w, layer.cross_attn, batch, t, s) : nullptr;
        call.scratch = &sc.mha;
        call.probe = probe ? &cross_site : nullptr;
        multi_head_attention(layer.cross_attn, call);
        probe_at(probe, i, Act::CrossAttnOut, out, batch, t, E, &self_mask);
      });
      probe_at(probe, i, Act::CrossResidMid, x, batch, t, E, &self_mask);
    }
    residual(dec.opt, dec.ffn_norm(layer), x, rows, E, sc, ffn);
    probe_at(probe, i, Act::ResidPost, x, batch, t, E, &self_mask);
    if (sink) sink(i, self_w, cross_w);
  }
  if (dec.has_final_norm) normalize(x, rows, dec.norm, dec.opt);
  zero_padding(x, batch, t, E, self_mask);
  probe_at(probe, Probe::final_layer, Act::Final, x, batch, t, E, &self_mask);
}

} // namespace attn
