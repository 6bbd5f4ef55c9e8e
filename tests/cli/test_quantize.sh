#!/usr/bin/env bash
# quantize: int8 (with scales) and float16 weight files in the same layout, which every tool runs
# with --weights (int8 by the int8 product, float16 by the float chain, both kept so in memory): the
# trained demo model keeps at least 99% exact match on its held-out set with
# int8 weights; int8 files are at most 0.3x the float32 file; mha-run, encode and decode on a
# quantized file against the float32 file within the quantization's error; the layout and its
# attributes kept (a group of a larger file included); bad input (missing scales, scales of the
# wrong shape, an unknown scheme).
source "$(dirname "$0")/lib.sh"
M="$TESTDATA/reverse_model.h5"
T="$TESTDATA/reverse_test.h5"

# --- the trained model, int8: exact match on the 1000 held-out sequences ---
check "quantize demo" quantize --weights "$M" -o q8.h5
rows() { h5dump -w 0 -d "$2" "$1" | sed -n 's/^ *([0-9]*,0): //p' | sed 's/,* *$//; s/\(, 0\)*$//'; }
encode --tokens "$T:/src" --weights q8.h5 --lengths "$T:/src_lengths" -o - |
  decode --generate --max-len 11 --memory - --memory-lengths "$T:/src_lengths" --weights q8.h5 -o rev8.h5 2>err.txt &&
  pass || fail "int8 demo model: $(cat err.txt)"
ok=$(paste -d '|' <(rows rev8.h5 /tokens) <(rows "$T" /expected) | awk -F'|' '$1 == $2 { n++ } END { print n + 0 }')
[ "$ok" -ge 990 ] && pass || fail "int8 demo model: exact match $ok/1000, below 99%"
h5dump -H -d /encoder/layers/0/linear1/weight q8.h5 | grep -q "H5T_STD_I8LE" && pass || fail "linear1 not int8"
[ "$(shape q8.h5 encoder/layers/0/linear1/weight_scale)" = "128, 2" ] && pass ||
  fail "scales: $(shape q8.h5 encoder/layers/0/linear1/weight_scale)" # F = 128 rows, E = 64 in blocks of 32
h5dump -H -d /src_embed/weight q8.h5 | grep -q "H5T_IEEE_F32LE" && pass || fail "embedding quantized without --all"
[ "$(attr q8.h5 encoder/layers/0/linear1/weight/quantization)" = "int8" ] && pass || fail "quantization attribute"

# --- file size: int8 at most 0.3x float32 (a 2-layer, 256-wide encoder) ---
tensor-gen --shape 2,12,256 --seed 1 -o x256.h5
check "init 256" encode -i x256.h5 --init xavier --layers 2 --embed-dim 256 --heads 4 --ffn-dim 1024 --norm-first \
  --final-norm --save-weights e32.h5 -o y32.h5
check "quantize int8" quantize --weights e32.h5 -o e8.h5
check "quantize row" quantize --weights e32.h5 --block 0 -o e8row.h5
check "quantize f16" quantize --weights e32.h5 --scheme f16 -o e16.h5
size() { stat -c %s "$1"; }
awk -v a="$(size e8.h5)" -v b="$(size e32.h5)" 'BEGIN { exit !(a <= 0.3 * b) }' && pass ||
  fail "int8 file $(size e8.h5) bytes, float32 $(size e32.h5): above 0.3x"
awk -v a="$(size e16.h5)" -v b="$(size e32.h5)" 'BEGIN { exit !(a <= 0.55 * b) }' && pass ||
  fail "f16 file $(size e16.h5) bytes, float32 $(size e32.h5)"
for q in e8 e8row e16; do
  check "encode $q" encode -i x256.h5 --weights $q.h5 -o "y_$q.h5"
done
same y_e8.h5 y32.h5 0 0.01 max # int8: about 1% of the output's scale
same y_e8row.h5 y32.h5 0 0.01 max
same y_e16.h5 y32.h5 0 0.001 max
cmp -s <(values y_e8.h5 output) <(values y32.h5 output) && fail "int8 changes nothing?" || pass

# --- mha-run and decode; a group of a larger file (its attributes above the group kept) ---
W="$TESTDATA/mha.h5"
check "quantize mha group" quantize --weights "$W:/w/packed" -o mq.h5
check "mha-run f32" mha-run -q "$W:/q5" -k "$W:/k7" -v "$W:/v7" --weights "$W:/w/packed" -o m32.h5
check "mha-run int8" mha-run -q "$W:/q5" -k "$W:/k7" -v "$W:/v7" --weights mq.h5 -o m8.h5
same m8.h5 m32.h5 0 0.02 max
D="$TESTDATA/decoder.h5"
check "quantize decoder group" quantize --weights "$D:/s2s" --all -o dq.h5
h5dump -H -d /decoder/layers/0/self_attn/in_proj_weight dq.h5 | grep -q "H5T_STD_I8LE" && pass || fail "decoder int8"
h5dump -H -d /tgt_embed/weight dq.h5 | grep -q "H5T_STD_I8LE" && pass || fail "--all: the embedding stays float"
for w in f32:"$D:/s2s" int8:dq.h5; do
  check "decode $w" decode --generate --max-len 8 --memory "$D:/s2s_memory" --memory-lengths "$D:/s2s_src_lengths" \
    --weights "${w#*:}" -o "gen_${w%%:*}.h5"
done
# a random 16-wide model, embeddings int8 too, with near ties: at least 22 of its 24 greedy tokens
agree=$(paste <(numbers gen_int8.h5 tokens) <(numbers gen_f32.h5 tokens) | awk '$1 == $2 {n++} END {print n + 0}')
[ "$agree" -ge 22 ] && pass || fail "int8 decoder: $agree of 24 tokens as float32's"

# --- the kernels: int8 and float16 weights stay so in memory. float16 gives the bytes of float32 over
# its values (quantize --scheme f32); int8 runs the int8 product (inputs quantized per block), whose
# bytes are the same on every instruction set and --chunk, within 2% of the dequantized file ---
tensor-gen --shape 3,50,256 --seed 2 -o x150.h5 # 150 rows: past the column tiles' 128, the packed panels
for q in e8 e8row e16; do
  check "dequantize $q" quantize --weights $q.h5 --scheme f32 -o "${q}_f.h5"
  h5dump -H -d /layers/0/linear1/weight "${q}_f.h5" | grep -q "H5T_IEEE_F32LE" && pass || fail "$q: not float32"
  [ -z "$(h5ls "${q}_f.h5/layers/0/linear1" | grep weight_scale)" ] && pass || fail "$q: scales kept by f32"
  for x in x256 x150; do
    check "encode $q $x" encode -i $x.h5 --weights $q.h5 -o "k_$q.h5"
    check "encode ${q}_f $x" encode -i $x.h5 --weights "${q}_f.h5" -o "k_${q}_f.h5"
    if [ $q = e16 ]; then same "k_$q.h5:output" "k_${q}_f.h5:output"; else same "k_$q.h5:output" "k_${q}_f.h5:output" 0 0.02 max; fi
  done
done
for isa in scalar avx2; do # the reference loop and the AVX2 tiles: the same bytes
  ATTN_LINEAR_ISA=$isa encode -i x150.h5 --weights e8.h5 -o "k_isa.h5" 2>err.txt && pass || fail "$isa: $(cat err.txt)"
  same k_isa.h5:output k_e8.h5:output
done
check "encode int8 --chunk 1" encode -i x150.h5 --weights e8.h5 --chunk 1 -o k_chunk.h5
same k_chunk.h5:output k_e8.h5:output
check "dequantize mha" quantize --weights mq.h5 --scheme f32 -o mqf.h5
check "mha-run int8 again" mha-run -q "$W:/q5" -k "$W:/k7" -v "$W:/v7" --weights mqf.h5 -o m8f.h5
same m8.h5:output m8f.h5:output 0 0.02 max
check "mha-run --save-weights" mha-run -q "$W:/q5" -k "$W:/k7" -v "$W:/v7" --weights mq.h5 --save-weights ms.h5 -o o.h5
h5dump -H -d /in_proj_weight ms.h5 | grep -q "H5T_STD_I8LE" && pass || fail "--save-weights: int8 not kept"
check "mha-run saved" mha-run -q "$W:/q5" -k "$W:/k7" -v "$W:/v7" --weights ms.h5 -o m8s.h5
same m8s.h5:output m8.h5:output
check "dequantize decoder" quantize --weights dq.h5 --scheme f32 -o dqf.h5
check "decode dequantized" decode --generate --max-len 8 --memory "$D:/s2s_memory" \
  --memory-lengths "$D:/s2s_src_lengths" --weights dqf.h5 -o gen_f.h5
for isa in scalar avx2; do
  ATTN_LINEAR_ISA=$isa decode --generate --max-len 8 --memory "$D:/s2s_memory" --memory-lengths "$D:/s2s_src_lengths" \
    --weights dq.h5 -o gen_isa.h5 2>err.txt && pass || fail "$isa: $(cat err.txt)"
  same gen_isa.h5:scores gen_int8.h5:scores
done
check "decode f16" quantize --weights "$D:/s2s" --scheme f16 -o d16.h5
check "dequantize f16 decoder" quantize --weights d16.h5 --scheme f32 -o d16f.h5
# The cache of the memory's keys and values: float16 by default with quantized weights (--kv-cache
# auto), float32 otherwise. float16 weights with a float32 cache give float32's bytes over their
# values, and with the float16 cache the bytes of float32 weights given --kv-cache f16.
gen16() {
  local w=$1 out=$2
  shift 2
  decode --generate --beam 3 --max-len 8 --memory "$D:/s2s_memory" --memory-lengths "$D:/s2s_src_lengths" \
    --weights "$w" -o "$out" "$@" 2>err.txt && pass || fail "decode $w $*: $(cat err.txt)"
}
gen16 d16.h5 gen_d16.h5 --verbose
grep -q "cached (memory keys and values in float16)" err.txt && pass || fail "float16 weights: cache not float16"
gen16 d16.h5 gen_d16_32.h5 --kv-cache f32
gen16 d16f.h5 gen_d16f.h5 --verbose
grep -q "float16)" err.txt && fail "float32 weights: float16 cache by default" || pass
gen16 d16f.h5 gen_d16f_16.h5 --kv-cache f16
same gen_d16_32.h5:scores gen_d16f.h5:scores
same gen_d16.h5:scores gen_d16f_16.h5:scores
cmp -s <(values gen_d16.h5 scores) <(values gen_d16f.h5 scores) && fail "the float16 cache changes nothing?" || pass
same gen_d16.h5:scores gen_d16f.h5:scores 0 1e-2 max
# Prompts of 20 positions: the first 19 go through the cache at once (a prefill), which reads the
# memory's float32 rows, so the float16 cache and the float32 one in key tiles keep them (steps
# alone read only the float16 copies, or the key tiles and the values).
for n in 20 9; do
  for i in 1 2 3; do seq $i $((i + n - 1)) | awk '{printf "%d ", $1 % 11}'; done >prompt$n.txt
  check "prompt of $n" tensor-gen --from-text prompt$n.txt --shape 3,$n --dtype i64 -o prompt$n.h5
  gen16 d16.h5 gen_p$n.h5 --prompt prompt$n.h5
  gen16 d16f.h5 gen_p${n}f.h5 --prompt prompt$n.h5 --kv-cache f16
  same gen_p$n.h5:scores gen_p${n}f.h5:scores
  for cache in --no-cache --verbose; do # beams of 2: 6 rows, which float32 steps run in key tiles
    check "prompt of $n, $cache" decode --generate --beam 2 --max-len 8 --memory "$D:/s2s_memory" \
      --memory-lengths "$D:/s2s_src_lengths" --weights d16f.h5 --prompt prompt$n.h5 -o gen_p$n$cache.h5 $cache
  done
  grep -Eq "float32 weights (in column tiles|read where the file maps them) for steps of 6 rows" err.txt && pass || fail "prompt of $n: float32 steps not on the tiles' path: $(grep generate: err.txt)"
  cmp -s <(values gen_p$n--verbose.h5 tokens) <(values gen_p$n--no-cache.h5 tokens) && pass ||
    fail "prompt of $n: the cache's tokens are not recomputing's"
  same gen_p$n--verbose.h5:scores gen_p$n--no-cache.h5:scores 1e-5 1e-5
done

# --- the families by their own names (quantize keeps the layout): int8 runs as its dequantized file ---
LR="$TESTDATA/llama_reverse.h5"
check "quantize llama" quantize --weights "$LR:/w" -o lq.h5
check "dequantize llama" quantize --weights lq.h5 --scheme f32 -o lqf.h5
for w in lq lqf; do
  check "llama $w" decode --generate --max-len 9 --prompt "$LR:/heldout/prompt" \
    --prompt-lengths "$LR:/heldout/prompt_lengths" --weights $w.h5 -o "lrev_$w.h5"
done
same lrev_lq.h5:tokens lrev_lqf.h5:tokens
ok=$(paste -d '|' <(rows lrev_lq.h5 /tokens) <(rows "$LR" /heldout/expect) | awk -F'|' '$1 == $2 { n++ } END { print n + 0 }')
[ "$ok" -ge 198 ] && pass || fail "int8 LLaMA-layout demo model: exact match $ok/200, below 99%"
G="$TESTDATA/decoder.h5"
for fam in gpt2 llama qwen2; do
  check "quantize $fam" quantize --weights "$G:/w/$fam" -o "${fam}_q.h5"
  check "dequantize $fam" quantize --weights "${fam}_q.h5" --scheme f32 -o "${fam}_f.h5"
  for w in q f; do
    check "$fam $w" decode --tokens "$G:/$fam/ids" --lengths "$G:/$fam/ids_lengths" --weights "${fam}_$w.h5" \
      -o "${fam}_tf_$w.h5"
  done
  same "${fam}_tf_q.h5:logits" "${fam}_tf_f.h5:logits" 0 0.05 max
  same "${fam}_tf_q.h5:logits" "$G:/${fam}_expect/logits" 0 0.05 max # the quantization's error
done
E="$TESTDATA/encoder.h5"
check "quantize bert" quantize --weights "$E:/w/bert" -o bert_q.h5
check "dequantize bert" quantize --weights bert_q.h5 --scheme f32 -o bert_f.h5
for w in q f; do
  check "bert $w" encode --tokens "$E:/bert/ids" --weights "bert_$w.h5" -o "bert_$w.out.h5"
done
same bert_q.out.h5:output bert_f.out.h5:output 0 0.05 max

# --- bad input ---
cp "$W" bad.h5
tensor-gen --shape 48,16 --fill uniform --low -9 --high 9 --dtype i64 -o bad.h5:/w/packed/in_proj_weight
h5attr bad.h5 /w/packed/in_proj_weight quantization string int8
h5attr bad.h5 /w/packed/in_proj_weight block int 0
I=(-q "$W:/q5" -k "$W:/k7" -v "$W:/v7")
expect_fail 1 "bad.h5: missing dataset /w/packed/in_proj_weight_scale (the scales of the int8 weight" \
  mha-run "${I[@]}" --weights bad.h5:/w/packed -o o.h5
tensor-gen --shape 48,2 -o bad.h5:/w/packed/in_proj_weight_scale
expect_fail 1 "bad.h5:/w/packed/in_proj_weight_scale: expected shape (48, 1)" mha-run "${I[@]}" --weights bad.h5:/w/packed -o o.h5
tensor-gen --shape 48,1 -o bad.h5:/w/packed/in_proj_weight_scale
check "hand-made int8" mha-run "${I[@]}" --weights bad.h5:/w/packed -o o.h5
h5attr bad.h5 /w/packed/in_proj_weight quantization string int4
expect_fail 1 "bad.h5:/w/packed/in_proj_weight: attribute quantization = 'int4': expected 'int8'" \
  mha-run "${I[@]}" --weights bad.h5:/w/packed -o o.h5
expect_fail 1 "is quantized already" quantize --weights mq.h5 -o o.h5
expect_fail 1 "/q5 is not a group" quantize --weights "$W:/q5" -o o.h5
tensor-gen --shape 48,16 --fill uniform --low -200 --high 200 --dtype i64 -o bad.h5:/w/packed/in_proj_weight
h5attr bad.h5 /w/packed/in_proj_weight quantization string int8
h5attr bad.h5 /w/packed/in_proj_weight block int 0
expect_fail 1 "bad.h5:/w/packed/in_proj_weight: int8 values must lie in [-128, 127], got" \
  mha-run "${I[@]}" --weights bad.h5:/w/packed -o o.h5
expect_fail 2 "--block does not apply to --scheme f16" quantize --weights "$W:/w/packed" --scheme f16 --block 8 -o o.h5
expect_fail 2 "output 'mq.h5' names the input 'mq.h5'" quantize --weights mq.h5 -o mq.h5
finish
