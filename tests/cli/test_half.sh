#!/usr/bin/env bash
# float16 and bfloat16 tensors (--dtype f16|bf16; either read wherever a float is read): numbers
# rounded as NumPy (float16) and the generator's bit-exact reference (bfloat16) round them
# (testdata/half.h5: ties, subnormals, overflow, infinities, NaN), the files' types as h5py reads
# them and as h5dump prints them, --allow-nonfinite on 16-bit inputs, every tool's 16-bit output
# against its float32 output, and 16-bit inputs through the tools and pipes.
source "$(dirname "$0")/lib.sh"
H="$TESTDATA/half.h5"
n=$(shape "$H" values)

# --- rounding: tensor-gen --from-text (the float64 values, 17 digits) -> f16 / bf16 ---
h5dump -d /values -y -m %.17g -o values.raw "$H" >/dev/null && tr -s ' ,\n' '\n' <values.raw | grep . >values.txt
[ "$(wc -l <values.txt)" -eq "$n" ] && pass || fail "values.txt: $(wc -l <values.txt) of $n"
for t in f16 bf16; do
  check "tensor-gen $t" tensor-gen --from-text values.txt --shape "$n" --dtype $t --allow-nonfinite -o "$t.h5"
  same "$t.h5:data" "$H:/${t}_values" 0 0
  # the stored type is the reference file's (which h5py reads as numbers: the generator asserts it)
  [ "$(h5dump -H -d /data "$t.h5" | grep DATATYPE)" = "$(h5dump -H -d /${t}_h5py "$H" | grep DATATYPE)" ] && pass ||
    fail "$t: type $(h5dump -H -d /data "$t.h5" | grep DATATYPE)"
done
h5dump -d /data bf16.h5 | grep -q '(0): 0, -0, 1, -1, 0.100098' && pass || fail "h5dump: $(h5dump -d /data bf16.h5 | grep '(0)')"
h5dump -H -d /data bf16.h5 | grep -q "16-bit little-endian floating-point" && pass || fail "bf16 is not a float type"
attn-view bf16.h5 --stats | grep -q "bfloat16 (${n},)" && pass || fail "attn-view: $(attn-view bf16.h5 --stats | head -1)"

# --- 16-bit inputs: NaN and Inf refused without --allow-nonfinite; read exactly ---
echo "1 2 inf 4" | tensor-gen --from-text - --shape 2,2 --dtype bf16 --allow-nonfinite -o inf.h5
echo "1 2 nan 4" | tensor-gen --from-text - --shape 2,2 --dtype f16 --allow-nonfinite -o nan.h5
expect_fail 1 "inf.h5:/data: Inf at index [1, 0]" attn-score -q inf.h5 -k inf.h5 -o o.h5
expect_fail 1 "nan.h5:/data: NaN at index [1, 0]" attn-score -q nan.h5 -k nan.h5 -o o.h5
check "nonfinite allowed" attn-score -q nan.h5 -k inf.h5 --allow-nonfinite -o o.h5
tensor-gen --shape 2,1,8 --seed 1 -o q.h5
tensor-gen --shape 2,1,8 --seed 2 --dtype bf16 -o kb.h5
tensor-gen --shape 2,1,6 --seed 3 --dtype bf16 -o vb.h5
tensor-gen --shape 2,1,6 --seed 3 --dtype f16 -o vh.h5
for v in vb vh; do # one key: weight 1, so the output is V as read
  check "identity $v" attn-score -q q.h5 -k kb.h5 -v $v.h5 -o "id_$v.h5"
  same "id_$v.h5:output" "$v.h5" 0 0
done

# --- every tool writes f16 and bf16: its float32 output, rounded ---
tensor-gen --shape 2,16,32 --seed 4 -o x.h5
runs=(
  "pe-gen --len 16 --dim 32"
  "attn-score -q x.h5 -k x.h5 -v x.h5 --causal"
  "mha-run -q x.h5 --init xavier --embed-dim 32 --heads 4"
  "encode -i x.h5 --init xavier --layers 1 --embed-dim 32 --heads 4 --ffn-dim 64"
)
for r in "${runs[@]}"; do
  tool=${r%% *}
  # shellcheck disable=SC2086
  check "$tool f32" $r -o "$tool.f32.h5"
  for t in f16 bf16; do
    # shellcheck disable=SC2086
    check "$tool $t" $r --dtype $t -o "$tool.$t.h5"
    [ "$t" = f16 ] && rel=0.0005 || rel=0.004 # half of the last place: 2^-11, 2^-8
    same "$tool.$t.h5" "$tool.f32.h5" 1e-7 $rel
    h5dump -H "$tool.$t.h5" | grep -q "16-bit little-endian floating-point" && pass || fail "$tool --dtype $t: type"
  done
done
D="$TESTDATA/decoder.h5"
check "decode f32" decode -i "$D:/tgt" --memory "$D:/mem" --weights "$D:/w/post_relu_1" -o dec.f32.h5
check "decode bf16" decode -i "$D:/tgt" --memory "$D:/mem" --weights "$D:/w/post_relu_1" --dtype bf16 -o dec.bf16.h5
same dec.bf16.h5 dec.f32.h5 1e-7 0.004

# --- 16-bit tensors through a pipe, and as inputs of mha-run and encode ---
pe-gen --len 16 --dim 32 --dtype bf16 -o - | attn-score -q -:pe -k -:pe -v -:pe -o pipe.h5 2>err.txt && pass ||
  fail "bf16 pipe: $(cat err.txt)"
check "pe bf16" pe-gen --len 16 --dim 32 --dtype bf16 -o pe.h5
check "pe direct" attn-score -q pe.h5:pe -k pe.h5:pe -v pe.h5:pe -o direct.h5
same pipe.h5 direct.h5 0 0
tensor-gen --shape 2,16,32 --seed 4 --dtype f16 -o xh.h5
check "mha-run f16 in" mha-run -q xh.h5 --init xavier --embed-dim 32 --heads 4 -o mh.h5
check "encode f16 in" encode -i xh.h5 --init xavier --layers 1 --embed-dim 32 --heads 4 --ffn-dim 64 -o eh.h5
# the same bytes as from a float32 file of the same numbers: float16 is read exactly
h5dump -d /data -y -m %.17g -o xh.raw xh.h5 >/dev/null && tr -s ' ,\n' '\n' <xh.raw | grep . >xh.txt
check "xh as f32" tensor-gen --from-text xh.txt --shape 2,16,32 -o xf.h5
check "mha-run f32 in" mha-run -q xf.h5 --init xavier --embed-dim 32 --heads 4 -o mf.h5
check "encode f32 in" encode -i xf.h5 --init xavier --layers 1 --embed-dim 32 --heads 4 --ffn-dim 64 -o ef.h5
cmp -s <(values mh.h5 output) <(values mf.h5 output) && cmp -s <(values eh.h5 output) <(values ef.h5 output) && pass ||
  fail "a float16 input is not read as its float32 numbers"
expect_fail 2 "--dtype: bf32 not in {f32,f64,f16,bf16}" attn-score -q q.h5 -k kb.h5 --dtype bf32 -o o.h5
finish
