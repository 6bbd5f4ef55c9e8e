// Filling tensors for tensor-gen: seeded random fills, constant and arange fills, numbers from text.
#pragma once

#include <cstdint>
#include <istream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

enum class Fill { Normal, Uniform, Zeros, Ones, Arange };
Fill parse_fill(std::string_view s); // "normal" | "uniform" | "zeros" | "ones" | "arange"

struct FillSpec {
  Fill kind = Fill::Normal;
  double mean = 0, std = 1; // normal
  double low = 0, high = 1; // uniform: [low, high); integers low..high-1 for int64
  std::uint64_t seed = 0;
};

// Fills `out` in C order. For int64 only zeros, ones, arange and uniform are meaningful; normal is a
// UsageError.
void fill(std::span<float> out, const FillSpec& spec);
void fill(std::span<double> out, const FillSpec& spec);
void fill(std::span<std::int64_t> out, const FillSpec& spec);

// Whitespace-separated numbers from `in` (`label` names the source in errors, which give the bad
// token and its 1-based position). parse_integers accepts only whole numbers.
std::vector<double> parse_numbers(std::istream& in, const std::string& label);
std::vector<std::int64_t> parse_integers(std::istream& in, const std::string& label);

} // namespace attn
