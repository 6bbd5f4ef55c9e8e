#!/usr/bin/env bash
# The linear-time forms inside multi-head attention: mha-run and encode on modules whose
# `attention` attribute names one (goldens of testdata/linear_mha.h5: NumPy, float64, each head
# the paper's equations), mha-run's --attention (drawn parameters, saved and reloaded, overriding a
# file's form), decode with a Performer decoder (the key/value cache against recomputing the
# prefix), and bad input.
source "$(dirname "$0")/lib.sh"
G="$TESTDATA/linear_mha.h5"

# --- golden cases: `tool` and `args` attributes (@ = the golden file) ---
cases=$(members "$G" cases)
[ "$(echo "$cases" | wc -w)" -ge 8 ] && pass || fail "golden cases missing: $cases"
golden_cases "$G" mha-run output weights

# --- --attention overrides a file's form: softmax over a Performer file is the softmax module ---
cp "$G" soft.h5 && h5attr soft.h5 /mha/perf attention string softmax
check "perf as softmax" mha-run -q "$G:/x" --weights "$G:/mha/perf" --attention softmax -o as_soft.h5
check "softmax file" mha-run -q "$G:/x" --weights soft.h5:/mha/perf --ignore-unknown-weights -o soft_out.h5
cmp -s <(values as_soft.h5 output) <(values soft_out.h5 output) && pass || fail "--attention softmax: not the softmax"
cmp -s <(values as_soft.h5 output) <(values perf_self_causal.h5 output) && fail "performer = softmax?" || pass

# --- parameters drawn from --seed: same seed, same bytes; saved and reloaded ---
check "init performer" mha-run -q "$G:/x" --init xavier --embed-dim 16 --heads 2 --attention performer --features 24 \
  --orthogonal --causal --seed 5 --save-weights pw.h5 -o i1.h5
check "init performer again" mha-run -q "$G:/x" --init xavier --embed-dim 16 --heads 2 --attention performer \
  --features 24 --orthogonal --causal --seed 5 -o i2.h5
check "reload performer" mha-run -q "$G:/x" --weights pw.h5 --causal -o i3.h5
cmp -s <(values i1.h5 output) <(values i2.h5 output) && pass || fail "performer --init: same seed, different bytes"
cmp -s <(values i1.h5 output) <(values i3.h5 output) && pass || fail "performer: --save-weights does not reproduce"
[ "$(shape pw.h5 features)" = "24, 8" ] && [ "$(attr pw.h5 attention)" = "performer" ] && pass ||
  fail "saved performer: features $(shape pw.h5 features), attention '$(attr pw.h5 attention)'"
for seed in 1 1 2; do
  check "softmax file, performer seed $seed" mha-run -q "$G:/x" --weights soft.h5:/mha/perf --ignore-unknown-weights \
    --attention performer --features 16 --seed $seed -o "s$seed.h5"
done
cmp -s <(values s1.h5 output) <(values s2.h5 output) && fail "performer: the seed changes nothing" || pass
check "init linformer" mha-run -q "$G:/x" -k "$G:/y" --init xavier --embed-dim 16 --heads 2 --kv-heads 1 \
  --attention linformer --proj-dim 4 --seed 2 --save-weights lw.h5 -o l1.h5
check "reload linformer" mha-run -q "$G:/x" -k "$G:/y" --weights lw.h5 -o l2.h5
cmp -s <(values l1.h5 output) <(values l2.h5 output) && pass || fail "linformer: --save-weights does not reproduce"
[ "$(shape lw.h5 E)" = "4, 9" ] && [ "$(shape lw.h5 F)" = "4, 9" ] && pass || fail "saved E, F: $(shape lw.h5 E)"

# --- the same bytes whatever the threads, and whatever the items of a call ---
P="-q $G:/x -k $G:/y --weights $G:/mha/perf_gqa --causal --need-weights"
for t in 1 3; do
  # shellcheck disable=SC2086
  check "threads $t" mha-run $P --threads $t -o "t$t.h5"
done
cmp -s <(values t1.h5 output) <(values t3.h5 output) && cmp -s <(values t1.h5 weights) <(values t3.h5 weights) &&
  pass || fail "--threads changes the bytes"

# --- a decoder whose every attention is Performer's: the cache gives the tokens of recomputing ---
D="$TESTDATA/decoder.h5"
cp "$D" perf_dec.h5 && h5attr perf_dec.h5 /s2s/decoder attention string performer
for i in 0 1; do
  for mod in self_attn multihead_attn; do
    tensor-gen --shape 32,4 --seed $i -o "perf_dec.h5:/s2s/decoder/layers/$i/$mod/features"
  done
done
for cache in "" --no-cache; do
  check "performer decoder $cache" decode --generate --max-len 8 --beam 3 $cache --memory "$D:/s2s_memory" \
    --memory-lengths "$D:/s2s_src_lengths" --weights perf_dec.h5:/s2s -o "gen$cache.h5"
done
cmp -s <(values gen.h5 tokens) <(values gen--no-cache.h5 tokens) && pass || fail "performer decoder: cache changes tokens"
same gen.h5:scores gen--no-cache.h5:scores 1e-5 1e-5
h5cmp gen.h5:scores "$D:/s2s_generate/beam3/scores" 1e-3 1e-3 >/dev/null 2>&1 && fail "performer decoder = softmax?" || pass

# --- bad input ---
cp "$G" in.h5
h5attr in.h5 /mha/lin attention string flash
cp "$G" nofeat.h5 && h5attr nofeat.h5 /mha/lin attention string performer
tensor-gen --shape 12,7 -o f127.h5:/features && cp "$G" badfeat.h5 && h5attr badfeat.h5 /mha/lin attention string performer
tensor-gen --shape 12,7 -o badfeat.h5:/mha/lin/features
tensor-gen --shape 2,7,7 --fill zeros -o blk.h5
X="-q in.h5:/x"
# shellcheck disable=SC2086
{
  expect_fail 1 "in.h5:/mha/lin attribute attention = 'flash': expected softmax, linear, performer or linformer" \
    mha-run $X --weights in.h5:/mha/lin -o o.h5
  expect_fail 1 "nofeat.h5: missing dataset /mha/lin/features (a matrix (M, d))" mha-run $X --weights nofeat.h5:/mha/lin -o o.h5
  expect_fail 1 "badfeat.h5:/mha/lin/features: expected shape (12, 8) (M = 12 rows, d = 8 the head dim (E = 16 / num_heads = 2)), got (12, 7)" \
    mha-run $X --weights badfeat.h5:/mha/lin -o o.h5
  expect_fail 1 "Linformer's E and F (5, 7) of in.h5:/mha/lf project 7 keys; in.h5:/y has m = 9" \
    mha-run $X -k in.h5:/y --weights in.h5:/mha/lf -o o.h5
  expect_fail 2 "--attention linformer needs --proj-dim" mha-run $X --weights in.h5:/mha/perf --attention linformer -o o.h5
  expect_fail 1 "--proj-dim 8 exceeds the 7 keys of in.h5:/x" mha-run $X --weights in.h5:/mha/perf --attention linformer --proj-dim 8 -o o.h5
  expect_fail 2 "--features does not apply to --attention linear" mha-run $X --init xavier --embed-dim 16 --heads 2 --attention linear --features 8 -o o.h5
  expect_fail 2 "--features does not apply to attention without --attention" mha-run $X --weights in.h5:/mha/perf --features 8 -o o.h5
  expect_fail 2 "the form of the --weights file, with its parameters" mha-run $X --weights in.h5:/mha/perf --attention performer --seed 2 -o o.h5
  expect_fail 1 "in.h5:/mha/perf attribute attention = 'performer' applies a causal mask and key padding only, not a mask tensor (--attn-mask)" mha-run $X --weights in.h5:/mha/perf --attn-mask blk.h5 -o o.h5
  expect_fail 1 "in.h5:/mha/lf attribute attention = 'linformer' cannot be causal" mha-run $X --weights in.h5:/mha/lf --causal -o o.h5
  expect_fail 2 "not defined with the extra keys of bias_k or add_zero_attn" \
    mha-run -q "$TESTDATA/mha.h5:/q5" --weights "$TESTDATA/mha.h5:/w/bias_kv" --attention linear -o o.h5
}
finish
