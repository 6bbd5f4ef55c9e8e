#!/usr/bin/env bash
# Text where ids went (CONTRACT.md section 6.2): decode --generate --prompt-text with --tokenizer or
# the model directory's own tokenizer.json, --text-out to a file and to standard output; encode
# --text (BERT) as tokenize's ids and lengths given with --tokens and --lengths; a tokenize output
# as decode's --prompt/--prompt-lengths; attn-view --labels-from, its pieces shown as text; the
# errors (no tokenizer, prompts outside the model's vocabulary, conflicting flags).
source "$(dirname "$0")/lib.sh"
: "${TOKENIZERS:?}"
LR="$TESTDATA/llama_reverse.h5:/w"
RT="$TESTDATA/tokenizers/reverse.json"
row() { h5dump -w 0 -d "$2" "$1" | sed -n "s/^ *($3,0): //p" | sed 's/ *$//; s/,$//'; }

# --- decode --prompt-text: the trained reverse model from text, to text ---
[ "$(decode --generate --max-len 9 --weights "$LR" --tokenizer "$RT" --prompt-text "31415<sep>" --text-out -)" = "5 1 4 1 3" ] &&
  pass || fail "reverse model from text"
check "two prompts to a file" decode --generate --max-len 9 --weights "$LR" --tokenizer "$RT" --prompt-text "31415<sep>" \
  --prompt-text "27<sep>" --text-out gen.txt -o gen.h5
printf '5 1 4 1 3\n7 2\n' | cmp -s - gen.txt && pass || fail "--text-out file: $(cat gen.txt)"
# the same tokens as from tokenize's ids and lengths
check "tokenize prompts" tokenize --tokenizer "$RT" --text "31415<sep>" --text "27<sep>" -o p.h5
check "decode --prompt from tokenize" decode --generate --max-len 9 --weights "$LR" --prompt p.h5:ids \
  --prompt-lengths p.h5:lengths -o gen_ids.h5
same gen.h5:tokens gen_ids.h5:tokens
# the generated text is detokenize's of the generated tokens (the end token left out)
[ "$(detokenize gen.h5:tokens --tokenizer "$RT" --skip-special)" = "$(printf '5 1 4 1 3\n7 2')" ] && pass ||
  fail "detokenize of the generated tokens: $(detokenize gen.h5:tokens --tokenizer "$RT" --skip-special)"
# --lines: a file of prompts
printf '31415<sep>\n27<sep>\n' >prompts.txt
check "tokenize --lines" tokenize --tokenizer "$RT" -i prompts.txt --lines -o pl.h5
same p.h5:ids pl.h5:ids
same p.h5:lengths pl.h5:lengths

# --- a model directory's own tokenizer.json ---
cp -r "$TESTDATA/hf/llama" model
printf '{"model": {"type": "WordLevel", "unk_token": "u", "vocab": {"p": 0, "<s>": 1, "a": 2, "b": 3, "c": 4, "d": 5, "e": 6, "f": 7, "g": 8, "u": 9, "</s>": 10}},
 "pre_tokenizer": {"type": "WhitespaceSplit"},
 "added_tokens": [{"id": 1, "content": "<s>", "special": true}, {"id": 10, "content": "</s>", "special": true}],
 "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
   "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}}\n' >model/tokenizer.json
check "the directory's tokenizer" decode --generate --max-len 6 --weights model --prompt-text "a b c" --text-out own.txt -o own.h5
[ "$(detokenize own.h5:tokens --tokenizer model --skip-special)" = "$(cat own.txt)" ] && pass ||
  fail "model directory: $(cat own.txt) vs $(detokenize own.h5:tokens --tokenizer model --skip-special)"
check "tokenize with the directory" tokenize --tokenizer model --text "a b c" -o abc.h5
[ "$(row abc.h5 /ids 0)" = "1, 2, 3, 4" ] && pass || fail "directory tokenizer ids: $(row abc.h5 /ids 0)"
check "the same from ids" decode --generate --max-len 6 --weights model --prompt abc.h5:ids -o own_ids.h5
same own.h5:tokens own_ids.h5:tokens

# --- encode --text (BERT) ---
cp -r "$TESTDATA/hf/bert" bert
printf '{"normalizer": {"type": "BertNormalizer", "lowercase": true}, "pre_tokenizer": {"type": "BertPreTokenizer"},
 "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]}, "decoder": {"type": "WordPiece"},
 "added_tokens": [{"id": 0, "content": "[PAD]", "special": true}, {"id": 1, "content": "[CLS]", "special": true}, {"id": 2, "content": "[SEP]", "special": true}],
 "model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[UNK]": 3, "a": 4, "b": 5, "c": 6, "##a": 7, "##b": 8, "the": 9, "cat": 10}}}\n' >bert/tokenizer.json
check "encode --text" encode --weights bert --text "The cat" --text "a ab, c" -o et.h5
check "tokenize for encode" tokenize --tokenizer bert --text "The cat" --text "a ab, c" -o bt.h5
[ "$(row bt.h5 /ids 1)" = "1, 4, 4, 8, 3, 6, 2" ] && pass || fail "BERT ids: $(row bt.h5 /ids 1)"
check "encode --tokens --lengths" encode --weights bert --tokens bt.h5:ids --lengths bt.h5:lengths -o eb.h5
same et.h5 eb.h5

# --- attn-view --labels-from ---
check "pieces" tokenize --tokenizer "$TOKENIZERS/llama3.json" --text "Héllo wörld" -o pw.h5
tensor-gen --shape 2,6,6 --fill uniform --seed 3 -o w.h5
attn-view w.h5 --index 0 --labels-from pw.h5 --values --width 200 >view.txt 2>err.txt && pass || fail "labels-from: $(cat err.txt)"
grep -q "^ *H *él *lo *w *ör *ld$" view.txt && pass || fail "labels as text: $(head -2 view.txt)"
attn-view w.h5 --index 0 --labels-from pw.h5 --png w.png 2>err.txt && pass || fail "labels-from PNG"
grep -qF "attn-view: note: the PNG's labels show 2 characters outside ASCII as '?' (é ö)" err.txt && pass ||
  fail "PNG note: $(cat err.txt)"
expect_fail 1 "--labels-from (pw.h5:/pieces) gives 6 labels; the axis has 4" attn-view "$(tensor-gen --shape 4,4 -o w4.h5 && echo w4.h5)" --labels-from pw.h5 --values
expect_fail 1 "--row 1 is outside the 1 rows of pw.h5:/pieces" attn-view w.h5 --index 0 --labels-from pw.h5 --row 1 --values
expect_fail 1 "pw.h5:/ids: holds numeric data; expected variable-length strings" attn-view w.h5 --index 0 --labels-from pw.h5:ids --values

# --- errors ---
expect_fail 2 "--prompt-text needs --tokenizer T" decode --generate --max-len 3 --weights "$LR" --prompt-text "1<sep>" -o x.h5
expect_fail 2 "--prompt-text" decode --generate --max-len 3 --weights "$LR" --tokenizer "$RT" --prompt-text "1" --prompt p.h5:ids -o x.h5
expect_fail 2 "--text-out - and -o - cannot both be standard output" decode --generate --max-len 3 --weights "$LR" --tokenizer "$RT" --prompt-text "1" --text-out - -o -
expect_fail 2 "--prompt-text" decode --tokens p.h5:ids --weights "$LR" --tokenizer "$RT" --prompt-text "1" -o x.h5
expect_fail 1 "--prompt-text 0: token 9906 (\"Hello\") of" decode --generate --max-len 3 --weights "$LR" --tokenizer "$TOKENIZERS/llama3.json" --prompt-text "Hello" -o x.h5
expect_fail 1 "--prompt-text: sequence 0: invalid UTF-8 at byte 1" decode --generate --max-len 3 --weights "$LR" --tokenizer "$RT" --prompt-text $'1\xff' -o x.h5
expect_fail 2 "--text" encode --weights bert --text "a" --tokens bt.h5:ids -o x.h5
expect_fail 2 "--text needs --tokenizer T" encode --weights "$TESTDATA/encoder.h5:/post_relu_1" --text "a" -o x.h5

finish
