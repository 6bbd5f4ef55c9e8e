#!/usr/bin/env bash
# encode through its command line: golden cases of testdata/encoder.h5 (nn.TransformerEncoder in
# float64: post/pre-norm, relu/gelu/gelu_tanh, 1-3 layers, final norm or not, padding, causal),
# per-layer weights, a sequence-to-sequence file, --init/--save-weights/--weights, pipes, bad input.
source "$(dirname "$0")/lib.sh"
G="$TESTDATA/encoder.h5"

# Tolerance (close, in lib.sh): |ours - ref| <= 1e-5 * max|ref|, as for mha-run (float32 sums whose
# rounding grows with the tensor's scale; LayerNorm keeps activations O(1)). Measured worst: 1.8e-7
# of the scale.

cases=$(members "$G" cases)
[ "$(echo "$cases" | wc -w)" -ge 6 ] && pass || fail "golden cases missing: $cases"
for c in $cases; do
  args=$(case_args "$G" "cases/$c")
  # shellcheck disable=SC2086
  if encode $args --emit-weights -o "$c.h5" 2>err.txt; then pass; else fail "$c: encode $args: $(cat err.txt)"; continue; fi
  close "$c.h5:output" "$G:/cases/$c/output"
  for l in $(members "$G" "cases/$c/weights"); do close "$c.h5:weights/$l" "$G:/cases/$c/weights/$l"; done
  # shellcheck disable=SC2086
  check "$c without weights" encode $args -o "${c}_nw.h5"
  same "${c}_nw.h5" "$c.h5:output" 0 1e-6 max # the blocked kernel instead of row blocks: last bits differ
done
# batch chunks: one sequence at a time gives the same bytes; --verbose reports progress per chunk
check "one sequence per chunk" encode -i "$G:/x" --weights "$G:/w/pre_gelu_3_norm" --lengths "$G:/lengths" --emit-weights \
  --chunk 1 --verbose -o c1.h5
grep -q '^encode: 1/2 sequences' err.txt && grep -q '^encode: 2/2 sequences' err.txt && pass || fail "progress lines: $(cat err.txt)"
# and the layers' seconds, apart from (and at most) those with reading and writing
sed -n 's/^encode: encoder: \([0-9.]*\) s, [0-9]* tokens\/s (the layers; \([0-9.]*\) s with reading and writing)$/\1 \2/p' err.txt |
  awk 'NF == 2 && $1 <= $2 {ok = 1} END {exit !ok}' && pass || fail "the layers' time line: $(cat err.txt)"
check "whole batch" encode -i "$G:/x" --weights "$G:/w/pre_gelu_3_norm" --lengths "$G:/lengths" --emit-weights -o c2.h5
cmp -s <(values c1.h5 output) <(values c2.h5 output) && cmp -s <(values c1.h5 weights/layer2) <(values c2.h5 weights/layer2) &&
  pass || fail "--chunk 1 changes the bytes"
check "tokens, one per chunk" encode --tokens "$G:/ids" --weights "$G:/tok_learned" --lengths "$G:/lengths" --chunk 1 -o tc1.h5
close tc1.h5 "$G:/cases_tokens/learned/output"
h5ls pre_gelu_3_norm.h5/weights/layer2 >/dev/null && [ "$(shape pre_gelu_3_norm.h5 weights/layer2)" = "2, 4, 7, 7" ] && pass ||
  fail "/weights/layer{i} (b, H, n, n)"
check "2-D input" encode -i "$G:/x2d" --weights "$G:/w/post_relu_1" -o x2d.h5
[ "$(shape x2d.h5 output)" = "7, 16" ] && pass || fail "2-D in, 2-D out"
close x2d.h5 "$G:/cases_2d/post_relu_1"
check "seq2seq file: /encoder by default" encode -i "$G:/x" --weights "$G:/seq2seq" -o s2s.h5
close s2s.h5 "$G:/cases/pre_gelu_3_norm/output"

# --- token ids: embeddings * sqrt(E) + sinusoidal, learned or no positions, then the stack ---
for pe in sinusoidal learned none; do
  args=$(case_args "$G" "cases_tokens/$pe")
  # shellcheck disable=SC2086
  check "tokens, pe $pe" encode $args -o "tok_$pe.h5"
  close "tok_$pe.h5" "$G:/cases_tokens/$pe/output"
done
h5cmp tok_sinusoidal.h5 tok_none.h5 2>/dev/null && fail "the positional encoding changes the output" || pass

# --- --init with --save-weights, then --weights; pipes ---
check "init" encode -i "$G:/x" --init xavier --layers 2 --embed-dim 16 --heads 4 --ffn-dim 24 --norm-first --activation gelu \
  --final-norm --seed 3 --causal --save-weights w.h5 --emit-weights -o init.h5
check "load" encode -i "$G:/x" --weights w.h5 --causal --emit-weights -o load.h5
cmp -s <(values init.h5 output) <(values load.h5 output) && cmp -s <(values init.h5 weights/layer1) <(values load.h5 weights/layer1) &&
  pass || fail "--weights reproduces --init bytes"
for a in num_heads norm_first activation layer_norm_eps; do h5dump -a "/$a" w.h5 >/dev/null 2>&1 && pass || fail "attribute $a"; done
[ "$(attr w.h5 activation)" = gelu ] && pass || fail "activation attribute"
# the saved layout is nn.TransformerEncoder's state_dict
layout() { h5ls -r "$1" | awk '$2 == "Dataset" {sub("^" g, "", $1); print $1}' g="$2"; }
[ "$(layout w.h5 '')" = "$(layout "$G/w/pre_gelu_3_norm" /w/pre_gelu_3_norm | grep -v '^/layers/2/')" ] && pass ||
  fail "saved layout: $(layout w.h5 '' | head -3)"
# RMSNorm and gated feed-forwards from --init: saved with linear_gate and norm_type, reloaded to the
# same bytes; the file is strict about them
check "init rms_norm swiglu" encode -i "$G:/x" --init xavier --layers 2 --embed-dim 16 --heads 4 --ffn-dim 24 \
  --norm-first --norm rms_norm --activation swiglu --final-norm --seed 4 --save-weights wrms.h5 --emit-weights -o rms1.h5
check "load rms_norm swiglu" encode -i "$G:/x" --weights wrms.h5 --emit-weights -o rms2.h5
cmp -s <(values rms1.h5 output) <(values rms2.h5 output) && pass || fail "rms_norm/swiglu: --weights reproduces --init bytes"
[ "$(attr wrms.h5 norm_type)" = rms_norm ] && [ "$(attr wrms.h5 activation)" = swiglu ] &&
  [ "$(shape wrms.h5 layers/1/linear_gate/weight)" = "24, 16" ] && ! h5ls wrms.h5/layers/0/norm1/bias >/dev/null 2>&1 &&
  pass || fail "rms_norm/swiglu layout: $(h5ls -r wrms.h5 | grep -E 'gate|norm1' | tr '\n' ' ')"
cp wrms.h5 wnogate.h5 && h5attr wnogate.h5 / activation string relu
expect_fail 1 "wnogate.h5: 4 datasets are not part of the layout this tool reads (PyTorch state_dict names, '.' as '/'; man attn-toolkit, WEIGHT FILES): /layers/0/linear_gate/bias" encode -i "$G:/x" --weights wnogate.h5 -o o.h5
cp wrms.h5 wln.h5 && h5attr wln.h5 / norm_type string layer_norm
expect_fail 1 "wln.h5: missing dataset /layers/0/norm1/bias" encode -i "$G:/x" --weights wln.h5 -o o.h5
cp wrms.h5 wbad.h5 && h5attr wbad.h5 / norm_type string batch_norm
expect_fail 1 "wbad.h5:/ attribute norm_type: unknown norm 'batch_norm' (layer_norm, rms_norm)" encode -i "$G:/x" --weights wbad.h5 -o o.h5
cp "$G" wg.h5 && h5attr wg.h5 /w/post_relu_1 activation string geglu
expect_fail 1 "wg.h5: missing dataset /w/post_relu_1/layers/0/linear_gate/weight (expected shape (32, 16) (E = 16, F = 32; activation geglu is gated))" \
  encode -i "$G:/x" --weights wg.h5:/w/post_relu_1 -o o.h5
# bias_k, bias_v and add_zero_attn (per layer) survive --save-weights: same bytes, same layout
XK="-i $G:/x --causal --emit-weights"
check "extra keys, saved" encode $XK --weights "$G:/w/extra_keys_pre_relu_2" --save-weights xk.h5 -o xk1.h5
check "extra keys, reloaded" encode $XK --weights xk.h5 -o xk2.h5
cmp -s <(values xk1.h5 output) <(values xk2.h5 output) && cmp -s <(values xk1.h5 weights/layer1) <(values xk2.h5 weights/layer1) &&
  pass || fail "extra keys: --save-weights then --weights changes the bytes"
[ "$(layout xk.h5 '')" = "$(layout "$G/w/extra_keys_pre_relu_2" /w/extra_keys_pre_relu_2)" ] && pass || fail "extra keys layout: $(layout xk.h5 '')"
[ "$(shape xk1.h5 weights/layer0)" = "2, 4, 7, 8" ] && [ "$(shape xk1.h5 weights/layer1)" = "2, 4, 7, 9" ] && pass ||
  fail "weights per layer (b, H, n, n + its extra keys): $(shape xk1.h5 weights/layer0), $(shape xk1.h5 weights/layer1)"
tensor-gen --shape 3,9,16 --seed 8 -o - | encode -i - --weights "$G:/w/post_relu_1" -o - |
  mha-run -q - --init xavier --embed-dim 16 --heads 2 -o piped.h5 2>err.txt && pass || fail "pipe: $(cat err.txt)"
tensor-gen --shape 3,9,16 --seed 8 -o x.h5 && encode -i x.h5 --weights "$G:/w/post_relu_1" -o y.h5 &&
  mha-run -q y.h5 --init xavier --embed-dim 16 --heads 2 -o direct.h5 && same piped.h5 direct.h5

# --- bad input ---
cp "$G" in.h5
cp w.h5 badf.h5 && tensor-gen --shape 16 -o badf.h5:/layers/1/norm2/weight --fill ones && tensor-gen --shape 8 -o badf.h5:/layers/1/norm2/bias
cp w.h5 badff.h5 && tensor-gen --shape 40,16 -o badff.h5:/layers/1/linear1/weight
tensor-gen --shape 2,7,12 -o x12.h5
W="--weights in.h5:/w/post_relu_1"
expect_fail 1 "badf.h5:/layers/1/norm2/bias: expected shape (16,) (E = 16), got (8,)" encode -i in.h5:/x --weights badf.h5 -o o.h5
expect_fail 1 "badff.h5:/layers/1/linear1/bias: expected shape (40,) (E = 16, F = 40), got (24,)" encode -i in.h5:/x --weights badff.h5 -o o.h5
expect_fail 1 "in.h5: missing dataset /bad/no_linear2/layers/1/linear2/weight (expected shape (16, 32) (E = 16, F = 32))" encode -i in.h5:/x --weights in.h5:/bad/no_linear2 -o o.h5
expect_fail 1 "missing group /bad/no_layers/layers/0 (an encoder's first layer); the group matches none of the layouts read by name either: model/layers/0/self_attn/q_proj/weight (LLaMA)" encode -i in.h5:/x --weights in.h5:/bad/no_layers -o o.h5
expect_fail 1 "x12.h5: feature size 12 differs from the embed dim of in.h5:/w/post_relu_1/layers/0/self_attn = 16" encode -i x12.h5 $W -o o.h5
expect_fail 1 "x12.h5: feature size 12 differs from --embed-dim = 16" encode -i x12.h5 --init xavier --layers 1 --embed-dim 16 --heads 2 --ffn-dim 8 -o o.h5
tensor-gen --shape 2,9 --fill zeros --dtype i64 -o kpm9.h5
expect_fail 1 "kpm9.h5:/data: key padding mask must be (b, n) = (2, 7), got (2, 9)" encode -i in.h5:/x $W --key-padding-mask kpm9.h5 -o o.h5
expect_fail 2 "--embed-dim 10 is not divisible by --heads 4" encode -i in.h5:/x --init xavier --layers 1 --embed-dim 10 --heads 4 --ffn-dim 8 -o o.h5
expect_fail 2 "--init needs --ffn-dim" encode -i in.h5:/x --init xavier --layers 1 --embed-dim 16 --heads 4 -o o.h5
expect_fail 2 "--layers does not apply to --weights" encode -i in.h5:/x $W --layers 2 -o o.h5
expect_fail 2 "give exactly one of --weights and --init" encode -i in.h5:/x -o o.h5
expect_fail 1 "in.h5:/ids_bad: token id 11 at index [1, 2] is outside the vocabulary 0..10 of in.h5:/tok_learned/src_embed/weight" encode --tokens in.h5:/ids_bad --weights in.h5:/tok_learned -o o.h5
expect_fail 1 "in.h5: missing dataset /w/post_relu_1/src_embed/weight (token embeddings (V, E)" encode --tokens in.h5:/ids $W -o o.h5
expect_fail 1 "in.h5:/x2d: holds float32 data; expected integers or bool" encode --tokens in.h5:/x2d --weights in.h5:/tok_none -o o.h5
expect_fail 1 "in.h5:/x: expected token ids (b, n) or (n,), got shape (2, 7, 16)" encode --tokens in.h5:/x --weights in.h5:/tok_none -o o.h5
expect_fail 2 "give exactly one of -i, --tokens, --text, --pixels and --image" encode -i in.h5:/x --tokens in.h5:/ids $W -o o.h5
expect_fail 2 "give exactly one of -i, --tokens, --text, --pixels and --image" encode $W -o o.h5
expect_fail 2 "--tokens needs --weights with token embeddings" encode --tokens in.h5:/ids --init xavier --layers 1 --embed-dim 16 --heads 4 --ffn-dim 8 -o o.h5
expect_fail 2 "--activation: swish not in {relu,gelu,gelu_tanh,silu,glu,geglu,geglu_tanh,swiglu}" encode -i in.h5:/x --init xavier --layers 1 --embed-dim 16 --heads 4 --ffn-dim 8 --activation swish -o o.h5
expect_fail 2 "names the input" encode -i in.h5:/x $W -o in.h5
[ -z "$(ls -A tmp)" ] && pass || fail "temporary files left: $(ls -A tmp)"


# --- pad tokens (issue 16): with --tokens, ids equal to the file's pad_id are padding by default, as
# PyTorch users pass src == pad; the same numbers as the explicit mask, outputs 0 there; --no-pad-mask
# turns it off; not when pad_id is also the model's eos_id or bos_id ---
RM="$TESTDATA/reverse_model.h5"
echo 4 6 0 0 12 3 0 5 | tensor-gen --from-text - --shape 2,4 --dtype i64 -o idsp.h5
echo 0 0 1 1 0 0 1 0 | tensor-gen --from-text - --shape 2,4 --dtype i64 -o kpmp.h5
check "pad ids" encode --tokens idsp.h5 --weights "$RM" --verbose -o pad_auto.h5
grep -q "padding: token ids equal to pad_id 0" err.txt && pass || fail "--verbose does not say pad ids are padding: $(cat err.txt)"
check "explicit mask" encode --tokens idsp.h5 --weights "$RM" --key-padding-mask kpmp.h5 -o pad_kpm.h5
cmp -s <(values pad_auto.h5 output) <(values pad_kpm.h5 output) && pass || fail "pad ids: not the numbers of the explicit mask"
# item 0, positions 2 and 3 (the pad ids): 128 values, every one 0
[ "$(h5dump -d /output -s 0,2,0 -c 1,2,64 -y -w 0 pad_auto.h5 | sed -n '/DATA {/,/}/p' | grep -v '[{}]' | tr ', ' '\n\n' |
  grep -c '^0$')" = 128 ] && pass || fail "pad positions' outputs are not 0"
check "--no-pad-mask" encode --tokens idsp.h5 --weights "$RM" --no-pad-mask -o pad_off.h5
! cmp -s <(values pad_auto.h5 output) <(values pad_off.h5 output) && pass || fail "--no-pad-mask changes nothing"
cp "$RM" pad_is_eos.h5
h5attr pad_is_eos.h5 / eos_id int 0
check "pad_id = eos_id" encode --tokens idsp.h5 --weights pad_is_eos.h5 -o pad_eos.h5
cmp -s <(values pad_eos.h5 output) <(values pad_off.h5 output) && pass || fail "pad_id = eos_id: pad ids were masked"

# --- BERT by its own weight names (issue 18, item 3): BertModel's state_dict with the config's
# scalars; token types, and the attention_mask its users hold (1 = attend); pooler and buffers unread
B=(--tokens "$G:/bert/ids" --weights "$G:/w/bert")
check "bert" encode "${B[@]}" --token-types "$G:/bert/types" --attention-mask "$G:/bert/attention_mask" --emit-weights -o bert.h5
close bert.h5:output "$G:/bert_expect/output"
for l in 0 1; do close "bert.h5:weights/layer$l" "$G:/bert_expect/weights/layer$l"; done
check "bert, no types, no mask" encode "${B[@]}" -o bert0.h5
close bert0.h5:output "$G:/bert_expect/output_types0"
echo 0 0 2 1 1 1 0 0 1 1 0 0 | tensor-gen --from-text - --shape 2,6 --dtype i64 -o types2.h5
expect_fail 1 "types2.h5:/data: token type 2 at index [0, 2] is outside 0..1 of" encode "${B[@]}" --token-types types2.h5 -o o.h5
echo 1 1 1 | tensor-gen --from-text - --shape 1,3 --dtype i64 -o am3.h5
expect_fail 1 "am3.h5:/data: attention mask (nonzero = attend) must be (b, n) = (2, 6), got (1, 3)" encode "${B[@]}" --attention-mask am3.h5 -o o.h5
expect_fail 2 "--token-types applies to --tokens, not to -i's features" encode -i "$G:/x" --init xavier --layers 1 --embed-dim 16 --heads 2 --ffn-dim 8 --token-types types2.h5 -o o.h5
expect_fail 2 "--lengths excludes --attention-mask" encode "${B[@]}" --attention-mask am3.h5 --lengths "$G:/lengths" -o o.h5

# a stack exported without its hyperparameters is refused, not run under a guess (issue 18, item 4:
# a pre-norm GELU model read as post-norm ReLU ran with exit 0, its output off by 3.3)
h5copy -p -i "$G" -s /w/pre_gelu_3_norm/layers -o noattr.h5 -d /m/layers && h5attr noattr.h5 /m num_heads int 4
expect_fail 1 "noattr.h5:/m: no norm_first attribute on the group or an ancestor (the layers' norm placement: 0 post-norm, 1 pre-norm)" \
  encode -i "$G:/x" --weights noattr.h5:/m -o o.h5
h5attr noattr.h5 /m norm_first int 1
expect_fail 1 "noattr.h5:/m: no activation attribute on the group or an ancestor" encode -i "$G:/x" --weights noattr.h5:/m -o o.h5
h5attr noattr.h5 /m activation string gelu
check "with both" encode -i "$G:/x" --weights noattr.h5:/m -o noattr_out.h5

# --- --matmul-precision: bf16 products over many rows, near float32's; f32 the same bytes as no flag ---
tensor-gen --shape 3,60,64 --seed 11 -o xbf.h5 # 180 rows: the W-packed products
check "init 64 wide" encode -i xbf.h5 --init xavier --layers 2 --embed-dim 64 --heads 4 --ffn-dim 128 --seed 5 \
  --save-weights wbf.h5 -o bf_plain.h5
check "f32" encode -i xbf.h5 --weights wbf.h5 --matmul-precision f32 -o bf_f32.h5
check "bf16" encode -i xbf.h5 --weights wbf.h5 --matmul-precision bf16 --verbose -o bf_bf16.h5
cmp -s <(values bf_plain.h5 output) <(values bf_f32.h5 output) && pass || fail "--matmul-precision f32 changes the bytes"
h5cmp bf_bf16.h5:/output bf_f32.h5:/output 0.05 0.02 max && pass || fail "bf16 products far from float32's"
if grep -q "products of many rows in bfloat16" err.txt; then # this CPU has AVX512-BF16: rounded, so not the same
  h5cmp bf_bf16.h5:/output bf_f32.h5:/output 1e-5 0 2>/dev/null && fail "bf16 products as float32's" || pass
else
  grep -q "no AVX512-BF16 here, products in float32" err.txt && pass || fail "bf16's --verbose line: $(cat err.txt)"
  cmp -s <(values bf_bf16.h5 output) <(values bf_f32.h5 output) && pass || fail "bf16 without AVX512-BF16: not float32's bytes"
fi
expect_fail 2 "--matmul-precision: f16 not in {f32,bf16}" encode -i xbf.h5 --weights wbf.h5 --matmul-precision f16 -o o.h5

finish
