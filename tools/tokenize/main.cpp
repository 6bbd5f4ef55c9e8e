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
  bool lines = false, no_special = false, no_pieces = false;
};

void run(const Options& o, attn::cli::Tool& tool) {
  if (tool.given("--text")) tool.forbid("--text", {"-i", "--lines"});
  if (!tool.given("--text") && o.input != "-") tool.input_ref(o.input); // the output must not replace it
  tool.check_outputs();
  attn::cli::Stopwatch clock;
  const attn::text::Tokenizer tok = attn::text::Tokenizer::load(o.tokenizer);
  tool.log("read {} in {:.3f} s", tok.label(), clock.seconds());
  const attn::text::Rows rows =
      tool.given("--text") ? attn::text::encode_all(tok, std::vector<std::string_view>(o.texts.begin(), o.texts.end()),
                                                    !o.no_special, "--text", tool.threads())
                           : attn::text::encode_file(tok, o.input, o.lines, !o.no_special, tool.threads());
  tool.log("{} sequences, {} tokens in {:.3f} s", rows.size(), rows.ids.size(), clock.seconds());
  auto out = tool.open_output("ids");
  attn::text::write_token_file(*out, tok, rows, !o.no_pieces);
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
  app.add_flag("--no-pieces", o.no_pieces,
               "Write no /pieces: for a corpus, the ids and lengths alone (HDF5 stores each piece as an object of "
               "its heap, most of the time of a large run)");
  return tool.run(argc, argv, [&] { run(o, tool); });
}
