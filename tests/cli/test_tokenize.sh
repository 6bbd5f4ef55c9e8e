#!/usr/bin/env bash
# tokenize and detokenize (CONTRACT.md section 6.2): the ids, lengths and pieces of real tokenizers
# (the exactness of every tokenizer against Hugging Face's library is tests/unit/text); --lines with
# CRLF, padding with the pad id, --no-special; tokenizer directories (tokenizer.json, or GPT-2's
# vocab.json and merges.txt); the cache of a big tokenizer's tables and where it goes
# (ATTN_CACHE_DIR, XDG_CACHE_HOME, HOME; none); detokenize's round trip, --skip-special, --lengths
# and 1-D ids; a line of a million characters; bad input: invalid UTF-8 (naming the sequence and
# byte), a tokenizer.json that is not JSON or names an unknown component, ids outside the
# vocabulary, empty input, --text with -i.
source "$(dirname "$0")/lib.sh"
: "${TOKENIZERS:?}"
L3="$TOKENIZERS/llama3.json"
L2="$TOKENIZERS/llama2.json"
# row FILE DATASET I: row I of a 2-D dataset as "a, b, c"
row() { h5dump -w 0 -d "$2" "$1" | sed -n "s/^ *($3,0): //p" | sed 's/ *$//; s/,$//'; }
vec() { h5dump -w 0 -d "$2" "$1" | sed -n 's/^ *(0): //p' | sed 's/ *$//'; }

# --- ids, lengths, pieces ---
check "tokenize --text" tokenize --tokenizer "$L3" --text "Hello World" --text "" --text "a b c" -o t.h5
[ "$(row t.h5 /ids 0)" = "9906, 4435, 0" ] && pass || fail "ids row 0: $(row t.h5 /ids 0)"
[ "$(row t.h5 /ids 1)" = "0, 0, 0" ] && pass || fail "ids row 1 (empty text): $(row t.h5 /ids 1)"
[ "$(row t.h5 /ids 2)" = "64, 293, 272" ] && pass || fail "ids row 2: $(row t.h5 /ids 2)"
[ "$(vec t.h5 /lengths)" = "2, 0, 3" ] && pass || fail "lengths: $(vec t.h5 /lengths)"
h5dump -d /pieces t.h5 | grep -q 'CSET H5T_CSET_UTF8' && pass || fail "pieces are not UTF-8 strings"
h5dump -w 0 -d /pieces t.h5 | grep -qF '(0,0): "Hello", "\37777777704\37777777640World", NULL' && pass ||
  fail "pieces: $(h5dump -w 0 -d /pieces t.h5 | grep '(0,0)')"
# LLaMA 2 adds <s> (1); --no-special does not
check "llama2" tokenize --tokenizer "$L2" --text "Hello" -o s.h5
[ "$(row s.h5 /ids 0)" = "1, 22557" ] && pass || fail "llama2 ids: $(row s.h5 /ids 0)"
check "llama2 --no-special" tokenize --tokenizer "$L2" --text "Hello" --no-special -o s.h5
[ "$(row s.h5 /ids 0)" = "22557" ] && pass || fail "llama2 --no-special ids: $(row s.h5 /ids 0)"

# --- --lines: CRLF, a final line ending, empty lines; right padding with the pad id ---
printf 'Hello World\r\n\nHello\n' >lines.txt
check "--lines" tokenize --tokenizer "$TOKENIZERS/pieces.json" -i lines.txt --lines -o p.h5 # pad id 50256
[ "$(vec p.h5 /lengths)" = "5, 2, 4" ] && pass || fail "lines: lengths $(vec p.h5 /lengths)"
[ "$(row p.h5 /ids 1)" = "50256, 50256, 50256, 50256, 50256" ] && pass || fail "padded row: $(row p.h5 /ids 1)"
tokenize --tokenizer "$L3" --lines <lines.txt -o std.h5 && [ "$(vec std.h5 /lengths)" = "2, 0, 1" ] && pass ||
  fail "--lines from standard input: $(vec std.h5 /lengths)"
# without --lines the whole input is one sequence, its line breaks included
check "whole input" tokenize --tokenizer "$L3" -i lines.txt -o w.h5
[ "$(vec w.h5 /lengths)" = "5" ] && pass || fail "whole input: lengths $(vec w.h5 /lengths)"

# --no-pieces: the ids and lengths alone; the ids stored in tiles (chunked), read as any dataset
check "--no-pieces" tokenize --tokenizer "$L3" -i lines.txt --lines --no-pieces -o np.h5
[ "$(h5ls np.h5 | awk '{print $1}' | tr '\n' ' ')" = "ids lengths " ] && pass || fail "--no-pieces: $(h5ls np.h5)"
same std.h5:ids np.h5:ids
h5dump -p -H -d /ids np.h5 | grep -q "CHUNKED" && pass || fail "ids not in tiles"

# --- tokenizer directories ---
mkdir -p model && cp "$L3" model/tokenizer.json
check "a directory with tokenizer.json" tokenize --tokenizer model --text "Hello World" -o d.h5
[ "$(row d.h5 /ids 0)" = "9906, 4435" ] && pass || fail "directory: $(row d.h5 /ids 0)"
check "GPT-2's vocab.json and merges.txt" tokenize --tokenizer "$TOKENIZERS/gpt2_pair" --text "Hello World<|endoftext|>" -o g.h5
[ "$(row g.h5 /ids 0)" = "15496, 2159, 50256" ] && pass || fail "vocab.json/merges.txt: $(row g.h5 /ids 0)"

# --- the cache of a big tokenizer's tables (tokenize(1), ENVIRONMENT) ---
c() { env -u ATTN_CACHE_DIR -u XDG_CACHE_HOME "$@"; }
check "first run: tables cached" c ATTN_CACHE_DIR="$PWD/tc" tokenize --tokenizer "$L3" --text "Hello World" -o c1.h5
[ "$(ls tc/tokenizers | grep -c '\.tables$')" = 1 ] && pass || fail "cache: $(ls -R tc)"
check "second run: tables from the cache" c ATTN_CACHE_DIR="$PWD/tc" detokenize c1.h5 --tokenizer "$L3" -o c1.txt
[ "$(cat c1.txt)" = "Hello World" ] && pass || fail "detokenize from the cache: $(cat c1.txt)"
check "second run" c ATTN_CACHE_DIR="$PWD/tc" tokenize --tokenizer "$L3" --text "Hello World" -o c2.h5
same c1.h5:ids c2.h5:ids
[ "$(row c2.h5 /ids 0)" = "9906, 4435" ] && pass || fail "ids from the cache: $(row c2.h5 /ids 0)"
h5dump -w 0 -d /pieces c2.h5 | grep -qF '(0,0): "Hello", "\37777777704\37777777640World"' && pass || fail "pieces from the cache"
check "XDG_CACHE_HOME" c HOME="$PWD/home" XDG_CACHE_HOME="$PWD/xdg" tokenize --tokenizer "$L3" --text a -o c3.h5
[ -n "$(ls xdg/attn-toolkit/tokenizers/*.tables)" ] && [ ! -e home ] && pass || fail "XDG_CACHE_HOME: $(ls -R xdg home)"
check "HOME" c HOME="$PWD/home" tokenize --tokenizer "$L3" --text a -o c3.h5
[ -n "$(ls home/.cache/attn-toolkit/tokenizers/*.tables)" ] && pass || fail "HOME: $(ls -R home)"
check "ATTN_CACHE_DIR=none" c ATTN_CACHE_DIR=none HOME="$PWD/home2" tokenize --tokenizer "$L3" --text a -o c3.h5
[ ! -e home2 ] && [ ! -e none ] && pass || fail "ATTN_CACHE_DIR=none wrote a cache"
printf 'not a directory' >blocked
check "a cache directory that cannot be made" c ATTN_CACHE_DIR="$PWD/blocked" tokenize --tokenizer "$L3" --text "Hello World" -o c4.h5
[ "$(row c4.h5 /ids 0)" = "9906, 4435" ] && pass || fail "without a cache: $(row c4.h5 /ids 0)"

# --- detokenize ---
printf 'The quick brown fox\njumps over 13 lazy dogs.\n\n  spaces  and\ttabs\n' >text.txt
check "tokenize text" tokenize --tokenizer "$L3" -i text.txt --lines -o tt.h5
check "detokenize round trip" detokenize tt.h5 --tokenizer "$L3" -o back.txt
cmp -s back.txt text.txt && pass || fail "round trip: $(diff back.txt text.txt | head -3)"
detokenize tt.h5:/ids --tokenizer "$L3" | cmp -s - text.txt && pass || fail "detokenize to standard output"
check "llama2 ids" tokenize --tokenizer "$L2" --text "Hello world" -o l2.h5
[ "$(detokenize l2.h5 --tokenizer "$L2")" = "<s> Hello world" ] && pass || fail "llama2 decode: $(detokenize l2.h5 --tokenizer "$L2")"
[ "$(detokenize l2.h5 --tokenizer "$L2" --skip-special)" = "Hello world" ] && pass || fail "--skip-special"
printf '9906 4435 0 0\n' | tensor-gen --shape 4 --dtype i64 --from-text - -o flat.h5
[ "$(detokenize flat.h5:data --tokenizer "$L3")" = 'Hello World!!' ] && pass || fail "1-D ids: $(detokenize flat.h5:data --tokenizer "$L3")"
printf '2\n' | tensor-gen --shape 1 --dtype i64 --from-text - -o len.h5
[ "$(detokenize flat.h5:data --lengths len.h5 --tokenizer "$L3")" = 'Hello World' ] && pass || fail "--lengths"

# --- a line of a million characters ---
head -c 1000000 /dev/zero | tr '\0' 'a' >big.txt
check "a million characters" tokenize --tokenizer "$L3" -i big.txt --lines -o big.h5
detokenize big.h5 --tokenizer "$L3" | head -c 1000000 | cmp -s - big.txt && pass || fail "a million characters back"

# --- bad input ---
printf 'ab\xc3\x28cd' >bad.txt
expect_fail 1 "bad.txt: sequence 0: invalid UTF-8 at byte 2 (0xC3 0x28" tokenize --tokenizer "$L3" -i bad.txt -o x.h5
printf 'fine\nab\xffc\n' >bad2.txt
expect_fail 1 "sequence 1: invalid UTF-8 at byte 2 (0xFF" tokenize --tokenizer "$L3" -i bad2.txt --lines -o x.h5
expect_fail 1 "--text: sequence 1: invalid UTF-8 at byte 0" tokenize --tokenizer "$L3" --text ok --text $'\xe2\x82' -o x.h5
: >empty.txt
expect_fail 1 "no text to tokenize" tokenize --tokenizer "$L3" -i empty.txt -o x.h5
expect_fail 1 "no text to tokenize" tokenize --tokenizer "$L3" -i empty.txt --lines -o x.h5
expect_fail 2 "--text" tokenize --tokenizer "$L3" --text a -i text.txt -o x.h5
expect_fail 2 "names the input" tokenize --tokenizer "$L3" -i text.txt -o text.txt
expect_fail 1 "nothere.json: no such file" tokenize --tokenizer nothere.json --text a -o x.h5
printf '{"model": ' >broken.json
expect_fail 1 "broken.json: not JSON" tokenize --tokenizer broken.json --text a -o x.h5
printf '{"model": {"type": "Magic", "vocab": {}}}' >magic.json
expect_fail 1 'magic.json: model: unsupported model "Magic"' tokenize --tokenizer magic.json --text a -o x.h5
printf '{"normalizer": {"type": "Precompiled", "precompiled_charsmap": ""}, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}' >pre.json
expect_fail 1 'pre.json: normalizer.precompiled_charsmap: a charsmap of 0 bytes whose trie claims 0' tokenize --tokenizer pre.json --text a -o x.h5
printf '{"normalizer": {"type": "Precompiled", "precompiled_charsmap": "a$b"}, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}' >pre64.json
expect_fail 1 'pre64.json: normalizer.precompiled_charsmap: not base64' tokenize --tokenizer pre64.json --text a -o x.h5
printf '{"normalizer": {"type": "Nmt"}, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}' >nmt.json
expect_fail 1 'nmt.json: normalizer: unsupported normalizer "Nmt"' tokenize --tokenizer nmt.json --text a -o x.h5
printf '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}}' >merge.json
expect_fail 1 'merge.json: model.merges[0]: the merged token "ab" is not in the vocabulary' tokenize --tokenizer merge.json --text a -o x.h5
mkdir -p emptydir
expect_fail 1 "emptydir: a directory with neither tokenizer.json nor vocab.json and merges.txt" tokenize --tokenizer emptydir --text a -o x.h5
printf '9906 999999\n' | tensor-gen --shape 2 --dtype i64 --from-text - -o oov.h5
expect_fail 1 "oov.h5:/data: id 999999 (row 0, position 1) is not in the vocabulary" detokenize oov.h5:data --tokenizer "$L3"
printf '5\n' | tensor-gen --shape 1 --dtype i64 --from-text - -o len5.h5
expect_fail 1 "length 5 of row 0 is outside [0, 2]" detokenize oov.h5:data --lengths len5.h5 --tokenizer "$L3"
expect_fail 1 "no such file" detokenize missing.h5 --tokenizer "$L3"

echo "test_tokenize: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
