#!/usr/bin/env bash
# Looking inside a run (CONTRACT.md section 6.3): encode's and decode's --emit-activations against
# testdata/probe.h5 (tests/golden/make_probe_goldens.py: a float64 forward that records every named
# activation, tied to PyTorch's modules' outputs and weights), the interventions (--ablate-heads,
# --ablate-cross-heads, --ablate-with mean:, --patch with positions and heads, --steer) against the
# same forward with the same change, the logit lens, and the bad input the contract lists.
source "$(dirname "$0")/lib.sh"
P="$TESTDATA/probe.h5" E="$TESTDATA/encoder.h5" D="$TESTDATA/decoder.h5"
ALL=resid_pre,q,k,v,scores,pattern,z,attn_out,resid_mid,mlp_hidden,mlp_out,resid_post,final
CROSS=cross_q,cross_k,cross_v,cross_scores,cross_pattern,cross_z,cross_attn_out,cross_resid_mid

# Tolerance (close): |ours - ref| <= 1e-5 * max|ref| per dataset, float32 against float64, as the
# stacks' outputs.
compare_all() { # OURS GROUP: every activation the golden group holds, and nothing it lacks
  local ours=$1 group=$2 l name
  for l in $(members "$P" "$group/activations"); do
    if [ "$l" = final ]; then close "$ours:activations/final" "$P:/$group/activations/final"; continue; fi
    for name in $(members "$P" "$group/activations/$l"); do
      close "$ours:activations/$l/$name" "$P:/$group/activations/$l/$name"
    done
    [ "$(members "$ours" "activations/$l" | sort)" = "$(members "$P" "$group/activations/$l" | sort)" ] && pass ||
      fail "$ours: $l holds $(members "$ours" "activations/$l" | tr '\n' ' ')"
  done
}

# --- every activation: nn.TransformerEncoder post-norm and pre-norm with padding, a decoder with
# cross-attention, LLaMA (RoPE, grouped KV heads, SwiGLU), BERT
for m in post_relu_1 pre_relu_2; do
  check "encode $m" encode -i "$E:/x" --weights "$E:/w/$m" --lengths "$E:/lengths" --emit-activations "$ALL" -o "$m.h5"
  compare_all "$m.h5" "enc_$m"
done
# the activations change nothing else: the output is the plain run's to the last bit, or, with
# scores or pattern (the kernel's row blocks), that of --emit-weights (the same path)
check "plain" encode -i "$E:/x" --weights "$E:/w/pre_relu_2" --lengths "$E:/lengths" -o plain.h5
check "emit-weights" encode -i "$E:/x" --weights "$E:/w/pre_relu_2" --lengths "$E:/lengths" --emit-weights -o ew.h5
same pre_relu_2.h5:output ew.h5:output 0 0
check "no kernel names" encode -i "$E:/x" --weights "$E:/w/pre_relu_2" --lengths "$E:/lengths" \
  --emit-activations resid_pre,q,k,v,z,attn_out,resid_mid,mlp_hidden,mlp_out,resid_post,final -o nk.h5
same nk.h5:output plain.h5:output 0 0
same nk.h5:activations/layer1/z pre_relu_2.h5:activations/layer1/z 0 1e-6 max
# --emit-layers and names given one flag each
check "emit-layers" encode -i "$E:/x" --weights "$E:/w/pre_relu_2" --lengths "$E:/lengths" --emit-activations z \
  --emit-activations mlp_out --emit-layers 1 -o some.h5
[ "$(members some.h5 activations)" = layer1 ] && [ "$(members some.h5 activations/layer1 | tr '\n' ' ')" = "mlp_out z " ] &&
  pass || fail "--emit-layers 1: $(h5ls -r some.h5)"
close some.h5:activations/layer1/z "$P:/enc_pre_relu_2/activations/layer1/z"
# batch chunks of one item write the same bytes
check "chunk 1" encode -i "$E:/x" --weights "$E:/w/pre_relu_2" --lengths "$E:/lengths" --emit-activations "$ALL" \
  --chunk 1 -o c1.h5
same c1.h5:activations/layer1/scores pre_relu_2.h5:activations/layer1/scores 0 0
same c1.h5:activations/layer0/mlp_hidden pre_relu_2.h5:activations/layer0/mlp_hidden 0 0

DEC=(-i "$D:/tgt" --memory "$D:/mem" --weights "$D:/w/pre_gelu_3_norm" --lengths "$D:/tgt_lengths"
  --memory-lengths "$D:/mem_lengths")
check "decode cross" decode "${DEC[@]}" --emit-activations "$ALL,$CROSS" -o dec.h5
compare_all dec.h5 dec
check "decode ablate" decode "${DEC[@]}" --ablate-heads 0.1 --ablate-cross-heads 1.0,2.3 -o dec_ab.h5
close dec_ab.h5:output "$P:/dec_iv/ablate/output"

LL=(--tokens "$D:/llama/ids" --lengths "$D:/llama/ids_lengths" --weights "$D:/w/llama")
check "llama" decode "${LL[@]}" --emit-activations "$ALL" --lens 3 -o llama.h5
compare_all llama.h5 llama
same llama.h5:lens/ids "$P:/llama/lens/ids" 0 0
close llama.h5:lens/logprobs "$P:/llama/lens/logprobs"
# a patch of v without a batch axis (broadcast), on KV head 1
check "llama patch v" decode "${LL[@]}" --patch "v@1=$P:/llama_v_src" --patch-heads 1 --patch-positions 0-4 -o llama_pv.h5
close llama_pv.h5:output "$P:/llama_iv/patch_v/output"

check "gpt2" decode --tokens "$D:/gpt2/ids" --lengths "$D:/gpt2/ids_lengths" --weights "$D:/w/gpt2" \
  --emit-activations "$ALL" --lens 2 -o gpt2.h5
compare_all gpt2.h5 gpt2
same gpt2.h5:lens/ids "$P:/gpt2/lens/ids" 0 0
close gpt2.h5:lens/logprobs "$P:/gpt2/lens/logprobs"

# int8 weights keep their products (the feed-forward's rows then in one pass: the same bits), and
# linear attention forms write their implied weights as pattern, as --emit-weights does
check "quantize" quantize --weights "$D:/w/llama" -o q8.h5
LQ=(--tokens "$D:/llama/ids" --lengths "$D:/llama/ids_lengths" --weights q8.h5)
check "int8 plain" decode "${LQ[@]}" -o q8_plain.h5
check "int8 emit" decode "${LQ[@]}" --emit-activations mlp_hidden,resid_post,z,final -o q8_emit.h5
same q8_emit.h5:output q8_plain.h5:output 0 0
same q8_emit.h5:activations/final q8_plain.h5:output 0 0
LIN="$TESTDATA/linear_mha.h5"
check "linear forms" encode -i "$LIN:/x" --weights "$LIN:/enc" --lengths "$LIN:/lengths" --emit-activations pattern,z --emit-weights -o lin.h5
for l in 0 1; do same "lin.h5:activations/layer$l/pattern" "lin.h5:weights/layer$l" 0 0; done
expect_fail 1 "scores has no meaning for layer 0" encode -i "$LIN:/x" --weights "$LIN:/enc" --emit-activations scores -o bad.h5

check "bert" encode --tokens "$E:/bert/ids" --weights "$E:/w/bert" --token-types "$E:/bert/types" \
  --attention-mask "$E:/bert/attention_mask" --emit-activations "$ALL" -o bert.h5
compare_all bert.h5 bert

# --- interventions on pre_relu_2, from a clean run of another input
ENC=(-i "$E:/x" --weights "$E:/w/pre_relu_2" --lengths "$E:/lengths")
check "clean run" encode -i "$P:/enc_clean_x" --weights "$E:/w/pre_relu_2" --lengths "$E:/lengths" \
  --emit-activations z,resid_mid,pattern,k -o clean.h5
iv() { # NAME ARGS...: the run with ARGS against enc_iv/NAME (output, resid_post of layer 1, z of layer 0)
  local name=$1
  shift
  check "$name" encode "${ENC[@]}" "$@" --emit-activations z,resid_post -o "iv_$name.h5"
  close "iv_$name.h5:output" "$P:/enc_iv/$name/output"
  close "iv_$name.h5:activations/layer1/resid_post" "$P:/enc_iv/$name/resid_post1"
  close "iv_$name.h5:activations/layer0/z" "$P:/enc_iv/$name/z0" # written as changed
}
iv ablate --ablate-heads 0.1,1.3
iv ablate_mean --ablate-heads 0.2 --ablate-with mean:clean.h5
iv patch_resid_mid --patch resid_mid@1=clean.h5 --patch-positions 1,2
iv patch_z_head --patch "z@0=clean.h5:activations/layer0/z" --patch-heads 2
iv patch_pattern --patch pattern@1=clean.h5 --patch-heads 0 --patch-positions 0,3
iv patch_k --patch k@0=clean.h5 --patch-positions 2
iv steer --steer "resid_post@0=$P:/enc_steer_dir" --steer-scale 2.5
# a mean already averaged (H, dh) is taken as it is; an ablation of every head of a layer with 0
# equals a patch of z with zeros
check "mean" encode "${ENC[@]}" --ablate-heads 0.2 --ablate-with "mean:iv_ablate.h5:activations/layer0/z" -o m1.h5
tensor-gen --shape 2,4,7,4 --fill zeros -o zeros.h5
check "ablate all" encode "${ENC[@]}" --ablate-heads 1.0,1.1,1.2,1.3 -o ab_all.h5
check "patch zeros" encode "${ENC[@]}" --patch "z@1=zeros.h5:data" -o patch0.h5
same ab_all.h5:output patch0.h5:output 0 0

# --- generation: interventions at every step (cached: the cache holds the changed keys and values;
# and recomputed), against greedy decoding by the reference with the same change
GEN=(--generate --max-len 6 --weights "$D:/w/llama" --prompt "$D:/llama/prompt" --prompt-lengths "$D:/llama/prompt_lengths")
for cache in "" --no-cache; do
  check "generate steer $cache" decode "${GEN[@]}" $cache --steer "resid_post@0=$P:/llama_dir" --steer-scale 3 -o gs.h5
  same gs.h5:tokens "$P:/llama_gen/steer/tokens" 0 0
  check "generate ablate $cache" decode "${GEN[@]}" $cache --ablate-heads 0.2,1.0,1.1 -o ga.h5
  same ga.h5:tokens "$P:/llama_gen/ablate/tokens" 0 0
  check "generate patch k $cache" decode "${GEN[@]}" $cache --patch "k@1=$P:/llama_k_src" --patch-positions 1,2 -o gk.h5
  same gk.h5:tokens "$P:/llama_gen/patch_k/tokens" 0 0
done
# beam search: each beam's rows take their item's sources; the cache and the recomputing path agree
tensor-gen --shape 3,16 --seed 9 -o dirs.h5 # (n, E): a direction per position, positions 0-2
check "beam steer" decode "${GEN[@]}" --beam 2 --steer "resid_post@0=dirs.h5:data" --steer-scale 2 -o gb.h5
check "beam steer no cache" decode "${GEN[@]}" --beam 2 --steer "resid_post@0=dirs.h5:data" --steer-scale 2 --no-cache -o gbn.h5
same gb.h5:tokens gbn.h5:tokens 0 0
tensor-gen --shape 3,9,16 --seed 10 -o dirs_b.h5 # (b, n, E): each item its own
check "beam patch per item" decode "${GEN[@]}" --beam 2 --patch "resid_mid@1=dirs_b.h5:data" --patch-positions 1 -o gp.h5
check "beam patch per item no cache" decode "${GEN[@]}" --beam 2 --patch "resid_mid@1=dirs_b.h5:data" --patch-positions 1 \
  --no-cache -o gpn.h5
same gp.h5:tokens gpn.h5:tokens 0 0
# a generation's activations and lens are those of a teacher-forced run over its final sequences
# (prompt, or bos, and the generated tokens through the end token)
check "generate emit" decode "${GEN[@]}" --emit-activations resid_post,pattern,k,mlp_hidden,final --lens 2 -o ge.h5
tensor-gen --from-text <(echo "2 2 2 2 10 0  2 7 7 7 7 7  10 0 0 0 0 0") --shape 3,6 --dtype i64 -o gen_tokens.h5
same ge.h5:tokens gen_tokens.h5:data 0 0 # the sequences below are these after the prompts (4, 2 and 0 ids: bos)
tensor-gen --from-text <(echo "1 4 5 6 2 2 2 2 10  1 7 2 7 7 7 7 7 0  1 10 0 0 0 0 0 0 0") --shape 3,9 --dtype i64 -o seq.h5:ids
tensor-gen --from-text <(echo "9 8 2") --shape 3 --dtype i64 -o seq.h5:lengths
check "teacher-forced final sequences" decode --tokens seq.h5:ids --lengths seq.h5:lengths --weights "$D:/w/llama" \
  --emit-activations resid_post,pattern,k,mlp_hidden,final --lens 2 -o gt.h5
for d in layer0/resid_post layer1/pattern layer1/k layer0/mlp_hidden final; do same "ge.h5:activations/$d" "gt.h5:activations/$d" 0 0; done
same ge.h5:lens/ids gt.h5:lens/ids 0 0
same ge.h5:lens/logprobs gt.h5:lens/logprobs 0 0
expect_fail 2 "--emit-activations and --lens write to -o FILE" decode "${GEN[@]}" --emit-activations z \
  --text-out out.txt --tokenizer "$TESTDATA/tokenizers/reverse.json"

# --- attention rollout and flow (attn-rollout) against NumPy and networkx (make_probe_goldens.py),
# over the weights of a run (--emit-activations pattern here; /weights of --emit-weights alike)
for c in "enc_pre_relu_2 mean 0.5" "llama max 0.3" "llama min 0.0"; do
  set -- $c
  check "rollout $c" attn-rollout "$P:$1/activations" --heads "$2" --residual "$3" -o "r_$1_$2.h5"
  close "r_$1_$2.h5:rollout" "$P:/rollout/$1/$2_$3"
done
for r in enc_pre_relu_2 llama; do
  check "flow $r" attn-rollout "$P:$r/activations" --method flow -o "f_$r.h5"
  close "f_$r.h5:flow" "$P:/flow/$r/mean_0.5"
done
check "flow rows" attn-rollout "$P:llama/activations" --method flow --rows 2,4 -o f_rows.h5
check "rollout of --emit-weights" attn-rollout ew.h5 -o r_ew.h5
close r_ew.h5:rollout "$P:/rollout/enc_pre_relu_2/mean_0.5"
# an unbatched run (2-D input): activations, patches and rollout without the batch axis
check "unbatched" encode -i "$E:/x2d" --weights "$E:/w/pre_relu_2" --emit-activations z,resid_post,pattern -o u.h5
[ "$(shape u.h5 activations/layer1/z)" = "4, 7, 4" ] && [ "$(shape u.h5 activations/layer0/resid_post)" = "7, 16" ] && pass ||
  fail "unbatched shapes: $(h5ls -r u.h5)"
check "unbatched patch" encode -i "$E:/x2d" --weights "$E:/w/pre_relu_2" --patch z@1=u.h5 -o u2.h5
same u2.h5:output u.h5:output 0 1e-6 max # z patched with itself
check "unbatched rollout" attn-rollout u.h5 -o ur.h5
[ "$(shape ur.h5 rollout)" = "7, 7" ] && pass || fail "unbatched rollout: $(shape ur.h5 rollout)"
expect_fail 1 "no per-layer self-attention weights" attn-rollout plain.h5 -o bad.h5
expect_fail 2 "--rows" attn-rollout ew.h5 --rows 1 -o bad.h5
expect_fail 1 "--rows: row 9 is beyond the 7 positions" attn-rollout ew.h5 --method flow --rows 9 -o bad.h5

# --- bad input: exit 2 for the command line, 1 for what the model or a file says; nothing written
expect_fail 2 "unknown activation name 'attn_weights'" encode "${ENC[@]}" --emit-activations attn_weights -o bad.h5
expect_fail 2 "--patch 'z@x=clean.h5': 'x' is not an index" encode "${ENC[@]}" --patch z@x=clean.h5 -o bad.h5
expect_fail 2 "expected NAME@LAYER=FILE[:DATASET]" encode "${ENC[@]}" --patch z0=clean.h5 -o bad.h5
expect_fail 2 "--steer 'z@0=clean.h5': z cannot be steered" encode "${ENC[@]}" --steer z@0=clean.h5 -o bad.h5
expect_fail 2 "expected LAYER.HEAD" encode "${ENC[@]}" --ablate-heads 3 -o bad.h5
expect_fail 2 "--patch-positions and --patch-heads need --patch" encode "${ENC[@]}" --patch-heads 1 -o bad.h5
expect_fail 2 "--ablate-with needs --ablate-heads" encode "${ENC[@]}" --ablate-with mean:clean.h5 -o bad.h5
expect_fail 1 "cross_q has no meaning for" encode "${ENC[@]}" --emit-activations cross_q -o bad.h5
expect_fail 1 "--emit-layers: layer 2 is beyond the model" encode "${ENC[@]}" --emit-activations z --emit-layers 1-2 -o bad.h5
expect_fail 1 "--ablate-heads: head 4 of layer 0 is beyond the model" encode "${ENC[@]}" --ablate-heads 0.4 -o bad.h5
expect_fail 1 "--patch: layer 5 is beyond the model" encode "${ENC[@]}" --patch z@5=clean.h5 -o bad.h5
expect_fail 1 "shape (2, 4, 7, 4) differs from resid_mid of layer 0: expected (2, 7, 16) or (7, 16)" \
  encode "${ENC[@]}" --patch "resid_mid@0=clean.h5:activations/layer0/z" -o bad.h5
expect_fail 1 "is not a direction for resid_post of layer 0: expected (16,), (7, 16) or (2, 7, 16)" \
  encode "${ENC[@]}" --steer "resid_post@0=zeros.h5:data" -o bad.h5
expect_fail 1 "--patch-positions: position 7 is beyond" encode "${ENC[@]}" --patch z@0=clean.h5 --patch-positions 7 -o bad.h5
expect_fail 1 "clean.h5: no dataset" encode "${ENC[@]}" --patch mlp_out@0=clean.h5 -o bad.h5
expect_fail 1 "--lens: " decode -i "$D:/tgt" --memory "$D:/mem" --weights "$D:/w/pre_gelu_3_norm" --lens 2 -o bad.h5
expect_fail 1 "--lens 12: more tokens than the vocabulary's 11" decode "${LL[@]}" --lens 12 -o bad.h5
expect_fail 1 "resid_mid has no meaning" encode -i "$E:/x" --weights "$E:/w/pos_parallel_alibi" --emit-activations resid_mid -o bad.h5

finish
