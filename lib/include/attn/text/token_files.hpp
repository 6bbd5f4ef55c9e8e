// Text inputs cut into sequences and tokenized, and the token files tokenize writes and detokenize
// and decode read (CONTRACT.md section 6.2): /ids (b, n) int64 right-padded, /lengths (b,),
// /pieces (b, n) strings.
#pragma once

#include "attn/core/tensor.hpp"
#include "attn/h5/h5io.hpp"
#include "attn/text/tokenizer.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attn::text {

// The whole of a text file, or of standard input ("-"); an Error naming it when it cannot be read.
std::string read_text(const std::string& path);

// Writes `text` to `target` ("-": standard output) whole or not at all (a temporary file renamed).
void write_text_file(const std::string& target, const std::string& text);

// The sequences of an input: the whole of it as one, or with `lines` each line without its "\n"
// or "\r\n" (a final line ending starts no empty sequence). Views into `text`.
std::vector<std::string_view> split_sequences(std::string_view text, bool lines);

// Rows of token ids in one block: row i is ids[offsets[i], offsets[i + 1]).
struct Rows {
  std::vector<std::int32_t> ids;
  std::vector<std::int64_t> offsets{0};
  std::int64_t size() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
  std::int64_t length(std::int64_t i) const { return offsets[i + 1] - offsets[i]; }
  const std::int32_t* row(std::int64_t i) const { return ids.data() + offsets[i]; }
  std::int64_t longest() const;
  void append(const std::vector<std::int32_t>& r);
};

// Each sequence's ids, checked to be UTF-8 first (an Error naming `source`, the sequence's index
// (counted from `first_index`) and the byte offset), on up to `threads` threads (0: all).
Rows encode_all(const Tokenizer& tok, const std::vector<std::string_view>& seqs, bool add_special,
                const std::string& source, int threads = 0, std::int64_t first_index = 0);
// The sequences of a text file ("-": standard input) tokenized: the whole of it as one, or with
// `lines` each line, read and tokenized a block of lines at a time (the text is never held whole,
// only the ids). An empty input is an Error.
Rows encode_file(const Tokenizer& tok, const std::string& path, bool lines, bool add_special, int threads = 0);

// Rows of ids: the tokens of each row up to its length.
struct TokenRows {
  std::vector<std::vector<std::int64_t>> rows;
  bool batched = true; // false: a 1-D ids dataset (one row)
};

// Writes /ids, /lengths and (unless `pieces` is false) /pieces of `rows` (pad: the tokenizer's pad id).
void write_token_file(h5::OutputFile& out, const Tokenizer& tok, const Rows& rows, bool pieces = true);

// The bytes of an HDF5 file holding write_token_file's datasets (for h5::InputFiles::add_image:
// token ids from text read as any tool reads them from a file).
std::vector<char> token_file_image(const Tokenizer& tok, const Rows& rows);

// The tokenizer a run with --tokenizer T, or else with --weights W, uses: T; or a Hugging Face
// model directory's own tokenizer.json (W is the directory, or a file in it); "" when neither.
std::string choose_tokenizer(const std::string& tokenizer, const std::string& weights);

// Rows of an ids dataset (b, n) or (n,), cut at `lengths` when given (b,), each id checked
// against the tokenizer's vocabulary (an Error naming the first bad id, its row and position).
TokenRows read_token_rows(const h5::Dataset& ids, const h5::Dataset* lengths, const Tokenizer& tok);

} // namespace attn::text
