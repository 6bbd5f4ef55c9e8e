#!/usr/bin/env bash
# mha-run benchmark (issue 4): figures and ratios from one run, never pass/fail.
# Self-attention on (8, 512, 512), E = 512, H = 8, 2 threads, without weights, with per-head
# weights and with averaged weights, against torch.nn.MultiheadAttention at its best of (torch
# threads, OpenBLAS threads) = (2,2), (1,2), (1,1), each at OpenBLAS's default core and the core that fits the CPU. Flops: 4 projections 2 b n E^2 each, plus
# 4 b n^2 E for the attention.
# Usage: bench/bench_mha_run.sh [BUILD_DIR]   (default build/; run scripts/build.sh first)
source "$(dirname "$0")/lib.sh"
B=8 N=512 E=512 H=8
flops=$((8 * B * N * E * E + 4 * B * N * N * E))

machine_limits
echo "== self-attention (b, n, E) = ($B, $N, $E), H = $H, 2 threads; $(gflops $flops 1) GFLOP per call"
"$T/tensor-gen" --shape $B,$N,$E --seed 1 -o "$WORK/x.h5"
"$T/mha-run" -q "$WORK/x.h5" --init xavier --embed-dim $E --heads $H --save-weights "$WORK/w.h5" -o "$WORK/o.h5"
# compute_s ARGS...: "best median" of 7 runs of the multi-head attention alone (mha-run --verbose).
compute_s() {
  for _ in 1 2 3 4 5 6 7; do
    "$T/mha-run" -q "$WORK/x.h5" --weights "$WORK/w.h5" --threads 2 "$@" --verbose -o "$WORK/o.h5" 2>&1 |
      sed -n 's/.*multi-head attention: \([0-9.]*\) s.*/\1/p'
  done | sort -n | awk '{t[NR] = $1} END {print t[1], t[4]}'
}
for mode in none heads average; do
  case $mode in
  none) flag="" ;;
  heads) flag="--need-weights" ;;
  average) flag="--average-weights" ;;
  esac
  # shellcheck disable=SC2086
  read -r ours ours_med < <(compute_s $flag)
  # shellcheck disable=SC2086
  wall=$(best_s 5 "$T/mha-run" -q "$WORK/x.h5" --weights "$WORK/w.h5" --threads 2 $flag -o "$WORK/o.h5")
  # shellcheck disable=SC2086
  peak=$(peak_mib "$T/mha-run" -q "$WORK/x.h5" --weights "$WORK/w.h5" --threads 2 $flag -o "$WORK/o.h5")
  echo "-- weights: $mode ${flag:+($flag)}"
  printf "  mha-run compute        %7.4f s (median %7.4f)  %6s GFLOP/s = %.0f%% of sgemm, %.0f%% of the FMA peak\n" \
    "$ours" "$ours_med" "$(gflops $flops "$ours")" "$(pct_of_rate $flops "$ours" "$sg2")" "$(pct_of_rate $flops "$ours" "$peak2")"
  printf "  mha-run whole process  %7.4f s  peak %s MiB (reads 8 MiB and the weights, writes the outputs)\n" "$wall" "$peak"
  read -r best_t best_med _ < <(torch_best bench/torch_mha.py $B $N $E $H $mode)
  printf "  => compute: best %.2fx, median %.2fx; whole process %.2fx (against PyTorch's best call)\n" \
    "$(echo "$best_t / $ours" | bc -l)" "$(echo "$best_med / $ours_med" | bc -l)" "$(echo "$best_t / $wall" | bc -l)"
  ceiling_bound "$flops" "$best_t" "$sg2" "$peak2"
done
