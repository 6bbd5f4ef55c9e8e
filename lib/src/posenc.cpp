#include "attn/posenc.hpp"

#include "attn/error.hpp"

#include <fmt/format.h>

#include <cmath>

namespace attn {

PeLayout parse_pe_layout(std::string_view s) {
  if (s == "interleaved") return PeLayout::Interleaved;
  if (s == "concat") return PeLayout::Concat;
  throw UsageError(fmt::format("unknown layout '{}' (interleaved or concat)", s));
}

RopeStyle parse_rope_style(std::string_view s) {
  if (s == "half") return RopeStyle::Half;
  if (s == "interleaved") return RopeStyle::Interleaved;
  throw UsageError(fmt::format("unknown RoPE style '{}' (half or interleaved)", s));
}

// --- sinusoidal --------------------------------------------------------------------------------

// base^(2i/d) for the ceil(d/2) pairs.
static std::vector<double> sinusoidal_divisors(std::int64_t d, double base) {
  std::vector<double> div(static_cast<std::size_t>((d + 1) / 2));
  for (std::size_t i = 0; i < div.size(); ++i)
    div[i] = std::pow(base, static_cast<double>(2 * i) / static_cast<double>(d));
  return div;
}

static void sinusoidal_row(double* row, double pos, std::int64_t d, const std::vector<double>& div,
                           PeLayout layout) {
  const std::int64_t pairs = static_cast<std::int64_t>(div.size());
  const std::int64_t n_sin = pairs, n_cos = d / 2;
  for (std::int64_t i = 0; i < pairs; ++i) {
    double s, c;
    ::sincos(pos / div[static_cast<std::size_t>(i)], &s, &c);
    if (layout == PeLayout::Interleaved) {
      row[2 * i] = s;
      if (2 * i + 1 < d) row[2 * i + 1] = c;
    } else {
      row[i] = s;
      if (i < n_cos) row[n_sin + i] = c;
    }
  }
}

void sinusoidal_row(double* row, double pos, std::int64_t d, double base, PeLayout layout) {
  sinusoidal_row(row, pos, d, sinusoidal_divisors(d, base), layout);
}

template <typename T>
void add_sinusoidal(T* x, std::int64_t b, std::int64_t n, std::int64_t d, double base,
                    std::int64_t offset, PeLayout layout) {
  const std::vector<double> div = sinusoidal_divisors(d, base);
  // Rows are independent: each thread computes a row once (d/2 sincos calls) and adds it to
  // every batch item.
#pragma omp parallel
  {
    std::vector<double> row(static_cast<std::size_t>(d));
#pragma omp for schedule(static)
    for (std::int64_t p = 0; p < n; ++p) {
      sinusoidal_row(row.data(), static_cast<double>(offset + p), d, div, layout);
      for (std::int64_t bi = 0; bi < b; ++bi) {
        T* xr = x + (bi * n + p) * d;
        for (std::int64_t k = 0; k < d; ++k) xr[k] = static_cast<T>(static_cast<double>(xr[k]) + row[k]);
      }
    }
  }
}

template void add_sinusoidal<float>(float*, std::int64_t, std::int64_t, std::int64_t, double, std::int64_t, PeLayout);
template void add_sinusoidal<double>(double*, std::int64_t, std::int64_t, std::int64_t, double, std::int64_t, PeLayout);

// --- learned -------------------------------------------------------------------------------------

template <typename T>
void add_learned(T* x, std::int64_t b, std::int64_t n, std::int64_t d, const T* table,
                 std::int64_t rows, std::int64_t offset) {
  if (offset < 0 || offset + n > rows)
    throw Error(fmt::format("positions {}..{} are outside the learned table of {} rows", offset,
                            offset + n - 1, rows));
  for (std::int64_t bi = 0; bi < b; ++bi)
    for (std::int64_t p = 0; p < n; ++p) {
      T* xr = x + (bi * n + p) * d;
      const T* tr = table + (offset + p) * d;
      for (std::int64_t k = 0; k < d; ++k)
        xr[k] = static_cast<T>(static_cast<double>(xr[k]) + static_cast<double>(tr[k]));
    }
}

template void add_learned<float>(float*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, std::int64_t);
template void add_learned<double>(double*, std::int64_t, std::int64_t, std::int64_t, const double*, std::int64_t, std::int64_t);

// --- rotary --------------------------------------------------------------------------------------

void rope_tables(double* cos, double* sin, std::int64_t n, std::int64_t dh, double base,
                 std::int64_t offset) {
  const std::int64_t half = dh / 2;
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i)
    inv_freq[static_cast<std::size_t>(i)] = std::pow(base, -static_cast<double>(2 * i) / static_cast<double>(dh));
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < n; ++p)
    for (std::int64_t i = 0; i < half; ++i)
      ::sincos(static_cast<double>(offset + p) * inv_freq[static_cast<std::size_t>(i)], &sin[p * half + i],
               &cos[p * half + i]);
}

template <typename T>
void apply_rope(T* x, std::int64_t b, std::int64_t n, std::int64_t heads, std::int64_t dh,
                RopeStyle style, double base, std::int64_t offset) {
  const std::int64_t half = dh / 2;
  std::vector<double> cos(static_cast<std::size_t>(n * half)), sin(cos.size());
  rope_tables(cos.data(), sin.data(), n, dh, base, offset);
  // Element pair i of a head: (lo, hi) offsets inside the head.
  const std::int64_t lo_step = style == RopeStyle::Half ? 1 : 2;
  const std::int64_t hi_off = style == RopeStyle::Half ? half : 1;
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t bi = 0; bi < b; ++bi)
    for (std::int64_t p = 0; p < n; ++p) {
      const double* c = cos.data() + p * half;
      const double* s = sin.data() + p * half;
      T* row = x + (bi * n + p) * heads * dh;
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
    }
}

template void apply_rope<float>(float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, RopeStyle, double, std::int64_t);
template void apply_rope<double>(double*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, RopeStyle, double, std::int64_t);

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
        bias[(h * n + i) * m + j] = static_cast<T>(-slopes[static_cast<std::size_t>(h)] * static_cast<double>(std::llabs(p - j)));
    }
}

template void alibi_bias<float>(float*, std::int64_t, std::int64_t, std::int64_t);
template void alibi_bias<double>(double*, std::int64_t, std::int64_t, std::int64_t);

} // namespace attn
