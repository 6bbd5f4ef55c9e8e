#!/usr/bin/env bash
# attn-score's linear-time forms (--attention linear, performer, linformer) through the command
# line: every golden case of testdata/linear_attention.h5 (NumPy, float64, from the papers'
# equations), the same bytes whatever the threads, seeded parameters, pipes, and bad input.
source "$(dirname "$0")/lib.sh"
G="$TESTDATA/linear_attention.h5"

# --- golden cases: each group's `args` attribute is the command line (@ = the golden file) ---
cases=$(members "$G" cases)
[ "$(echo "$cases" | wc -w)" -ge 20 ] && pass || fail "golden cases missing: $cases"
golden_cases "$G" attn-score output weights
[ "$(shape lin_no_values.h5 weights)" = "2, 5, 7" ] && [ "$(attr lin_no_values.h5 default)" = "weights" ] && pass ||
  fail "without values only /weights"

# --- the same bytes whatever the threads (the causal sums' blocks do not depend on them) ---
L="-q $G:/q150 -k $G:/k200 -v $G:/v200 --causal"
for kind in "linear" "performer --params $G:/params/favor37"; do
  for t in 1 2 3; do
    # shellcheck disable=SC2086
    check "$kind --threads $t" attn-score --attention $kind $L --threads $t -o "t$t.h5"
  done
  cmp -s <(values t1.h5 output) <(values t2.h5 output) && cmp -s <(values t1.h5 output) <(values t3.h5 output) &&
    pass || fail "$kind: --threads changes the bytes"
  # one item at a time gives each item's bytes too
  # shellcheck disable=SC2086
  check "$kind item 1" attn-score --attention $kind -q "$G:/q150" -k "$G:/k200" -v "$G:/v200" --causal -o all.h5
  h5cmp all.h5:output t1.h5:output 0 0 >/dev/null && pass || fail "$kind: bytes differ between runs"
done

# --- Performer's features: drawn from --seed, saved, reloaded; orthogonal blocks ---
P="-q $G:/q5 -k $G:/k7 -v $G:/v7"
# shellcheck disable=SC2086
check "performer seed" attn-score --attention performer $P --features 64 --seed 3 --save-params f3.h5 -o s3.h5
# shellcheck disable=SC2086
check "performer seed again" attn-score --attention performer $P --features 64 --seed 3 -o s3b.h5
# shellcheck disable=SC2086
check "performer other seed" attn-score --attention performer $P --features 64 --seed 4 -o s4.h5
cmp -s <(values s3.h5 output) <(values s3b.h5 output) && pass || fail "performer: same seed, different bytes"
cmp -s <(values s3.h5 output) <(values s4.h5 output) && fail "performer: the seed changes nothing" || pass
[ "$(shape f3.h5 features)" = "64, 8" ] && pass || fail "saved features shape $(shape f3.h5 features)"
# shellcheck disable=SC2086
check "performer --params" attn-score --attention performer $P --params f3.h5 -o p3.h5
cmp -s <(values s3.h5 output) <(values p3.h5 output) && pass || fail "performer: --params does not reproduce --seed"
# shellcheck disable=SC2086
check "performer orthogonal" attn-score --attention performer $P --features 20 --orthogonal --save-params fo.h5 -o o.h5
# rows 0 and 1 of the first block are orthogonal: |w_0 . w_1| small against |w_0| |w_1|
numbers fo.h5 features | awk '
  NR <= 8 {a[NR] = $1} NR > 8 && NR <= 16 {b[NR - 8] = $1}
  END {for (i = 1; i <= 8; i++) {d += a[i] * b[i]; na += a[i] ^ 2; nb += b[i] ^ 2}
       exit !(na > 0 && d * d < 1e-10 * na * nb)}' && pass || fail "--orthogonal: rows 0 and 1 not orthogonal"
[ "$(shape fo.h5 features)" = "20, 8" ] && pass || fail "orthogonal features shape $(shape fo.h5 features)"

# Performer approximates softmax: its error against the exact kernel falls as M grows (as
# 1/sqrt(M) in expectation: here its root mean square falls 10x from M = 16 to 4096).
check "exact softmax" attn-score -q "$G:/q150" -k "$G:/k200" -v "$G:/v200" -o exact.h5
for M in 16 4096; do
  check "performer M=$M" attn-score --attention performer -q "$G:/q150" -k "$G:/k200" -v "$G:/v200" \
    --features $M --orthogonal --seed 1 -o "perf$M.h5"
done
e16=$(rms_diff perf16.h5 output exact.h5 output) e4096=$(rms_diff perf4096.h5 output exact.h5 output)
awk -v a="$e16" -v b="$e4096" 'BEGIN {exit !(a != "" && b != "" && b < a / 5 && b < 0.02)}' && pass ||
  fail "performer error vs softmax (rms): M=16 $e16, M=4096 $e4096"

# --- Linformer: --init with --save-params, then --params gives the same bytes ---
check "linformer init" attn-score --attention linformer $P --init xavier --proj-dim 4 --seed 2 --save-params lf.h5 -o li.h5
check "linformer params" attn-score --attention linformer $P --params lf.h5 -o lp.h5
cmp -s <(values li.h5 output) <(values lp.h5 output) && pass || fail "linformer: --params does not reproduce --init"
[ "$(shape lf.h5 E)" = "4, 7" ] && [ "$(shape lf.h5 F)" = "4, 7" ] && pass || fail "saved E, F: $(shape lf.h5 E)"

# --- pipes: positional encodings from pe-gen as queries and keys ---
pe-gen --len 70 --dim 16 -o - | attn-score --attention linear -q -:pe -k -:pe -v -:pe --causal -o pipe.h5 2>err.txt &&
  pass || fail "pe pipe: $(cat err.txt)"
pe-gen --len 70 --dim 16 -o pe.h5 && attn-score --attention linear -q pe.h5 -k pe.h5 -v pe.h5 --causal -o direct.h5 &&
  same pipe.h5 direct.h5

# --- bad input ---
cp "$G" in.h5
tensor-gen --shape 16,7 -o f167.h5:/features
tensor-gen --shape 3,6 -o E36.h5:/E
tensor-gen --shape 3,7 -o E37.h5:/E
tensor-gen --shape 9,7 -o E97.h5:/E
tensor-gen --shape 9,7 -o E97.h5:/F
tensor-gen --shape 5,7 --fill zeros --dtype i64 -o blk57.h5
tensor-gen --shape 2,5,4 -o q4.h5
tensor-gen --shape 16,8 -o fE.h5:/features && tensor-gen --shape 3,7 -o fE.h5:/E
I="-q in.h5:/q5 -k in.h5:/k7 -v in.h5:/v7"
# shellcheck disable=SC2086
{
  expect_fail 2 "--features: must be positive, got 0" attn-score --attention performer $I --features 0 -o o.h5
  expect_fail 1 "--proj-dim 8 exceeds the 7 keys" attn-score --attention linformer $I --init xavier --proj-dim 8 -o o.h5
  expect_fail 2 "--attention linformer cannot be --causal" attn-score --attention linformer $I --params in.h5:/params/lf3 --causal -o o.h5
  expect_fail 1 "f167.h5:/features: expected shape (16, 8) (M = 16 rows, d = 8 from the queries), got (16, 7)" \
    attn-score --attention performer $I --params f167.h5 -o o.h5
  expect_fail 1 "E36.h5:/E: expected shape (3, 7) (k = 3, m = 7 keys), got (3, 6)" attn-score --attention linformer $I --params E36.h5 -o o.h5
  expect_fail 1 "E37.h5: missing dataset /F" attn-score --attention linformer $I --params E37.h5 -o o.h5
  expect_fail 1 "Linformer needs k <= m" attn-score --attention linformer $I --params E97.h5 -o o.h5
  expect_fail 2 "not a mask tensor (--attn-mask)" attn-score --attention linear $I --attn-mask blk57.h5 -o o.h5
  expect_fail 2 "not --window" attn-score --attention performer $I --window 2 -o o.h5
  expect_fail 2 "not --top-k" attn-score --attention linear $I --top-k 2 -o o.h5
  expect_fail 2 "has no (n, m) scores to emit" attn-score --attention linear $I --emit scores -o o.h5
  expect_fail 2 "--score does not apply to --attention linear" attn-score --attention linear $I --score dot -o o.h5
  expect_fail 2 "--scale does not apply to --attention linear" attn-score --attention linear $I --scale 2 -o o.h5
  expect_fail 2 "--features does not apply to --attention softmax" attn-score $I --features 8 -o o.h5
  expect_fail 2 "--attention linformer needs exactly one of --params and --init" attn-score --attention linformer $I -o o.h5
  expect_fail 2 "--attention linformer --init needs --proj-dim" attn-score --attention linformer $I --init xavier -o o.h5
  expect_fail 2 "--features does not apply to --attention performer --params" \
    attn-score --attention performer $I --params in.h5:/params/favor16 --features 8 -o o.h5
  expect_fail 1 "--attention performer needs d_q == d_k, got 4 (q4.h5) and 8" attn-score --attention performer -q q4.h5 -k in.h5:/k7 -o o.h5
  expect_fail 1 "in.h5: missing dataset /params/lf3/features (a matrix (M, d))" attn-score --attention performer $I --params in.h5:/params/lf3 -o o.h5
  expect_fail 1 "1 dataset is not part of the layout" attn-score --attention performer $I --params fE.h5 -o o.h5
}
tensor-gen --shape 1,2000,2 -o big_q.h5
tensor-gen --shape 1,200000,2 -o big_k.h5
expect_fail 2 "the implied weights (b, n, m) = (1, 2000, 200000) exceed 268435456 elements" \
  attn-score --attention linear -q big_q.h5 -k big_k.h5 -o o.h5
finish
