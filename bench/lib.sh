# Shared set-up and helpers of the bench/ scripts, sourced first by each: strict mode, the
# repository root as working directory, the bench packages installed, BUILD (the script's first
# argument, default build/) and T (its tools), WORK (a scratch directory removed on exit).
# Timings are wall clock from date +%s%N.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/install-deps.sh bench
BUILD=${1:-build}
T="$BUILD/tools"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# gflops FLOPS SECONDS: the rate in GFLOP/s, one decimal.
gflops() { echo "scale=1; $1 / $2 / 1000000000" | bc; }

# mean_ms RUNS CMD...: mean wall time per run in milliseconds.
mean_ms() {
  local runs=$1
  shift
  local start end
  start=$(date +%s%N)
  for _ in $(seq "$runs"); do "$@" >/dev/null 2>&1; done
  end=$(date +%s%N)
  echo "scale=2; ($end - $start) / $runs / 1000000" | bc
}

# best_s RUNS CMD...: best wall time of RUNS runs, in seconds.
best_s() {
  local runs=$1 best=""
  shift
  for _ in $(seq "$runs"); do
    local start end t
    start=$(date +%s%N)
    "$@" >/dev/null 2>&1
    end=$(date +%s%N)
    t=$(echo "scale=4; ($end - $start) / 1000000000" | bc)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc)" -eq 1 ]; then best=$t; fi
  done
  echo "$best"
}

# peak_mib CMD...: peak resident memory in MiB (/usr/bin/time -v).
peak_mib() { /usr/bin/time -v "$@" 2>&1 >/dev/null | awk '/Maximum resident/ {printf "%.1f", $6 / 1024}'; }
