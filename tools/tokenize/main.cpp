// tokenize: text to token ids with a Hugging Face tokenizer.json, exactly as the tokenizers library
// encodes it (CONTRACT.md section 6.2). Writes /ids, /lengths and /pieces.
#include "cli.hpp"

#include "attn/core/error.hpp"
#include "attn/text/token_files.hpp"
#include "attn/text/tokenizer.hpp"

namespace {

struct Options {
  std::string tokenizer, input;
  std::vector<std::string> texts;
  bool lines = false, no_special = false;
};

void run(const Options& o, attn::cli::Tool& tool) {
  if (tool.given("--text")) tool.forbid("--text", {"-i", "--lines"});
  tool.check_outputs();
  attn::cli::Stopwatch clock;
  const attn::text::Tokenizer tok = attn::text::Tokenizer::load(o.tokenizer);
  tool.log("read {} in {:.3f} s", tok.label(), clock.seconds());
  std::string text; // the input file's bytes, which the sequences view
  std::vector<std::string_view> seqs;
  std::string source = "--text";
  if (tool.given("--text")) {
    seqs.assign(o.texts.begin(), o.texts.end());
  } else {
    text = attn::text::read_text(o.input);
    source = attn::h5::input_label(o.input);
    if (text.empty()) throw attn::Error(fmt::format("{}: no text to tokenize (the input is empty)", source));
    seqs = attn::text::split_sequences(text, o.lines);
  }
  const auto ids = attn::text::encode_all(tok, seqs, !o.no_special, source, tool.threads());
  std::size_t total = 0;
  for (const auto& r : ids) total += r.size();
  tool.log("{} sequences, {} tokens in {:.3f} s", ids.size(), total, clock.seconds());
  auto out = tool.open_output("ids");
  attn::text::write_token_file(*out, tok, ids);
  out->commit();
}

} // namespace

int main(int argc, char** argv) {
  attn::cli::Tool tool("tokenize", "Text to token ids with a Hugging Face tokenizer.json, as the tokenizers library "
                                   "encodes it; writes /ids, /lengths and /pieces.");
  Options o;
  auto& app = tool.app();
  app.add_option("--tokenizer", o.tokenizer,
                 "A tokenizer.json, or a directory holding one (a model directory) or GPT-2's vocab.json and "
                 "merges.txt")
      ->required()
      ->type_name("T");
  app.add_option("-i,--input", o.input, "The UTF-8 text to tokenize ('-' = standard input, the default)")
      ->type_name("FILE|-")
      ->default_str("-");
  o.input = "-";
  app.add_option("--text", o.texts, "A sequence given on the command line (repeatable; instead of -i)")
      ->type_name("TEXT")
      ->allow_extra_args(false);
  app.add_flag("--lines", o.lines, "Each line of the input (without its \\n or \\r\\n) is a sequence");
  app.add_flag("--no-special", o.no_special, "Add no special tokens (add_special_tokens=False)");
  return tool.run(argc, argv, [&] { run(o, tool); });
}
