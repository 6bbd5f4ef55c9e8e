#!/usr/bin/env bash
# The MPI build (issue 17): figures only, never pass/fail.
#   1. encode of a 6-layer model (E = 512, 8 heads, F = 2048) on (64, 512, 512): one process on 2
#      threads, one on 1 thread, and mpirun with 2 ranks of 1 thread each; the speed-up of 2 ranks
#      over 1 x 1 and over 1 x 2, with the sgemm ceiling of the same run.
#   2. the MPI start-up cost: a tiny encode under mpirun -n 1 and -n 2 against the same tool
#      started directly.
#   3. the I/O share: the whole run against the compute the tool reports (--verbose).
# Usage: bench/bench_mpi.sh [MPI_BUILD_DIR]   (default build-mpi/; scripts/test.sh --mpi builds it)
source "$(dirname "$0")/lib.sh" "${1:-build-mpi}"
scripts/install-deps.sh mpi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() {
  local n=$1
  shift
  mpirun --oversubscribe -q -n "$n" "$@"
}

read -r sg1 _ < <(sgemm_ceiling 1)
machine_limits "sgemm on 1 thread: $sg1"

echo "== encode, 6 layers, E=512, 8 heads, F=2048, input (64, 512, 512)"
"$T/tensor-gen" --shape 64,512,512 --seed 1 -o "$WORK/x.h5"
"$T/encode" -i "$WORK/x.h5" --init xavier --layers 6 --embed-dim 512 --heads 8 --ffn-dim 2048 --seed 1 \
  --save-weights "$WORK/w.h5" -o "$WORK/o.h5"
E=(-i "$WORK/x.h5" --weights "$WORK/w.h5")
mkdir "$WORK/one" "$WORK/two" # the same command line (-o o.h5) in each, so the files can be compared
flops=$(echo "64 * 512 * 6 * 2 * (4 * 512 * 512 + 2 * 512 * 2048 + 2 * 512 * 512)" | bc)
T=$(realpath "$T")
one2=$(best_s 2 "$T/encode" "${E[@]}" --threads 2 -o "$WORK/o1.h5")
one1=$(cd "$WORK/one" && best_s 2 "$T/encode" "${E[@]}" --threads 1 -o o.h5)
two1=$(cd "$WORK/two" && best_s 2 mpi 2 "$T/encode" "${E[@]}" --threads 1 -o o.h5)
cmp -s "$WORK/one/o.h5" "$WORK/two/o.h5" && same=identical || same="DIFFERENT"
printf "  1 process x 2 threads  %7.3f s  %6s GFLOP/s\n" "$one2" "$(gflops "$flops" "$one2")"
printf "  1 process x 1 thread   %7.3f s  %6s GFLOP/s\n" "$one1" "$(gflops "$flops" "$one1")"
printf "  2 ranks x 1 thread     %7.3f s  %6s GFLOP/s  (output bytes %s to one process's)\n" "$two1" \
  "$(gflops "$flops" "$two1")" "$same"
printf "  => 2 ranks: %.2fx one process on 1 thread, %.2fx one process on 2 threads\n" \
  "$(echo "$one1 / $two1" | bc -l)" "$(echo "$one2 / $two1" | bc -l)"
peak1=$(peak_mib "$T/encode" "${E[@]}" --threads 2 -o "$WORK/o1.h5")
echo "  peak memory: one process ${peak1} MiB (each rank holds the weights and its own chunk)"

echo "== MPI start-up: a tiny encode (1, 8, 16), 1 layer"
"$T/tensor-gen" --shape 1,8,16 -o "$WORK/t.h5"
T1=(-i "$WORK/t.h5" --init xavier --layers 1 --embed-dim 16 --heads 2 --ffn-dim 32)
direct=$(mean_ms 10 "$T/encode" "${T1[@]}" -o "$WORK/t1.h5")
n1=$(mean_ms 5 mpi 1 "$T/encode" "${T1[@]}" -o "$WORK/t2.h5")
n2=$(mean_ms 5 mpi 2 "$T/encode" "${T1[@]}" -o "$WORK/t3.h5")
printf "  started directly %7.1f ms; mpirun -n 1 %7.1f ms; mpirun -n 2 %7.1f ms (start-up %.0f / %.0f ms)\n" \
  "$direct" "$n1" "$n2" "$(echo "$n1 - $direct" | bc -l)" "$(echo "$n2 - $direct" | bc -l)"

echo "== I/O and set-up: one run's wall time against the encoder's own time (--verbose, the slower rank)"
for n in 1 2; do
  start=$EPOCHREALTIME
  mpi $n "$T/encode" "${E[@]}" --verbose -o "$WORK/o2.h5" 2>"$WORK/v.txt"
  end=$EPOCHREALTIME
  wall=$(echo "scale=4; $(elapsed_us "$start" "$end") / 1000000" | bc)
  compute=$(sed -n 's/.*encoder: \([0-9.]*\) s.*/\1/p' "$WORK/v.txt" | sort -g | tail -1)
  printf "  %d rank(s): encoder %.3f s of %.3f s; %.3f s start-up, weights, reading and writing (64 MiB in, 64 MiB out)\n" \
    "$n" "$compute" "$wall" "$(echo "$wall - $compute" | bc -l)"
done
