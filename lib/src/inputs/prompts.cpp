// Reading and checking generation prompts (inputs/prompts.hpp).
#include "attn/inputs/prompts.hpp"

#include "attn/core/error.hpp"
#include "attn/text/token_files.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace attn {

Prompts load_prompts(const h5::Dataset& ids, const h5::Dataset* lengths, std::int64_t vocab) {
  ids.require_rank(1, 2, "prompt token ids (b, p) or (p,)");
  Prompts p;
  p.ids = ids.read_ints();
  p.batched = p.ids.rank() == 2;
  if (!p.batched) p.ids.reshape({1, p.ids.dim(0)});
  const std::int64_t B = p.ids.dim(0), P = p.ids.dim(1);
  if (lengths) {
    lengths->require_rank(1, 1, "prompt lengths (b,)");
    const TensorI l = lengths->read_ints();
    if (l.dim(0) != B)
      throw Error(fmt::format("{}: expected shape ({},) (one length per prompt of {}), got ({},)", lengths->label(), B,
                              ids.label(), l.dim(0)));
    for (std::int64_t b = 0; b < B; ++b) {
      if (l[b] < 0 || l[b] > P)
        throw Error(fmt::format("{}: length {} at index {} is outside 0..{} (the prompts' width)", lengths->label(),
                                l[b], b, P));
      p.lengths.push_back(l[b]);
    }
  } else {
    p.lengths.assign(static_cast<std::size_t>(B), P);
  }
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < p.lengths[static_cast<std::size_t>(b)]; ++j)
      if (const std::int64_t id = p.ids[b * P + j]; id < 0 || id >= vocab)
        throw Error(fmt::format("{}: token id {} at {} is outside the vocabulary 0..{}", ids.label(), id,
                                p.batched ? fmt::format("({}, {})", b, j) : fmt::format("{}", j), vocab - 1));
  return p;
}

} // namespace attn

namespace attn {

Prompts prompts_from_text(const text::Tokenizer& tok, const std::vector<std::string>& texts, std::int64_t vocab,
                          const std::string& what) {
  const std::vector<std::string_view> views(texts.begin(), texts.end());
  const text::Rows rows = text::encode_all(tok, views, true, what);
  const std::int64_t P = rows.longest();
  Prompts p;
  p.ids = TensorI(Shape{rows.size(), std::max<std::int64_t>(P, 1)});
  std::fill(p.ids.data(), p.ids.data() + p.ids.size(), tok.pad_id() < vocab ? tok.pad_id() : 0);
  for (std::int64_t b = 0; b < rows.size(); ++b) {
    for (std::int64_t j = 0; j < rows.length(b); ++j) {
      const std::int64_t id = rows.row(b)[j];
      if (id >= vocab)
        throw Error(fmt::format("{} {}: token {} ({:?}) of {} is outside the model's vocabulary 0..{}", what, b, id,
                                std::string(tok.token(id).value_or("")), tok.label(), vocab - 1));
      p.ids.data()[b * p.ids.dim(1) + j] = id;
    }
    p.lengths.push_back(rows.length(b));
  }
  return p;
}

} // namespace attn
