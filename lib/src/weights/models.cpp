// Loading whole encoder and decoder models in any layout (weights/models.hpp).
#include "attn/weights/models.hpp"

#include "attn/core/error.hpp"
#include "attn/weights/embedding_weights.hpp"
#include "attn/weights/layouts/model_layouts.hpp"
#include "attn/weights/layouts/seq2seq_layouts.hpp"
#include "attn/weights/stack_weights.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace attn {

EncoderModel load_encoder_model(WeightGroup g, bool ignore_unknown) {
  if (const Layout layout = detect_layout(g); layout == Layout::T5 || layout == Layout::Bart) {
    EncoderLm lm = layout == Layout::T5 ? load_t5_encoder(g) : load_bart_encoder(g);
    check_all_weights_used(g, seq2seq_encoder_known(layout, g), ignore_unknown);
    std::string e_source = "the d_model of " + lm.embed.label;
    return {std::move(g), std::move(lm.enc), std::move(lm.embed), std::move(e_source)};
  }
  if (detect_layout(g) == Layout::Bert) {
    EncoderLm bert = load_bert(g);
    check_all_weights_used(g, layout_buffers(Layout::Bert, Decoder{}), ignore_unknown);
    std::string e_source = "the hidden size of " + bert.embed.label;
    return {std::move(g), std::move(bert.enc), std::move(bert.embed), std::move(e_source)};
  }
  const WeightGroup eg = stack_group(g, "encoder");
  Encoder enc = load_encoder(eg);
  // a sequence-to-sequence file's other parts are known; the embeddings are read (or not) later
  check_all_weights_used(g, known_model_parts(g, {"decoder", "tgt_embed", "generator", "src_embed"}), ignore_unknown);
  std::string e_source = "the embed dim of " + eg.label("layers/0/self_attn");
  return {std::move(g), std::move(enc), std::nullopt, std::move(e_source)};
}

DecoderModel load_decoder_model(WeightGroup g, bool ignore_unknown) {
  if (const Layout layout = detect_layout(g); layout == Layout::T5 || layout == Layout::Bart) {
    Seq2SeqDecoder lm = layout == Layout::T5 ? load_t5_decoder(g) : load_bart_decoder(g);
    check_all_weights_used(g, lm.known, ignore_unknown);
    WeightGroup dg = g.child(lm.group);
    std::string first = g.label(lm.first_layer);
    DecoderModel m{std::move(g),        std::move(dg), std::move(first), std::move(lm.dec), std::move(lm.gen),
                   std::move(lm.embed), lm.bos_attr,   lm.eos_attr,      lm.pad_attr};
    m.forced_bos = lm.forced_bos, m.forced_eos = lm.forced_eos;
    return m;
  }
  if (const Layout layout = detect_layout(g); layout != Layout::Toolkit) {
    CausalLm lm = layout == Layout::Llama ? load_llama(g) : load_gpt2(g);
    check_all_weights_used(g, layout_buffers(layout, lm.dec), ignore_unknown);
    const bool llama = layout == Layout::Llama;
    WeightGroup dg = g.child(llama ? "model" : "transformer");
    std::string first = g.label(llama ? "model/layers/0" : "transformer/h/0");
    return {std::move(g),        std::move(dg), std::move(first), std::move(lm.dec), std::move(lm.gen),
            std::move(lm.embed), lm.bos_attr,   lm.eos_attr,      lm.pad_attr};
  }
  WeightGroup dg = stack_group(g, "decoder");
  Decoder dec = load_decoder(dg);
  auto gen = load_generator(g, dec.embed_dim());
  // a sequence-to-sequence file's other parts are known; the embeddings are read (or not) later
  check_all_weights_used(g, known_model_parts(g, {"encoder", "src_embed", "tgt_embed"}), ignore_unknown);
  std::string first = dg.label("layers/0");
  return {std::move(g), std::move(dg), std::move(first), std::move(dec), std::move(gen), std::nullopt};
}

TokenEmbedding target_embedding(DecoderModel& m) {
  if (m.embed) return std::move(*m.embed);
  return load_embedding(m.group, "tgt_embed", m.dec.embed_dim(), "decoder");
}

std::vector<std::int64_t> special_ids(const DecoderModel& m, const std::optional<std::int64_t>& flag,
                                      const char* flag_name, const std::string& attr) {
  const auto list = flag ? std::nullopt : m.group.attr_ints(attr);
  if (!list || list->size() == 1) return {special_id(m, flag, flag_name, attr, std::nullopt)};
  if (list->empty()) throw Error(fmt::format("{} is an empty list; give {}", m.group.attr_label(attr), flag_name));
  const std::int64_t V = m.gen->vocab();
  for (std::int64_t id : *list)
    if (id < 0 || id >= V)
      throw Error(fmt::format("{} = [{}] holds {}, outside the vocabulary 0..{} of {}", m.group.attr_label(attr),
                              fmt::join(*list, ", "), id, V - 1, m.group.label("generator/weight")));
  return *list;
}

std::int64_t special_id(const DecoderModel& m, const std::optional<std::int64_t>& flag, const char* flag_name,
                        const std::string& attr, std::optional<std::int64_t> fallback) {
  std::int64_t id;
  std::string source;
  if (flag) {
    id = *flag, source = fmt::format("{} {}", flag_name, id);
  } else if (auto a = m.group.attr_int(attr)) {
    id = *a, source = fmt::format("{} = {}", m.group.attr_label(attr), id);
  } else if (fallback) {
    id = *fallback, source = fmt::format("the default {} {}", attr, id);
  } else {
    throw Error(
        fmt::format("{}: no {} attribute on the group or an ancestor; give {}", m.group.label(), attr, flag_name));
  }
  const std::int64_t V = m.gen->vocab();
  if (id < 0 || id >= V)
    throw Error(
        fmt::format("{} is outside the vocabulary 0..{} of {}", source, V - 1, m.group.label("generator/weight")));
  return id;
}

} // namespace attn
