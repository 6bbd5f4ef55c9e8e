#!/usr/bin/env bash
# decode through its command line: golden cases of testdata/decoder.h5 (nn.TransformerDecoder in
# float64: post/pre-norm, relu/gelu/gelu_tanh, 1-3 layers, final norm or not, causal or not, target
# and memory padding), per-layer self and cross weights, the nn.Transformer token path with
# encode piped in, generation (greedy and beam, cached and recomputed) against a Python loop that
# recomputes the prefix, batch chunks, bad input.
source "$(dirname "$0")/lib.sh"
G="$TESTDATA/decoder.h5"

# Tolerance (close, in lib.sh): |ours - ref| <= 1e-5 * max|ref|, as for encode and mha-run.

cases=$(members "$G" cases)
[ "$(echo "$cases" | wc -w)" -ge 4 ] && pass || fail "golden cases missing: $cases"
for c in $cases; do
  args=$(case_args "$G" "cases/$c")
  # shellcheck disable=SC2086
  if decode $args --emit-weights -o "$c.h5" 2>err.txt; then pass; else fail "$c: decode $args: $(cat err.txt)"; continue; fi
  close "$c.h5:output" "$G:/cases/$c/output"
  for l in $(members "$G" "cases/$c/weights"); do
    close "$c.h5:weights/$l/self" "$G:/cases/$c/weights/$l/self"
    close "$c.h5:weights/$l/cross" "$G:/cases/$c/weights/$l/cross"
  done
  # shellcheck disable=SC2086
  check "$c without weights" decode $args -o "${c}_nw.h5"
  same "${c}_nw.h5" "$c.h5:output" 0 1e-6 max # the blocked kernel instead of row blocks: last bits differ
  # shellcheck disable=SC2086
  check "$c, one sequence per chunk" decode $args --emit-weights --chunk 1 -o "${c}_c1.h5"
  cmp -s <(values "${c}_c1.h5" output) <(values "$c.h5" output) &&
    cmp -s <(values "${c}_c1.h5" weights/layer0/cross) <(values "$c.h5" weights/layer0/cross) && pass ||
    fail "$c: --chunk 1 changes the bytes"
done
[ "$(shape pre_gelu_3_norm_lengths.h5 weights/layer2/cross)" = "2, 4, 5, 7" ] && pass || fail "/weights/layer{i}/cross (b, H, t, s)"
[ "$(shape pre_gelu_3_norm_lengths.h5 weights/layer2/self)" = "2, 4, 5, 5" ] && pass || fail "/weights/layer{i}/self (b, H, t, t)"
h5ls post_relu_1.h5/logits >/dev/null 2>&1 && fail "no generator, no /logits" || pass
check "2-D target and memory" decode -i "$G:/tgt2d" --memory "$G:/mem2d" --weights "$G:/w/post_relu_1" -o x2d.h5
[ "$(shape x2d.h5 output)" = "5, 16" ] && pass || fail "2-D in, 2-D out"
close x2d.h5 "$G:/cases_2d/post_relu_1"

# --- nn.Transformer with embeddings: encode --tokens | decode --tokens, /logits ---
S="--weights $G:/s2s"
check "encode the source tokens" encode --tokens "$G:/s2s_src" $S --lengths "$G:/s2s_src_lengths" -o mem.h5
close mem.h5 "$G:/s2s_expect/memory"
encode --tokens "$G:/s2s_src" $S --lengths "$G:/s2s_src_lengths" -o - |
  decode --memory - --memory-lengths "$G:/s2s_src_lengths" --tokens "$G:/s2s_tgt" --lengths "$G:/s2s_tgt_lengths" $S \
    -o tf.h5 --verbose 2>err.txt && pass || fail "encode | decode: $(cat err.txt)"
# --verbose: the layers' seconds, apart from (and at most) those with reading, writing and the logits
sed -n 's/^decode: decoder: \([0-9.]*\) s, [0-9]* target tokens\/s (the layers; \([0-9.]*\) s with reading, writing and the logits)$/\1 \2/p' err.txt |
  awk 'NF == 2 && $1 <= $2 {ok = 1} END {exit !ok}' && pass || fail "the layers' time line: $(cat err.txt)"
close tf.h5:output "$G:/s2s_expect/output"
close tf.h5:logits "$G:/s2s_expect/logits"
[ "$(shape tf.h5 logits)" = "3, 5, 11" ] && pass || fail "/logits (b, t, V)"
# padded target positions (row 2 from position 2 on) are exactly 0 in /output and /logits
nonzero=$(h5dump -d /logits -s 2,2,0 -c 1,3,11 tf.h5 | sed -n 's/^ *([0-9,]*): //p' | tr ', ' '\n\n' | grep -cv '^0*$')
[ "$nonzero" -eq 0 ] && [ "$(h5dump -d /logits -s 2,2,0 -c 1,3,11 tf.h5 | grep -c '^ *(2,[2-4],0): ')" -eq 3 ] && pass ||
  fail "padded logits not 0: $(h5dump -d /logits -s 2,2,0 -c 1,3,11 tf.h5 | grep -A4 DATA)"

# --- generation: tokens exactly as the Python loop (float64, prefix recomputed), scores close ---
# generate_like_python MODEL OUT: greedy and 3 beams, cached and not, against MODEL's goldens
generate_like_python() {
  local model=$1 out=$2 K cache
  for K in 1 3; do
    for cache in "" --no-cache; do
      check "$model: generate beam $K $cache" decode --generate --max-len 8 --beam $K $cache \
        --memory "$G:/${model}_memory" --memory-lengths "$G:/${model}_src_lengths" --weights "$G:/$model" -o "$out$K$cache.h5"
      same "$out$K$cache.h5:tokens" "$G:/${model}_generate/beam$K/tokens" 0 0
      same "$out$K$cache.h5:scores" "$G:/${model}_generate/beam$K/scores" 1e-5 1e-5
    done
    cmp -s <(values "$out$K.h5" tokens) <(values "$out$K--no-cache.h5" tokens) && pass ||
      fail "$model, beam $K: cache and --no-cache tokens differ"
  done
}
generate_like_python s2s gen
# every attention module with add_bias_kv and add_zero_attn (bias_k and the zero key appended to
# the cache's keys at every step, and to the memory's): teacher-forced and generated as PyTorch
X="--weights $G:/s2s_xk"
encode --tokens "$G:/s2s_xk_src" $X --lengths "$G:/s2s_xk_src_lengths" -o xk_mem.h5 2>err.txt && pass || fail "encode, extra keys: $(cat err.txt)"
close xk_mem.h5 "$G:/s2s_xk_expect/memory"
check "decode, extra keys" decode --memory xk_mem.h5 --memory-lengths "$G:/s2s_xk_src_lengths" --tokens "$G:/s2s_xk_tgt" \
  --lengths "$G:/s2s_xk_tgt_lengths" $X -o xk_tf.h5
close xk_tf.h5:output "$G:/s2s_xk_expect/output"
close xk_tf.h5:logits "$G:/s2s_xk_expect/logits"
generate_like_python s2s_xk xk_gen
# RMSNorm and SwiGLU in generation: the KV cache's steps give the tokens and scores of recomputing
# the prefix through the teacher-forced stack (whose numbers the blocks_* goldens check)
P=/w/blocks_rms_swiglu_pre_2
cp "$G" blk.h5
tensor-gen --shape 11,16 --seed 3 -o "blk.h5:$P/tgt_embed/weight"
tensor-gen --shape 11,16 --seed 7 --std 0.5 -o "blk.h5:$P/generator/weight"
h5attr blk.h5 "$P" bos_id int 1 && h5attr blk.h5 "$P" eos_id int 10 && h5attr blk.h5 "$P" pad_id int 0
for cache in "" --no-cache; do
  check "rms_norm swiglu: generate $cache" decode --generate --max-len 6 --beam 2 $cache --memory "$G:/mem" \
    --weights "blk.h5:$P" -o "blkgen$cache.h5"
done
values blkgen.h5 tokens | grep -q '(1,0): 0, 8, 3, 9, 10' && cmp -s <(values blkgen.h5 tokens) <(values blkgen--no-cache.h5 tokens) &&
  pass || fail "rms_norm swiglu: cached tokens differ: $(values blkgen.h5 tokens | grep '(') vs $(values blkgen--no-cache.h5 tokens | grep '(')"
same blkgen.h5:scores blkgen--no-cache.h5:scores 1e-5 1e-5
# RoPE (each key rotated once as it enters the cache, the query at its step's position), ALiBi, the
# sliding window and grouped KV heads in generation: the cache's steps give the tokens and scores
# of recomputing the prefix through the teacher-forced stack (whose numbers the pos_* goldens check)
for P in /w/pos_rope_gqa_window /w/pos_alibi_window; do
  tensor-gen --shape 11,16 --seed 3 -o "blk.h5:$P/tgt_embed/weight"
  tensor-gen --shape 11,16 --seed 2 --std 0.5 -o "blk.h5:$P/generator/weight" # runs to --max-len: past the window
  h5attr blk.h5 "$P" bos_id int 1 && h5attr blk.h5 "$P" eos_id int 10 && h5attr blk.h5 "$P" pad_id int 0
  for cache in "" --no-cache; do
    check "$P: generate $cache" decode --generate --max-len 9 --beam 2 $cache --memory "$G:/mem" \
      --memory-lengths "$G:/mem_lengths" --weights "blk.h5:$P" -o "posgen$cache.h5"
  done
  [ "$(shape posgen.h5 tokens)" = "2, 9" ] && cmp -s <(values posgen.h5 tokens) <(values posgen--no-cache.h5 tokens) &&
    pass || fail "$P: cached tokens differ: $(values posgen.h5 tokens | grep '(') vs $(values posgen--no-cache.h5 tokens | grep '(')"
  same posgen.h5:scores posgen--no-cache.h5:scores 1e-5 1e-5
done
h5dump -d /tokens gen1.h5 | grep -q 'H5T_STD_I64LE' && pass || fail "/tokens is int64"
[ "$(shape gen1.h5 tokens)" = "3, 8" ] && [ "$(shape gen3.h5 tokens)" = "3, 5" ] && [ "$(shape gen3.h5 scores)" = 3 ] &&
  pass || fail "/tokens (b, L), L the longest row; /scores (b,)"
# a 2-D memory (s, E) is batch 1 and every output drops the batch axis: /tokens (L,), /scores a scalar
# (it kept its (1,) axis), with the numbers of the (1, s, E) run
tensor-gen --shape 7,64 --seed 9 -o mem2.h5
tensor-gen --shape 1,7,64 --seed 9 -o mem3.h5
check "generate from a 2-D memory" decode --generate --max-len 6 --beam 2 --memory mem2.h5 --weights "$TESTDATA/reverse_model.h5" -o g2d.h5
check "generate from its 3-D twin" decode --generate --max-len 6 --beam 2 --memory mem3.h5 --weights "$TESTDATA/reverse_model.h5" -o g3d.h5
h5ls g2d.h5 | grep -q "^scores *Dataset {SCALAR}" && [ "$(shape g2d.h5 tokens)" = "$(shape g3d.h5 tokens | sed 's/^1, //')" ] &&
  pass || fail "2-D memory: $(h5ls g2d.h5 | tr '\n' ' ')"
cmp -s <(values g2d.h5 scores | grep -o '(0[,)].*') <(values g3d.h5 scores | grep -o '(0[,)].*') && pass || fail "2-D memory: /scores differs from the (1, s, E) run: $(values g2d.h5 scores) vs $(values g3d.h5 scores)"
check "one sequence per chunk" decode --generate --max-len 8 --beam 3 --chunk 1 --memory "$G:/s2s_memory" \
  --memory-lengths "$G:/s2s_src_lengths" $S -o gen3c1.h5
cmp -s <(values gen3c1.h5 tokens) <(values gen3.h5 tokens) && pass || fail "--chunk 1 changes the tokens"
# up to 256 steps of one row read the mapped float32 weights where they are (none laid out); more
# read them in column tiles, laid out as the file is read (neither without SIMD kernels)
check "one row per step" decode --generate --max-len 8 --chunk 1 --memory "$G:/s2s_memory" \
  --memory-lengths "$G:/s2s_src_lengths" $S -o gen1c1.h5 --verbose
grep -q "linear kernels scalar" err.txt || grep -q "read where the file maps them for steps of 1 rows (others in column tiles: 0 laid out now" err.txt &&
  pass || fail "few steps of one row: the weights not read in place: $(grep generate: err.txt)"
cmp -s <(values gen1c1.h5 tokens) <(values gen1.h5 tokens) && pass || fail "--chunk 1, beam 1 changes the tokens"
check "one row per step, many steps" decode --generate --max-len 257 --chunk 1 --memory "$G:/s2s_memory" \
  --memory-lengths "$G:/s2s_src_lengths" $S -o gen1c257.h5 --verbose
grep -q "linear kernels scalar" err.txt || grep -q "column tiles for steps of 1 rows (read so; 0 laid out now" err.txt &&
  pass || fail "257 steps of one row: the weights not read in tiles: $(grep generate: err.txt)"
cmp -s <(h5dump -d /tokens -s 0,0 -c 3,8 gen1c257.h5 | grep '^ *(' | tr -d ' ') <(values gen1.h5 tokens | grep '^ *(' | tr -d ' ') &&
  pass || fail "--max-len 257 changes the first 8 tokens: $(h5dump -d /tokens -s 0,0 -c 3,8 gen1c257.h5 | grep '^ *(')"
encode --tokens "$G:/s2s_src" $S --lengths "$G:/s2s_src_lengths" -o - |
  decode --generate --max-len 8 --memory - --memory-lengths "$G:/s2s_src_lengths" $S -o piped.h5 2>err.txt &&
  pass || fail "encode | decode --generate: $(cat err.txt)"
same piped.h5:tokens "$G:/s2s_generate/beam1/tokens" 0 0
# flags over the file's ids: --pad 7 pads with 7; --eos 5 ends rows at their first 5
check "--pad" decode --generate --max-len 8 --pad 7 --memory "$G:/s2s_memory" --memory-lengths "$G:/s2s_src_lengths" $S -o pad7.h5
values pad7.h5 tokens | grep -q '(0,0): 2, 7, 7, 7, 7, 7, 7, 7' && pass || fail "--pad 7: $(values pad7.h5 tokens | head -4)"
check "--eos" decode --generate --max-len 8 --eos 5 --memory "$G:/s2s_memory" --memory-lengths "$G:/s2s_src_lengths" $S -o eos5.h5
values eos5.h5 tokens | grep -q '(1,0): 5, 0,' && values eos5.h5 tokens | grep -q '(2,0): 5, 0,' && pass ||
  fail "--eos 5: $(values eos5.h5 tokens | head -5)"

# --- bad input ---
cp "$G" in.h5
W="--weights in.h5:/w/post_relu_1"
M="--memory in.h5:/mem"
tensor-gen --shape 2,7,12 -o mem12.h5
tensor-gen --shape 3,7,16 -o mem3.h5
tensor-gen --shape 2,5 --fill arange --dtype i64 -o ids.h5 # 0..9: ids 0-9 of the vocabulary 0..10
tensor-gen --shape 2,5 --from-text <(echo 3 4 5 6 7 8 9 11 3 3) --dtype i64 -o ids_bad.h5
expect_fail 1 "mem12.h5:/data: memory feature size 12 differs from the decoder's 16 (the key size of in.h5:/w/post_relu_1/layers/0/multihead_attn)" \
  decode -i in.h5:/tgt --memory mem12.h5 $W -o o.h5
expect_fail 1 "mem3.h5:/data: batch 3 differs from the target's batch 2" decode -i in.h5:/tgt --memory mem3.h5 $W -o o.h5
expect_fail 1 "ids_bad.h5:/data: token id 11 at index [1, 2] is outside the vocabulary 0..10 of in.h5:/s2s/tgt_embed/weight" \
  decode --tokens ids_bad.h5 $M --weights in.h5:/s2s -o o.h5
check "ids inside the vocabulary" decode --tokens ids.h5 $M --weights in.h5:/s2s -o ok.h5
expect_fail 1 "in.h5: missing group /bad/no_cross/layers/1/multihead_attn (a decoder layer's cross-attention; layer 0 has one)" \
  decode -i in.h5:/tgt $M --weights in.h5:/bad/no_cross -o o.h5
cp "$G" badff.h5 && tensor-gen --shape 40,16 -o badff.h5:/w/pre_gelu_3_norm/layers/2/linear1/weight
expect_fail 1 "badff.h5:/w/pre_gelu_3_norm/layers/2/linear1/bias: expected shape (40,) (E = 16, F = 40), got (32,)" \
  decode -i in.h5:/tgt $M --weights badff.h5:/w/pre_gelu_3_norm -o o.h5
cp "$G" badff2.h5 && tensor-gen --shape 40,16 -o badff2.h5:/w/pre_gelu_3_norm/layers/2/linear1/weight &&
  tensor-gen --shape 40 -o badff2.h5:/w/pre_gelu_3_norm/layers/2/linear1/bias && tensor-gen --shape 16,40 -o badff2.h5:/w/pre_gelu_3_norm/layers/2/linear2/weight
expect_fail 1 "badff2.h5:/w/pre_gelu_3_norm/layers/2/linear1/weight: F = 40; layer 0 has F = 32" \
  decode -i in.h5:/tgt $M --weights badff2.h5:/w/pre_gelu_3_norm -o o.h5
expect_fail 1 "in.h5: missing dataset /w/post_relu_1/generator/weight (the generator (V, E), needed for --generate)" \
  decode --generate --max-len 4 $M $W -o o.h5
expect_fail 1 "in.h5: missing dataset /bad/no_tgt_embed/tgt_embed/weight (token embeddings (V, E)" \
  decode --generate --max-len 4 --memory in.h5:/s2s_memory --weights in.h5:/bad/no_tgt_embed -o o.h5
expect_fail 1 "in.h5:/bad/no_ids: no bos_id attribute on the group or an ancestor; give --bos" \
  decode --generate --max-len 4 --memory in.h5:/s2s_memory --weights in.h5:/bad/no_ids -o o.h5
expect_fail 1 "--bos 11 is outside the vocabulary 0..10 of in.h5:/s2s/generator/weight" \
  decode --generate --max-len 4 --bos 11 --memory in.h5:/s2s_memory --weights in.h5:/s2s -o o.h5
expect_fail 1 "--beam 12 is larger than the vocabulary V = 11 of in.h5:/s2s/generator/weight" \
  decode --generate --max-len 4 --beam 12 --memory in.h5:/s2s_memory --weights in.h5:/s2s -o o.h5
expect_fail 2 "--max-len: must be positive, got 0" decode --generate --max-len 0 --memory in.h5:/s2s_memory --weights in.h5:/s2s -o o.h5
expect_fail 2 "--generate needs --max-len" decode --generate --memory in.h5:/s2s_memory --weights in.h5:/s2s -o o.h5
expect_fail 2 "--tokens does not apply to --generate" decode --generate --max-len 3 --tokens ids.h5 $M --weights in.h5:/s2s -o o.h5
expect_fail 2 "--beam does not apply to teacher-forced decoding" decode -i in.h5:/tgt $M $W --beam 2 -o o.h5
expect_fail 2 "give exactly one of -i, --tokens and --generate" decode $M $W -o o.h5
expect_fail 2 "--kv-cache does not apply to teacher-forced decoding" decode -i in.h5:/tgt $M $W --kv-cache f16 -o o.h5
expect_fail 2 "--kv-cache does not apply to --no-cache" decode --generate --max-len 3 --memory in.h5:/s2s_memory \
  --weights in.h5:/s2s --no-cache --kv-cache f16 -o o.h5
expect_fail 2 "--kv-cache: bf16 not in {auto,f32,f16}" decode --generate --max-len 3 --memory in.h5:/s2s_memory \
  --weights in.h5:/s2s --kv-cache bf16 -o o.h5
expect_fail 2 "--memory is required" decode -i in.h5:/tgt $W -o o.h5
expect_fail 2 "output 'in.h5' names the input" decode -i in.h5:/tgt $M $W -o in.h5
tensor-gen --shape 2,9 --fill zeros --dtype i64 -o kpm9.h5
expect_fail 1 "kpm9.h5:/data: key padding mask must be (b, s) = (2, 7), got (2, 9)" \
  decode -i in.h5:/tgt $M $W --memory-key-padding-mask kpm9.h5 -o o.h5
expect_fail 1 "kpm9.h5:/data: key padding mask must be (b, t) = (2, 5), got (2, 9)" \
  decode -i in.h5:/tgt $M $W --key-padding-mask kpm9.h5 -o o.h5
cmp -s in.h5 "$G" && pass || fail "inputs unchanged"


# --- pad tokens in a teacher-forced target (issue 16): padding by default, as tgt == pad ---
RM="$TESTDATA/reverse_model.h5"
echo 4 6 8 | tensor-gen --from-text - --shape 1,3 --dtype i64 -o srcp.h5
encode --tokens srcp.h5 --weights "$RM" -o memp.h5
echo 1 12 0 0 | tensor-gen --from-text - --shape 1,4 --dtype i64 -o tgtp.h5
echo 0 0 1 1 | tensor-gen --from-text - --shape 1,4 --dtype i64 -o tkpm.h5
check "target pad ids" decode --tokens tgtp.h5 --memory memp.h5 --weights "$RM" -o dpad_auto.h5
check "target explicit mask" decode --tokens tgtp.h5 --memory memp.h5 --weights "$RM" --key-padding-mask tkpm.h5 -o dpad_kpm.h5
check "target --no-pad-mask" decode --tokens tgtp.h5 --memory memp.h5 --weights "$RM" --no-pad-mask -o dpad_off.h5
cmp -s <(values dpad_auto.h5 logits) <(values dpad_kpm.h5 logits) && pass || fail "target pad ids: not the explicit mask's logits"
! cmp -s <(values dpad_auto.h5 logits) <(values dpad_off.h5 logits) && pass || fail "--no-pad-mask changes nothing"
expect_fail 2 "--no-pad-mask" decode --generate --max-len 3 --no-pad-mask --memory memp.h5 --weights "$RM" -o o.h5

# --- decoder-only models (issue 18, item 2): no cross-attention, no --memory; prompts and sampling ---
# golden: a LLaMA-like stack in our layout, teacher-forced and generated by a Python loop that
# recomputes the prefix (greedy, and sampled with the same sampler and random stream)
# lm_like_python NAME MODEL: the golden model w/MODEL against /NAME_expect and /NAME_generate
lm_like_python() {
  local n=$1 cache l
  local W=(--weights "$G:/w/$2") P=(--prompt "$G:/$n/prompt" --prompt-lengths "$G:/$n/prompt_lengths") # lengths 4, 2, 0 (from bos)
  check "$n, teacher-forced" decode --tokens "$G:/$n/ids" --lengths "$G:/$n/ids_lengths" "${W[@]}" --emit-weights -o "${n}_tf.h5"
  close "${n}_tf.h5:logits" "$G:/${n}_expect/logits"
  close "${n}_tf.h5:output" "$G:/${n}_expect/output"
  for l in 0 1; do close "${n}_tf.h5:weights/layer$l/self" "$G:/${n}_expect/weights/layer$l"; done
  h5ls "${n}_tf.h5/weights/layer0" | grep -q cross && fail "$n: a decoder-only model wrote cross weights" || pass
  for cache in "" --no-cache; do
    check "$n greedy $cache" decode --generate --max-len 8 "${P[@]}" "${W[@]}" $cache -o "${n}_g$cache.h5"
    same "${n}_g$cache.h5:tokens" "$G:/${n}_generate/greedy/tokens" 0 0
    same "${n}_g$cache.h5:scores" "$G:/${n}_generate/greedy/scores" 1e-5 1e-5
    check "$n sampled $cache" decode --generate --max-len 8 "${P[@]}" "${W[@]}" "${SAMPLE[@]}" $cache -o "${n}_s$cache.h5"
    same "${n}_s$cache.h5:tokens" "$G:/${n}_generate/sample/tokens" 0 0
    same "${n}_s$cache.h5:scores" "$G:/${n}_generate/sample/scores" 1e-5 1e-5
  done
}
SAMPLE=(--temperature 0.7 --top-k 6 --top-p 0.9 --seed 5)
lm_like_python do decoder_only
# the parallel residual (whose numbers encoder.h5's pos_parallel_alibi checks) in generation: the
# cache's steps give the tokens and scores of recomputing the prefix
cp "$G" par.h5 && h5attr par.h5 /w/decoder_only parallel_residual int 1
for cache in "" --no-cache; do
  check "parallel residual: generate $cache" decode --generate --max-len 8 --prompt "$G:/do/prompt" \
    --prompt-lengths "$G:/do/prompt_lengths" --weights par.h5:/w/decoder_only $cache -o "pargen$cache.h5"
done
cmp -s <(values pargen.h5 tokens) <(values pargen--no-cache.h5 tokens) && pass || fail "parallel residual: cached tokens differ"
same pargen.h5:scores pargen--no-cache.h5:scores 1e-5 1e-5
! cmp -s <(values pargen.h5 tokens) <(values do_g.h5 tokens) && pass || fail "parallel_residual = 1 changed nothing"
h5attr par.h5 /w/pre_gelu_3_norm parallel_residual int 1
expect_fail 1 "par.h5:/w/pre_gelu_3_norm attribute parallel_residual = 1 is for stacks of self-attention and feed-forward" \
  decode -i "$G:/tgt" --memory "$G:/mem" --weights par.h5:/w/pre_gelu_3_norm -o o.h5
h5attr par.h5 /w/post_relu_1 parallel_residual int 1
expect_fail 1 "parallel_residual = 1 needs pre-norm layers" decode -i "$G:/tgt" --memory "$G:/mem" --weights par.h5:/w/post_relu_1 -o o.h5
D="--weights $G:/w/decoder_only"
PR=(--prompt "$G:/do/prompt" --prompt-lengths "$G:/do/prompt_lengths")
! cmp -s <(values do_g.h5 tokens) <(values do_s.h5 tokens) && pass || fail "sampling gave the greedy tokens"
# prompts of one length: all but the last position go through the cache at once (a prefill), with
# the same tokens and scores as recomputing, greedy and with beams
for K in 1 3; do
  for cache in "" --no-cache; do
    check "prefill, beam $K $cache" decode --generate --max-len 6 --beam $K --prompt "$G:/do/prompt" $D $cache -o "pre$K$cache.h5"
  done
  cmp -s <(values "pre$K.h5" tokens) <(values "pre$K--no-cache.h5" tokens) && pass || fail "prefill, beam $K: tokens differ"
  same "pre$K.h5:scores" "pre$K--no-cache.h5:scores" 1e-5 1e-5
done
check "sampled, --chunk 1" decode --generate --max-len 8 "${PR[@]}" $D "${SAMPLE[@]}" --chunk 1 -o do_s1.h5
cmp -s <(values do_s.h5 tokens) <(values do_s1.h5 tokens) && pass || fail "--chunk 1 changes the sampled tokens"
check "another seed" decode --generate --max-len 8 "${PR[@]}" $D --temperature 1.5 --seed 6 -o do_s6.h5
! cmp -s <(values do_s.h5 tokens) <(values do_s6.h5 tokens) && pass || fail "another seed and temperature, the same tokens"
check "--temperature 0 is greedy" decode --generate --max-len 8 "${PR[@]}" $D --temperature 0 -o do_t0.h5
cmp -s <(values do_g.h5 tokens) <(values do_t0.h5 tokens) && pass || fail "--temperature 0 is not greedy"
check "no prompt: one sequence from bos" decode --generate --max-len 8 $D -o do_bos.h5
[ "$(values do_bos.h5 tokens | grep '(0)' | tr -d ' ')" = "$(values do_g.h5 tokens | grep '(2,0)' | sed 's/(2,0)/(0)/' | tr -d ' ')" ] &&
  pass || fail "no prompt: not the bos row's tokens: $(values do_bos.h5 tokens | grep '(')"
echo 1 4 5 11 | tensor-gen --from-text - --shape 1,4 --dtype i64 -o p11.h5
expect_fail 1 "p11.h5:/data: token id 11 at (0, 3) is outside the vocabulary 0..10" decode --generate --max-len 3 --prompt p11.h5 $D -o o.h5
echo 5 | tensor-gen --from-text - --shape 1 --dtype i64 -o plen5.h5
expect_fail 1 "plen5.h5:/data: length 5 at index 0 is outside 0..4" decode --generate --max-len 3 --prompt p11.h5 --prompt-lengths plen5.h5 $D -o o.h5
expect_fail 2 "--top-p" decode --generate --max-len 3 $D --temperature 1 --top-p 1.5 -o o.h5
expect_fail 2 "--top-p" decode --generate --max-len 3 $D --temperature 1 --top-p 0 -o o.h5
expect_fail 2 "--temperature samples one token per row: it does not combine with --beam" decode --generate --max-len 3 $D --temperature 1 --beam 2 -o o.h5
expect_fail 2 "--top-k does not apply to greedy decoding" decode --generate --max-len 3 $D --top-k 3 -o o.h5
expect_fail 2 "--memory does not apply to a decoder-only model" decode --generate --max-len 3 $D --memory memp.h5 -o o.h5
expect_fail 2 "--memory is required" decode --generate --max-len 3 --weights "$RM" -o o.h5
expect_fail 2 "--prompt does not apply to teacher-forced decoding" decode --tokens "$G:/do/ids" $D --prompt p11.h5 -o o.h5

# --- models by their own names (issue 18, item 3): LlamaForCausalLM's layout, exported in one loop
# with the config's scalars as attributes; "qwen2" has q/k/v biases, tied embeddings, a window ---
lm_like_python llama llama
lm_like_python qwen2 qwen2
lm_like_python gpt2 gpt2 # Conv1D weights, learned positions, tied lm_head, a mask buffer ignored
cp "$G" lm.h5
h5attr lm.h5 /w/llama hidden_act string relu
expect_fail 1 "lm.h5:/w/llama attribute hidden_act = 'relu': expected silu (SwiGLU) or gelu (GEGLU)" decode --tokens "$G:/llama/ids" --weights lm.h5:/w/llama -o o.h5
h5attr lm.h5 /w/llama hidden_act string silu && h5attr lm.h5 /w/llama hidden_size int 32
expect_fail 1 "lm.h5:/w/llama attribute hidden_size = 32 contradicts the datasets: lm.h5:/w/llama/model/embed_tokens/weight gives 16" \
  decode --tokens "$G:/llama/ids" --weights lm.h5:/w/llama -o o.h5
h5attr lm.h5 /w/llama hidden_size int 16 && h5attr lm.h5 /w/llama tie_word_embeddings bool 0 && h5attr lm.h5 /w/qwen2 tie_word_embeddings bool 0
expect_fail 1 "missing dataset /w/qwen2/lm_head/weight (lm.h5:/w/qwen2 attribute tie_word_embeddings = False" \
  decode --tokens "$G:/qwen2/ids" --weights lm.h5:/w/qwen2 -o o.h5
tensor-gen --shape 16 -o lm.h5:/w/llama/model/layers/1/self_attn/q_proj/bias
expect_fail 1 "lm.h5:/w/llama/model/layers/1/self_attn: q_proj, k_proj and v_proj have biases all three or none; found 1" \
  decode --tokens "$G:/llama/ids" --weights lm.h5:/w/llama -o o.h5
cp "$G" lm2.h5 && h5attr lm2.h5 /w/llama num_key_value_heads int 3
expect_fail 1 "lm2.h5:/w/llama attribute num_key_value_heads = 3 does not divide num_attention_heads = 4" \
  decode --tokens "$G:/llama/ids" --weights lm2.h5:/w/llama -o o.h5
h5attr lm2.h5 /w/gpt2 n_positions int 64
expect_fail 1 "lm2.h5:/w/gpt2 attribute n_positions = 64 contradicts the datasets: lm2.h5:/w/gpt2/transformer/wpe/weight gives 32" \
  decode --tokens "$G:/gpt2/ids" --weights lm2.h5:/w/gpt2 -o o.h5
echo $(seq 1 33 | sed 's/.*/1/') | tensor-gen --from-text - --shape 1,33 --dtype i64 -o ids33.h5
expect_fail 1 "outside the learned table of 32 rows" decode --tokens ids33.h5 --weights "$G:/w/gpt2" -o o.h5

# --- a trained LLaMA-layout model (issue 18, item 5): tests/golden/train_reverse_llama.py taught it
# to reverse digit strings and exported it as a user would; held-out prompts of unequal length, at
# least 99% exact continuations (PyTorch's own greedy decoding got all 200) ---
# rows FILE DATASET: one line per row, trailing pad (0) ids dropped
rows() { h5dump -d "/$2" -y -w 100000 "$1" | sed -n '/DATA {/,/^ *}/p' | sed '1d;$d' | sed 's/[ ,]*$//; s/\(, 0\)*$//' | tr -d ' '; }
LR="$TESTDATA/llama_reverse.h5"
for cache in "" --no-cache; do
  check "trained model $cache" decode --generate --max-len 9 --prompt "$LR:/heldout/prompt" \
    --prompt-lengths "$LR:/heldout/prompt_lengths" --weights "$LR:/w" $cache -o "rev$cache.h5"
  right=$(paste -d'|' <(rows "rev$cache.h5" tokens) <(rows "$LR" heldout/expect) | awk -F'|' '$1 == $2 {n++} END {print n + 0}')
  [ "$right" -ge 198 ] && pass || fail "trained model $cache: $right of 200 held-out prompts reversed exactly (want >= 198)"
done
[ "$(rows "$LR" heldout/expect | wc -l)" -eq 200 ] && pass || fail "the held-out set is not 200 rows"
# --lookup and --draft (issue 56): the same tokens as plain greedy decoding; a draft model of another
# form (int8) kept or refused token by token; the passes counted
LP="--generate --max-len 9 --prompt $LR:/heldout/prompt --prompt-lengths $LR:/heldout/prompt_lengths --weights $LR:/w"
check "quantized draft model" quantize --weights "$LR:/w" --scheme int8 -o draft8.h5
for spec in "--lookup 3" "--lookup 14" "--draft $LR:/w" "--draft draft8.h5 --draft-tokens 6"; do
  # shellcheck disable=SC2086
  check "$spec" decode $LP $spec --verbose -o spec.h5 2>err.txt
  cmp -s <(values spec.h5 tokens) <(values rev.h5 tokens) && pass || fail "$spec: tokens differ from plain greedy decoding"
  grep -q "tokens in [0-9]* passes" err.txt && pass || fail "$spec: no passes counted: $(cat err.txt)"
done
# shellcheck disable=SC2086
passes=$(decode $LP --draft "$LR:/w" --verbose -o spec.h5 2>&1 | sed -n 's/.* tokens in \([0-9]*\) passes.*/\1/p')
tokens=$(rows rev.h5 tokens | tr ',' '\n' | grep -c .)
[ "$passes" -lt $((tokens / 3)) ] && pass || fail "the model drafting for itself: $passes passes for $tokens tokens"
# shellcheck disable=SC2086
check "sampled with --lookup" decode $LP --lookup 4 --temperature 1.5 --seed 3 -o samp.h5
[ "$(shape samp.h5 tokens)" = "200, 9" ] && pass || fail "sampled with --lookup: $(shape samp.h5 tokens)"
expect_fail 2 "--lookup checks drafted tokens for one row: not with --beam" decode $LP --lookup 2 --beam 2 -o o.h5
expect_fail 2 "give one of --lookup and --draft" decode $LP --lookup 2 --draft "$LR:/w" -o o.h5
expect_fail 2 "--draft-tokens does not apply to generation without --draft" decode $LP --draft-tokens 3 -o o.h5
expect_fail 2 "--no-cache does not apply to --lookup" decode $LP --lookup 2 --no-cache -o o.h5
expect_fail 2 "--lookup: " decode $LP --lookup 15 -o o.h5
expect_fail 2 "--lookup does not apply to teacher-forced decoding" decode --tokens "$LR:/example/ids" --weights "$LR:/w" \
  --lookup 2 -o o.h5
expect_fail 1 "--draft $G:/w/llama: vocabulary 11 differs from the model's 14" decode $LP --draft "$G:/w/llama" -o o.h5
expect_fail 1 "a draft model is decoder-only" decode $LP --draft "$G:/s2s" -o o.h5
check "trained model's attention" decode --tokens "$LR:/example/ids" --weights "$LR:/w" --emit-weights -o rev_tf.h5
[ "$(shape rev_tf.h5 weights/layer1/self)" = "1, 4, 13, 13" ] && pass || fail "weights shape $(shape rev_tf.h5 weights/layer1/self)"

finish
