// The deferred NaN/Inf checks of mapped weights' values (weight_source.hpp, finite_check).
#include "attn/core/half.hpp"
#include "attn/h5/h5io.hpp"
#include "attn/weights/weight_source.hpp"

#include <vector>

namespace attn {

std::function<void()> finite_check(const float* data, const Shape& shape, const std::string& label) {
  return [data, shape, label] { h5::check_finite(data, shape, 0, checked_numel(shape, label), label, false); };
}

std::function<void()> finite_check(HalfKind kind, const std::uint16_t* bits, const Shape& shape,
                                   const std::string& label) {
  return [kind, bits, shape, label] {
    const std::int64_t n = checked_numel(shape, label);
    if (LinearWeight::half_all_finite(kind, bits, n)) return;
    std::vector<float> values(static_cast<std::size_t>(n)); // the rare failure: widened to name the index
    for (std::int64_t i = 0; i < n; ++i)
      values[i] = kind == HalfKind::F16 ? f16_to_float(bits[i]) : bf16_to_float(bits[i]);
    h5::check_finite(values.data(), shape, 0, n, label, false);
  };
}

} // namespace attn
