#!/usr/bin/env bash
# Bad and borderline values on the newest surface (issue 52): each answer was silently wrong or named
# the wrong thing. An int8 weight of -128 computes the same bytes on every instruction set; large
# keys under Performer, out-of-range integers (--seed, any INT flag), an inert --token-types, a
# linear form from a file that cannot apply, weight NaNs, offsets float64 cannot count, an unused
# pos_embed and tensor-gen's --mean against its --dtype: each a clean one-line error (expect_fail
# in lib.sh: status, message, nothing written) or the right numbers.
source "$(dirname "$0")/lib.sh"
W="$TESTDATA/mha.h5"
M="$TESTDATA/reverse_model.h5"
E="$TESTDATA/encoder.h5"

# --- 1. int8 weights of -128 (another program's file): the same bytes on every instruction set ---
check "quantize mha" quantize --weights "$W:/w/packed" -o mq.h5
check "poke -128" h5poke mq.h5 /in_proj_weight 0 -128 -128 127 -128 -128 -128 -128 -128 -128 -128 -128 -128 -128 -128 -128 -128
h5dump -d /in_proj_weight -s 0,0 -c 1,3 mq.h5 | grep -q -- "-128, -128, 127" && pass || fail "the poke did not land"
check "mha-run -128 scalar" env ATTN_LINEAR_ISA=scalar mha-run -q "$W:/q5" -k "$W:/k7" -v "$W:/v7" --weights mq.h5 -o m_scalar.h5
for isa in avx2 avx512; do
  check "mha-run -128 $isa" env ATTN_LINEAR_ISA=$isa mha-run -q "$W:/q5" -k "$W:/k7" -v "$W:/v7" --weights mq.h5 -o m_$isa.h5
  same m_$isa.h5:output m_scalar.h5:output
done
# and the int8 product is the dequantized weight's within the inputs' quantization
check "dequantize" quantize --weights mq.h5 --scheme f32 -o mqf.h5
check "mha-run dequantized" mha-run -q "$W:/q5" -k "$W:/k7" -v "$W:/v7" --weights mqf.h5 -o m_f.h5
check "int8 near float32" h5cmp m_scalar.h5:output m_f.h5:output 0.05 0.05

# --- 2. Performer with large but finite keys: an error, not zeros ---
tensor-gen --shape 1,4,8 --seed 1 -o q.h5
tensor-gen --shape 1,6,8 --mean 1e20 --std 1e19 -o kbig.h5
tensor-gen --shape 1,6,8 -o v.h5
expect_fail 1 "--attention performer: the keys' feature exponents |x'|^2 / 2 overflow float32" \
  attn-score -q q.h5 -k kbig.h5 -v v.h5 --attention performer -o o.h5
expect_fail 1 "--attention performer: the queries' feature exponents |x'|^2 / 2 overflow float32" \
  attn-score -q kbig.h5 -k q.h5 -v q.h5 --attention performer -o o.h5
check "performer, ordinary keys" attn-score -q q.h5 -k q.h5 -v q.h5 --attention performer -o o.h5

# --- 3. integers beyond their type: --seed in every tool, and any INT flag ---
expect_fail 2 "--seed: must be an integer from 0 to 18446744073709551615, got 18446744073709551616" \
  tensor-gen --shape 2 --seed 18446744073709551616 -o o.h5
expect_fail 2 "--seed: must be an integer from 0 to 18446744073709551615, got -1" tensor-gen --shape 2 --seed -1 -o o.h5
expect_fail 2 "--seed: must be an integer" mha-run -q q.h5 --init xavier --embed-dim 8 --heads 2 --seed -1 -o o.h5
expect_fail 2 "--seed: must be an integer" encode -i q.h5 --init xavier --layers 1 --embed-dim 8 --heads 2 --ffn-dim 8 \
  --seed 99999999999999999999 -o o.h5
expect_fail 2 "--len: must be an integer from -9223372036854775808 to 9223372036854775807, got 99999999999999999999" \
  pe-gen --len 99999999999999999999 --dim 8 -o o.h5
expect_fail 2 "--shape: must be an integer" tensor-gen --shape 2,99999999999999999999 -o o.h5
check "--seed 2^64 - 1" tensor-gen --shape 2 --seed 18446744073709551615 -o s.h5

# --- 4. flags that cannot apply are refused ---
expect_fail 2 "--token-types applies to --tokens, not to -i's features" \
  encode -i "$E:/bert/x" --weights "$E:/w/bert" --token-types "$E:/bert/types" -o o.h5
expect_fail 2 "--mean does not apply to --fill uniform" tensor-gen --shape 2 --fill uniform --mean 3 -o o.h5
expect_fail 2 "--low does not apply to --fill normal" tensor-gen --shape 2 --low -1 -o o.h5
expect_fail 2 "--seed does not apply to --fill arange" tensor-gen --shape 2 --fill arange --seed 3 -o o.h5

# --- 5. messages name what the user gave, with the right status ---
cp "$M" lf.h5
h5attr lf.h5 /decoder/layers/0/self_attn attention string linformer
tensor-gen --shape 2,3 -o lf.h5:/decoder/layers/0/self_attn/E
tensor-gen --shape 2,3 -o lf.h5:/decoder/layers/0/self_attn/F
tensor-gen --shape 1,3,64 -o tgt.h5
tensor-gen --shape 1,5,64 -o mem.h5
expect_fail 1 "lf.h5:/decoder/layers/0/self_attn attribute attention = 'linformer' cannot be causal" \
  decode -i tgt.h5 --memory mem.h5 --weights lf.h5 -o o.h5
cp "$W" w.h5
{
  echo nan
  seq 2 16
} | tensor-gen --from-text - --shape 16 --allow-nonfinite -o w.h5:/w/packed/out_proj/bias
expect_fail 1 "w.h5:/w/packed/out_proj/bias: NaN at index [0]" mha-run -q w.h5:/q5 --weights w.h5:/w/packed -o o.h5
grep -q "allow-nonfinite" err.txt && fail "a weight's NaN advises --allow-nonfinite: $(cat err.txt)" || pass
expect_fail 1 "NaN at index [0]" quantize --weights w.h5:/w/packed -o o.h5
grep -q "allow-nonfinite" err.txt && fail "quantize advises --allow-nonfinite: $(cat err.txt)" || pass

# (and the Hugging Face activation names, from one table for GPT-2 and BERT)
cp "$E" act.h5
h5attr act.h5 /w/bert hidden_act string swish
expect_fail 1 "act.h5:/w/bert attribute hidden_act = 'swish': expected gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, relu, silu" \
  encode --tokens "$E:/bert/ids" --weights act.h5:/w/bert -o o.h5

# --- 6. offsets float64 cannot count ---
expect_fail 2 "--offset 9223372036854775807: positions up to" pe-gen --len 4 --dim 8 --offset 9223372036854775807 -o o.h5
expect_fail 2 "--offset 9007199254740990: positions up to" pe-gen --kind rope --len 4 --dim 8 --offset 9007199254740990 -o o.h5
tensor-gen --shape 1,4,8 -o x.h5
expect_fail 2 "--offset 9007199254740990" pe-gen --add x.h5 --offset 9007199254740990 -o o.h5
expect_fail 2 "--offset 9007199254740990" pe-gen --kind rope --apply x.h5 --heads 2 --offset 9007199254740990 -o o.h5
check "last position 2^53" pe-gen --len 4 --dim 8 --offset 9007199254740989 -o p53.h5
tensor-gen --shape 6,8 -o tab.h5
expect_fail 1 "--offset 3: 4 positions from it are outside the 6 rows of the learned table tab.h5:/data" \
  pe-gen --kind learned --table tab.h5 --add x.h5 --offset 3 -o o.h5

# --- 7. a weight present but unused ---
cp "$M" pe.h5
tensor-gen --shape 32,64 -o pe.h5:/pos_embed/weight
echo 4 6 8 | tensor-gen --from-text - --shape 1,3 --dtype i64 -o ids3.h5
expect_fail 1 "pe.h5: 1 dataset is not part of the layout this tool reads" encode --tokens ids3.h5 --weights pe.h5 -o o.h5
grep -qF "/pos_embed/weight" err.txt && pass || fail "the unused pos_embed is not named: $(cat err.txt)"
expect_fail 1 "/pos_embed/weight" decode -i tgt.h5 --memory mem.h5 --weights pe.h5 -o o.h5
check "--ignore-unknown-weights" encode --tokens ids3.h5 --weights pe.h5 --ignore-unknown-weights -o o.h5

# --- 8. tensor-gen's bounds follow --dtype ---
check "--mean 1e39 --dtype f64" tensor-gen --shape 2 --mean 1e39 --dtype f64 -o big.h5
expect_fail 2 "--mean: must be within f32's range" tensor-gen --shape 2 --mean 1e39 -o o.h5
expect_fail 2 "--mean: must be within f16's range (|x| <= 65504), got 100000" tensor-gen --shape 2 --mean 1e5 --dtype f16 -o o.h5
expect_fail 2 "--high: must be within i64's range" tensor-gen --shape 2 --fill uniform --high 1e19 --dtype i64 -o o.h5

finish
