#!/usr/bin/env bash
# attn-score --attention monotonic (Raffel et al. 2017): every golden case of
# testdata/monotonic_attention.h5 (NumPy, float64: the soft alignment by the paper's triple sum, the
# hard one by its Algorithm 1), over each score function, with an energy bias and key padding;
# alignments that stay finite and sum to at most 1 over long inputs; hard alignments that move
# forward; the same bytes whatever the threads; bad input.
source "$(dirname "$0")/lib.sh"
G="$TESTDATA/monotonic_attention.h5"

# --- golden cases ---
cases=$(members "$G" cases)
[ "$(echo "$cases" | wc -w)" -ge 10 ] && pass || fail "golden cases missing: $cases"
golden_cases "$G" attn-score output weights scores

# --- long inputs: the scan stays finite where cumprod(1 - p) underflows (p ~ 0.02 over 6000
# inputs: (0.98)^6000 ~ 1e-53), rows sum to at most 1, and they match the softmax run's shape ---
tensor-gen --shape 2,30,16 --seed 1 -o q.h5
tensor-gen --shape 2,6000,16 --seed 2 -o k.h5
check "long soft" attn-score --attention monotonic -q q.h5 -k k.h5 -v k.h5 --energy-bias -4 --emit weights -o long.h5
numbers long.h5 weights | awk -v m=6000 '
  $1 != $1 + 0 || $1 < 0 {bad = 1} {s += $1} NR % m == 0 {if (s > 1 + 1e-5) bad = 1; s = 0}
  END {exit bad || NR != 2 * 30 * 6000}' && pass || fail "long soft alignment: negative, NaN or a row above 1"
numbers long.h5 output | awk '$1 != $1 + 0 {bad = 1} END {exit bad}' && pass || fail "long soft context: NaN"

# --- hard alignments: one-hot or empty rows, moving forward ---
check "long hard" attn-score --attention monotonic --hard -q q.h5 -k k.h5 -v k.h5 --emit weights -o hard.h5
numbers hard.h5 weights | awk -v m=6000 '
  {j = (NR - 1) % m} $1 == 1 {ones++; if (j < last) back = 1; last = j} $1 != 0 && $1 != 1 {bad = 1}
  NR % m == 0 {if (ones > 1) bad = 1; ones = 0} NR % (30 * m) == 0 {last = 0}
  END {exit bad || back}' && pass || fail "hard alignment: not one-hot, or moving back"

# --- the same bytes whatever the threads (items in parallel, each output after the one before) ---
for t in 1 3; do
  check "threads $t" attn-score --attention monotonic -q q.h5 -k k.h5 -v k.h5 --threads $t -o "t$t.h5"
done
cmp -s <(values t1.h5 output) <(values t3.h5 output) && pass || fail "--threads changes the bytes"

# --- bad input ---
I="-q $G:/q5 -k $G:/k7 -v $G:/v7"
# shellcheck disable=SC2086
{
  expect_fail 2 "--causal does not apply to --attention monotonic" attn-score --attention monotonic $I --causal -o o.h5
  expect_fail 2 "--window does not apply to --attention monotonic" attn-score --attention monotonic $I --window 2 -o o.h5
  expect_fail 2 "--top-k does not apply to --attention monotonic" attn-score --attention monotonic $I --top-k 2 -o o.h5
  expect_fail 2 "--attn-mask does not apply to --attention monotonic" attn-score --attention monotonic $I --attn-mask "$G:/masks/kpm" -o o.h5
  expect_fail 2 "--hard does not apply to --attention softmax" attn-score $I --hard -o o.h5
  expect_fail 2 "--energy-bias does not apply to --attention linear" attn-score --attention linear $I --energy-bias 1 -o o.h5
  expect_fail 2 "--energy-bias" attn-score --attention monotonic $I --energy-bias nan -o o.h5
  expect_fail 2 "--score general needs exactly one of --params and --init" attn-score --attention monotonic $I --score general -o o.h5
  expect_fail 1 "--score scaled-dot needs d_q == d_k" attn-score --attention monotonic -q "$G:/q6" -k "$G:/k7" -o o.h5
}
finish
