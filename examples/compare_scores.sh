#!/usr/bin/env bash
# Compare attn-score's four scoring functions on the same queries and keys: scaled dot-product,
# plain dot-product, Luong's general (q^T W k) and Bahdanau's additive (v^T tanh(W_q q + W_k k)),
# the last two with fresh Xavier-initialised parameters. For each, attn-view --stats gives the
# attention entropy per query (nats): ln 32 = 3.47 is uniform attention over the 32 keys, 0 is all
# weight on one key. Unscaled dot products over 64 features are large, so plain dot attention is
# far more peaked than scaled dot attention, which is why the Transformer divides by sqrt(d_k).
#
#   examples/compare_scores.sh [OUT_DIR]      (tools on PATH; writes OUT_DIR, default compare-scores/)
set -euo pipefail
out=${1:-compare-scores}
mkdir -p "$out"

# 4 sequences: 16 queries and 32 keys/values of 64 features, standard normal.
tensor-gen --shape 4,16,64 --seed 1 -o "$out/q.h5"
tensor-gen --shape 4,32,64 --seed 2 -o "$out/k.h5"

printf '%-11s %9s %9s %9s   (entropy per query, nats; uniform = ln 32 = 3.466)\n' score min mean max
for score in scaled-dot dot general additive; do
  params=()
  case $score in
  general) params=(--init xavier --seed 7 --save-params "$out/$score-params.h5") ;;
  additive) params=(--init xavier --hidden 32 --seed 7 --save-params "$out/$score-params.h5") ;;
  esac
  attn-score -q "$out/q.h5" -k "$out/k.h5" -v "$out/k.h5" --score "$score" "${params[@]}" --emit weights \
    -o "$out/$score.h5"
  # "entropy   min 0.12, mean 1.9, max 3.1 (nats; ...)" -> "0.12 1.9 3.1"
  read -r lo mean hi < <(attn-view "$out/$score.h5:weights" --stats |
    sed -n 's/^entropy *min \([^,]*\), mean \([^,]*\), max \([^ ]*\) .*/\1 \2 \3/p')
  printf '%-11s %9s %9s %9s\n' "$score" "$lo" "$mean" "$hi"
done
echo "weights of each: $out/<score>.h5:/weights; e.g. attn-view $out/dot.h5:weights --index 0"
