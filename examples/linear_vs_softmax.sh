#!/usr/bin/env bash
# Linear-time attention against exact softmax attention, from the shell.
#
# 1. For n = 256 .. 16384 keys and queries (one sequence, d = 64; q and k normal with standard
#    deviation 0.5, v standard normal), the time of the attention (the tool's --verbose figure), the
#    tool's peak memory, and the error against exact softmax attention (relative root mean square,
#    |out - exact| / |exact| over all outputs), for: softmax (the blocked kernel), linear (elu + 1 features:
#    Katharopoulos et al. 2020, a different kernel, so not an approximation of softmax), performer
#    (FAVOR+, M = 256 orthogonal random features, which approximates softmax) and linformer (keys
#    and values projected to k = 256 by random E, F, as at initialisation: trained, they would be
#    learned). Exact softmax costs O(n^2 d); the linear forms O(n d r).
# 2. Performer's error against softmax as M grows, at n = 1024: it falls roughly as 1/sqrt(M), so
#    the last column, error * sqrt(M), stays roughly level. The script checks that it falls.
#
#   examples/linear_vs_softmax.sh [OUT_DIR] [MAX_N]   (tools on PATH; default linear-vs-softmax/, 16384)
set -euo pipefail
out=${1:-linear-vs-softmax}
max_n=${2:-16384}
mkdir -p "$out"

# attention TIME and PEAK MEMORY of one attn-score run, from its --verbose lines
run() {
  attn-score "$@" --verbose 2>&1 >/dev/null |
    awk '/ attention: [0-9.]+ s/ {t = $3} /peak memory:/ {m = $4} END {printf "%s %s\n", t, m}'
}
values() { # FILE: the /output values, one per line
  local txt
  txt=$(mktemp)
  h5dump -d /output -y -m %.9g -o "$txt" "$1" >/dev/null && tr -s ' ,\n' '\n' <"$txt" | grep .
  rm -f "$txt"
}
rms() { # relative root mean square difference of A:output from B:output: |A - B| / |B|
  paste <(values "$1") <(values "$2") | awk '{d = $1 - $2; s += d * d; t += $2 * $2} END {printf "%.3g\n", sqrt(s / t)}'
}

printf '%6s %-10s %9s %9s %12s\n' n variant seconds "peak MiB" "error"
n=256
while [ "$n" -le "$max_n" ]; do
  tensor-gen --shape 1,$n,64 --seed 1 --std 0.5 -o "$out/q$n.h5"
  tensor-gen --shape 1,$n,64 --seed 2 --std 0.5 -o "$out/k$n.h5"
  tensor-gen --shape 1,$n,64 --seed 3 -o "$out/v$n.h5"
  io=(-q "$out/q$n.h5" -k "$out/k$n.h5" -v "$out/v$n.h5")
  k=$((n < 256 ? n : 256))
  for variant in softmax linear performer linformer; do
    case $variant in
    softmax) extra=() ;;
    linear) extra=(--attention linear) ;;
    performer) extra=(--attention performer --features 256 --orthogonal --seed 4) ;;
    linformer) extra=(--attention linformer --init xavier --proj-dim $k --seed 4) ;;
    esac
    read -r secs peak < <(run "${io[@]}" "${extra[@]}" -o "$out/$variant$n.h5")
    err="-"
    [ $variant = softmax ] || err=$(rms "$out/$variant$n.h5" "$out/softmax$n.h5")
    printf '%6d %-10s %9s %9s %12s\n' $n $variant "$secs" "$peak" "$err"
  done
  n=$((n * 4))
done

echo
echo "performer against exact softmax, n = 1024, as the random features M grow:"
printf '%6s %12s %16s\n' M error "error * sqrt(M)"
errs=()
for M in 16 64 256 1024 4096; do
  attn-score -q "$out/q1024.h5" -k "$out/k1024.h5" -v "$out/v1024.h5" --attention performer --features $M \
    --orthogonal --seed 4 -o "$out/performer_M$M.h5"
  e=$(rms "$out/performer_M$M.h5" "$out/softmax1024.h5")
  errs+=("$e")
  printf '%6d %12s %16s\n' $M "$e" "$(awk -v e="$e" -v m=$M 'BEGIN {printf "%.3f", e * sqrt(m)}')"
done
# the check: from M = 16 to M = 4096 (256x) the error falls at least 4x (1/sqrt(M) would be 16x)
awk -v a="${errs[0]}" -v b="${errs[4]}" 'BEGIN {exit !(b < a / 4)}' || {
  echo "linear_vs_softmax.sh: performer's error did not fall with M (${errs[*]})" >&2
  exit 1
}
echo "performer's error falls with M: ${errs[0]} at M = 16, ${errs[4]} at M = 4096"
