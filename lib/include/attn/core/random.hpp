// A seeded, platform-independent random source: the same seed gives the same numbers (and so the
// same output bytes) on every machine, unlike std::normal_distribution.
#pragma once

#include <cstdint>

namespace attn {

// xoshiro256** (Blackman and Vigna), state seeded from the seed by splitmix64.
class Rng {
public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t next();
  // Uniform in [0, 1), 53 random bits.
  double uniform();
  // Standard normal by the Box-Muller transform (pairs; the second value is kept for the next call).
  double normal();

private:
  std::uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

} // namespace attn
