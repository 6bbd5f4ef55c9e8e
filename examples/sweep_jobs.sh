#!/usr/bin/env bash
# Many small runs, no MPI: a parameter sweep (heads x window x seed) as independent tasks of the
# serial tools, each writing its own file, combined at the end into one results file.
#
#   examples/sweep_jobs.sh OUT                 every task here, several at a time (xargs -P; GNU
#                                               parallel works the same: see run_all), then combine
#   sbatch --array=0-11 examples/sweep_jobs.sh OUT
#                                               one task per Slurm array element (SLURM_ARRAY_TASK_ID)
#   examples/sweep_jobs.sh OUT --combine       after the array (or sbatch --dependency=afterok:JOB)
#
# Task K: random inputs (2, 32, 64) from seed S, a fresh H-head nn.MultiheadAttention layer
# (mha-run --init, seed S) and local attention over its output with window W (attn-score
# --window W), piped, so a task makes no file but OUT/runs/hH_wW_sS.h5. Names come from the
# parameters and the tools' own temporary files have unique names: concurrent tasks never write
# the same file. OUT/results.h5 then holds /hH_wW_sS/{output,weights} for every task.
set -euo pipefail
out=${1:?usage: sweep_jobs.sh OUT [--combine | --task K]}
HEADS=(1 4 16)
WINDOWS=(2 8)
SEEDS=(1 2)
tasks=$((${#HEADS[@]} * ${#WINDOWS[@]} * ${#SEEDS[@]}))

# The parameters of task K: heads, window, seed.
params() {
  local k=$1
  echo "${HEADS[$((k / (${#WINDOWS[@]} * ${#SEEDS[@]})))]} ${WINDOWS[$((k / ${#SEEDS[@]} % ${#WINDOWS[@]}))]} ${SEEDS[$((k % ${#SEEDS[@]}))]}"
}

run_task() {
  local h w s
  read -r h w s < <(params "$1")
  mkdir -p "$out/runs"
  tensor-gen --shape 2,32,64 --seed "$s" -o - |
    mha-run -q - --init xavier --embed-dim 64 --heads "$h" --seed "$s" --threads 1 -o - |
    attn-score -q - -k - -v - --window "$w" --emit weights --threads 1 -o "$out/runs/h${h}_w${w}_s${s}.h5"
}

run_all() {
  # GNU parallel instead: seq 0 $((tasks - 1)) | parallel bash "$0" "$out" --task {}
  seq 0 $((tasks - 1)) | xargs -P "${JOBS:-$(nproc)}" -I{} bash "$0" "$out" --task {}
}

# One results file from the runs, written here and only here (never by concurrent tasks).
combine() {
  local h w s name
  rm -f "$out/results.h5"
  for ((k = 0; k < tasks; k++)); do
    read -r h w s < <(params "$k")
    name=h${h}_w${w}_s${s}
    for ds in output weights; do
      h5copy -p -i "$out/runs/$name.h5" -s "/$ds" -o "$out/results.h5" -d "/$name/$ds"
    done
  done
  echo "$tasks runs in $out/results.h5"
}

case "${2:-}" in
--task) run_task "${3:?--task K}" ;;
--combine) combine ;;
"")
  if [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
    run_task "$SLURM_ARRAY_TASK_ID"
  else
    run_all
    combine
  fi
  ;;
*)
  echo "sweep_jobs.sh: unknown option '$2' (--combine, --task K)" >&2
  exit 2
  ;;
esac
