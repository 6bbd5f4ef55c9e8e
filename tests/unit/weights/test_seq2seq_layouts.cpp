// Unit tests of lib/src/weights/layouts/seq2seq_layouts.cpp: T5's and BART's sides loaded from the
// test directories (testdata/hf/{t5,t5_gated,bart}, make_seq2seq_goldens.py) into the generic
// stacks as their configs say; their numbers are tests/cli/test_seq2seq.sh's.
#include "attn/core/error.hpp"
#include "attn/weights/layouts/seq2seq_layouts.hpp"
#include "attn/weights/models.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace attn;

namespace {
WeightGroup open_dir(h5::InputFiles& in, const std::string& name) {
  return WeightGroup::open(in, {test::testdata("hf/" + name), ""});
}
} // namespace

TEST_CASE("T5 v1.0: relu, tied head scaled by d_model^-0.5, unscaled scores, one relative bias per stack") {
  h5::InputFiles in;
  const WeightGroup g = open_dir(in, "t5");
  CHECK(detect_layout(g) == Layout::T5);
  const EncoderLm enc = load_t5_encoder(g);
  CHECK(enc.enc.layers.size() == 2);
  CHECK(enc.enc.opt.norm_first);
  CHECK(enc.enc.opt.norm == NormKind::Rms);
  CHECK(enc.enc.opt.eps == 1e-6);
  CHECK(enc.enc.opt.activation == Activation::Relu);
  CHECK(enc.enc.opt.positions == LayerPositions::Relative);
  REQUIRE(enc.enc.opt.relative);
  CHECK(enc.enc.opt.relative->rule().bidirectional);
  CHECK(enc.enc.opt.relative->rule().buckets == 8);
  CHECK(enc.enc.opt.relative->rule().max_distance == 10);
  CHECK(enc.enc.layers[1].self_attn.shape.score_scale() == 1.0f);
  CHECK(enc.enc.has_final_norm);
  CHECK(!enc.embed.scaled);
  CHECK(enc.embed.pe == PeKind::None);
  const Seq2SeqDecoder dec = load_t5_decoder(g);
  CHECK(dec.dec.has_cross);
  REQUIRE(dec.dec.opt.relative);
  CHECK(!dec.dec.opt.relative->rule().bidirectional);
  CHECK(dec.dec.opt.relative != enc.enc.opt.relative);
  REQUIRE(dec.gen);
  CHECK(dec.gen->input_scale == 0.25f); // 16^-0.5
  CHECK(dec.bos_attr == "decoder_start_token_id");
  CHECK(dec.forced_bos == -1);
  // the decoder model: start token from decoder_start_token_id
  const DecoderModel m = load_decoder_model(g, false);
  CHECK(special_id(m, std::nullopt, "--bos", m.bos_attr, std::nullopt) == 0);
  CHECK(m.first_layer == test::testdata("hf/t5") + ": decoder.block.0");
}

TEST_CASE("T5 v1.1 (flan): gated-gelu, d_kv of its own, an untied head, T5Config's bucket defaults") {
  h5::InputFiles in;
  const WeightGroup g = open_dir(in, "t5_gated");
  const EncoderLm enc = load_t5_encoder(g);
  CHECK(enc.enc.opt.activation == Activation::GegluTanh);
  CHECK(enc.enc.layers[0].self_attn.shape.head_dim() == 6);
  CHECK(enc.enc.layers[0].self_attn.shape.q_dim() == 12);
  CHECK(enc.enc.layers[0].ffn.wg.dim(0) == 24);
  CHECK(enc.enc.opt.relative->rule().buckets == 32);
  CHECK(enc.enc.opt.relative->rule().max_distance == 128);
  const Seq2SeqDecoder dec = load_t5_decoder(g);
  CHECK(dec.dec.layers.size() == 1); // num_decoder_layers
  REQUIRE(dec.gen);
  CHECK(dec.gen->input_scale == 1.0f);
}

TEST_CASE("BART: positions from row 2, layernorm_embedding, post-norm, final_logits_bias, forced ids") {
  h5::InputFiles in;
  const WeightGroup g = open_dir(in, "bart");
  CHECK(detect_layout(g) == Layout::Bart);
  const EncoderLm enc = load_bart_encoder(g);
  CHECK(!enc.enc.opt.norm_first);
  CHECK(enc.enc.opt.activation == Activation::Gelu);
  CHECK(enc.embed.scaled);
  CHECK(enc.embed.pe == PeKind::Learned);
  CHECK(enc.embed.pos_table.dim(0) == 20);
  const Tensor stored = g.read("model/encoder/embed_positions/weight", {22, 16});
  CHECK(enc.embed.pos_table.data()[0] == stored.data()[2 * 16]);
  CHECK(enc.embed.norm_weight.size() == 16);
  const Seq2SeqDecoder dec = load_bart_decoder(g);
  REQUIRE(dec.gen);
  CHECK(dec.gen->bias.size() == 48);
  CHECK(dec.forced_bos == 0);
  CHECK(dec.forced_eos == 2);
  CHECK(dec.known == std::vector<std::string>{"model/encoder"});
  CHECK(seq2seq_encoder_known(Layout::Bart, g) ==
        std::vector<std::string>{"model/decoder", "lm_head", "final_logits_bias"});
}
