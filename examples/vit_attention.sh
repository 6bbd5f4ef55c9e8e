#!/usr/bin/env bash
# Where a Vision Transformer looks: PNG images through a ViTForImageClassification directory as
# downloaded (its preprocessor_config.json makes the pixel_values as transformers does, with
# Pillow's resize), the predicted labels, and each head's class-token attention drawn over the image.
# The model is the small random-weight test model of testdata/hf/vit_cls (written by
# tests/golden/make_vit_goldens.py); point VIT at a real download (google/vit-base-patch16-224) and
# IMAGES at your photos to see a trained one.
#
#   examples/vit_attention.sh [OUT_DIR]
set -euo pipefail
out=${1:-vit-attention}
data=${ATTN_TESTDATA:-$(dirname "$0")/../testdata}
VIT=${VIT:-$data/hf/vit_cls}
read -r -a images <<<"${IMAGES:-$data/images/rgb.png $data/images/palette.png $data/images/gray.png}"
mkdir -p "$out"

args=()
for f in "${images[@]}"; do args+=(--image "$f"); done
encode "${args[@]}" --weights "$VIT" --emit-weights -o "$out/vit.h5"

# The label of each image: the largest logit (labels by index; the config's id2label names them).
layers=$(h5ls "$out/vit.h5/weights" | wc -l)
heads=$(h5ls "$out/vit.h5/weights/layer0" | sed 's/.*{[0-9]*, \([0-9]*\),.*/\1/')
h5dump -w 0 -d /logits "$out/vit.h5" | sed -n 's/^ *(\([0-9]*\),0): //p' | tr -d ',' |
  awk -v names="${images[*]}" 'BEGIN { split(names, f, " ") }
    { best = 1; for (i = 2; i <= NF; i++) if ($i > $best) best = i
      n = split(f[NR], parts, "/"); printf "%s: label %d (logit %s)\n", parts[n], best - 1, $best }'

# The last layer's class-token attention, each head over each image.
last=$((layers - 1))
for i in "${!images[@]}"; do
  name=$(basename "${images[$i]}" .png)
  for ((h = 0; h < heads; h++)); do
    attn-view "$out/vit.h5:weights/layer$last" --index "$i,$h" --over-image "${images[$i]}" \
      --png "$out/${name}_layer${last}_head$h.png"
  done
done
echo "$((${#images[@]} * heads)) pictures in $out/ (layer $last, $heads heads per image)"
