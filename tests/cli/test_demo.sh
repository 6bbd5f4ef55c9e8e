#!/usr/bin/env bash
# The demo (examples/demo.sh, what scripts/demo.sh runs) works from the shell alone, and its trained
# sequence-to-sequence model, run by encode | decode --generate, reverses at least 99% of the 1000
# held-out sequences exactly.
source "$(dirname "$0")/lib.sh"
: "${SRC:?}"
ATTN_TESTDATA=$TESTDATA bash "$SRC/examples/demo.sh" out >demo.txt 2>&1 && pass || fail "demo: $(tail -5 demo.txt)"
line=$(grep 'exact match:' demo.txt)
read -r ok total < <(echo "$line" | sed -n 's/.*exact match: \([0-9]*\)\/\([0-9]*\).*/\1 \2/p')
[ "${total:-0}" -eq 1000 ] && pass || fail "held-out set: '$line'"
[ "${ok:-0}" -ge 990 ] && pass || fail "exact match below 99%: '$line'"
[ "$(shape out/reversed.h5 tokens)" = "1000, 11" ] && pass || fail "/tokens (1000, 11): $(shape out/reversed.h5 tokens)"
h5ls out/example.h5/weights/layer1/cross >/dev/null && pass || fail "the example's cross-attention weights"
grep -q "^row sums  11 rows of 10: all sum to 1" demo.txt && pass || fail "attn-view --stats of the cross-attention"
[ "$(pnginfo out/cross_attention.png | awk '{print ($1 >= 640 && $2 >= 640)}')" = 1 ] && pass ||
  fail "cross_attention.png: $(pnginfo out/cross_attention.png 2>&1)"
grep -q "tokens 9, 5, 8, 5, 7, 2: digits 5 1 4 1 3" demo.txt && pass || fail "the LLaMA-layout model's continuation: $(grep -A1 'it continues' demo.txt)"
h5ls out/llama_example.h5/weights/layer1/self >/dev/null && pass || fail "the LLaMA-layout example's self-attention weights"
finish
