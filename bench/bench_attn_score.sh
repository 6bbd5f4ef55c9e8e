#!/usr/bin/env bash
# attn-score benchmarks (issue 3): figures and ratios from one run, never pass/fail.
#   1. sgemm's GFLOP/s (the ceiling), scaled dot-product attention at b=8 (8 heads as batch),
#      n=m=4096, d=64 against PyTorch's softmax(QK^T/sqrt d)V at its best of (torch threads,
#      OpenBLAS threads) = (2,2), (1,2), (1,1), each at OpenBLAS's default core and
#      the core that fits the CPU (bench/lib.sh). Flops counted as 4 b n m d.
#   2. n=m=32768, d=64, one head, no weights: peak memory above inputs and outputs.
#   3. --window 128 against full attention at several n.
# Usage: bench/bench_attn_score.sh [BUILD_DIR]   (default build/; run scripts/build.sh first)
source "$(dirname "$0")/lib.sh"

# kernel_s ARGS...: seconds of the attention kernel alone (attn-score --verbose).
kernel_s() { "$T/attn-score" "$@" --verbose -o "$WORK/o.h5" 2>&1 | sed -n 's/.*attention: \([0-9.]*\) s.*/\1/p'; }

read -r sg1 _ < <(sgemm_ceiling 1)
machine_limits "sgemm on 1 thread: $sg1"

echo "== scaled dot-product, b=8, n=m=4096, d=64, 2 threads"
for x in q k v; do "$T/tensor-gen" --shape 8,4096,64 --seed $((RANDOM)) -o "$WORK/$x.h5"; done
A=(-q "$WORK/q.h5" -k "$WORK/k.h5" -v "$WORK/v.h5")
flops=$((4 * 8 * 4096 * 4096 * 64))
best_k=""
for _ in 1 2 3; do
  t=$(kernel_s "${A[@]}" --threads 2)
  if [ -z "$best_k" ] || [ "$(echo "$t < $best_k" | bc)" -eq 1 ]; then best_k=$t; fi
done
wall=$(best_s 3 "$T/attn-score" "${A[@]}" --threads 2 -o "$WORK/o.h5")
printf "  attn-score kernel      %7.4f s  %6s GFLOP/s = %.0f%% of sgemm on 2 threads, %.0f%% of the FMA peak\n" \
  "$best_k" "$(gflops $flops "$best_k")" "$(pct_of_rate $flops "$best_k" "$sg2")" "$(pct_of_rate $flops "$best_k" "$peak2")"
printf "  attn-score process     %7.4f s  (reads 24 MiB, writes 8 MiB)\n" "$wall"
read -r best_t _ < <(torch_best bench/torch_attention.py 8 4096 64)
printf "  => kernel %.2fx and whole process %.2fx the throughput of PyTorch's best setting\n" \
  "$(echo "$best_t / $best_k" | bc -l)" "$(echo "$best_t / $wall" | bc -l)"

echo "== n=m=32768, d=64, one head, no weights (blocked kernel)"
for x in q k v; do "$T/tensor-gen" --shape 1,32768,64 --seed $((RANDOM)) -o "$WORK/l$x.h5"; done
L=(-q "$WORK/lq.h5" -k "$WORK/lk.h5" -v "$WORK/lv.h5")
io_mib=$(echo "scale=1; 4 * 32768 * 64 * 4 / 1048576" | bc)
base=$(peak_mib "$T/attn-score" --version)
peak=$(peak_mib "$T/attn-score" "${L[@]}" -o "$WORK/lo.h5")
t=$(kernel_s "${L[@]}")
printf "  peak %s MiB = process baseline %s + inputs and output %s + %.1f MiB more (goal: < 100); kernel %.2f s\n" \
  "$peak" "$base" "$io_mib" "$(echo "$peak - $base - $io_mib" | bc -l)" "$t"

echo "== --window 128 --causal against full causal attention, d=64, one head"
for n in 8192 16384 32768 65536; do
  for x in q k v; do "$T/tensor-gen" --shape 1,$n,64 --seed $((RANDOM)) -o "$WORK/w$x.h5"; done
  W=(-q "$WORK/wq.h5" -k "$WORK/wk.h5" -v "$WORK/wv.h5" --causal)
  tw=$(kernel_s "${W[@]}" --window 128)
  tf=$(kernel_s "${W[@]}")
  printf "  n=%6d  window %8.4f s  full %8.3f s  full/window %6.1fx\n" "$n" "$tw" "$tf" "$(echo "$tf / $tw" | bc -l)"
done
