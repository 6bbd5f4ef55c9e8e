#!/usr/bin/env bash
# The example experiments in examples/ run as a researcher would run them (tools on PATH, an
# output directory), and what each one's comments claim holds in its output.
source "$(dirname "$0")/lib.sh"
: "${SRC:?}"
export ATTN_TESTDATA=$TESTDATA
E="$SRC/examples"

# compare_scores.sh: four scoring functions, entropy within [0, ln 32], dot far more peaked than
# scaled dot (the point of the 1/sqrt(d_k) scaling).
bash "$E/compare_scores.sh" cs >cs.txt 2>&1 && pass || fail "compare_scores.sh: $(tail -3 cs.txt)"
[ "$(grep -cE '^(scaled-dot|dot|general|additive) ' cs.txt)" -eq 4 ] && pass || fail "four scores: $(cat cs.txt)"
awk '$1 ~ /^(scaled-dot|dot|general|additive)$/ { if ($2 < 0 || $4 > 3.4658) bad = 1 } END { exit bad }' cs.txt &&
  pass || fail "entropy outside [0, ln 32]: $(cat cs.txt)"
awk '$1 == "scaled-dot" { s = $3 } $1 == "dot" { d = $3 } END { exit !(s > 2 * d) }' cs.txt && pass ||
  fail "dot not more peaked than scaled dot: $(cat cs.txt)"
for s in general additive; do [ -s "cs/$s-params.h5" ] && pass || fail "$s parameters not saved"; done

# reversal_circuit.sh: the demo model reverses its answers; the first answer digit's information
# sits at the last prompt digit before each layer and, after layer 1, at the separator only
# (patching there restores the clean logit difference; elsewhere it stays the corrupted one); some
# head's ablation costs accuracy; both pictures drawn.
bash "$E/reversal_circuit.sh" 32 rc >rc.txt 2>&1 && pass || fail "reversal_circuit.sh: $(tail -3 rc.txt)"
awk '/^clean accuracy/ { exit !($NF >= 0.95) }' rc.txt && pass || fail "clean accuracy: $(cat rc.txt)"
awk '$1 == "resid_pre@0" || $1 == "resid_pre@1" || $1 == "resid_post@1" {
  at = ($1 == "resid_post@1") ? 9 : 8          # field of position 6 (the last digit) or 7 (the separator)
  for (i = 2; i <= NF; i++) if ((i == at) != ($i > 5)) bad = 1; rows++ } END { exit bad || rows != 3 }' rc.txt && pass ||
  fail "patching table: $(cat rc.txt)"
awk '/^  layer [01]:/ { for (i = 3; i <= NF; i++) if ($i > 0.05) hit = 1 } END { exit !hit }' rc.txt && pass ||
  fail "no head matters: $(cat rc.txt)"
for p in ablation_drop patching; do [ -s "rc/$p.png" ] && pass || fail "rc/$p.png missing"; done

# monotonic_alignment.sh: the hard alignment stops at frame 3i for every output; the soft one's
# mass is at most 1 and falls; its expected position moves forward.
bash "$E/monotonic_alignment.sh" mono >mono.txt 2>&1 && pass || fail "monotonic_alignment.sh: $(tail -3 mono.txt)"
[ "$(awk 'NF == 6 && $1 ~ /^[0-9]+$/' mono.txt | wc -l)" -eq 16 ] && pass || fail "16 outputs: $(cat mono.txt)"
awk 'NF == 6 && $1 ~ /^[0-9]+$/ { if ($3 != $2 || $5 > 1 || (rows++ && ($5 >= mass || $4 <= pos))) bad = 1
  mass = $5; pos = $4 } END { exit bad || rows != 16 }' mono.txt && pass || fail "monotonic alignments: $(cat mono.txt)"

# t5_bart.sh: T5's buckets split by the key's side of the query (before: 0..3, after: 4..7, the
# query itself 0), a decoder's keys after the query all in bucket 0; BART's forced first and last
# tokens; the three pictures.
bash "$E/t5_bart.sh" tb >tb.txt 2>&1 && pass || fail "t5_bart.sh: $(tail -3 tb.txt)"
[ "$(sed -n 's/^encoder buckets of query 12 over keys 0..23: //p' tb.txt)" = "3 3 3 3 3 3 3 3 2 2 2 1 0 5 6 6 6 7 7 7 7 7 7 7" ] &&
  pass || fail "encoder buckets: $(cat tb.txt)"
[ "$(sed -n 's/^decoder buckets of query 12 over keys 0..23: //p' tb.txt)" = "7 7 7 7 7 6 5 4 4 3 2 1 0 0 0 0 0 0 0 0 0 0 0 0" ] &&
  pass || fail "decoder buckets: $(cat tb.txt)"
grep -qE '^BART generated: 0( [0-9]+)* 2$' tb.txt && pass || fail "BART's forced tokens: $(cat tb.txt)"
for p in t5_bias_head0 t5_cross_head0 bart_cross_head0; do [ -s "tb/$p.png" ] && pass || fail "tb/$p.png missing"; done

# vit_attention.sh: a label per image, each head's class-token attention over each image.
bash "$E/vit_attention.sh" va >va.txt 2>&1 && pass || fail "vit_attention.sh: $(tail -3 va.txt)"
[ "$(grep -cE '^(rgb|palette|gray)\.png: label [0-4] \(logit ' va.txt)" -eq 3 ] && pass || fail "labels: $(cat va.txt)"
[ "$(ls va/*_layer1_head*.png | wc -l)" -eq 12 ] && pass || fail "12 pictures: $(ls va)"

# sweep_heads.sh: six head counts, per-head weights (8, H, 64, 64) that are distributions.
bash "$E/sweep_heads.sh" sh >sh.txt 2>&1 && pass || fail "sweep_heads.sh: $(tail -3 sh.txt)"
[ "$(grep -c 'rows all sum to 1' sh.txt)" -eq 6 ] && pass || fail "six sweeps with row sums 1: $(cat sh.txt)"
for h in 1 2 4 8 16 32; do
  [ "$(shape "sh/h$h.h5" weights)" = "8, $h, 64, 64" ] && pass || fail "h$h weights: $(shape "sh/h$h.h5" weights)"
done

# visualise_encodings.sh: three pictures, and RoPE scores constant along each diagonal.
bash "$E/visualise_encodings.sh" enc >enc.txt 2>&1 && pass || fail "visualise_encodings.sh: $(tail -3 enc.txt)"
for p in sinusoidal rope_cos rope_scores; do
  read -r w h colours < <(pnginfo "enc/$p.png")
  [ "${w:-0}" -ge 512 ] && [ "${h:-0}" -ge 256 ] && [ "${colours:-0}" -ge 100 ] && pass ||
    fail "$p.png: $w x $h, $colours colours"
done
for d in 0 1 2; do
  a=$(sed -n "s/^  p = $d, j = 0: //p" enc.txt)
  b=$(sed -n "s/^  p = $((d + 40)), j = 40: //p" enc.txt)
  [ -n "$a" ] && [ "$a" = "$b" ] && pass || fail "RoPE score at p - j = $d: '$a' and '$b'"
done
# ... and everywhere, not only at the printed positions: row p + 1 is row p shifted right by one.
h5dump -w 0 -d /scores enc/rope_scores.h5 | sed -n 's/^ *([0-9]*,0): //p' | tr -d ',' |
  awk 'NR > 1 { for (j = 2; j <= NF; j++) if ($j != prev[j - 1] && ($j - prev[j - 1]) ^ 2 > 1e-8) bad = 1 }
       { for (j = 1; j <= NF; j++) prev[j] = $j } END { exit bad }' && pass || fail "RoPE scores are not Toeplitz"

# reverse_model_attention.sh: the trained model reverses the digits; four pictures, one per head.
bash "$E/reverse_model_attention.sh" 31415926 rm >rm.txt 2>&1 && pass || fail "reverse_model_attention.sh: $(tail -3 rm.txt)"
grep -q "^out: 62951413$" rm.txt && grep -q "(reversed correctly)" rm.txt && pass || fail "31415926 reversed: $(cat rm.txt)"
for head in 0 1 2 3; do
  read -r w h _ < <(pnginfo "rm/cross_head$head.png")
  [ "${w:-0}" -ge 512 ] && [ "${h:-0}" -ge 512 ] && pass || fail "cross_head$head.png: $w x $h"
done
grep -q "^row sums  9 rows of 8: all sum to 1" rm.txt && pass || fail "cross-attention row sums: $(cat rm.txt)"
bash "$E/reverse_model_attention.sh" 12 bad >bad.txt 2>&1
[ $? -eq 2 ] && grep -q "give 3 to 10 digits" bad.txt && pass || fail "2 digits: $(cat bad.txt)"

# linear_vs_softmax.sh (up to n = 4096 here): four variants at three sizes, the linear forms' errors
# printed beside their times, and Performer's error falling as M grows (the script's own check).
bash "$E/linear_vs_softmax.sh" lvs 4096 >lvs.txt 2>&1 && pass || fail "linear_vs_softmax.sh: $(tail -3 lvs.txt)"
[ "$(grep -cE '^ *(256|1024|4096) (softmax|linear|performer|linformer) ' lvs.txt)" -eq 12 ] && pass ||
  fail "linear_vs_softmax.sh: 12 rows: $(cat lvs.txt)"
awk '$2 ~ /^(linear|performer|linformer)$/ && $5 !~ /^[0-9.e+-]+$/ {bad = 1} END {exit bad}' lvs.txt && pass ||
  fail "linear_vs_softmax.sh: an error column is missing: $(cat lvs.txt)"
grep -q "^performer's error falls with M" lvs.txt && pass || fail "linear_vs_softmax.sh: $(tail -3 lvs.txt)"

# sweep_jobs.sh: 12 tasks run 4 at a time, then combined into one file; every concurrent run's file
# holds the bytes of a run of the same task alone (nothing clobbered), and nothing else is left.
JOBS=4 bash "$E/sweep_jobs.sh" sj >sj.txt 2>&1 && pass || fail "sweep_jobs.sh: $(tail -3 sj.txt)"
grep -q "^12 runs in sj/results.h5" sj.txt && pass || fail "sweep_jobs.sh: $(cat sj.txt)"
[ "$(h5ls sj/results.h5 | grep -c Group)" -eq 12 ] && [ "$(shape sj/results.h5 h16_w8_s2/weights)" = "2, 32, 32" ] && pass ||
  fail "results.h5: $(h5ls sj/results.h5 | head -3)"
[ "$(find sj -type f | wc -l)" -eq 13 ] && pass || fail "sweep_jobs.sh left other files: $(find sj -type f | grep -v '/runs/h')"
for k in 0 5 11; do bash "$E/sweep_jobs.sh" alone --task "$k"; done
same_run() { cmp -s <(values "$1" output) <(values "$2" output) && cmp -s <(values "$1" weights) <(values "$2" weights); }
for f in alone/runs/*.h5; do same_run "$f" "sj/runs/${f##*/}" && pass || fail "sweep_jobs.sh: ${f##*/} differs when run alone"; done
SLURM_ARRAY_TASK_ID=7 bash "$E/sweep_jobs.sh" slurm && [ "$(ls slurm/runs)" = h4_w8_s2.h5 ] &&
  same_run slurm/runs/h4_w8_s2.h5 sj/runs/h4_w8_s2.h5 && pass || fail "one Slurm array task: $(ls slurm/runs)"

finish
