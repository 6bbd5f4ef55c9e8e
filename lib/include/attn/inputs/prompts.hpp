// Prompts for generation: token ids (B, P) and each row's length, read and checked
// (decode --generate --prompt).
#pragma once

#include "attn/core/tensor.hpp"
#include "attn/h5/h5io.hpp"
#include "attn/text/tokenizer.hpp"

#include <cstdint>
#include <vector>

namespace attn {

// Prompts for generation: ids (B, P) (a 1-D dataset is one prompt, batched false) and each row's
// length (right padding beyond it; P for every row without a lengths dataset).
struct Prompts {
  TensorI ids;
  std::vector<std::int64_t> lengths;
  bool batched = true;
  std::int64_t items() const { return ids.dim(0); }
};
// Reads and checks them: ids in 0..vocab-1 (within each row's length), lengths (B,) in 0..P; each
// error names the dataset, the index and the value.
Prompts load_prompts(const h5::Dataset& ids, const h5::Dataset* lengths, std::int64_t vocab);
// Prompts from text (decode --prompt-text): each text encoded with its special tokens, right-padded
// with the tokenizer's pad id; an id the model's vocabulary (0..vocab-1) lacks is an Error naming
// the text, the id and its token. `what` names the texts ("--prompt-text").
Prompts prompts_from_text(const text::Tokenizer& tok, const std::vector<std::string>& texts, std::int64_t vocab,
                          const std::string& what);

} // namespace attn
