// Positional encodings: sinusoidal tables, learned tables, RoPE tables and rotation, ALiBi slopes
// (posenc.hpp).
#include "attn/attention/posenc.hpp"

#include "attn/core/names.hpp"

#include "attn/core/error.hpp"
#include "attn/kernels/parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#if defined(__x86_64__)
#include <immintrin.h>
// glibc's vector math (libmvec), AVX2 variants (declared AVX2 too: clang checks the ABI).
extern "C" __attribute__((target("avx2"))) __m256d _ZGVdN4v_sin(__m256d);
extern "C" __attribute__((target("avx2"))) __m256d _ZGVdN4v_cos(__m256d);
#endif

namespace attn {

// --- sin and cos of many angles ---------------------------------------------------------------
// The hot loop of every table here. On CPUs with AVX2 it uses glibc's vector sin/cos (libmvec),
// about 9x faster than scalar sincos; both are float64 routines within a few ulps of the exact
// value (measured: 0 of 7.3 million float32 results round differently, largest relative gap
// 4.4e-16), and the golden tests check each path against the float64 formula.

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void sincos_avx2(const double* a, double* s, double* c, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d x = _mm256_loadu_pd(a + i);
    _mm256_storeu_pd(s + i, _ZGVdN4v_sin(x));
    _mm256_storeu_pd(c + i, _ZGVdN4v_cos(x));
  }
  for (; i < n; ++i) ::sincos(a[i], &s[i], &c[i]);
}
#endif

static bool g_vector_math = true;
void use_vector_math(bool on) { g_vector_math = on; }

static void sincos_array(const double* a, double* s, double* c, std::int64_t n) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2 && g_vector_math) return sincos_avx2(a, s, c, n);
#endif
  for (std::int64_t i = 0; i < n; ++i) ::sincos(a[i], &s[i], &c[i]);
}

// Below this many output elements a parallel region costs more (starting the thread pool takes
// milliseconds) than the work it shares.
constexpr std::int64_t parallel_min_elements = 1 << 16;

// The threads for a loop over this many output elements (pe-gen's --threads sets them), else 1.
static int pe_threads(std::int64_t elements) { return threads_if(elements >= parallel_min_elements); }

PeLayout parse_pe_layout(std::string_view s) {
  static constexpr Named<PeLayout> layouts[] = {{"interleaved", PeLayout::Interleaved}, {"concat", PeLayout::Concat}};
  return parse_named(s, layouts, "layout");
}

RopeStyle parse_rope_style(std::string_view s) {
  static constexpr Named<RopeStyle> styles[] = {{"half", RopeStyle::Half}, {"interleaved", RopeStyle::Interleaved}};
  return parse_named(s, styles, "RoPE style");
}

// --- sinusoidal --------------------------------------------------------------------------------

// base^(2i/d) for the ceil(d/2) pairs.
static std::vector<double> sinusoidal_divisors(std::int64_t d, double base) {
  std::vector<double> div(static_cast<std::size_t>((d + 1) / 2));
  for (std::size_t i = 0; i < div.size(); ++i)
    div[i] = std::pow(base, static_cast<double>(2 * i) / static_cast<double>(d));
  return div;
}

// row (d) for position pos; scratch holds 3 * ceil(d/2) doubles.
static void sinusoidal_row(double* row, double pos, std::int64_t d, const std::vector<double>& div, PeLayout layout,
                           double* scratch) {
  const std::int64_t pairs = static_cast<std::int64_t>(div.size());
  double* angle = scratch;
  double* s = scratch + pairs;
  double* c = scratch + 2 * pairs;
  for (std::int64_t i = 0; i < pairs; ++i) angle[i] = pos / div[static_cast<std::size_t>(i)];
  sincos_array(angle, s, c, pairs);
  const std::int64_t n_cos = d / 2;
  for (std::int64_t i = 0; i < pairs; ++i) {
    if (layout == PeLayout::Interleaved) {
      row[2 * i] = s[i];
      if (i < n_cos) row[2 * i + 1] = c[i];
    } else {
      row[i] = s[i];
      if (i < n_cos) row[pairs + i] = c[i];
    }
  }
}

void sinusoidal_row(double* row, double pos, std::int64_t d, double base, PeLayout layout) {
  const auto div = sinusoidal_divisors(d, base);
  std::vector<double> scratch(3 * div.size());
  sinusoidal_row(row, pos, d, div, layout, scratch.data());
}

// Rows are independent: each thread computes a row once (ceil(d/2) sin/cos pairs) and adds it to
// every batch item, or stores it when `add` is false.
template <typename T>
static void sinusoidal_rows(T* x, std::int64_t b, std::int64_t n, std::int64_t d, double base, std::int64_t offset,
                            PeLayout layout, bool add) {
  const std::vector<double> div = sinusoidal_divisors(d, base);
  parallel_shares(n, pe_threads(b * n * d), [&](std::int64_t p0, std::int64_t p1) {
    std::vector<double> row(static_cast<std::size_t>(d)), scratch(3 * div.size());
    for (std::int64_t p = p0; p < p1; ++p) {
      sinusoidal_row(row.data(), static_cast<double>(offset) + static_cast<double>(p), d, div, layout, scratch.data());
      for (std::int64_t bi = 0; bi < b; ++bi) {
        T* xr = x + (bi * n + p) * d;
        for (std::int64_t k = 0; k < d; ++k) xr[k] = static_cast<T>(add ? static_cast<double>(xr[k]) + row[k] : row[k]);
      }
    }
  });
}

template <typename T>
void add_sinusoidal(T* x, std::int64_t b, std::int64_t n, std::int64_t d, double base, std::int64_t offset,
                    PeLayout layout) {
  sinusoidal_rows(x, b, n, d, base, offset, layout, true);
}

template <typename T>
void sinusoidal_table(T* out, std::int64_t n, std::int64_t d, double base, std::int64_t offset, PeLayout layout) {
  sinusoidal_rows(out, 1, n, d, base, offset, layout, false);
}

template void add_sinusoidal<float>(float*, std::int64_t, std::int64_t, std::int64_t, double, std::int64_t, PeLayout);
template void add_sinusoidal<double>(double*, std::int64_t, std::int64_t, std::int64_t, double, std::int64_t, PeLayout);
template void sinusoidal_table<float>(float*, std::int64_t, std::int64_t, double, std::int64_t, PeLayout);
template void sinusoidal_table<double>(double*, std::int64_t, std::int64_t, double, std::int64_t, PeLayout);

// --- learned -------------------------------------------------------------------------------------

template <typename T>
void add_learned(T* x, std::int64_t b, std::int64_t n, std::int64_t d, const T* table, std::int64_t rows,
                 std::int64_t offset, std::string_view label) {
  if (offset < 0 || offset > rows - n) // not offset + n > rows: that overflows for offsets near 2^63
    throw Error(fmt::format("{}: {} positions from {} are outside the learned table of {} rows (shape ({}, {}))", label,
                            n, offset, rows, rows, d));
  for (std::int64_t bi = 0; bi < b; ++bi)
    for (std::int64_t p = 0; p < n; ++p) {
      T* xr = x + (bi * n + p) * d;
      const T* tr = table + (offset + p) * d;
      for (std::int64_t k = 0; k < d; ++k)
        xr[k] = static_cast<T>(static_cast<double>(xr[k]) + static_cast<double>(tr[k]));
    }
}

template void add_learned<float>(float*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t,
                                 std::int64_t, std::string_view);
template void add_learned<double>(double*, std::int64_t, std::int64_t, std::int64_t, const double*, std::int64_t,
                                  std::int64_t, std::string_view);

// --- rotary --------------------------------------------------------------------------------------

std::vector<double> rope_inv_freq(std::int64_t dh, double base, const RopeScaling& s, std::int64_t seq_len) {
  const std::int64_t half = dh / 2;
  const double d = static_cast<double>(dh);
  if (s.kind == RopeScalingKind::Dynamic && seq_len > s.max_positions)
    base *= std::pow(s.factor * static_cast<double>(seq_len) / static_cast<double>(s.max_positions) - (s.factor - 1),
                     d / (d - 2));
  std::vector<double> inv(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i)
    inv[static_cast<std::size_t>(i)] = std::pow(base, -static_cast<double>(2 * i) / d);
  constexpr double two_pi = 2 * 3.14159265358979323846;
  switch (s.kind) {
  case RopeScalingKind::None:
  case RopeScalingKind::Dynamic: break;
  case RopeScalingKind::Linear:
    for (double& f : inv) f /= s.factor;
    break;
  case RopeScalingKind::Llama3: {
    const double old = static_cast<double>(s.original_max_positions);
    const double low_wavelen = old / s.low_freq_factor, high_wavelen = old / s.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = two_pi / f;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else if (wavelen >= high_wavelen) { // between: smoothed
        const double smooth = (old / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    }
    break;
  }
  case RopeScalingKind::Yarn: {
    const auto correction_dim = [&](double rotations) {
      return d * std::log(static_cast<double>(s.max_positions) / (rotations * two_pi)) / (2 * std::log(base));
    };
    const double low = std::max(std::floor(correction_dim(s.beta_fast)), 0.0);
    double high = std::min(std::ceil(correction_dim(s.beta_slow)), d - 1);
    if (low == high) high += 0.001;
    for (std::int64_t i = 0; i < half; ++i) {
      double& f = inv[static_cast<std::size_t>(i)];
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1 - ramp;
      f = f / s.factor * (1 - extrapolation) + f * extrapolation;
    }
    break;
  }
  }
  return inv;
}

void rope_tables(double* cos, double* sin, std::int64_t n, std::int64_t dh, double base, std::int64_t offset,
                 const RopeScaling& scaling) {
  const std::int64_t half = dh / 2;
  const std::vector<double> inv_freq = rope_inv_freq(dh, base, scaling, offset + n);
  const double attention_factor = scaling.kind == RopeScalingKind::Yarn ? scaling.attention_factor : 1.0;
  parallel_shares(n, pe_threads(n * half), [&](std::int64_t p0, std::int64_t p1) {
    std::vector<double> angle(static_cast<std::size_t>(half));
    for (std::int64_t p = p0; p < p1; ++p) {
      for (std::int64_t i = 0; i < half; ++i)
        angle[static_cast<std::size_t>(i)] =
            (static_cast<double>(offset) + static_cast<double>(p)) * inv_freq[static_cast<std::size_t>(i)];
      sincos_array(angle.data(), sin + p * half, cos + p * half, half);
      if (attention_factor != 1.0)
        for (std::int64_t i = 0; i < half; ++i)
          sin[p * half + i] *= attention_factor, cos[p * half + i] *= attention_factor;
    }
  });
}

template <typename T>
void apply_rope(T* x, std::int64_t b, std::int64_t n, std::int64_t heads, std::int64_t dh, RopeStyle style, double base,
                std::int64_t offset, std::int64_t ld, std::int64_t rot, const RopeScaling& scaling) {
  if (rot == 0) rot = dh;
  const std::int64_t half = rot / 2;
  if (ld == 0) ld = heads * dh;
  std::vector<double> cos(static_cast<std::size_t>(n * half)), sin(cos.size());
  rope_tables(cos.data(), sin.data(), n, rot, base, offset, scaling);
  // Element pair i of a head: (lo, hi) offsets inside the head.
  const std::int64_t lo_step = style == RopeStyle::Half ? 1 : 2;
  const std::int64_t hi_off = style == RopeStyle::Half ? half : 1;
  parallel_for(b * n, pe_threads(b * n * heads * dh), [&](std::int64_t bp) {
    const std::int64_t bi = bp / n, p = bp % n;
    const double* c = cos.data() + p * half;
    const double* s = sin.data() + p * half;
    T* row = x + (bi * n + p) * ld;
    for (std::int64_t h = 0; h < heads; ++h) {
      T* xh = row + h * dh;
      for (std::int64_t i = 0; i < half; ++i) {
        T& lo = xh[i * lo_step];
        T& hi = xh[i * lo_step + hi_off];
        const double a = lo, bb = hi;
        lo = static_cast<T>(a * c[i] - bb * s[i]);
        hi = static_cast<T>(bb * c[i] + a * s[i]);
      }
    }
  });
}

template void apply_rope<float>(float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, RopeStyle, double,
                                std::int64_t, std::int64_t, std::int64_t, const RopeScaling&);
template void apply_rope<double>(double*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, RopeStyle, double,
                                 std::int64_t, std::int64_t, std::int64_t, const RopeScaling&);

// --- ALiBi ---------------------------------------------------------------------------------------

static std::vector<double> alibi_slopes_power_of_2(std::int64_t n) {
  const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(n)) - 3)));
  std::vector<double> s(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) s[static_cast<std::size_t>(i)] = start * std::pow(start, static_cast<double>(i));
  return s;
}

std::vector<double> alibi_slopes(std::int64_t heads) {
  if (heads <= 0) throw UsageError("ALiBi needs at least one head");
  std::int64_t c = 1;
  while (c * 2 <= heads) c *= 2;
  if (c == heads) return alibi_slopes_power_of_2(heads);
  std::vector<double> s = alibi_slopes_power_of_2(c);
  const std::vector<double> twice = alibi_slopes(2 * c);
  for (std::int64_t k = 0; k < heads - c; ++k) s.push_back(twice[static_cast<std::size_t>(2 * k)]);
  return s;
}

template <typename T> void alibi_bias(T* bias, std::int64_t heads, std::int64_t n, std::int64_t m) {
  const std::vector<double> slopes = alibi_slopes(heads);
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t p = i + (m - n);
      for (std::int64_t j = 0; j < m; ++j)
        bias[(h * n + i) * m + j] =
            static_cast<T>(-slopes[static_cast<std::size_t>(h)] * static_cast<double>(std::llabs(p - j)));
    }
}

template void alibi_bias<float>(float*, std::int64_t, std::int64_t, std::int64_t);
template void alibi_bias<double>(double*, std::int64_t, std::int64_t, std::int64_t);

std::int64_t relative_bucket(std::int64_t relative, const RelativeBuckets& rule) {
  std::int64_t nb = rule.buckets, bucket = 0, d;
  if (rule.bidirectional) {
    nb /= 2;
    if (relative > 0) bucket = nb;
    d = std::llabs(relative);
  } else {
    d = relative < 0 ? -relative : 0;
  }
  const std::int64_t max_exact = nb / 2;
  if (d < max_exact) return bucket + d;
  // float32 throughout, as torch.log(d.float() / max_exact) / math.log(...) * (nb - max_exact)
  const float ratio = static_cast<float>(d) / static_cast<float>(max_exact);
  const float span = static_cast<float>(std::log(static_cast<double>(rule.max_distance) / max_exact));
  const float scaled = std::log(ratio) / span * static_cast<float>(nb - max_exact);
  // past max_distance the quotient only grows; clamp before converting so no float overflows int64
  const float capped = std::min(scaled, static_cast<float>(nb));
  return bucket + std::min(max_exact + static_cast<std::int64_t>(capped), nb - 1);
}

void check_relative_buckets(const RelativeBuckets& rule, const std::string& source) {
  const std::int64_t per_direction = rule.bidirectional ? rule.buckets / 2 : rule.buckets;
  if (per_direction < 2)
    throw Error(fmt::format("{}: {} relative buckets{} leave fewer than 2 per direction", source, rule.buckets,
                            rule.bidirectional ? " (bidirectional)" : ""));
  if (rule.max_distance <= per_direction / 2)
    throw Error(fmt::format("{}: max_distance {} must exceed the {} exact distances of {} buckets per direction",
                            source, rule.max_distance, per_direction / 2, per_direction));
}

RelativeBias::RelativeBias(const RelativeBuckets& rule, std::int64_t heads, std::vector<float> table,
                           const std::string& source)
    : rule_(rule), heads_(heads), table_(std::move(table)) {
  check_relative_buckets(rule_, source);
  if (heads_ <= 0 || static_cast<std::int64_t>(table_.size()) != rule_.buckets * heads_)
    throw std::logic_error("RelativeBias: the table is not (buckets, heads)");
  const std::int64_t d = rule_.max_distance;
  by_distance_.resize(static_cast<std::size_t>((2 * d + 1) * heads_));
  for (std::int64_t r = -d; r <= d; ++r) {
    const std::int64_t bucket = relative_bucket(r, rule_);
    for (std::int64_t h = 0; h < heads_; ++h)
      by_distance_[static_cast<std::size_t>(h * (2 * d + 1) + r + d)] =
          table_[static_cast<std::size_t>(bucket * heads_ + h)];
  }
}

void RelativeBias::add_run(float* s, std::int64_t h, std::int64_t first, std::int64_t count, int step) const {
  const std::int64_t d = rule_.max_distance;
  const float* v = by_distance_.data() + h * (2 * d + 1) + d; // v[r] for -d <= r <= d
  // the positions c whose distance first + step c lies within [-d, d]: [lo, hi)
  const auto clamp_c = [count](std::int64_t c) { return std::clamp<std::int64_t>(c, 0, count); };
  const std::int64_t lo = clamp_c(step > 0 ? -d - first : first - d),
                     hi = clamp_c(step > 0 ? d - first + 1 : first + d + 1);
  const float before = step > 0 ? v[-d] : v[d], after = step > 0 ? v[d] : v[-d];
  for (std::int64_t c = 0; c < lo; ++c) s[c] += before;
  if (step > 0)
    for (std::int64_t c = lo; c < hi; ++c) s[c] += v[first + c];
  else
    for (std::int64_t c = lo; c < hi; ++c) s[c] += v[first - c];
  for (std::int64_t c = std::max(hi, lo); c < count; ++c) s[c] += after;
}

template <typename T> void relative_bias(T* bias, const RelativeBias& rb, std::int64_t n, std::int64_t m) {
  for (std::int64_t h = 0; h < rb.heads(); ++h)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < m; ++j) bias[(h * n + i) * m + j] = static_cast<T>(rb.term(h, j - (i + (m - n))));
}

template void relative_bias<float>(float*, const RelativeBias&, std::int64_t, std::int64_t);
template void relative_bias<double>(double*, const RelativeBias&, std::int64_t, std::int64_t);

} // namespace attn
