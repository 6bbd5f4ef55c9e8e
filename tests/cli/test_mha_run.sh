#!/usr/bin/env bash
# mha-run through its command line: every golden case of testdata/mha.h5 (torch.nn.MultiheadAttention
# in float64, and a float64 reference for grouped KV heads and RoPE), pipes, --init with
# --save-weights then --weights, the PyTorch layout of saved weights, and bad input.
source "$(dirname "$0")/lib.sh"
G="$TESTDATA/mha.h5"

# Tolerance (close, in lib.sh): |ours - ref| <= 1e-5 * max|ref|. Each output sums E products three
# times over (projection, attention, output projection), and float32 rounding of such sums grows
# with the size of the terms, i.e. with the tensor's scale; we measured at most 7.5e-7 of it (the
# (2, 200, 32) cases), so 1e-5 leaves 13x.

# --- golden cases: each group's `args` attribute is the command line (@ = the golden file) ---
cases=$(members "$G" cases)
[ "$(echo "$cases" | wc -w)" -ge 20 ] && pass || fail "golden cases missing: $cases"
for c in $cases; do
  args=$(case_args "$G" "cases/$c")
  # shellcheck disable=SC2086
  if mha-run $args -o "$c.h5" 2>err.txt; then pass; else fail "$c: mha-run $args: $(cat err.txt)"; continue; fi
  close "$c.h5:output" "$G:/cases/$c/output"
  h5ls "$c.h5/weights" >/dev/null 2>&1 && fail "$c: /weights without --need-weights" || pass
  if h5ls "$G/cases/$c/weights" >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    check "$c --need-weights" mha-run $args --need-weights -o "${c}_w.h5"
    close "${c}_w.h5:weights" "$G:/cases/$c/weights"
    close "${c}_w.h5:output" "$G:/cases/$c/output"
    # shellcheck disable=SC2086
    check "$c --average-weights" mha-run $args --average-weights -o "${c}_a.h5"
    close "${c}_a.h5:weights" "$G:/cases/$c/avg_weights"
  fi
done
[ "$(shape self_2d.h5 output)" = "6, 16" ] && [ "$(shape self_2d_w.h5 weights)" = "4, 6, 6" ] && pass || fail "2-D in, 2-D out"
[ "$(shape cross_w.h5 weights)" = "2, 4, 5, 7" ] && [ "$(shape cross_a.h5 weights)" = "2, 5, 7" ] && pass || fail "weights shapes"
# a query that sees no key: output out_proj/bias (lengths 0 in item 0), exactly
h5cmp cross_lengths.h5:output "$G:/cases/cross_lengths/output" 0 1e-5 max && pass || fail "lengths 0"
check "f64 output" mha-run -q "$G:/x5" --weights "$G:/w/packed" --dtype f64 -o f64.h5
h5dump -H -d /output f64.h5 | grep -q H5T_IEEE_F64LE && pass || fail "--dtype f64"
close f64.h5:output "$G:/cases/self/output"
# the same on the float64 reference path of the kernel
ATTN_REFERENCE=1 mha-run -q "$G:/q5" -k "$G:/k7" -v "$G:/v7" --weights "$G:/w/packed" --causal -o ref.h5 && close ref.h5:output "$G:/cases/cross_causal/output"

# --- pipes: ALiBi from pe-gen as the additive mask, per head; inputs from tensor-gen ---
pe-gen --kind alibi --heads 4 --len 5 --len-k 7 -o - |
  mha-run -q "$G:/q5" -k "$G:/k7" -v "$G:/v7" --weights "$G:/w/packed" --attn-mask - -o alibi.h5 2>err.txt && pass || fail "alibi pipe: $(cat err.txt)"
close alibi.h5:output "$G:/cases/alibi/output"
tensor-gen --shape 3,10,16 --seed 4 -o - | mha-run -q - --weights "$G:/w/packed" --causal -o - |
  mha-run -q - --weights "$G:/w/packed" -o piped.h5 2>err.txt && pass || fail "mha-run pipe: $(cat err.txt)"
tensor-gen --shape 3,10,16 --seed 4 -o x.h5 && mha-run -q x.h5 --weights "$G:/w/packed" --causal -o y.h5 &&
  mha-run -q y.h5 --weights "$G:/w/packed" -o direct.h5 && same piped.h5 direct.h5

# --- groups of items (--chunk; by default about 512 positions' worth, here 1 item of 300): the same
# bytes whatever the grouping, with per-item lengths, key padding and the weights ---
tensor-gen --shape 3,300,16 --seed 5 -o g300.h5 && tensor-gen --shape 3,260,16 --seed 6 -o k260.h5
echo "300 0 17" | tensor-gen --shape 3 --from-text - --dtype i64 -o len3.h5
for q in "-q g300.h5 --lengths len3.h5" "-q g300.h5 -k k260.h5 --causal"; do
  for c in "" "--chunk 1" "--chunk 2" "--chunk 3"; do
    # shellcheck disable=SC2086
    check "$q $c" mha-run $q --weights "$G:/w/packed" $c --need-weights -o "chunk$c.h5"
    # shellcheck disable=SC2086
    check "$q $c averaged" mha-run $q --weights "$G:/w/packed" $c --average-weights -o "chunka$c.h5"
  done
  for c in "--chunk 1" "--chunk 2" "--chunk 3"; do # exactly (h5cmp without a tolerance)
    h5cmp chunk.h5:output "chunk$c.h5:output" && h5cmp chunk.h5:weights "chunk$c.h5:weights" &&
      h5cmp chunka.h5:weights "chunka$c.h5:weights" && h5cmp chunk.h5:output "chunka$c.h5:output" &&
      pass || fail "$q: $c changes the bytes"
  done
done
# default groups: about 1024 positions' worth (3 of 300), at most half the items (2 of 3)
mha-run -q g300.h5 --weights "$G:/w/packed" --verbose -o chunk.h5 2>log.txt && grep -q "; 2 per group" log.txt &&
  pass || fail "default group: $(cat log.txt)"
tensor-gen --shape 8,300,16 --seed 7 -o g8.h5 && mha-run -q g8.h5 --weights "$G:/w/packed" --verbose -o g8o.h5 2>log.txt &&
  grep -q "; 3 per group" log.txt && pass || fail "default group of 8 items: $(cat log.txt)"
# a standard error closed early (a reader that stops at its line) fails neither the run nor its output
mha-run -q g300.h5 --weights "$G:/w/packed" --verbose -o closed.h5 2>&1 | grep -q "per group"
[ "${PIPESTATUS[0]}" = 0 ] && h5cmp closed.h5:output chunk.h5:output && pass || fail "closed standard error"
expect_fail 2 "--chunk" mha-run -q g300.h5 --weights "$G:/w/packed" --chunk 0 -o o.h5

# --- --init with --save-weights, then --weights: identical output bytes, PyTorch's layout ---
for kv in 4 2; do
  check "init kv=$kv" mha-run -q "$G:/q5" -k "$G:/k7" --init xavier --embed-dim 16 --heads 4 --kv-heads $kv --seed 7 \
    --rope half --causal --need-weights --save-weights "w$kv.h5" -o "init$kv.h5"
  check "load kv=$kv" mha-run -q "$G:/q5" -k "$G:/k7" --weights "w$kv.h5" --rope half --causal --need-weights -o "load$kv.h5"
  cmp -s <(values "init$kv.h5" output) <(values "load$kv.h5" output) && cmp -s <(values "init$kv.h5" weights) <(values "load$kv.h5" weights) &&
    pass || fail "kv=$kv: --weights reproduces --init bytes"
done
# the saved file has exactly the datasets and shapes nn.MultiheadAttention's state_dict exports
layout() { h5ls -r "$1" | awk '$2 == "Dataset" {sub("^" g, "", $1); print $1, $3, $4}' g="$2"; }
[ "$(layout w4.h5 '')" = "$(layout "$G/w/packed" /w/packed)" ] && pass || fail "saved layout: $(layout w4.h5 '')"
[ "$(layout w2.h5 '')" = "$(layout "$G/w/gqa" /w/gqa)" ] && pass || fail "saved GQA layout: $(layout w2.h5 '')"
h5dump -a /num_heads w4.h5 | grep -q "(0): 4" && pass || fail "num_heads attribute"
h5dump -a /num_kv_heads w2.h5 | grep -q "(0): 2" && pass || fail "num_kv_heads attribute"
h5dump -a /num_kv_heads w4.h5 >/dev/null 2>&1 && fail "no num_kv_heads when G = H" || pass
check "kdim/vdim init" mha-run -q "$G:/q5" -k "$G:/k7d6" -v "$G:/v7d10" --init xavier --embed-dim 16 --heads 2 --save-weights kv.h5 -o kv_init.h5
[ "$(layout kv.h5 '')" = "$(layout "$G/w/kv" /w/kv)" ] && pass || fail "kdim/vdim layout: $(layout kv.h5 '')"
# add_bias_kv and add_zero_attn survive --save-weights: bias_k, bias_v and the attribute, same bytes
XK="-q $G:/q5 -k $G:/k7d6 -v $G:/v7d10 --need-weights"
check "extra keys, saved" mha-run $XK --weights "$G:/w/bias_kv_zero" --save-weights xk.h5 -o xk1.h5
check "extra keys, reloaded" mha-run $XK --weights xk.h5 -o xk2.h5
cmp -s <(values xk1.h5 output) <(values xk2.h5 output) && cmp -s <(values xk1.h5 weights) <(values xk2.h5 weights) &&
  pass || fail "bias_k, add_zero_attn: --save-weights then --weights changes the bytes"
[ "$(layout xk.h5 '')" = "$(layout "$G/w/bias_kv_zero" /w/bias_kv_zero)" ] && h5dump -a /add_zero_attn xk.h5 | grep -q "(0): 1" &&
  pass || fail "extra keys layout: $(layout xk.h5 '')"
[ "$(shape xk1.h5 weights)" = "2, 4, 5, 9" ] && pass || fail "weights (b, H, n, m + 2): $(shape xk1.h5 weights)"
check "save into a group" mha-run -q "$G:/x5" --init xavier --embed-dim 16 --heads 4 --save-weights grp.h5:/exp/mha -o g1.h5
check "load from a group" mha-run -q "$G:/x5" --weights grp.h5:/exp/mha -o g2.h5
same g1.h5 g2.h5
[ "$(layout grp.h5 /exp/mha)" = "$(layout "$G/w/packed" /w/packed)" ] && pass || fail "group layout"
check "same seed" mha-run -q "$G:/x5" --init xavier --embed-dim 16 --heads 4 -o g3.h5
same g1.h5 g3.h5
check "other seed" mha-run -q "$G:/x5" --init xavier --embed-dim 16 --heads 4 --seed 1 -o g4.h5
h5cmp g1.h5 g4.h5 2>/dev/null && fail "--seed changes the weights" || pass

# --- bad input ---
cp "$G" in.h5
tensor-gen --shape 3,5,16 -o b3.h5
tensor-gen --shape 2,6,16 -o v6.h5
cp w4.h5 bias47.h5 && tensor-gen --shape 47 -o bias47.h5:/in_proj_bias
cp w4.h5 out8.h5 && tensor-gen --shape 16,8 -o out8.h5:/out_proj/weight
cp w4.h5 wnan.h5
echo "1 2 nan 4 5 6 7 8 9 10 11 12 13 14 15 16" | tensor-gen --shape 16 --from-text - --allow-nonfinite -o wnan.h5:/out_proj/bias 2>/dev/null ||
  fail "tensor-gen refuses NaN into a weight file"
W="--weights in.h5:/w/packed"
expect_fail 2 "--embed-dim 10 is not divisible by --heads 3" mha-run -q in.h5:/x5 --init xavier --embed-dim 10 --heads 3 -o o.h5
expect_fail 2 "--kv-heads 3 does not divide --heads 4" mha-run -q in.h5:/x5 --init xavier --embed-dim 16 --heads 4 --kv-heads 3 -o o.h5
expect_fail 2 "--rope needs an even head dim, got --embed-dim 12 / --heads 4 = 3" mha-run -q in.h5:/x5 --init xavier --embed-dim 12 --heads 4 --rope half -o o.h5
expect_fail 1 "in.h5:/bad/heads3 attribute num_heads = 3 does not divide the embed dim 16 of in.h5:/bad/heads3/out_proj/weight" mha-run -q in.h5:/x5 --weights in.h5:/bad/heads3 -o o.h5
expect_fail 1 "in.h5:/bad/kv3 attribute num_kv_heads = 3 does not divide num_heads = 4" mha-run -q in.h5:/x5 --weights in.h5:/bad/kv3 -o o.h5
expect_fail 1 "in.h5:/bad/kv_disagree/in_proj_weight: expected shape (32, 16) (E = 16, num_heads = 4, num_kv_heads = 2), got (48, 16)" mha-run -q in.h5:/x5 --weights in.h5:/bad/kv_disagree -o o.h5
expect_fail 1 "in.h5:/bad/no_heads: no num_heads attribute" mha-run -q in.h5:/x5 --weights in.h5:/bad/no_heads -o o.h5
expect_fail 1 "bias47.h5:/in_proj_bias: expected shape (48,) (E = 16, num_heads = 4), got (47,)" mha-run -q in.h5:/x5 --weights bias47.h5 -o o.h5
expect_fail 1 "out8.h5:/out_proj/weight: expected shape (16, 16) (E = 16, num_heads = 4), got (16, 8)" mha-run -q in.h5:/x5 --weights out8.h5 -o o.h5
expect_fail 1 "in.h5: missing dataset /bad/no_out/out_proj/weight (expected shape (16, 16) (E = 16, num_heads = 4))" mha-run -q in.h5:/x5 --weights in.h5:/bad/no_out -o o.h5
expect_fail 1 "wnan.h5:/out_proj/bias: NaN at index [2]" mha-run -q in.h5:/x5 --weights wnan.h5 -o o.h5
expect_fail 1 "missing dataset /nested/in_proj_weight (or q_proj_weight" mha-run -q in.h5:/x5 --weights in.h5:/nested -o o.h5
expect_fail 1 "in.h5: no group '/w/nope'" mha-run -q in.h5:/x5 --weights in.h5:/w/nope -o o.h5
expect_fail 1 "in.h5:/k7d6: feature size 6 differs from the embed dim of in.h5:/w/packed/in_proj_weight = 16" mha-run -q in.h5:/k7d6 $W -o o.h5
expect_fail 1 "in.h5:/k7d6: feature size 6 differs from kdim of in.h5:/w/packed/in_proj_weight = 16" mha-run -q in.h5:/q5 -k in.h5:/k7d6 $W -o o.h5
expect_fail 1 "in.h5:/v7: feature size 16 differs from vdim of in.h5:/w/kv/v_proj_weight = 10" mha-run -q in.h5:/q5 -k in.h5:/k7d6 -v in.h5:/v7 --weights in.h5:/w/kv -o o.h5
expect_fail 1 "in.h5:/x5: feature size 16 differs from --embed-dim = 8" mha-run -q in.h5:/x5 --init xavier --embed-dim 8 --heads 2 -o o.h5
expect_fail 1 "in.h5:/masks/int4: shape (2, 4, 5, 7) does not broadcast to (batch, heads, n, m) = (2, 2, 5, 7)" mha-run -q in.h5:/q5 -k in.h5:/k7 --init xavier --embed-dim 16 --heads 2 --attn-mask in.h5:/masks/int4 -o o.h5
expect_fail 1 "in.h5:/masks/bool2: shape (5, 7) does not broadcast to (batch, heads, n, m) = (2, 4, 5, 5)" mha-run -q in.h5:/x5 $W --attn-mask in.h5:/masks/bool2 -o o.h5
expect_fail 1 "key padding mask must be (b, m) = (2, 7), got (2, 5)" mha-run -q in.h5:/q5 -k in.h5:/k7 $W --key-padding-mask in.h5:/masks/kpm5 -o o.h5
expect_fail 1 "batch sizes differ" mha-run -q b3.h5 -k in.h5:/k7 $W -o o.h5
expect_fail 1 "keys and values differ in length: in.h5:/k7 has 7 positions, v6.h5 has 6" mha-run -q in.h5:/q5 -k in.h5:/k7 -v v6.h5 $W -o o.h5
expect_fail 2 "give exactly one of --weights and --init" mha-run -q in.h5:/x5 -o o.h5
expect_fail 2 "give exactly one of --weights and --init" mha-run -q in.h5:/x5 $W --init xavier -o o.h5
expect_fail 2 "--init needs --heads" mha-run -q in.h5:/x5 --init xavier --embed-dim 16 -o o.h5
expect_fail 2 "--heads does not apply to --weights" mha-run -q in.h5:/x5 $W --heads 4 -o o.h5
expect_fail 2 "-v needs -k" mha-run -q in.h5:/x5 -v in.h5:/v7 $W -o o.h5
expect_fail 2 "--rope-base does not apply to attention without --rope" mha-run -q in.h5:/x5 $W --rope-base 500 -o o.h5
expect_fail 2 "--rope: halfway not in {half,interleaved}" mha-run -q in.h5:/x5 $W --rope halfway -o o.h5
expect_fail 2 "names the input" mha-run -q in.h5:/x5 $W -o in.h5
expect_fail 2 "names the input" mha-run -q in.h5:/x5 --init xavier --embed-dim 16 --heads 4 --save-weights in.h5 -o o.h5
expect_fail 2 "and -o name the same file" mha-run -q in.h5:/x5 --init xavier --embed-dim 16 --heads 4 --save-weights o.h5 -o o.h5
[ -z "$(ls -A tmp)" ] && pass || fail "temporary files left: $(ls -A tmp)"

finish
