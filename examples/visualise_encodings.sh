#!/usr/bin/env bash
# Look at positional encodings. The sinusoidal table PE(p, 2i) = sin(p / 10000^(2i/D)) as a
# picture (positions down, dimensions across: fast waves on the left, slow on the right); RoPE's
# cos table; and what RoPE does to attention: rotating the same vector to every position makes
# the dot product of positions p and j depend on p - j only, so the score matrix is constant along
# its diagonals (a Toeplitz matrix), which the picture shows as stripes parallel to the diagonal.
#
#   examples/visualise_encodings.sh [OUT_DIR]   (tools on PATH; writes OUT_DIR, default encodings/)
set -euo pipefail
out=${1:-encodings}
mkdir -p "$out"

# 1. Sinusoidal: 128 positions x 64 dimensions, in the terminal (pooled to 64 columns) and as a PNG.
pe-gen --len 128 --dim 64 -o "$out/sinusoidal.h5"
attn-view "$out/sinusoidal.h5" --width 64
attn-view "$out/sinusoidal.h5" --png "$out/sinusoidal.png"

# 2. RoPE's tables: cos of angle p * 10000^(-2i/32) for 128 positions and the 16 pairs of a head of 32.
pe-gen --kind rope --len 128 --dim 32 -o "$out/rope.h5"
attn-view "$out/rope.h5:cos" --png "$out/rope_cos.png"

# 3. RoPE on a constant vector at every position, then dot-product scores between positions.
tensor-gen --shape 64,32 --fill ones -o - | pe-gen --kind rope --apply - --heads 1 -o "$out/rotated.h5"
attn-score -q "$out/rotated.h5" -k "$out/rotated.h5" -v "$out/rotated.h5" --score dot --emit scores \
  -o "$out/rope_scores.h5"
attn-view "$out/rope_scores.h5:scores" --png "$out/rope_scores.png"
attn-view "$out/rope_scores.h5:scores" --width 64
echo "score(p, j) depends on p - j only; the first diagonals (p - j = 0, 1, 2):"
for d in 0 1 2; do
  h5dump -d /scores -s "$d,0" -c 1,1 "$out/rope_scores.h5" | sed -n 's/^ *(.*): /  p = '"$d"', j = 0: /p'
  h5dump -d /scores -s "$((d + 40)),40" -c 1,1 "$out/rope_scores.h5" | sed -n 's/^ *(.*): /  p = '"$((d + 40))"', j = 40: /p'
done
echo "pictures: $out/sinusoidal.png $out/rope_cos.png $out/rope_scores.png"
