// The (batch, seq, features) convention: whole sequences and readers of batch chunks.
#include "attn/h5/h5io.hpp"

#include "h5/plumbing.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

namespace attn::h5 {

template <typename T> Sequence<T> read_sequence(const Dataset& ds, bool allow_nonfinite, std::string_view what) {
  ds.require_rank(2, 3, fmt::format("{} (seq, features) or (batch, seq, features)", what));
  Sequence<T> seq{ds.read_floats<T>(allow_nonfinite), ds.rank() == 3};
  if (!seq.batched) seq.x.reshape({1, seq.x.dim(0), seq.x.dim(1)});
  return seq;
}
template Sequence<float> read_sequence<float>(const Dataset&, bool, std::string_view);
template Sequence<double> read_sequence<double>(const Dataset&, bool, std::string_view);

SequenceReader::SequenceReader(Dataset ds, bool allow_nonfinite, std::string_view what)
    : ds_(std::move(ds)), allow_nonfinite_(allow_nonfinite), batched_(ds_.rank() == 3) {
  ds_.require_rank(2, 3, fmt::format("{} (seq, features) or (batch, seq, features)", what));
}

Tensor SequenceReader::read(std::int64_t first, std::int64_t count) const {
  Tensor x(Shape{count, len(), features()}, Uninitialized{});
  read(first, count, x.data());
  return x;
}

Tensor SequenceReader::map(std::int64_t first, std::int64_t count) const {
  Tensor x = batched_ ? ds_.map_float_rows(first, count, allow_nonfinite_)
                      : ds_.map_float_rows(0, len(), allow_nonfinite_); // one item, (n, d)
  if (x.size()) x.reshape({count, len(), features()});
  return x;
}

Tensor SequenceReader::read_mapped(std::int64_t first, std::int64_t count) const {
  if (Tensor x = map(first, count); x.size()) return x; // (a conditional expression would copy it)
  return read(first, count);
}

const float* GroupReader::read(std::int64_t first, std::int64_t count) {
  if (count > most_) throw std::logic_error("GroupReader::read: more items than the group holds");
  mapped_ = Tensor(); // the previous group's mapping goes before the next is made
  if (Tensor x = r_.map(first, count); x.size()) {
    mapped_ = std::move(x);
    return mapped_.data();
  }
  if (!buffer_.size()) buffer_ = Tensor(Shape{most_, r_.len(), r_.features()}, Uninitialized{});
  r_.read(first, count, buffer_.data());
  return buffer_.data();
}

void SequenceReader::read(std::int64_t first, std::int64_t count, float* out) const {
  if (batched_) {
    ds_.read_float_rows(first, count, out, allow_nonfinite_);
  } else {
    ds_.read_float_rows(0, len(), out, allow_nonfinite_);
  }
}

} // namespace attn::h5
