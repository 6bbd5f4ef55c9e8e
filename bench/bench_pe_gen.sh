#!/usr/bin/env bash
# pe-gen benchmarks (issue 2): figures and ratios measured in one run, never pass/fail.
#   1. Whole-process wall time of a small call, next to a process that only loads the same libraries
#      (pe-gen --help: the libraries a tool links, OpenBLAS not among them) and a Python process
#      that imports PyTorch.
#   2. pe-gen --len 100000 --dim 512 against the textbook NumPy formula (float64, as in The
#      Annotated Transformer; compute only, no file written, so the comparison favours NumPy), with
#      peak memory from /usr/bin/time -v against the output size.
# Usage: bench/bench_pe_gen.sh [BUILD_DIR]   (default build/; run scripts/build.sh first)
source "$(dirname "$0")/lib.sh"
PE="$T/pe-gen"

echo "== small call: pe-gen --len 16 --dim 64 -o f.h5 (mean of 100 processes)"
t_true=$(mean_ms 100 /bin/true)
t_libs=$(mean_ms 100 "$PE" --help)
t_small=$(mean_ms 100 "$PE" --len 16 --dim 64 -o "$WORK/f.h5")
t_torch=$(mean_ms 3 /usr/bin/python3 -c "import torch")
printf "  /bin/true                     %8s ms\n" "$t_true"
printf "  pe-gen --help (libs only)     %8s ms\n" "$t_libs"
printf "  pe-gen --len 16 --dim 64      %8s ms   (goal <= 20 ms)\n" "$t_small"
printf "  python3 -c 'import torch'     %8s ms   (%.0fx the pe-gen call)\n" "$t_torch" "$(echo "$t_torch / $t_small" | bc -l)"

echo "== large table: --len 100000 --dim 512 (best of 3)"
cat >"$WORK/textbook.py" <<'PY'
import math, numpy as np
max_len, d_model = 100000, 512
pe = np.zeros((max_len, d_model))
position = np.arange(0, max_len)[:, None]
div_term = np.exp(np.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
pe[:, 0::2] = np.sin(position * div_term)
pe[:, 1::2] = np.cos(position * div_term)
PY
cat >"$WORK/textbook_timed.py" <<PY
import time
t = time.perf_counter()
exec(open("$WORK/textbook.py").read())
print(time.perf_counter() - t)
PY
t_np=$(for _ in 1 2 3; do /usr/bin/python3 "$WORK/textbook_timed.py"; done | sort -n | head -1)
out_mib=$(echo "scale=1; 100000 * 512 * 4 / 1048576" | bc)
for threads in 2 1; do
  t_pe=$(best_s 3 "$PE" --len 100000 --dim 512 --threads "$threads" -o "$WORK/big.h5")
  m_pe=$(peak_mib "$PE" --len 100000 --dim 512 --threads "$threads" -o "$WORK/big.h5")
  printf "  pe-gen --threads %s (whole process, writes the file)  %6.3f s   peak %6.1f MiB = %.2fx the %s MiB output\n" \
    "$threads" "$t_pe" "$m_pe" "$(echo "$m_pe / $out_mib" | bc -l)" "$out_mib"
  printf "    NumPy textbook formula / pe-gen = %.2fx\n" "$(echo "$t_np / $t_pe" | bc -l)"
done
m_np=$(peak_mib /usr/bin/python3 "$WORK/textbook.py")
printf "  NumPy textbook formula (compute only, in memory)      %6.3f s   peak %6.1f MiB\n" "$t_np" "$m_np"
