// Tensor fills for tensor-gen (normal, uniform, zeros, ones, arange) and the parsing of numbers
// from text (fill.hpp).
#include "attn/core/fill.hpp"

#include "attn/core/names.hpp"

#include "attn/core/error.hpp"
#include "attn/core/random.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <type_traits>

namespace attn {

Fill parse_fill(std::string_view s) {
  static constexpr Named<Fill> fills[] = {{"normal", Fill::Normal},
                                          {"uniform", Fill::Uniform},
                                          {"zeros", Fill::Zeros},
                                          {"ones", Fill::Ones},
                                          {"arange", Fill::Arange}};
  return parse_named(s, fills, "fill");
}

// One fill for every element type; integers take whole numbers from uniform and refuse normal.
template <typename T> static void fill_any(std::span<T> out, const FillSpec& spec) {
  Rng rng(spec.seed);
  switch (spec.kind) {
  case Fill::Normal:
    if constexpr (std::is_integral_v<T>)
      throw UsageError("--fill normal cannot make integers (use uniform with --low/--high)");
    else
      for (auto& v : out) v = static_cast<T>(spec.mean + spec.std * rng.normal());
    break;
  case Fill::Uniform:
    if constexpr (std::is_integral_v<T>) {
      const double lo = std::ceil(spec.low), hi = std::ceil(spec.high);
      if (!(hi > lo))
        throw UsageError(
            fmt::format("--fill uniform with integers needs --high > --low (got {} and {})", spec.low, spec.high));
      for (auto& v : out) v = static_cast<T>(std::floor(lo + (hi - lo) * rng.uniform()));
    } else {
      for (auto& v : out) v = static_cast<T>(spec.low + (spec.high - spec.low) * rng.uniform());
    }
    break;
  case Fill::Zeros: std::fill(out.begin(), out.end(), T{0}); break;
  case Fill::Ones: std::fill(out.begin(), out.end(), T{1}); break;
  case Fill::Arange:
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(i);
    break;
  }
}

void fill(std::span<float> out, const FillSpec& spec) { fill_any(out, spec); }
void fill(std::span<double> out, const FillSpec& spec) { fill_any(out, spec); }
void fill(std::span<std::int64_t> out, const FillSpec& spec) { fill_any(out, spec); }

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
  return parse_tokens<double>(in, label, "a number", [](const char* s, char** end) {
    const double v = std::strtod(s, end);
    if (errno == ERANGE && std::fabs(v) <= 1) errno = 0; // underflow: a subnormal or 0, correctly rounded
    return v;
  });
}

std::vector<std::int64_t> parse_integers(std::istream& in, const std::string& label) {
  return parse_tokens<std::int64_t>(in, label, "a 64-bit integer", [](const char* s, char** end) {
    return static_cast<std::int64_t>(std::strtoll(s, end, 10));
  });
}

} // namespace attn
