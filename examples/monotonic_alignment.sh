#!/usr/bin/env bash
# Monotonic attention (Raffel et al. 2017) on a toy alignment task: 48 input frames and 16 outputs,
# output i belonging to frame 3i (as characters to audio frames, at a fixed rate here). Inputs and
# outputs are sinusoidal encodings of their positions (base 100), so the dot-product energy of
# output i and frame j is largest (d/2 = 16) where j = 3i and below 15 for any other frame; the
# energy bias -15.5 makes p = sigmoid(e - 15.5) above 0.5 only there. For each output the script prints where the
# hard (inference) alignment stops (at 3i), the expected position and the mass of the soft
# (training) alignment, and the argmax of plain softmax attention over the same energies (which
# agrees here, but has no notion of order); then the soft alignment as a heatmap. The soft mass
# falls from output to output: each stop with p = 0.62 passes 38% of it on, and the mass that
# passes the last frame is lost; training drives p toward 0 or 1, where soft and hard agree.
#
#   examples/monotonic_alignment.sh [OUT_DIR]   (tools on PATH; writes OUT_DIR, default monotonic/)
set -euo pipefail
out=${1:-monotonic}
mkdir -p "$out"
n=16 m=48 d=32

# inputs: pe-gen's sinusoidal table (sin, cos interleaved); outputs: the same formula at 0, 3, 6, ...
pe-gen --len $m --dim $d --base 100 -o "$out/frames.h5"
awk -v n=$n -v d=$d 'BEGIN {
  for (i = 0; i < n; i++) for (k = 0; k < d / 2; k++) { w = exp(-log(100) * 2 * k / d); print sin(3 * i * w), cos(3 * i * w) }
}' | tensor-gen --from-text - --shape $n,$d -o "$out/outputs.h5"

common=(-q "$out/outputs.h5" -k "$out/frames.h5:pe" -v "$out/frames.h5:pe" --score dot --emit weights)
attn-score "${common[@]}" --attention monotonic --hard --energy-bias -15.5 -o "$out/hard.h5"
attn-score "${common[@]}" --attention monotonic --energy-bias -15.5 -o "$out/soft.h5"
attn-score "${common[@]}" -o "$out/softmax.h5"

# each row of a (n, m) weights dataset as "position-of-max expected-position mass"
rows() {
  local txt="$out/rows.txt"
  h5dump -d /weights -y -m %.9g -o "$txt" "$1" >/dev/null
  tr -s ' ,\n' '\n' <"$txt" | grep . | awk -v m=$m '{ j = (NR - 1) % m; if (j == 0) { best = -1; e = 0; s = 0 }
    if ($1 > best) { best = $1; at = j }; e += j * $1; s += $1
    if (j == m - 1) printf "%d %.2f %.3f\n", (s > 0 ? at : -1), (s > 0 ? e / s : 0), s }'
}
printf '%6s %6s %6s %14s %10s %8s\n' output frame hard soft-expected soft-mass softmax
rows "$out/hard.h5" >"$out/hard.txt"
rows "$out/soft.h5" >"$out/soft.txt"
rows "$out/softmax.h5" >"$out/softmax.txt"
paste "$out/hard.txt" "$out/soft.txt" "$out/softmax.txt" |
  awk '{ printf "%6d %6d %6d %14.2f %10.3f %8d\n", NR - 1, 3 * (NR - 1), $1, $5, $6, $7 }'
attn-view "$out/soft.h5:weights" --colour never --width 100
