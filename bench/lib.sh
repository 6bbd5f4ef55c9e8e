# Shared set-up and helpers of the bench/ scripts, sourced first by each: strict mode, the
# repository root as working directory, the bench packages installed, BUILD (the script's first
# argument, default build/) and T (its tools), WORK (a scratch directory removed on exit).
# Timings are wall clock from bash's own $EPOCHREALTIME, read around a run (elapsed_us).
# `start=$(date +%s%N)` there added the start of a date process to every time (~1.2 ms here:
# /bin/true took 2.0 ms timed that way, 0.75 ms this way), which counted against our
# whole-process figures.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/install-deps.sh bench
BUILD=${1:-build}
T="$BUILD/tools"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# elapsed_us START END: microseconds between two readings of $EPOCHREALTIME (seconds with six
# decimals, the locale's decimal point).
elapsed_us() { echo $((${2//[.,]/} - ${1//[.,]/})); }

# elapsed_s START END: the seconds between them, six decimals.
elapsed_s() { echo "scale=6; $(elapsed_us "$1" "$2") / 1000000" | bc; }

# median: the median of the numbers on standard input, one a line (the mean of the middle two for
# an even count). Some scripts define their own (over a file, or the lower middle).
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# gflops FLOPS SECONDS: the rate in GFLOP/s, one decimal.
gflops() { echo "scale=1; $1 / $2 / 1000000000" | bc; }

# pct_of_rate FLOPS SECONDS GFLOPS: the rate of FLOPS in SECONDS as a percentage of GFLOPS (the sgemm
# ceiling or the FMA peak), for printf's %.0f.
pct_of_rate() { echo "100 * $1 / $2 / ($3 * 1000000000)" | bc -l; }

# mean_ms RUNS CMD...: mean wall time per run in milliseconds.
mean_ms() {
  local runs=$1
  shift
  local start end
  start=$EPOCHREALTIME
  for _ in $(seq "$runs"); do "$@" >/dev/null 2>&1; done
  end=$EPOCHREALTIME
  echo "scale=2; $(elapsed_us "$start" "$end") / $runs / 1000" | bc
}

# best_s RUNS CMD...: best wall time of RUNS runs, in seconds.
best_s() {
  local runs=$1 best=""
  shift
  for _ in $(seq "$runs"); do
    local start end t
    start=$EPOCHREALTIME
    "$@" >/dev/null 2>&1
    end=$EPOCHREALTIME
    t=$(echo "scale=4; $(elapsed_us "$start" "$end") / 1000000" | bc)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc)" -eq 1 ]; then best=$t; fi
  done
  echo "$best"
}

# peak_mib CMD...: peak resident memory in MiB (/usr/bin/time -v).
peak_mib() { /usr/bin/time -v "$@" 2>&1 >/dev/null | awk '/Maximum resident/ {printf "%.1f", $6 / 1024}'; }

# Our tools run as users run them: without OPENBLAS_CORETYPE, so at the core they choose themselves
# (OpenBLAS's pick, or SkylakeX/Haswell where OpenBLAS falls back). That core fits the CPU: PyTorch
# is tried with it as well as with OpenBLAS's default, since a PyTorch user can set the variable too.
unset OPENBLAS_CORETYPE
OUR_BLAS=$("$T/pe-gen" -V | sed -n 's/^BLAS: //p')
FIT_CORE=$(echo "$OUR_BLAS" | sed -n 's/^OpenBLAS core \([A-Za-z0-9]*\) .*/\1/p')
echo "== ours (OPENBLAS_CORETYPE unset): $OUR_BLAS"

# ceiling_bound FLOPS PYTORCH_S GFLOPS PEAK: the best ratio against PyTorch's PYTORCH_S that a run of
# FLOPS could reach at the sgemm ceiling GFLOPS measured in the same run, with nothing else (no
# start-up, I/O or exit): a ratio goal above it needs more than the ceiling. Then the same at the
# FMA units' peak PEAK (fma_peak), which no run can pass.
ceiling_bound() {
  local at_ceiling at_peak
  at_ceiling=$(echo "$1 / ($3 * 1000000000)" | bc -l)
  at_peak=$(echo "$1 / ($4 * 1000000000)" | bc -l)
  printf "  (with nothing else it would take %.4f s = %.2fx PyTorch's best at the sgemm ceiling, %.4f s = %.2fx at the FMA peak)\n" \
    "$at_ceiling" "$(echo "$2 / $at_ceiling" | bc -l)" "$at_peak" "$(echo "$2 / $at_peak" | bc -l)"
}

# sgemm_ceiling THREADS: "GFLOP/s core" of sgemm 2048^3 at the core that fits the CPU.
sgemm_ceiling() { "$BUILD/bench/sgemm_rate" 2048 "$1"; }

# fma_peak THREADS: "GFLOP/s isa" of the CPU's fused multiply-adds alone (bench/fma_peak.cpp), the
# rate no product can pass. OpenBLAS's sgemm reaches ~82% of it on a Zen 4, blas::linear ~92%.
fma_peak() { "$BUILD/bench/fma_peak" "$1"; }

# machine_limits [MORE]: what this machine can do, measured now on 2 threads: sets sg2 and sg_core
# (sgemm_ceiling) and peak2 and peak_isa (fma_peak), and prints them as a bench's first line, MORE
# (that bench's own facts) at its end.
# shellcheck disable=SC2120 # MORE is optional
machine_limits() {
  read -r sg2 sg_core < <(sgemm_ceiling 2)
  read -r peak2 peak_isa < <(fma_peak 2)
  echo "== sgemm 2048^3 at $sg_core (the core that fits this CPU): $sg2 GFLOP/s on 2 threads; FMA peak ($peak_isa): $peak2${1:+; $1}"
}

# torch_best CMD...: runs CMD (a PyTorch bench whose line starts with its best time and ends with
# its OpenBLAS core; CMD gets its torch threads appended) at (torch threads, OpenBLAS threads) =
# (2,2), (1,2), (1,1), each with OpenBLAS's default core and with $FIT_CORE. Prints every setting
# on standard error; echoes the line of the fastest.
torch_best() {
  local best="" line core tt ob default_core=""
  for core in default "$FIT_CORE"; do
    for cfg in "2 2" "1 2" "1 1"; do
      read -r tt ob <<<"$cfg"
      if [ "$core" = default ]; then
        line=$(env -u OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS="$ob" /usr/bin/python3 "$@" "$tt")
        default_core=${line##* }
      else
        [ "${default_core%%/*}" = "$core" ] && break # the default already is the fitting core
        line=$(OPENBLAS_CORETYPE=$core OPENBLAS_NUM_THREADS="$ob" /usr/bin/python3 "$@" "$tt")
      fi
      printf "  PyTorch (torch %s, OpenBLAS %s, core %s): %s\n" "$tt" "$ob" "${line##* }" "${line% *}" >&2
      if [ -z "$best" ] || [ "$(echo "${line%% *} < ${best%% *}" | bc)" -eq 1 ]; then best=$line; fi
    done
  done
  echo "$best"
}
