#!/usr/bin/env bash
# Encoder-decoder models by their own names, from Hugging Face directories as downloaded: T5's
# relative position bias looked at on its own, then T5 and BART each encoding a source and
# generating from it. The models are the small random-weight test models of testdata/hf/ (written
# by tests/golden/make_seq2seq_goldens.py); point T5 and BART at real downloads (t5-small,
# facebook/bart-base) to do the same with trained ones.
#
#   examples/t5_bart.sh [OUT_DIR]
set -euo pipefail
out=${1:-t5-bart}
data=${ATTN_TESTDATA:-$(dirname "$0")/../testdata}
T5=${T5:-$data/hf/t5}
BART=${BART:-$data/hf/bart}
mkdir -p "$out"

# 1. T5's positions: one learned bias per head over buckets of the key-minus-query distance, the
#    first layer's table shared by every layer. The bucket rule alone (this model's: 8 buckets,
#    max_distance 10): in the encoder half the buckets count keys after the query, half those before;
#    near distances have a bucket each, far ones share logarithmically wider buckets.
pe-gen --kind relative --buckets 8 --max-distance 10 --len 24 -o "$out/buckets.h5"
pe-gen --kind relative --buckets 8 --max-distance 10 --direction causal --len 24 -o "$out/buckets_causal.h5"
row() { h5dump -w 0 -d /buckets "$1" | sed -n "s/^ *($2,0): //p" | tr -d ','; }
echo "encoder buckets of query 12 over keys 0..23: $(row "$out/buckets.h5" 12)"
echo "decoder buckets of query 12 over keys 0..23: $(row "$out/buckets_causal.h5" 12)"

# The bias itself from the model's table (quantize converts the directory to an HDF5 weight file,
# whose datasets any tool reads), as an additive mask's picture for head 0: constant along each
# diagonal, as a function of distance only.
quantize --weights "$T5" --scheme f32 -o "$out/t5.h5"
table="$out/t5.h5:/encoder/block/0/layer/0/SelfAttention/relative_attention_bias/weight"
pe-gen --kind relative --table "$table" --max-distance 10 --len 24 -o "$out/bias.h5"
attn-view "$out/bias.h5" --index 0,0 --png "$out/t5_bias_head0.png"

# 2. T5 and BART: a source of 12 ids encoded once, then greedy generation from that memory with the
#    key/value cache (T5 starts from decoder_start_token_id 0; BART from 2, its config forcing
#    token 0 first and the end token 2 last), and the first layer's cross-attention as a picture.
for m in T5 BART; do
  dir=${!m}
  name=$(tr 'A-Z' 'a-z' <<<"$m")
  seq 5 16 | tensor-gen --from-text - --shape 1,12 --dtype i64 -o "$out/${name}_src.h5"
  encode --tokens "$out/${name}_src.h5" --weights "$dir" -o "$out/${name}_memory.h5"
  decode --generate --max-len 8 --memory "$out/${name}_memory.h5" --weights "$dir" -o "$out/${name}_out.h5"
  tokens=$(h5dump -w 0 -d /tokens "$out/${name}_out.h5" | sed -n 's/^ *(0,0): //p' | tr -d ',')
  echo "$m generated: $tokens"
  start=$([ "$m" = T5 ] && echo 0 || echo 2)
  # teacher-force the start token and what was generated, keeping every layer's weights
  echo "$start $tokens" | tensor-gen --from-text - --shape 1,$(($(wc -w <<<"$tokens") + 1)) --dtype i64 \
    -o "$out/${name}_tgt.h5"
  decode --tokens "$out/${name}_tgt.h5" --memory "$out/${name}_memory.h5" --weights "$dir" --emit-weights \
    -o "$out/${name}_forced.h5"
  attn-view "$out/${name}_forced.h5:weights/layer0/cross" --index 0,0 --png "$out/${name}_cross_head0.png"
done
echo "pictures in $out/: t5_bias_head0.png, t5_cross_head0.png, bart_cross_head0.png"
