// Queries, keys and values read as sequences (attn-score, mha-run): checked to go together.
#pragma once

#include "attn/h5/h5io.hpp"

#include <string>

namespace attn {

// q, k and v (null: none, or the keys themselves) have the same batch, and k and v the same length;
// else an Error naming the arguments as the user gave them (q_arg, k_arg, v_arg).
void check_qkv(const h5::SequenceReader& q, const h5::SequenceReader& k, const h5::SequenceReader* v,
               const std::string& q_arg, const std::string& k_arg, const std::string& v_arg);

} // namespace attn
