// PyTorch's parameter initialisations, drawn from our seeded Rng (the same distributions as
// torch.nn.init, not the same numbers): same seed, same bytes on every machine.
#pragma once

#include "attn/core/random.hpp"
#include "attn/core/tensor.hpp"

namespace attn {

// U(-bound, bound) of the given shape.
Tensor uniform_init(const Shape& shape, double bound, Rng& rng);
// torch.nn.init.xavier_uniform_ of a (rows, cols) matrix: bound sqrt(6 / (rows + cols)).
Tensor xavier_uniform(std::int64_t rows, std::int64_t cols, Rng& rng);
// nn.Linear(in, out)'s default: weight (out, in) by kaiming_uniform_(a = sqrt(5)), which is
// U(+-1/sqrt(in)), and bias (out) U(+-1/sqrt(in)).
Tensor linear_weight_init(std::int64_t out, std::int64_t in, Rng& rng);
Tensor linear_bias_init(std::int64_t out, std::int64_t in, Rng& rng);

} // namespace attn
