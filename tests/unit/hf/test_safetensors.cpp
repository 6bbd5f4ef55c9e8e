// The Hugging Face layer: safetensors headers (the tensors, their types, shapes and bytes, the
// buffer's order checked), config.json flattened, model directories; and a directory read as
// weights: float32 borrowed from the mapping, 16-bit Linear weights kept 16-bit.
#include "attn/core/error.hpp"
#include "attn/hf/model_dir.hpp"
#include "attn/hf/safetensors.hpp"
#include "attn/weights/layouts/model_layouts.hpp"
#include "attn/weights/weights.hpp"
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <fstream>

using namespace attn;

namespace {

void write_file(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A safetensors file: HEADER's length (8 bytes, little-endian), HEADER, DATA.
std::string safetensors(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 255);
  return out + header + data;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.begin(), s.size());
  return s;
}

} // namespace

TEST_CASE("safetensors: tensors in header order, their bytes in the mapping; the buffer's order may differ") {
  test::TempDir dir;
  const std::string path = dir.file("m.safetensors");
  const std::string bf16 = std::string("\x80\x3f\x00\xc0", 4); // 1.0, -2.0
  write_file(path,
             safetensors(R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},)"
                         R"("__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})"
                         "  ",
                         floats({3.5f, -1.0f}) + bf16));
  const hf::SafetensorsFile f(path);
  REQUIRE(f.tensors().size() == 2);
  CHECK(f.tensors()[0].name == "b");
  CHECK(f.tensors()[0].dtype == hf::DType::BF16);
  CHECK(f.tensors()[1].shape == Shape{1, 2});
  CHECK(f.metadata().at("format") == "pt");
  const hf::StTensor* a = f.find("a");
  REQUIRE(a);
  float v[2];
  std::memcpy(v, f.data(*a), 8);
  CHECK(v[0] == 3.5f);
  CHECK(v[1] == -1.0f);
  CHECK(f.find("c") == nullptr);
}

TEST_CASE("safetensors: a damaged header is an error naming the file and the tensor") {
  test::TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const auto fails = [&](const std::string& header, const std::string& data, const std::string& message) {
    write_file(path, safetensors(header, data));
    CHECK_THROWS_WITH_AS(hf::SafetensorsFile{path}, doctest::Contains(message.c_str()), Error);
  };
  fails(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", std::string(8, '\0'),
        "tensor w: unknown key 'extra'");
  fails(R"({"w":{"dtype":"F32","shape":[2]}})", std::string(8, '\0'), "tensor w: data_offsets is not [begin, end]");
  fails(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", std::string(8, '\0'),
        "tensor w: the shape's size overflows");
  fails(R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'), "tensor w: no dtype string");
  fails(R"({"__metadata__":{"a":1}})", "", "__metadata__ value a is not a string");
  write_file(path, "1234");
  CHECK_THROWS_WITH_AS(hf::SafetensorsFile{path}, doctest::Contains("4 bytes: too short"), Error);
  CHECK_THROWS_WITH_AS(hf::SafetensorsFile{dir.file("none")}, doctest::Contains("none: cannot open"), Error);
}

TEST_CASE("config.json: numbers, strings and bools as themselves, nested values flattened, null absent") {
  test::TempDir dir;
  const std::string path = dir.file("config.json");
  write_file(path, R"({"a": 3, "b": 1e-5, "c": "silu", "d": true, "e": null, "eos_token_id": [1, 2],
    "architectures": ["LlamaForCausalLM"], "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "inner": {"x": 1}}})");
  const auto c = hf::read_config(path);
  CHECK(std::get<std::int64_t>(c.at("a")) == 3);
  CHECK(std::get<double>(c.at("b")) == 1e-5);
  CHECK(std::get<std::string>(c.at("c")) == "silu");
  CHECK(std::get<bool>(c.at("d")));
  CHECK_FALSE(c.count("e"));
  CHECK(std::get<std::vector<std::int64_t>>(c.at("eos_token_id")) == std::vector<std::int64_t>{1, 2});
  CHECK_FALSE(c.count("architectures"));
  CHECK(std::get<std::string>(c.at("rope_scaling.rope_type")) == "llama3");
  CHECK(std::get<double>(c.at("rope_scaling.factor")) == 8.0);
  CHECK(std::get<std::int64_t>(c.at("rope_scaling.inner.x")) == 1);
}

TEST_CASE("a model directory as weights: names with '/' for '.', config values on the root, 16-bit kept") {
  h5::InputFiles in;
  const WeightGroup g = WeightGroup::open(in, {test::testdata("hf/llama_bf16"), ""});
  CHECK(g.has("model/norm/weight"));
  CHECK(g.has_group("model/layers/1"));
  CHECK_FALSE(g.has("model/norm"));
  CHECK(g.attr_positive("num_attention_heads") == 4);
  CHECK(g.attr_label("num_attention_heads").find("llama_bf16/config.json: key num_attention_heads") !=
        std::string::npos);
  const WeightGroup a = g.child("model/layers/0/self_attn");
  const LinearWeight q = a.read_linear("q_proj/weight", {16, 16});
  CHECK(q.format() == LinearWeight::Format::bf16);
  const Tensor norm = g.read("model/norm/weight", {16});
  CHECK_FALSE(norm.borrowed()); // widened to float32
  CHECK_THROWS_WITH_AS(a.read("k_proj/weight", {16, 16}),
                       doctest::Contains("model.safetensors: tensor model.layers.0.self_attn.k_proj.weight: expected "
                                         "shape (16, 16), got (8, 16)"),
                       Error);
  const CausalLm lm = load_llama(g); // the embeddings stay 16-bit too, widened as looked up
  REQUIRE(lm.embed.compact_table);
  CHECK(lm.embed.compact_table->format() == LinearWeight::Format::bf16);
  CHECK(lm.embed.table.size() == 0);
  CHECK(lm.embed.vocab() == 11);
  const CausalLm gpt2 = load_gpt2(WeightGroup::open(in, {test::testdata("hf/gpt2_bf16"), ""}));
  CHECK(gpt2.dec.layers[0].self_attn.in_proj_weight.format() == LinearWeight::Format::bf16); // Conv1D, transposed
  CHECK(gpt2.gen.weight.format() == LinearWeight::Format::bf16);                             // the tied wte
  const WeightGroup f32 = WeightGroup::open(in, {test::testdata("hf/llama"), "model"});
  CHECK(f32.read("norm/weight", {16}).borrowed()); // from the mapping
  CHECK(f32.read_linear("layers/0/mlp/up_proj/weight", {24, 16}).format() == LinearWeight::Format::f32);
  CHECK_THROWS_WITH_AS(WeightGroup::open(in, {test::testdata("hf/llama"), "nope"}),
                       doctest::Contains("no tensors under 'nope'"), Error);
}
