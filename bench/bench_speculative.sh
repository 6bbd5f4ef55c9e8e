#!/usr/bin/env bash
# Past the memory-bandwidth bound (issue 56): decode --generate --lookup and --draft against plain
# greedy decoding, figures from one run, never pass/fail. A pair of LLaMA-layout models trained by
# the reference script (tests/golden/train_reverse_llama.py --task copy) on a copy-heavy task, the
# prompt "<s> d1 .. dk <sep>" (8 <= k <= 16 digits) continued by "d1 .. dk </s>": the model (hidden
# 256, 4 layers, FFN 704) and its draft model (hidden 128, 2 layers, FFN 352: an eighth of its
# weights). Trained once (about 25 minutes on 2 cores) into $ATTN_BENCH_CACHE (default
# ~/.cache/attn-toolkit-bench) and reused.
# Over the 200 held-out prompts, one sequence at a time (plain decoding with --chunk 1, as the
# drafted runs go), ROUNDS rounds alternating the runs: tokens per second of the generation
# (decode --verbose's time), of the generation after the prompts (as llama.cpp's "eval" rate: less
# the time of plain decoding with --max-len 1, each prompt's pass and its first token, measured in
# the same round) and of the whole process; the tokens per pass over the weights, and whether the
# tokens are plain greedy decoding's (they must be). Ratios: medians of per-round ratios against
# plain decoding.
# Usage: bench/bench_speculative.sh [BUILD_DIR] [ROUNDS]   (default build/, 5 rounds)
source "$(dirname "$0")/lib.sh"
ROUNDS=${2:-5}
CACHE=${ATTN_BENCH_CACHE:-$HOME/.cache/attn-toolkit-bench}/speculative
mkdir -p "$CACHE"
train() { # NAME HIDDEN LAYERS FFN STEPS
  [ -f "$CACHE/$1" ] && return
  echo "training $1 (hidden $2, $3 layers) ..." >&2
  env -u OPENBLAS_CORETYPE /usr/bin/python3 tests/golden/train_reverse_llama.py "$CACHE" --task copy --digits 8-16 \
    --hidden "$2" --layers "$3" --ffn "$4" --steps "$5" --lr 2e-3 --name "$1" --min-right 190
}
train copy_target.h5 256 4 704 1500
train copy_draft.h5 128 2 352 2000
M=$CACHE/copy_target.h5 D=$CACHE/copy_draft.h5
params() { h5ls -r "$1/w" | sed -n 's/.*Dataset {\(.*\)}.*/\1/p' | awk -F', ' '{p = 1; for (i = 1; i <= NF; i++) p *= $i; s += p} END {print s}'; }
machine_limits "memory bandwidth $("$BUILD/bench/mem_bandwidth" 512 2) GB/s; model $(params "$M") weights, draft model $(params "$D")"
P="--generate --prompt $M:/heldout/prompt --prompt-lengths $M:/heldout/prompt_lengths --weights $M:/w --threads 2"

# run NAME ARGS...: "wall generation tokens passes" of one decode run (passes: tokens without a drafter).
run() {
  local name=$1 s e log
  shift
  s=$EPOCHREALTIME
  # shellcheck disable=SC2086
  log=$("$T/decode" $P "$@" --verbose -o "$WORK/$name.h5" 2>&1)
  e=$EPOCHREALTIME
  local gen tokens passes
  gen=$(echo "$log" | sed -n 's/^decode: generate: \([0-9.]*\) s$/\1/p')
  tokens=$(h5dump -d /tokens -y -w 100000 "$WORK/$name.h5" | sed -n '/DATA {/,/}/p' | tr ',' '\n' | grep -cE '^ *[1-9]')
  passes=$(echo "$log" | sed -n 's/.* tokens in \([0-9]*\) passes.*/\1/p')
  echo "$(elapsed_s "$s" "$e") $gen $tokens ${passes:-$tokens}"
}

declare -A res
runs=("lookup4|--lookup 4" "lookup8|--lookup 8" "draft4|--draft $D:/w --draft-tokens 4" "draft6|--draft $D:/w --draft-tokens 6")
for r in $(seq "$ROUNDS"); do
  read -r pw pg tok _ < <(run plain --max-len 17 --chunk 1)
  read -r _ p1 t1 _ < <(run prompts --max-len 1 --chunk 1) # the prompts' passes and first tokens
  for spec in "${runs[@]}"; do
    IFS='|' read -r name args <<<"$spec"
    # shellcheck disable=SC2086
    read -r w g t passes < <(run "$name" --max-len 17 $args)
    cmp -s <(h5dump -d /tokens "$WORK/$name.h5" | tail -n +3) <(h5dump -d /tokens "$WORK/plain.h5" | tail -n +3) ||
      echo "  (round $r: $name's tokens differ from plain greedy decoding's)"
    res[$name]+="$(echo "$pg / $g" | bc -l) $(echo "$pw / $w" | bc -l) $(echo "$t / $g" | bc -l) $(echo "$t / $passes" | bc -l) \
$(echo "($pg - $p1) / ($g - $p1)" | bc -l) $(echo "($t - $t1) / ($g - $p1)" | bc -l)
"
  done
  res[plain]+="$(echo "$tok / $pg" | bc -l) $pw $(echo "($tok - $t1) / ($pg - $p1)" | bc -l) $p1
"
done
col() { echo "${res[$1]}" | awk -v c="$2" 'NF {print $c}' | median; }
printf "  plain greedy, one sequence at a time: %.0f tokens/s of generation, %.0f after the prompts (their passes %.3f s);"\
" whole process %.3f s\n" "$(col plain 1)" "$(col plain 3)" "$(col plain 4)" "$(col plain 2)"
for spec in "${runs[@]}"; do
  IFS='|' read -r name args <<<"$spec"
  printf "  %-8s %5.0f tokens/s => %.2fx plain's generation; after the prompts %5.0f tokens/s => %.2fx; %.2fx its whole"\
" process; %.2f tokens per pass\n" "$name" "$(col "$name" 3)" "$(col "$name" 1)" "$(col "$name" 6)" "$(col "$name" 5)" \
    "$(col "$name" 2)" "$(col "$name" 4)"
done
echo "  (medians over $ROUNDS rounds of per-round ratios; 200 prompts, up to 17 tokens each)"
