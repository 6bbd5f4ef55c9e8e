// Checking that queries, keys and values go together (inputs/qkv.hpp).
#include "attn/inputs/qkv.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

namespace attn {

void check_qkv(const h5::SequenceReader& q, const h5::SequenceReader& k, const h5::SequenceReader* v,
               const std::string& q_arg, const std::string& k_arg, const std::string& v_arg) {
  const std::int64_t b = q.items(), m = k.len();
  if (k.items() != b) throw Error(fmt::format("batch sizes differ: {} has {}, {} has {}", q_arg, b, k_arg, k.items()));
  if (!v) return;
  if (v->items() != b)
    throw Error(fmt::format("batch sizes differ: {} has {}, {} has {}", q_arg, b, v_arg, v->items()));
  if (v->len() != m)
    throw Error(
        fmt::format("keys and values differ in length: {} has {} positions, {} has {}", k_arg, m, v_arg, v->len()));
}

} // namespace attn
