#!/usr/bin/env bash
# tokenize against its peers (issue 54): figures and ratios from one run, never pass/fail.
#   1. start-up: `tokenize --text "Hello world"` with LLaMA 3's tokenizer.json (9 MB) and Gemma 3's
#      (33 MB), whole processes, median of 11 (the goal: 40 ms and 120 ms), with the tables' cache
#      (the usual case: every run after the first), without it, and the first run;
#   2. throughput on a corpus of MB megabytes (Debian's /usr/share/doc text, which is English prose,
#      changelogs, licences and code, with the tests' multilingual corpus once every 200 files) split into
#      lines: tokenize --lines on 2 threads, a whole process with and without /pieces, against
#      Hugging Face's tokenizers library (its Node binding, encodeBatch on 2 threads: the
#      encoding alone, the corpus already in memory), for LLaMA 3 (byte-level BPE), Gemma 3 (BPE
#      with byte fallback), BERT (WordPiece) and a Unigram; against @huggingface/tokenizers (its
#      JavaScript port) for LLaMA 3, and tiktoken (WASM) for GPT-2; the ids checked identical (a
#      checksum of every row); rounds alternate the tools; the ratio is the median of per-round
#      ratios; peak RSS of tokenize (/usr/bin/time -v) against 3x the tokenizer.json + the ids.
# Usage: bench/bench_tokenize.sh [BUILD_DIR] [NODE_MODULES] [MB] [ROUNDS]
#   NODE_MODULES holds tokenizers, @huggingface/tokenizers, tiktoken (npm install --prefix DIR ...;
#   default /tmp/tokref/node_modules); MB default 100, ROUNDS default 3.
source "$(dirname "$0")/lib.sh"
MODULES=${2:-/tmp/tokref/node_modules}
MB=${3:-100}
ROUNDS=${4:-3}
TK="$BUILD/tests/tokenizers"
[ -d "$MODULES/tokenizers" ] || { echo "bench_tokenize: no $MODULES/tokenizers (npm install tokenizers @huggingface/tokenizers tiktoken)" >&2; exit 1; }
[ -f "$TK/llama3.json" ] || { echo "bench_tokenize: no $TK/llama3.json (configure the build first)" >&2; exit 1; }
unset OPENBLAS_CORETYPE
grep -m1 "model name" /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "cores: $(nproc); node $(node --version); tokenizers $(node -p "require('$MODULES/tokenizers/package.json').version")"

# --- 1. start-up ---
# The tables' cache (tokenize(1)) in the work directory: the first run reads the JSON and writes the
# cache, the next ones map it; ATTN_CACHE_DIR=none reads the JSON every time.
export ATTN_CACHE_DIR="$WORK/cache"
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
hello_ms() { # one whole tokenize of "Hello world", in ms
  local s e
  s=$EPOCHREALTIME
  "$T/tokenize" --tokenizer "$TK/$1.json" --text "Hello world" -o "$WORK/hello.h5"
  e=$EPOCHREALTIME
  echo $(($(elapsed_us "$s" "$e") / 1000))
}
for t in llama3 gemma3; do
  rm -rf "$ATTN_CACHE_DIR"
  first=$(hello_ms "$t")
  cached=$(for _ in $(seq 11); do hello_ms "$t"; done | median)
  none=$(for _ in $(seq 5); do ATTN_CACHE_DIR=none hello_ms "$t"; done | median)
  printf "start-up %s (%s MB): %s ms from the cache (median of 11 whole processes); %s ms without it (median of 5); %s ms for the first run, which writes it (%s MB)\n" \
    "$t" "$(($(stat -c %s "$TK/$t.json") / 1000000))" "$cached" "$none" "$first" "$(($(du -sb "$ATTN_CACHE_DIR" | cut -f1) / 1000000))"
done

# --- 2. throughput ---
node -e "const c = require('$PWD/testdata/tokenizers/corpus.json'); process.stdout.write(c.filter(s => !s.includes('\n')).join('\n') + '\n')" >"$WORK/multi.txt"
{
  i=0
  for f in /usr/share/doc/*/copyright /usr/share/doc/*/changelog*.gz; do
    # the multilingual lines (and their pathological long words) once every 200 files
    if [ $((i++ % 200)) -eq 0 ]; then cat "$WORK/multi.txt" || break; fi
    case $f in *.gz) zcat "$f" 2>/dev/null ;; *) cat "$f" ;; esac || break # head has what it needs
  done
} | head -c $((MB * 1100000)) >"$WORK/raw.txt" || true
iconv -f utf-8 -t utf-8 -c "$WORK/raw.txt" 2>/dev/null | head -c $((MB * 1000000)) | sed '$d' >"$WORK/corpus.txt" || true
rm -f "$WORK/raw.txt"
bytes=$(stat -c %s "$WORK/corpus.txt")
echo "corpus: $bytes bytes, $(wc -l <"$WORK/corpus.txt") lines"

# ours TOKENIZER [ARGS...]: "seconds checksum tokens peak_MiB" of one tokenize process
ours() {
  local tok=$1 s e
  shift
  s=$EPOCHREALTIME
  /usr/bin/time -v "$T/tokenize" --tokenizer "$tok" -i "$WORK/corpus.txt" --lines --threads 2 "$@" -o "$WORK/out.h5" 2>"$WORK/time.txt"
  e=$EPOCHREALTIME
  local peak
  peak=$(awk '/Maximum resident/ { printf "%.0f", $6 / 1024 }' "$WORK/time.txt")
  echo "$(echo "scale=3; $(elapsed_us "$s" "$e") / 1000000" | bc) $("$BUILD/bench/ids_checksum" "$WORK/out.h5") $peak"
}
peer() { RAYON_NUM_THREADS=2 node bench/tokenize_peers.mjs "$MODULES" "$@" "$WORK/corpus.txt"; }
mbps() { echo "scale=1; $bytes / $1 / 1000000" | bc; }

# compare NAME TOKENIZER PEER [PEER_TOKENIZER]
compare() {
  local name=$1 tok=$2 who=$3 ratios=() rp=() ok=yes last_ours last_peer peak with
  for r in $(seq "$ROUNDS"); do
    read -r so sumo ntok peak < <(ours "$tok" --no-pieces)
    read -r sp sump ntokp < <(peer "$who" "$tok")
    [ "$sumo" = "$sump" ] && [ "$ntok" = "$ntokp" ] || ok="NO ($sumo/$ntok vs $sump/$ntokp)"
    ratios+=("$(echo "scale=3; $sp / $so" | bc)")
    last_ours=$so last_peer=$sp
  done
  read -r with _ _ _ < <(ours "$tok")
  local med
  med=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  printf "%-8s %-9s ours %6.1f MB/s (%5.1f MB/s with /pieces), %-9s %6.1f MB/s; ours/peer x%s (median of %s rounds: %s); %s tokens, ids identical: %s; peak %s MiB (3x tokenizer.json + ids: %s MiB)\n" \
    "$name" "$(basename "$tok" .json)" "$(mbps "$last_ours")" "$(mbps "$with")" "$who" "$(mbps "$last_peer")" "$med" "$ROUNDS" "${ratios[*]}" \
    "$ntok" "$ok" "$peak" "$(((3 * $(stat -c %s "$tok") + 8 * ntok) / 1048576))"
}
compare "BPE" "$TK/llama3.json" hf
compare "BPE" "$TK/llama3.json" hfjs
compare "BPE-bf" "$TK/gemma3.json" hf
compare "WordPc" "$TK/bert.json" hf
compare "Unigram" "$TK/unigram.json" hf
compare "BPE" "$TK/gpt2.json" tiktoken
