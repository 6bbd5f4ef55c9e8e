// PyTorch's parameter initialisations from our seeded stream (init.hpp).
#include "attn/core/init.hpp"

#include <cmath>

namespace attn {

Tensor uniform_init(const Shape& shape, double bound, Rng& rng) {
  Tensor t(shape, Uninitialized{});
  for (float& x : t.span()) x = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
  return t;
}

Tensor xavier_uniform(std::int64_t rows, std::int64_t cols, Rng& rng) {
  return uniform_init({rows, cols}, std::sqrt(6.0 / static_cast<double>(rows + cols)), rng);
}

Tensor linear_weight_init(std::int64_t out, std::int64_t in, Rng& rng) {
  return uniform_init({out, in}, 1.0 / std::sqrt(static_cast<double>(in)), rng);
}

Tensor linear_bias_init(std::int64_t out, std::int64_t in, Rng& rng) {
  return uniform_init({out}, 1.0 / std::sqrt(static_cast<double>(in)), rng);
}

} // namespace attn
