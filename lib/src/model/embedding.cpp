// Token embeddings: table lookup, scaling, positions, BERT's types and norm (embedding.hpp).
#include "attn/model/embedding.hpp"

#include "attn/model/transformer.hpp"

#include "attn/attention/posenc.hpp"
#include "attn/core/error.hpp"
#include "attn/kernels/blas.hpp"
#include "attn/kernels/parallel.hpp"

#include <fmt/format.h>

#include <cmath>

namespace attn {

LinearWeight tied_generator(const TokenEmbedding& emb) {
  if (!emb.compact_table) return LinearWeight(emb.table);
  if (emb.compact_table->format() == LinearWeight::Format::int8) return LinearWeight(emb.compact_table->to_float());
  return *emb.compact_table;
}

void embed_tokens(float* x, const std::int64_t* ids, std::int64_t batch, std::int64_t n, const TokenEmbedding& emb,
                  std::int64_t offset, const std::string& ids_label, std::int64_t first_item,
                  const std::int64_t* types) {
  const std::int64_t V = emb.vocab(), E = emb.width();
  for (std::int64_t i = 0; i < batch * n; ++i)
    if (ids[i] < 0 || ids[i] >= V)
      throw Error(fmt::format("{}: token id {} at index [{}, {}] is outside the vocabulary 0..{} of {}", ids_label,
                              ids[i], first_item + i / n, i % n, V - 1, emb.label));
  if (emb.compact_table) emb.compact_table->run_check(); // its values left in a mapped file are checked here
  const float scale = emb.scaled ? std::sqrt(static_cast<float>(E)) : 1.0f;
  parallel_for(batch * n, threads_if(batch * n * E >= (1 << 15)), [&](std::int64_t i) {
    if (emb.compact_table) {
      for (std::int64_t e = 0; e < E; ++e) x[i * E + e] = emb.compact_table->at(ids[i], e) * scale;
      return;
    }
    const float* row = emb.table.data() + ids[i] * E;
    for (std::int64_t e = 0; e < E; ++e) x[i * E + e] = row[e] * scale;
  });
  if (emb.pe == PeKind::Sinusoidal) add_sinusoidal(x, batch, n, E, 10000.0, offset, PeLayout::Interleaved);
  if (emb.pe == PeKind::Learned)
    add_learned(x, batch, n, E, emb.pos_table.data(), emb.pos_table.dim(0), offset, emb.pos_label);
  if (emb.type_table.size()) // BERT: + type embedding
    for (std::int64_t i = 0; i < batch * n; ++i) {
      const float* row = emb.type_table.data() + (types ? types[i] : 0) * E;
      for (std::int64_t e = 0; e < E; ++e) x[i * E + e] += row[e];
    }
  if (emb.norm_weight.size()) // BERT's embeddings LayerNorm, BART's layernorm_embedding
    layer_norm(x, batch * n, LayerNorm{emb.norm_weight, emb.norm_bias}, emb.norm_eps);
}

} // namespace attn
