#include "attn/fill.hpp"

#include "attn/error.hpp"
#include "attn/random.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace attn {

Fill parse_fill(std::string_view s) {
  if (s == "normal") return Fill::Normal;
  if (s == "uniform") return Fill::Uniform;
  if (s == "zeros") return Fill::Zeros;
  if (s == "ones") return Fill::Ones;
  if (s == "arange") return Fill::Arange;
  throw UsageError(fmt::format("unknown fill '{}' (normal, uniform, zeros, ones, arange)", s));
}

template <typename T> static void fill_float(std::span<T> out, const FillSpec& spec) {
  Rng rng(spec.seed);
  const std::size_t n = out.size();
  switch (spec.kind) {
  case Fill::Normal:
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(spec.mean + spec.std * rng.normal());
    break;
  case Fill::Uniform:
    for (std::size_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(spec.low + (spec.high - spec.low) * rng.uniform());
    break;
  case Fill::Zeros:
    for (auto& v : out) v = 0;
    break;
  case Fill::Ones:
    for (auto& v : out) v = 1;
    break;
  case Fill::Arange:
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(i);
    break;
  }
}

void fill(std::span<float> out, const FillSpec& spec) { fill_float(out, spec); }
void fill(std::span<double> out, const FillSpec& spec) { fill_float(out, spec); }

void fill(std::span<std::int64_t> out, const FillSpec& spec) {
  Rng rng(spec.seed);
  switch (spec.kind) {
  case Fill::Normal: throw UsageError("--fill normal cannot make integers (use uniform with --low/--high)");
  case Fill::Uniform: {
    const double lo = std::ceil(spec.low), hi = std::ceil(spec.high);
    if (!(hi > lo)) throw UsageError(fmt::format("--fill uniform with integers needs --high > --low (got {} and {})", spec.low, spec.high));
    for (auto& v : out) v = static_cast<std::int64_t>(std::floor(lo + (hi - lo) * rng.uniform()));
    break;
  }
  case Fill::Zeros:
    for (auto& v : out) v = 0;
    break;
  case Fill::Ones:
    for (auto& v : out) v = 1;
    break;
  case Fill::Arange:
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::int64_t>(i);
    break;
  }
}

template <typename T, typename Parse>
static std::vector<T> parse_tokens(std::istream& in, const std::string& label, const char* what, Parse parse) {
  std::vector<T> out;
  std::string tok;
  while (in >> tok) {
    errno = 0;
    char* end = nullptr;
    T v = parse(tok.c_str(), &end);
    if (end == tok.c_str() || *end != '\0' || errno == ERANGE)
      throw Error(fmt::format("{}: token {} '{}' is not {}", label, out.size() + 1, tok, what));
    out.push_back(v);
  }
  if (in.bad()) throw Error(fmt::format("{}: read error", label));
  return out;
}

std::vector<double> parse_numbers(std::istream& in, const std::string& label) {
  return parse_tokens<double>(in, label, "a number",
                              [](const char* s, char** end) { return std::strtod(s, end); });
}

std::vector<std::int64_t> parse_integers(std::istream& in, const std::string& label) {
  return parse_tokens<std::int64_t>(in, label, "a 64-bit integer", [](const char* s, char** end) {
    return static_cast<std::int64_t>(std::strtoll(s, end, 10));
  });
}

} // namespace attn
