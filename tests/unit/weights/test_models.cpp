// Unit tests of lib/src/weights/models.cpp and attention_weights.cpp: whole models loaded in each
// layout, special ids from flags or attributes, parameters saved in the layout they are read in.
#include "attn/core/error.hpp"
#include "attn/weights/attention_weights.hpp"
#include "attn/weights/embedding_weights.hpp"
#include "attn/weights/layouts/model_layouts.hpp"
#include "attn/weights/models.hpp"
#include "attn/weights/stack_weights.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

using namespace attn;

TEST_CASE("load_decoder_model: a sequence-to-sequence file's decoder, generator and special ids") {
  h5::InputFiles in;
  const std::string path = test::testdata("reverse_model.h5");
  DecoderModel m = load_decoder_model(WeightGroup::open(in, {path, ""}), false);
  CHECK(m.dec.layers.size() == 2);
  CHECK(m.dec.has_cross);
  REQUIRE(m.gen);
  CHECK(m.first_layer == path + ":/decoder/layers/0");
  CHECK(!m.embed); // tgt_embed is read on demand
  const TokenEmbedding emb = target_embedding(m);
  CHECK(emb.table.dim(0) == m.gen->vocab());
  CHECK(special_id(m, std::nullopt, "--bos", m.bos_attr, std::nullopt) == 1); // the file's bos_id
  CHECK(special_id(m, std::int64_t{5}, "--bos", m.bos_attr, std::nullopt) == 5);
  CHECK(special_id(m, std::nullopt, "--pad", "no_such_id", 0) == 0);
  const std::string bad_bos =
      fmt::format("--bos -1 is outside the vocabulary 0..{} of {}:/generator/weight", m.gen->vocab() - 1, path);
  CHECK_THROWS_WITH_AS(special_id(m, std::int64_t{-1}, "--bos", m.bos_attr, std::nullopt), bad_bos.c_str(), Error);
  CHECK_THROWS_WITH_AS(special_id(m, std::nullopt, "--eos", "no_such_id", std::nullopt),
                       doctest::Contains("no no_such_id attribute on the group or an ancestor; give --eos"), Error);
}

TEST_CASE("load_encoder_model: nn.Transformer's encoder and BERT's by its own names") {
  h5::InputFiles in;
  const EncoderModel s2s = load_encoder_model(WeightGroup::open(in, {test::testdata("reverse_model.h5"), ""}), false);
  CHECK(s2s.enc.layers.size() == 2);
  CHECK(!s2s.embed);
  CHECK(s2s.e_source.find("the embed dim of ") == 0);
  const EncoderModel bert = load_encoder_model(WeightGroup::open(in, {test::testdata("encoder.h5"), "/w/bert"}), false);
  REQUIRE(bert.embed);
  CHECK(bert.embed->type_table.size() > 0);
  CHECK(bert.e_source.find("the hidden size of ") == 0);
}

TEST_CASE("known_model_parts: pos_embed only with learned positions") {
  test::TempDir dir;
  const std::string path = dir.file("m.h5");
  {
    h5::OutputFile out({path, ""}, "x", {"test", "test"});
    WeightWriter w(out);
    w.write("x", Tensor(Shape{1}));
    out.commit();
  }
  h5::InputFiles in;
  const WeightGroup g = WeightGroup::open(in, {path, ""});
  CHECK(known_model_parts(g, {"encoder"}) == std::vector<std::string>{"encoder"});
  test::TempDir dir2;
  const std::string learned = dir2.file("l.h5");
  {
    h5::OutputFile out({learned, ""}, "x", {"test", "test"});
    WeightWriter w(out);
    w.write("x", Tensor(Shape{1}));
    w.attr("pe", std::string("learned"));
    out.commit();
  }
  const WeightGroup gl = WeightGroup::open(in, {learned, ""});
  CHECK(known_model_parts(gl, {"encoder"}) == std::vector<std::string>{"encoder", "pos_embed"});
}

TEST_CASE("attention parameters: saved as they are read, for every form") {
  test::TempDir dir;
  const std::string path = dir.file("p.h5");
  const ScoreParams additive = xavier_score_params(ScoreKind::Additive, 4, 6, 3, 5, 7);
  const LinformerProjections lf = xavier_linformer(2, 5, 8);
  const LocationAwareParams loc = xavier_location_aware(4, 6, 3, 2, 3, 9);
  const Tensor features = favor_features(8, 4, false, 10);
  {
    h5::OutputFile out({path, ""}, score_params_primary(ScoreKind::Additive), {"test", "test"});
    const WeightWriter w(out);
    save_score_params(w.child("add"), ScoreKind::Additive, additive);
    save_linformer(w.child("lf"), lf);
    save_location_aware(w.child("loc"), loc);
    save_favor_features(w.child("perf"), features);
    out.commit();
  }
  h5::InputFiles in;
  const WeightGroup root = WeightGroup::open(in, {path, ""});
  const ScoreParams a = load_score_params(root.child("add"), ScoreKind::Additive, 4, 6, 5);
  CHECK(test::max_abs_diff(a.W_q.span(), additive.W_q.span()) == 0);
  CHECK(test::max_abs_diff(a.v.span(), additive.v.span()) == 0);
  const LinformerProjections l = load_linformer(root.child("lf"), 5);
  CHECK(test::max_abs_diff(l.F.span(), lf.F.span()) == 0);
  const LocationAwareParams c = load_location_aware(root.child("loc"), 4, 6);
  CHECK(test::max_abs_diff(c.U.span(), loc.U.span()) == 0);
  CHECK(test::max_abs_diff(load_favor_features(root.child("perf"), 4, "d").span(), features.span()) == 0);
  CHECK(std::string(score_params_primary(ScoreKind::General)) == "W");
  CHECK(std::string(score_params_primary(ScoreKind::Location)) == "W_a");
}

TEST_CASE("stack weights: an initialised encoder saved and loaded back is the same encoder") {
  test::TempDir dir;
  const std::string path = dir.file("enc.h5");
  EncoderShape shape;
  shape.layers = 2, shape.embed_dim = 8, shape.heads = 2, shape.ffn_dim = 16, shape.final_norm = true;
  const Encoder enc = init_encoder(shape, 3);
  {
    h5::OutputFile out({path, ""}, "encoder/layers/0/self_attn/in_proj_weight", {"test", "test"});
    save_encoder(WeightWriter(out).child("encoder"), enc);
    out.commit();
  }
  h5::InputFiles in;
  const Encoder back = load_encoder(stack_group(WeightGroup::open(in, {path, ""}), "encoder"));
  CHECK(back.layers.size() == 2);
  CHECK(back.has_final_norm);
  CHECK(back.embed_dim() == 8);
  CHECK(back.ffn_dim() == 16);
  CHECK(test::max_abs_diff(back.layers[1].ffn.w1.to_float().span(), enc.layers[1].ffn.w1.to_float().span()) == 0);
}

TEST_CASE("layouts by their own names: LLaMA and GPT-2 detected and loaded as decoder-only stacks") {
  h5::InputFiles in;
  const std::string path = test::testdata("decoder.h5");
  for (const char* group : {"/w/llama", "/w/gpt2"}) {
    const WeightGroup g = WeightGroup::open(in, {path, group});
    CHECK(detect_layout(g) == (std::string(group) == "/w/llama" ? Layout::Llama : Layout::Gpt2));
    DecoderModel m = load_decoder_model(g, false);
    CHECK(!m.dec.has_cross);
    CHECK(m.dec.opt.norm_first);
    REQUIRE(m.gen);
    REQUIRE(m.embed); // read with the model
    CHECK(m.embed->table.dim(0) == m.gen->vocab());
    CHECK(m.bos_attr == "bos_token_id");
    CHECK(m.first_layer ==
          path + ":" + group + (std::string(group) == "/w/llama" ? "/model/layers/0" : "/transformer/h/0"));
  }
  CHECK(detect_layout(WeightGroup::open(in, {test::testdata("reverse_model.h5"), ""})) == Layout::Toolkit);
}
