// h5cmp A B [ATOL [RTOL [max]]]: compares two tensors (PATH[:NAME], read as float64 by lib/'s
// reader, which the unit tests check against h5py-written files). Exit 0 when the shapes agree and
// every |a - b| <= ATOL + RTOL * |b| (default: exact; equal infinities and NaN against NaN agree), or
// with "max" every
// |a - b| <= ATOL + RTOL * max|B| (relative to the tensor's scale, the error bound of float32 sums);
// else 1 with the worst index on standard error.
#include "attn/h5/h5io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) try {
  if (argc < 3 || argc > 6 || (argc == 6 && std::string(argv[5]) != "max")) {
    fmt::print(stderr, "usage: h5cmp A B [ATOL [RTOL [max]]]\n");
    return 2;
  }
  const bool scaled = argc == 6;
  const double atol = argc > 3 ? std::atof(argv[3]) : 0.0, rtol = argc > 4 ? std::atof(argv[4]) : 0.0;
  attn::h5::InputFiles in;
  auto read = [&](const char* arg) {
    auto ds = in.open(attn::h5::parse_tensor_ref(arg));
    if (ds.kind() == attn::h5::ElemKind::Float) return ds.read_floats<double>(true);
    auto ints = ds.read_ints();
    attn::TensorD t(ds.shape());
    for (std::int64_t i = 0; i < t.size(); ++i) t[i] = static_cast<double>(ints[i]);
    return t;
  };
  const attn::TensorD a = read(argv[1]), b = read(argv[2]);
  if (a.shape() != b.shape()) {
    fmt::print(stderr, "h5cmp: shapes differ: {} vs {}\n", attn::shape_str(a.shape()), attn::shape_str(b.shape()));
    return 1;
  }
  double scale = 0;
  for (std::int64_t i = 0; i < b.size(); ++i)
    if (std::isfinite(b[i])) scale = std::max(scale, std::abs(b[i]));
  double worst = 0;
  std::int64_t worst_i = -1;
  for (std::int64_t i = 0; i < a.size(); ++i) {
    const double excess = std::abs(a[i] - b[i]) - (atol + rtol * (scaled ? scale : std::abs(b[i])));
    const bool same = a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])); // equal infinities too
    if (!same && (excess > worst || std::isnan(excess))) {
      worst = std::isnan(excess) ? INFINITY : excess;
      worst_i = i;
    }
  }
  if (worst_i >= 0) {
    fmt::print(stderr, "h5cmp: differ at {}: {} vs {}\n", attn::index_str(a.shape(), worst_i), a[worst_i], b[worst_i]);
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "h5cmp: {}\n", e.what());
  return 2;
}
