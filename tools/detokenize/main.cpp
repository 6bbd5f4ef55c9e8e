// detokenize: token ids back to text with a Hugging Face tokenizer.json, exactly as the tokenizers
// library decodes them (CONTRACT.md section 6.2): one line per row.
#include "cli.hpp"

#include "attn/core/error.hpp"
#include "attn/text/token_files.hpp"
#include "attn/text/tokenizer.hpp"

namespace {

struct Options {
  std::string tokenizer, ids, lengths, output = "-";
  bool skip_special = false;
};

void run(const Options& o, attn::cli::Tool& tool) {
  attn::h5::TensorRef ids_ref = tool.input_ref(o.ids);
  if (ids_ref.name.empty()) ids_ref.name = "ids";
  attn::h5::Dataset ids = tool.inputs().open(ids_ref);
  // a tokenize output's lengths stand beside its ids
  std::optional<attn::h5::Dataset> lengths;
  if (!o.lengths.empty()) {
    lengths.emplace(tool.open_input(o.lengths));
  } else {
    const std::string beside =
        attn::h5::join_path(attn::h5::parent_of(attn::h5::normalize_path(ids_ref.name)), "lengths");
    if (tool.inputs().kind_of(ids_ref.path, beside) == attn::h5::ObjectKind::Dataset)
      lengths.emplace(tool.inputs().open({ids_ref.path, beside}));
  }
  if (o.output != "-") tool.check_file_output(o.output, "text");
  const attn::text::Tokenizer tok = attn::text::Tokenizer::load(o.tokenizer);
  const attn::text::TokenRows rows = attn::text::read_token_rows(ids, lengths ? &*lengths : nullptr, tok);
  std::string text;
  for (const auto& r : rows.rows) {
    text += tok.decode(r, o.skip_special);
    text += '\n';
  }
  attn::text::write_text_file(o.output, text);
}

} // namespace

int main(int argc, char** argv) {
  attn::cli::Tool tool("detokenize",
                       "Token ids back to text with a Hugging Face tokenizer.json, as the tokenizers "
                       "library decodes them; one line per row.",
                       false);
  Options o;
  auto& app = tool.app();
  app.add_option("ids", o.ids, "The ids (b, n) or (n,): a tokenize output, or any integer dataset (default name ids)")
      ->required()
      ->type_name("IDS[:NAME]");
  app.add_option("--tokenizer", o.tokenizer, "A tokenizer.json, or a directory holding one")
      ->required()
      ->type_name("T");
  app.add_option("--lengths", o.lengths, "Each row's length (b,) (default: the lengths dataset beside the ids, if any)")
      ->type_name("L[:NAME]");
  app.add_flag("--skip-special", o.skip_special, "Leave out special tokens (skip_special_tokens=True)");
  app.add_option("-o,--output", o.output, "Write the text to FILE ('-' = standard output, the default)")
      ->type_name("FILE|-");
  return tool.run(argc, argv, [&] { run(o, tool); });
}
