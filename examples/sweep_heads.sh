#!/usr/bin/env bash
# Sweep the number of heads of multi-head attention at a fixed model width (E = 128): for each H,
# a fresh nn.MultiheadAttention-style layer (Xavier init, the same seed) runs causal
# self-attention over the same input, and attn-view --stats summarises its per-head weights.
# Each head works in a smaller space as H grows (dh = E / H), but the 1/sqrt(dh) scaling keeps the
# spread of its scores about the same, so at initialisation the mean entropy hardly moves with H
# (a trained model is where heads specialise); the work is the same too (the same projections,
# and H attention problems of size dh), which the time column shows.
#
#   examples/sweep_heads.sh [OUT_DIR]      (tools on PATH; writes OUT_DIR, default sweep-heads/)
set -euo pipefail
out=${1:-sweep-heads}
mkdir -p "$out"

# 8 sequences of 64 positions with width 128, with sinusoidal positions added.
tensor-gen --shape 8,64,128 --seed 1 -o - | pe-gen --add - -o "$out/x.h5"

printf '%5s %5s %12s %12s %8s   %s\n' heads dh "mean entropy" "max entropy" "time" "row sums"
for heads in 1 2 4 8 16 32; do
  start=$(date +%s%N)
  mha-run -q "$out/x.h5" --init xavier --embed-dim 128 --heads "$heads" --seed 5 --causal --need-weights \
    -o "$out/h$heads.h5"
  ms=$((($(date +%s%N) - start) / 1000000))
  stats=$(attn-view "$out/h$heads.h5:weights" --stats)
  read -r mean hi < <(sed -n 's/^entropy *min [^,]*, mean \([^,]*\), max \([^ ]*\) .*/\1 \2/p' <<<"$stats")
  sums=$(sed -n 's/^row sums *\([0-9]* rows\).*: \(all sum to 1\).*/\1 \2/p' <<<"$stats")
  printf '%5s %5s %12s %12s %6s ms   %s\n' "$heads" $((128 / heads)) "$mean" "$hi" "$ms" "$sums"
done
echo "one head's map: attn-view $out/h8.h5:weights --index 0,3"
