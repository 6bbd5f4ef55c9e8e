#!/usr/bin/env bash
# Are the attention maps an explanation? Two experiments on the trained LLaMA-layout demo model
# (testdata/llama_reverse.h5: 2 layers, 4 heads, 2 key/value heads, trained by
# tests/golden/train_reverse_llama.py to write a digit sequence reversed after a separator).
#
#   1. Which heads carry the reversal: each of the 8 heads ablated in turn (its z set to 0,
#      decode --ablate-heads) on N teacher-forced sequences; the drop in the accuracy of the
#      answer's tokens (the model's top token, read with --lens 1) as a layer x head heatmap.
#   2. Where the information sits: the last prompt digit changed (a corrupted run), and the clean
#      run's residual stream patched in at one layer and one position at a time (--patch
#      resid_pre@0, resid_pre@1, resid_post@1); the mean log-probability difference between the
#      clean and the corrupted first answer digit at the separator, as a (3, positions) heatmap.
#      The first answer digit is the last prompt digit. What the model shows (N = 64): patching at
#      the last digit's position restores the clean answer before layer 0 and before layer 1, and
#      only at the separator after layer 1: layer 1's attention moves the digit, and ablating its
#      heads 2 and 3 costs accuracy where its heads 0 and 1 cost none (layer 0's heads all matter).
#
#   examples/reversal_circuit.sh [N] [OUT_DIR]
# Tokens: 0 pads, 1 starts, 2 ends, 3 separates; digit d is token d + 4.
set -euo pipefail
n=${1:-64}
out=${2:-reversal-circuit}
model=${ATTN_TESTDATA:-$(dirname "$0")/../testdata}/llama_reverse.h5:/w
k=6            # digits per sequence
T=$((2 * k + 3)) # bos, k digits, sep, k reversed digits, eos
sep=$((k + 1))   # the separator's position: the first answer digit is predicted there
mkdir -p "$out"

# N sequences of k random digits (seeded): clean, and corrupted at the last digit (+5 mod 10).
awk -v n="$n" -v k="$k" 'BEGIN { srand(55)
  for (b = 0; b < n; b++) { for (i = 0; i < k; i++) d[i] = int(rand() * 10)
    c = (d[k - 1] + 5) % 10
    printf "1 "; for (i = 0; i < k; i++) printf "%d ", d[i] + 4; printf "3 "
    for (i = k - 1; i >= 0; i--) printf "%d ", d[i] + 4; print "2"
    printf "1 " > "/dev/stderr"; for (i = 0; i < k - 1; i++) printf "%d ", d[i] + 4 > "/dev/stderr"
    printf "%d 3 ", c + 4 > "/dev/stderr"; for (i = k - 1; i >= 0; i--) printf "%d ", d[i] + 4 > "/dev/stderr"
    print "2" > "/dev/stderr" } }' >"$out/clean.txt" 2>"$out/corrupt.txt"
tensor-gen --from-text "$out/clean.txt" --shape "$n,$T" --dtype i64 -o "$out/clean.h5"
tensor-gen --from-text "$out/corrupt.txt" --shape "$n,$T" --dtype i64 -o "$out/corrupt.h5"

# accuracy LENS.h5: the fraction of answer tokens (positions sep..T-2 predicting sep+1..T-1) that
# are the model's top token, from /lens/ids (b, L + 1, T, 1) at the last layer (row 2).
accuracy() {
  h5dump -w 0 -d /lens/ids -s "0,2,0,0" -c "$n,1,$T,1" "$1" | sed -n 's/^ *([0-9,]*): //p' | tr -d ',' | tr -s ' ' '\n' |
    grep . | paste - "$out/next.txt" | awk -v sep="$sep" -v T="$T" '{ p = (NR - 1) % T }
      p >= sep && p <= T - 2 { total++; if ($1 == $2) hit++ } END { printf "%.4f\n", hit / total }'
}
# the next token of each position (the last one's: none), in the order h5dump prints the ids
awk '{ for (i = 2; i <= NF; i++) print $i; print -1 }' "$out/clean.txt" >"$out/next.txt"

decode --tokens "$out/clean.h5" --weights "$model" --lens 1 --emit-activations resid_pre,resid_post -o "$out/clean_run.h5"
clean=$(accuracy "$out/clean_run.h5")
echo "clean accuracy on the answers: $clean"

# --- 1. head ablation -------------------------------------------------------------------------------
: >"$out/ablation.txt"
for l in 0 1; do
  for h in 0 1 2 3; do
    decode --tokens "$out/clean.h5" --weights "$model" --lens 1 --ablate-heads "$l.$h" -o "$out/ablated.h5"
    echo "$l $h $(accuracy "$out/ablated.h5")" >>"$out/ablation.txt"
  done
done
echo "accuracy drop when one head is ablated (rows: layers; columns: heads):"
awk -v c="$clean" '{ drop[$1, $2] = c - $3 } END { for (l = 0; l < 2; l++) { printf "  layer %d:", l
  for (h = 0; h < 4; h++) printf " %7.4f", drop[l, h]; print "" } }' "$out/ablation.txt" | tee "$out/ablation_drop.txt"
awk -v c="$clean" '{ printf "%.6f ", c - $3 }' "$out/ablation.txt" | tensor-gen --from-text - --shape 2,4 -o "$out/ablation_drop.h5"
attn-view "$out/ablation_drop.h5" --png "$out/ablation_drop.png" --labels-y "layer 0,layer 1" --labels-x "head 0,head 1,head 2,head 3"

# --- 2. activation patching -------------------------------------------------------------------------
# logit_diff LENS.h5: the mean over items of logp(clean first answer digit) - logp(corrupted one) at
# the separator, from the full lens (K = 14: every token) at the last layer.
awk -v k="$k" '{ print $(k + 1) + 0, ($(k + 1) - 4 + 5) % 10 + 4 }' "$out/clean.txt" >"$out/answer_pair.txt"
logit_diff() {
  paste <(h5dump -w 0 -d /lens/ids -s "0,2,$sep,0" -c "$n,1,1,14" "$1" | sed -n 's/^ *([0-9,]*): //p' | tr -d ',') \
    <(h5dump -w 0 -d /lens/logprobs -s "0,2,$sep,0" -c "$n,1,1,14" "$1" | sed -n 's/^ *([0-9,]*): //p' | tr -d ',') \
    "$out/answer_pair.txt" | awk '{ for (i = 1; i <= 14; i++) lp[$i] = $(14 + i); s += lp[$29] - lp[$30] }
      END { printf "%.4f\n", s / NR }'
}
decode --tokens "$out/corrupt.h5" --weights "$model" --lens 14 -o "$out/corrupt_run.h5"
decode --tokens "$out/clean.h5" --weights "$model" --lens 14 -o "$out/clean_lens.h5"
echo "logit difference, clean run: $(logit_diff "$out/clean_lens.h5"); corrupted run: $(logit_diff "$out/corrupt_run.h5")"
: >"$out/patching.txt"
for point in resid_pre@0 resid_pre@1 resid_post@1; do
  for p in $(seq 0 $((T - 1))); do
    decode --tokens "$out/corrupt.h5" --weights "$model" --lens 14 --patch "$point=$out/clean_run.h5" \
      --patch-positions "$p" -o "$out/patched.h5"
    echo "$point $p $(logit_diff "$out/patched.h5")" >>"$out/patching.txt"
  done
done
echo "logit difference with the clean residual stream patched in (rows: where; columns: positions 0..$((T - 1))):"
awk '{ v[$1] = v[$1] sprintf(" %6.2f", $3) } END { n = split("resid_pre@0 resid_pre@1 resid_post@1", o, " ")
  for (i = 1; i <= n; i++) printf "  %-13s%s\n", o[i], v[o[i]] }' "$out/patching.txt" | tee "$out/patching_table.txt"
awk '{ printf "%s ", $3 }' "$out/patching.txt" | tensor-gen --from-text - --shape "3,$T" -o "$out/patching.h5"
attn-view "$out/patching.h5" --png "$out/patching.png" --labels-y "resid_pre 0,resid_pre 1,resid_post 1" \
  --labels-x "$(awk -v k="$k" 'BEGIN { printf "<s>"; for (i = 1; i <= k; i++) printf ",d%d", i; printf ",<sep>"
    for (i = 1; i <= k; i++) printf ",a%d", i; printf ",</s>" }')"
rm -f "$out/ablated.h5" "$out/patched.h5"
echo "pictures: $out/ablation_drop.png, $out/patching.png"
