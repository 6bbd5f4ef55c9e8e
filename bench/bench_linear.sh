#!/usr/bin/env bash
# attn-score's linear-time forms (issue 19): figures and ratios from one run, never pass/fail.
#   1. Causal attention on one sequence, n = 65536, d = 64, 2 threads: our blocked softmax kernel
#      against --attention linear (elu + 1) and --attention performer (M = 256): attention time
#      (--verbose), whole process, peak memory (/usr/bin/time -v), and the error against exact
#      softmax (relative root mean square). PyTorch's causal softmax and its causal linear
#      attention (cumulative sums, bench/torch_linear.py) at their best of (torch threads,
#      OpenBLAS threads) and cores, at n = 16384 (its chunked softmax at 65536 takes minutes).
#   2. Bidirectional Performer, M = 256, and Linformer, k = 256, at n = 16384 against exact softmax.
# q and k are normal with standard deviation 0.5, v standard normal.
# Usage: bench/bench_linear.sh [BUILD_DIR]   (default build/; run scripts/build.sh first)
source "$(dirname "$0")/lib.sh"

# kernel_s ARGS...: best of 3 of the attention's own time (attn-score --verbose).
kernel_s() {
  for _ in 1 2 3; do
    "$T/attn-score" "$@" --verbose -o "$WORK/o.h5" 2>&1 | sed -n 's/.*attention: \([0-9.]*\) s.*/\1/p'
  done | sort -n | head -1
}
values() {
  local txt
  txt=$(mktemp)
  h5dump -d /output -y -m %.9g -o "$txt" "$1" >/dev/null && tr -s ' ,\n' '\n' <"$txt" | grep .
  rm -f "$txt"
}
# rel_rms A B: |A - B| / |B| over /output
rel_rms() { paste <(values "$1") <(values "$2") | awk '{d = $1 - $2; s += d * d; t += $2 * $2} END {printf "%.3g", sqrt(s / t)}'; }
ratio() { echo "scale=1; $1 / $2" | bc; }

machine_limits

inputs() { # N: q, k, v of one sequence of N positions, d = 64
  "$T/tensor-gen" --shape 1,"$1",64 --seed 1 --std 0.5 -o "$WORK/q$1.h5"
  "$T/tensor-gen" --shape 1,"$1",64 --seed 2 --std 0.5 -o "$WORK/k$1.h5"
  "$T/tensor-gen" --shape 1,"$1",64 --seed 3 -o "$WORK/v$1.h5"
}

n=65536
inputs $n
A=(-q "$WORK/q$n.h5" -k "$WORK/k$n.h5" -v "$WORK/v$n.h5" --causal --threads 2)
echo "== causal, one sequence, n = $n, d = 64, 2 threads (inputs 48 MiB, output 16 MiB)"
"$T/attn-score" "${A[@]}" -o "$WORK/exact.h5"
printf "  %-22s %9s %9s %9s %9s\n" variant "attn (s)" "proc (s)" "peak MiB" error
declare -A kt
for variant in softmax linear "performer --features 256 --orthogonal --seed 4"; do
  name=${variant%% *}
  # shellcheck disable=SC2086
  extra=(--attention $variant)
  kt[$name]=$(kernel_s "${A[@]}" "${extra[@]}")
  wall=$(best_s 3 "$T/attn-score" "${A[@]}" "${extra[@]}" -o "$WORK/$name.h5")
  peak=$(peak_mib "$T/attn-score" "${A[@]}" "${extra[@]}" -o "$WORK/$name.h5")
  err="-"
  [ "$name" = softmax ] || err=$(rel_rms "$WORK/$name.h5" "$WORK/exact.h5")
  printf "  %-22s %9.4f %9.4f %9s %9s\n" "$name" "${kt[$name]}" "$wall" "$peak" "$err"
done
echo "  => linear $(ratio "${kt[softmax]}" "${kt[linear]}")x faster than our softmax kernel, performer $(ratio "${kt[softmax]}" "${kt[performer]}")x"

n=16384
inputs $n
echo "== PyTorch at n = $n, causal (its best setting; ours on the same input sizes)"
A=(-q "$WORK/q$n.h5" -k "$WORK/k$n.h5" -v "$WORK/v$n.h5" --threads 2)
for mode in softmax linear; do
  read -r best peak _ < <(torch_best bench/torch_linear.py $mode $n 64)
  ours=$(kernel_s "${A[@]}" --causal --attention $mode)
  printf "  %-8s PyTorch %8.4f s (peak %s MiB), ours %8.4f s => %sx\n" $mode "$best" "$peak" "$ours" "$(ratio "$best" "$ours")"
done

echo "== bidirectional, n = $n, d = 64, 2 threads"
"$T/attn-score" "${A[@]}" -o "$WORK/exact16k.h5"
soft=$(kernel_s "${A[@]}")
printf "  %-30s %9s s\n" softmax "$soft"
for variant in "performer --features 256 --orthogonal --seed 4" "linformer --init xavier --proj-dim 256 --seed 4"; do
  # shellcheck disable=SC2086
  extra=(--attention $variant)
  t=$(kernel_s "${A[@]}" "${extra[@]}")
  "$T/attn-score" "${A[@]}" "${extra[@]}" -o "$WORK/v.h5"
  note=""
  [ "${variant%% *}" = linformer ] && note=" (random E, F, as at initialisation)"
  printf "  %-30s %9s s  %sx faster; error %s%s\n" "${variant%% --*}" \
    "$t" "$(ratio "$soft" "$t")" "$(rel_rms "$WORK/v.h5" "$WORK/exact16k.h5")" "$note"
done
