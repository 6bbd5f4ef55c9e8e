#!/usr/bin/env bash
# What looking inside a run costs (issue 55): figures and ratios from one run, never pass/fail.
#   1. the bench encoder (6 x 512, 8 heads, FFN 2048, --init xavier) on (8, 512, 512): the plain run
#      against --emit-weights, --emit-activations pattern (every layer), --emit-activations of every
#      name, --ablate-heads 0.1, a --patch of resid_mid at layer 3 and a --steer; the layers' seconds
#      (encode --verbose: without reading and writing) and whole processes, rounds alternating the
#      runs, the ratio the median of per-round ratios (the goals: weights or pattern at most 1.25x,
#      an ablation or patch at most 1.05x);
#   2. bounded memory: every activation of the same encoder for inputs of 1x and 4x the items, peak
#      RSS (/usr/bin/time -v) against the plain run's (the goal: within 1.5x; every activation is
#      about 10 KiB per token and layer, so a 1 GiB input (2^19 tokens at E = 512) would write
#      ~160 GB: the figures below scale by the items, the peak does not);
#   3. attn-rollout: rollout over 12 layers of (8, 12, 512, 512) weights (the goal: 2 s) and flow
#      over 128 positions x 12 layers (the goal: 60 s, or what bounds it).
# Usage: bench/bench_probe.sh [BUILD_DIR] [ROUNDS]
source "$(dirname "$0")/lib.sh"
ROUNDS=${2:-5}
unset OPENBLAS_CORETYPE
grep -m1 "model name" /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "cores: $(nproc)"
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

ENC=(--init xavier --layers 6 --embed-dim 512 --heads 8 --ffn-dim 2048 --seed 1)
"$T/tensor-gen" --shape 8,512,512 --seed 2 -o "$WORK/x.h5"
"$T/tensor-gen" --shape 8,512,512 --seed 3 -o "$WORK/clean_x.h5"
"$T/tensor-gen" --shape 512 --seed 4 -o "$WORK/dir.h5"
"$T/encode" -i "$WORK/clean_x.h5" "${ENC[@]}" --emit-activations resid_mid --emit-layers 3 -o "$WORK/clean.h5"
ALL=resid_pre,q,k,v,scores,pattern,z,attn_out,resid_mid,mlp_hidden,mlp_out,resid_post,final
declare -A RUN=(
  [plain]=""
  [emit_weights]="--emit-weights"
  [pattern]="--emit-activations pattern"
  [all]="--emit-activations $ALL"
  [ablate]="--ablate-heads 0.1"
  [patch]="--patch resid_mid@3=$WORK/clean.h5 --patch-positions 0-255"
  [steer]="--steer resid_post@2=$WORK/dir.h5:data --steer-scale 4"
)
ORDER=(plain emit_weights pattern all ablate patch steer)

# one NAME: "layers_s whole_s" of one encode process
one() {
  local s e layers
  s=$EPOCHREALTIME
  # shellcheck disable=SC2086
  "$T/encode" -i "$WORK/x.h5" "${ENC[@]}" ${RUN[$1]} --verbose -o "$WORK/out_$1.h5" 2>"$WORK/err.txt"
  e=$EPOCHREALTIME
  layers=$(sed -n 's/^encode: encoder: \([0-9.]*\) s,.*/\1/p' "$WORK/err.txt")
  echo "$layers $(echo "scale=4; $(elapsed_us "$s" "$e") / 1000000" | bc)"
}
for name in "${ORDER[@]}"; do one "$name" >/dev/null; done # warm the page cache
for r in $(seq "$ROUNDS"); do
  for name in "${ORDER[@]}"; do echo "$r $name $(one "$name")"; done
done >"$WORK/rounds.txt"
echo "1. (8, 512, 512) through 6 x 512 layers, $ROUNDS rounds: median seconds (layers / whole process), median ratio to plain"
for name in "${ORDER[@]}"; do
  layers=$(awk -v n="$name" '$2 == n {print $3}' "$WORK/rounds.txt" | median)
  whole=$(awk -v n="$name" '$2 == n {print $4}' "$WORK/rounds.txt" | median)
  ratio_l=$(awk -v n="$name" '$2 == "plain" {p[$1] = $3} $2 == n {x[$1] = $3} END {for (r in x) print x[r] / p[r]}' "$WORK/rounds.txt" | median)
  ratio_w=$(awk -v n="$name" '$2 == "plain" {p[$1] = $4} $2 == n {x[$1] = $4} END {for (r in x) print x[r] / p[r]}' "$WORK/rounds.txt" | median)
  printf "  %-13s layers %7.3f s (x%.3f)   whole %7.3f s (x%.3f)   output %s MB\n" "$name" "$layers" "$ratio_l" "$whole" \
    "$ratio_w" "$(($(stat -c %s "$WORK/out_$name.h5") / 1000000))"
done

echo "2. peak RSS, every activation against the plain run (whole processes)"
"$T/tensor-gen" --shape 32,512,512 --seed 5 -o "$WORK/x4.h5"
peak() { # INPUT ARGS...: MiB
  local in=$1
  shift
  /usr/bin/time -v "$T/encode" -i "$in" "${ENC[@]}" "$@" -o "$WORK/peak.h5" 2>"$WORK/time.txt"
  echo $(($(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt") / 1024))
}
for in in x x4; do
  p=$(peak "$WORK/$in.h5")
  a=$(peak "$WORK/$in.h5" --emit-activations "$ALL")
  printf "  %s (%s items): plain %s MiB, every activation %s MiB (x%.2f), written %s MB\n" "$in" \
    "$([ $in = x ] && echo 8 || echo 32)" "$p" "$a" "$(echo "$a / $p" | bc -l)" "$(($(stat -c %s "$WORK/peak.h5") / 1000000))"
done
rm -f "$WORK/peak.h5" "$WORK"/out_*.h5

echo "3. attn-rollout"
"$T/tensor-gen" --shape 8,512,768 --seed 6 -o "$WORK/bx.h5"
"$T/encode" -i "$WORK/bx.h5" --init xavier --layers 12 --embed-dim 768 --heads 12 --ffn-dim 3072 --emit-weights -o "$WORK/bw.h5"
s=$EPOCHREALTIME
/usr/bin/time -v "$T/attn-rollout" "$WORK/bw.h5" --verbose -o "$WORK/r.h5" 2>"$WORK/time.txt"
e=$EPOCHREALTIME
printf "  rollout, 12 layers of (8, 12, 512, 512) (%s MB of weights): computation %s s, whole process %.2f s, peak %s MiB\n" \
  "$(($(stat -c %s "$WORK/bw.h5") / 1000000))" "$(sed -n 's/^attn-rollout: rollout: \([0-9.]*\) s$/\1/p' "$WORK/time.txt")" \
  "$(echo "$(elapsed_us "$s" "$e") / 1000000" | bc -l)" "$(($(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt") / 1024))"
rm -f "$WORK/bw.h5" "$WORK/bx.h5"
"$T/tensor-gen" --shape 1,128,256 --seed 7 -o "$WORK/fx.h5"
"$T/encode" -i "$WORK/fx.h5" --init xavier --layers 12 --embed-dim 256 --heads 8 --ffn-dim 512 --emit-weights -o "$WORK/fw.h5"
"$T/attn-rollout" "$WORK/fw.h5" --method flow --rows 0-7 --verbose -o "$WORK/f.h5" 2>"$WORK/err.txt"
f8=$(sed -n 's/^attn-rollout: flow: \([0-9.]*\) s$/\1/p' "$WORK/err.txt")
printf "  flow, 128 positions x 12 layers: 8 output rows (1024 max flows) %s s: %.2f ms a flow; all 128 rows: %.0f s\n" \
  "$f8" "$(echo "$f8 / 1024 * 1000" | bc -l)" "$(echo "$f8 * 16" | bc -l)"
