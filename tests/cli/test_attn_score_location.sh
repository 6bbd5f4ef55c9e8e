#!/usr/bin/env bash
# attn-score's location-based scores: Luong's --score location (a_i = softmax(W_a q_i)) and
# Chorowski's --score location-aware (the previous alignment convolved with learned filters inside
# an additive score, query after query): every golden case of testdata/location_attention.h5
# (NumPy with PyTorch's conv1d, float64), parameters saved and reloaded, threads, bad input.
source "$(dirname "$0")/lib.sh"
G="$TESTDATA/location_attention.h5"

# --- golden cases ---
cases=$(members "$G" cases)
[ "$(echo "$cases" | wc -w)" -ge 8 ] && pass || fail "golden cases missing: $cases"
golden_cases "$G" attn-score output weights scores

# --- --init, --save-params, --params: the same bytes; the seed matters ---
I="-q $G:/q5 -k $G:/k7 -v $G:/v7"
# shellcheck disable=SC2086
{
  check "location init" attn-score --score location $I --init xavier --seed 4 --save-params wa.h5 -o l1.h5
  check "location params" attn-score --score location $I --params wa.h5 -o l2.h5
  check "location-aware init" attn-score --score location-aware $I --init xavier --hidden 5 --filters 2 \
    --filter-width 3 --seed 4 --save-params la.h5 -o a1.h5
  check "location-aware params" attn-score --score location-aware $I --params la.h5 -o a2.h5
  check "location-aware other seed" attn-score --score location-aware $I --init xavier --hidden 5 --filters 2 \
    --filter-width 3 --seed 5 -o a3.h5
  check "location-aware defaults" attn-score --score location-aware $I --init xavier --hidden 5 --save-params ld.h5 -o a4.h5
}
cmp -s <(values l1.h5 output) <(values l2.h5 output) && pass || fail "location: --params does not reproduce --init"
cmp -s <(values a1.h5 output) <(values a2.h5 output) && pass || fail "location-aware: --params does not reproduce --init"
cmp -s <(values a1.h5 output) <(values a3.h5 output) && fail "location-aware: the seed changes nothing" || pass
[ "$(shape wa.h5 W_a)" = "7, 8" ] && pass || fail "W_a shape $(shape wa.h5 W_a)"
[ "$(shape la.h5 F)" = "2, 3" ] && [ "$(shape la.h5 U)" = "5, 2" ] && [ "$(shape la.h5 b)" = "5" ] && pass ||
  fail "location-aware params: F $(shape la.h5 F), U $(shape la.h5 U)"
[ "$(shape ld.h5 F)" = "10, 201" ] && pass || fail "default filters: $(shape ld.h5 F)"

# --- items in parallel, each query after the previous: the same bytes whatever the threads ---
tensor-gen --shape 3,40,8 --seed 1 -o q.h5
tensor-gen --shape 3,60,8 --seed 2 -o k.h5
for t in 1 3; do
  check "threads $t" attn-score --score location-aware -q q.h5 -k k.h5 -v k.h5 --params la.h5 --threads $t -o "t$t.h5"
done
cmp -s <(values t1.h5 output) <(values t3.h5 output) && pass || fail "--threads changes the bytes"

# --- bad input ---
cp la.h5 la_even.h5 && tensor-gen --shape 2,4 -o la_even.h5:/F
cp la.h5 la_noU.h5 && tensor-gen --shape 5,3 -o la_noU.h5:/U
tensor-gen --shape 6,8 -o wa6.h5:/W_a
# shellcheck disable=SC2086
{
  expect_fail 2 "--filter-width must be odd" attn-score --score location-aware $I --init xavier --hidden 4 --filter-width 4 -o o.h5
  expect_fail 2 "--score location-aware is a softmax attention: not with --attention monotonic" \
    attn-score --score location-aware --attention monotonic $I --params la.h5 -o o.h5
  expect_fail 2 "--top-k does not apply to --score location-aware" attn-score --score location-aware $I --params la.h5 --top-k 2 -o o.h5
  expect_fail 2 "--score location-aware --init needs --hidden" attn-score --score location-aware $I --init xavier -o o.h5
  expect_fail 2 "--filters does not apply to --score scaled-dot" attn-score $I --filters 3 -o o.h5
  expect_fail 2 "--hidden does not apply to --score location" attn-score --score location $I --init xavier --hidden 3 -o o.h5
  expect_fail 2 "--score location needs exactly one of --params and --init" attn-score --score location $I -o o.h5
  expect_fail 1 "la_even.h5:/F: the filter width 4 must be odd" attn-score --score location-aware $I --params la_even.h5 -o o.h5
  expect_fail 1 "la_noU.h5:/U: expected shape (5, 2) (hidden = 5 from v, filters = 2 from F, d_q = 8, d_k = 8), got (5, 3)" \
    attn-score --score location-aware $I --params la_noU.h5 -o o.h5
  expect_fail 1 "wa6.h5:/W_a: expected shape (7, 8) (m = 7 keys, d_q = 8), got (6, 8)" attn-score --score location $I --params wa6.h5 -o o.h5
}
finish
