#!/usr/bin/env bash
# The demo pipeline, from the shell alone: make inputs, add positional encodings, rotate them with
# RoPE, and build ALiBi biases, with the tools piped into each other. Writes demo-out/ (or $1).
# Run through scripts/demo.sh, which installs, builds and puts the tools on PATH.
set -euo pipefail
out=${1:-demo-out}
mkdir -p "$out"

echo "1. Inputs (2 sequences of 16 tokens, 64 features), sinusoidal encodings added, RoPE over 4 heads:"
tensor-gen --shape 2,16,64 --seed 1 -o - |
  pe-gen --add - -o - |
  pe-gen --kind rope --apply - --heads 4 -o "$out/x.h5"
h5ls "$out/x.h5"

echo "2. The tables themselves, several runs in one results file:"
pe-gen --len 16 --dim 64 -o "$out/tables.h5:/sinusoidal/pe"
pe-gen --kind rope --len 16 --dim 16 -o "$out/tables.h5:/rope/cos"
pe-gen --kind alibi --heads 6 --len 16 -o "$out/tables.h5:/alibi/bias"
h5ls -r "$out/tables.h5"

echo "3. ALiBi slopes for 6 heads (not a power of two) and the bias seen by the last query of head 0:"
h5dump -d /alibi/bias -s 0,0,15,0 -c 1,1,1,16 "$out/tables.h5" | sed -n '/DATA {/,/}/p'

echo "4. Causal self-attention over those inputs, as full attention and as a window of 4, weights kept:"
attn-score -q "$out/x.h5" -k "$out/x.h5" -v "$out/x.h5" --causal --emit weights -o "$out/attention.h5:/full/output"
attn-score -q "$out/x.h5" -k "$out/x.h5" -v "$out/x.h5" --causal --window 4 --emit weights -o "$out/attention.h5:/window/output"
h5ls -r "$out/attention.h5"
echo "   weights of the last query of sequence 0 over its window (keys 11..15 only):"
h5dump -d /window/weights -s 0,15,0 -c 1,1,16 "$out/attention.h5" | sed -n '/DATA {/,/}/p'

echo "5. Every result says how it was made:"
h5dump -a /command "$out/x.h5" | sed -n 's/^ *(0): /  /p'
echo "Done: results in $out/"
