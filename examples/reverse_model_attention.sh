#!/usr/bin/env bash
# Run the trained demo model (testdata/reverse_model.h5: an nn.Transformer, d_model 64, 2+2
# layers, 4 heads, trained by tests/golden/train_demo_model.py to reverse digit sequences) on
# digits of your choice, and render its cross-attention as PNGs, one per head of the last layer,
# with the digits as labels: output position i reads input position n-1-i, an anti-diagonal.
#
#   examples/reverse_model_attention.sh [DIGITS] [OUT_DIR]
#   e.g. examples/reverse_model_attention.sh 31415926 pi/
# Tokens: digit d is token d + 3; 0 pads, 1 starts and 2 ends a sequence.
set -euo pipefail
digits=${1:-1357924680}
out=${2:-reverse-attention}
model=${ATTN_TESTDATA:-$(dirname "$0")/../testdata}/reverse_model.h5
mkdir -p "$out"
[[ $digits =~ ^[0-9]{3,10}$ ]] || { echo "give 3 to 10 digits (the model was trained on those)" >&2; exit 2; }

# Digits -> token ids (n,), encoded once into the memory.
sed 's/./& /g' <<<"$digits" | awk '{ for (i = 1; i <= NF; i++) printf "%d ", $i + 3 }' |
  tensor-gen --from-text - --shape ${#digits} --dtype i64 -o "$out/src.h5"
encode --tokens "$out/src.h5" --weights "$model" -o "$out/memory.h5"

# Greedy generation with the KV cache; /tokens ends with the end token 2.
decode --generate --max-len $((${#digits} + 1)) --memory "$out/memory.h5" --weights "$model" -o "$out/generated.h5"
tokens=$(h5dump -w 0 -d /tokens "$out/generated.h5" | sed -n 's/^ *(0): //p' | tr -d ',')
answer=$(awk '{ for (i = 1; i <= NF && $i != 2; i++) printf "%d", $i - 3 }' <<<"$tokens")
echo "in:  $digits"
echo "out: $answer"
[ "$answer" = "$(rev <<<"$digits")" ] && echo "     (reversed correctly)" || echo "     (not the reverse)"

# Teacher-force the start token and the answer to keep every layer's attention maps.
awk '{ printf "1 "; for (i = 1; i <= NF && $i != 2; i++) printf "%d ", $i }' <<<"$tokens" |
  tensor-gen --from-text - --shape $((${#answer} + 1)) --dtype i64 -o "$out/target.h5"
decode --tokens "$out/target.h5" --memory "$out/memory.h5" --weights "$model" --emit-weights -o "$out/attention.h5"
labels_x=$(sed 's/./&,/g; s/,$//' <<<"$digits")
labels_y="<s>,$(sed 's/./&,/g; s/,$//' <<<"$answer")"
for head in 0 1 2 3; do
  attn-view "$out/attention.h5:weights/layer1/cross" --index "$head" --png "$out/cross_head$head.png" \
    --labels-x "$labels_x" --labels-y "$labels_y"
done
attn-view "$out/attention.h5:weights/layer1/cross" --index 0 --stats | sed -n '/^row sums/,$p'
echo "pictures: $out/cross_head{0,1,2,3}.png"
