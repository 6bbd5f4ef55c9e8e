#!/usr/bin/env bash
# attn-score through its command line: every golden case of testdata/attn_score.h5 (PyTorch,
# float64), pipes from pe-gen, --save-params then --params, and bad input.
source "$(dirname "$0")/lib.sh"
G="$TESTDATA/attn_score.h5"

# --- golden cases: each group's `args` attribute is the command line (@ = the golden file) ---
cases=$(members "$G" cases)
[ "$(echo "$cases" | wc -w)" -ge 20 ] && pass || fail "golden cases missing: $cases"
for c in $cases; do
  args=$(case_args "$G" "cases/$c")
  # shellcheck disable=SC2086
  if attn-score $args -o "$c.h5" 2>err.txt; then pass; else fail "$c: attn-score $args: $(cat err.txt)"; continue; fi
  for ds in output weights scores; do
    if h5ls "$G/cases/$c/$ds" >/dev/null 2>&1; then
      # float32 compute against float64 references: 1e-5 absolute covers the rounding of sums of
      # a few dozen float32 products and of expf.
      same "$c.h5:$ds" "$G:/cases/$c/$ds" 1e-5 1e-5
    fi
  done
done
# the same cases on the float64 reference path of the library
ATTN_REFERENCE=1 attn-score -q "$G:/q5" -k "$G:/k7" -v "$G:/v7" --top-k 3 --causal -o ref.h5 && same ref.h5 "$G:/cases/top_k_causal/output" 1e-6
[ "$(shape no_values.h5 weights)" = "2, 5, 7" ] && [ "$(attr no_values.h5 default)" = "weights" ] && pass || fail "without values only /weights"
h5ls no_values.h5/output >/dev/null 2>&1 && fail "no /output without values" || pass

# --- pipes: ALiBi from pe-gen as the additive mask; positional encodings as q and k ---
pe-gen --kind alibi --heads 1 --len 5 --len-k 7 -o - | attn-score -q "$G:/q5" -k "$G:/k7" -v "$G:/v7" --attn-mask - -o alibi.h5 2>err.txt && pass || fail "alibi pipe: $(cat err.txt)"
same alibi.h5 "$G:/alibi/output" 1e-5 1e-5
pe-gen --len 12 --dim 16 -o - | attn-score -q -:pe -k -:pe -v -:pe --causal -o pipe.h5 2>err.txt && pass || fail "pe pipe: $(cat err.txt)"
pe-gen --len 12 --dim 16 -o pe.h5 && attn-score -q pe.h5 -k pe.h5 -v pe.h5 --causal -o direct.h5 && same pipe.h5 direct.h5
[ "$(shape pipe.h5 output)" = "12, 16" ] && pass || fail "2-D in, 2-D out: $(shape pipe.h5 output)"
attn-score -q "$G:/q5" -k "$G:/k7" -v "$G:/v7" -o - | attn-score -q - -k "$G:/k7" --score dot -o /dev/null 2>err.txt
grep -q "needs d_q == d_k" err.txt && pass || fail "piped output feeds the next tool: $(cat err.txt)"

# --- parameters: --init xavier with --save-params, then --params gives the same bytes ---
for score in general additive; do
  hidden=""
  [ $score = additive ] && hidden="--hidden 6"
  check "$score init" attn-score -q "$G:/q5" -k "$G:/k4" -v "$G:/v7" --score $score --init xavier $hidden --seed 5 --save-params "p_$score.h5" -o "init_$score.h5"
  check "$score params" attn-score -q "$G:/q5" -k "$G:/k4" -v "$G:/v7" --score $score --params "p_$score.h5" -o "load_$score.h5"
  cmp -s <(values "init_$score.h5" output) <(values "load_$score.h5" output) && pass || fail "$score: --params reproduces --init bytes"
done
check "params in a group" attn-score -q "$G:/q5" -k "$G:/k4" --score additive --init xavier --hidden 3 --save-params grp.h5:/exp/p -o g1.h5
check "params from a group" attn-score -q "$G:/q5" -k "$G:/k4" --score additive --params grp.h5:/exp/p -o g2.h5
same g1.h5 g2.h5
check "same seed same bytes" attn-score -q "$G:/q5" -k "$G:/k4" --score additive --init xavier --hidden 3 --save-params grp2.h5 -o g3.h5
same g1.h5 g3.h5

# --- bad input ---
cp "$G" in.h5
tensor-gen --shape 2,7 --fill ones -o fpad.h5
tensor-gen --shape 3,7,8 -o k3.h5
tensor-gen --shape 2,6,6 -o v_short.h5
tensor-gen --shape 4,4 --fill zeros --dtype i64 -o badmask.h5
echo "3 9" | tensor-gen --shape 2 --from-text - --dtype i64 -o badlen.h5
tensor-gen --shape 2,5,8 --from-text <(for i in $(seq 80); do [ "$i" = 13 ] && echo inf || echo 1; done) --allow-nonfinite -o qinf.h5
tensor-gen --shape 8,5 -o W85.h5:/W
tensor-gen --shape 8,5 -o noW.h5
Q="-q in.h5:/q5"
expect_fail 1 "needs d_q == d_k" attn-score $Q -k in.h5:/k4 -o o.h5
expect_fail 1 "use --score general or additive" attn-score $Q -k in.h5:/k4 --score dot -o o.h5
expect_fail 1 "batch sizes differ" attn-score $Q -k k3.h5 -o o.h5
expect_fail 1 "keys and values differ in length" attn-score $Q -k in.h5:/k7 -v v_short.h5 -o o.h5
expect_fail 1 "does not broadcast to (batch, heads, n, m) = (2, 1, 5, 7)" attn-score $Q -k in.h5:/k7 --attn-mask badmask.h5 -o o.h5
expect_fail 1 "length 9 at index [1] is outside 0..7" attn-score $Q -k in.h5:/k7 --lengths badlen.h5 -o o.h5
expect_fail 1 "fpad.h5:/data: holds float32 data; expected integers or bool" attn-score $Q -k in.h5:/k7 --key-padding-mask fpad.h5 -o o.h5
expect_fail 2 "--top-k: must be positive, got 0" attn-score $Q -k in.h5:/k7 --top-k 0 -o o.h5
expect_fail 1 "--top-k 8 exceeds the 7 keys" attn-score $Q -k in.h5:/k7 --top-k 8 -o o.h5
expect_fail 2 "--window: must be zero or more, got -1" attn-score $Q -k in.h5:/k7 --window -1 -o o.h5
expect_fail 1 "--global position 7 is outside the 7 keys" attn-score $Q -k in.h5:/k7 --global 1,7 -o o.h5
expect_fail 1 "W85.h5:/W: expected shape (8, 4) (d_q = 8, d_k = 4), got (8, 5)" attn-score $Q -k in.h5:/k4 --score general --params W85.h5 -o o.h5
expect_fail 1 "noW.h5: missing dataset /W (expected shape (8, 4) (d_q = 8, d_k = 4))" attn-score $Q -k in.h5:/k4 --score general --params noW.h5 -o o.h5
expect_fail 1 "in.h5:/params/general/W: expected shape (8, 8) (d_q = 8, d_k = 8), got (8, 4)" attn-score $Q -k in.h5:/k7 --score general --params in.h5:/params/general -o o.h5
# --params is strict as the weight loader is: every dataset of the group is read, or refused by name
attn-score $Q -k in.h5:/k4 --score additive --init xavier --hidden 3 --save-params pad.h5 -o padd.h5
cp pad.h5 pextra.h5 && h5copy -i W85.h5 -o pextra.h5 -s /W -d /W
expect_fail 1 "pextra.h5: 1 dataset is not part of the layout this tool reads (PyTorch state_dict names, '.' as '/'; man attn-toolkit, WEIGHT FILES): /W; --ignore-unknown-weights runs without it" \
  attn-score $Q -k in.h5:/k4 --score additive --params pextra.h5 -o o.h5
attn-score $Q -k in.h5:/k4 --score additive --params pextra.h5 --ignore-unknown-weights -o pign.h5 &&
  cmp -s <(values pign.h5 output) <(values padd.h5 output) && pass || fail "--ignore-unknown-weights: not the numbers without /W"
tensor-gen --shape 3,2 -o v32.h5 && cp pad.h5 pv2.h5 && h5ls pv2.h5/v >/dev/null && h5copy -i v32.h5 -o pv2.h5 -s /data -d /v2
expect_fail 1 "pv2.h5: 1 dataset is not part of the layout" attn-score $Q -k in.h5:/k4 --score additive --params pv2.h5 -o o.h5
expect_fail 2 "--ignore-unknown-weights does not apply to --score scaled-dot" attn-score $Q -k in.h5:/k7 --ignore-unknown-weights -o o.h5
expect_fail 1 "qinf.h5:/data: Inf at index [0, 1, 4]" attn-score -q qinf.h5 -k in.h5:/k7 -o o.h5
check "--allow-nonfinite" attn-score -q qinf.h5 -k in.h5:/k7 --allow-nonfinite -o inf_ok.h5
expect_fail 2 "--score general needs exactly one of --params and --init" attn-score $Q -k in.h5:/k4 --score general -o o.h5
expect_fail 2 "--params does not apply to --score scaled-dot" attn-score $Q -k in.h5:/k7 --params in.h5:/params/general -o o.h5
expect_fail 2 "--scale does not apply to --score dot" attn-score $Q -k in.h5:/k7 --score dot --scale 2 -o o.h5
expect_fail 2 "--score additive --init needs --hidden" attn-score $Q -k in.h5:/k4 --score additive --init xavier -o o.h5
expect_fail 2 "--emit: unknown output 'probs'" attn-score $Q -k in.h5:/k7 -v in.h5:/v7 --emit probs -o o.h5
expect_fail 2 "names the input" attn-score $Q -k in.h5:/k7 -o in.h5
expect_fail 2 "--query is required" attn-score -k in.h5:/k7 -o o.h5
[ -z "$(ls -A tmp)" ] && pass || fail "temporary files left: $(ls -A tmp)"

finish
