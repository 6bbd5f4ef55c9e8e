#!/usr/bin/env bash
# A Hugging Face directory in bfloat16 (issue 53): figures and ratios from one run, never pass/fail.
# A random LLaMA-shaped model (12 layers, hidden 768, 12 heads, 4 key/value heads, intermediate
# 2048, V 32000; bench/make_hf_llama.py) as model.safetensors in BF16, and the same values in a
# float32 HDF5 file:
#   1. decode --generate, 16 prompt + 128 generated tokens, batch 1, whole processes alternated
#      over rounds: the time outside the generation (process wall clock minus --verbose's
#      "generate: S s": start-up, config, mapping, layout) as a share of the process; peak RSS
#      (/usr/bin/time -v) against the 16-bit weights + 10% + the KV cache;
#   2. the generation's time per token against the streaming bound for 2-byte weights (weight and
#      cache bytes per token over the bandwidth measured in the same run);
#   3. prefill (a (4, 256) prompt, --max-len 1) from bf16 against the float32 file, per round (the
#      pair in either order by turns);
#   4. a short run (the 16-token prompt and 1 token: the weights used in place, no tiles laid out),
#      whole process from bf16 against the float32 file;
#   5. the rate of generation's steps over 16-bit weights read in place as rows against the same in
#      column tiles, per weight shape of the model (bench/half_rows_rate.cpp; which ones a loader
#      leaves in place: blas::half_steps_in_place).
# Usage: bench/bench_hf.sh [BUILD_DIR] [ROUNDS]   (default build/, 5)
source "$(dirname "$0")/lib.sh"
ROUNDS=${2:-5}
L=12 E=768 H=12 G=4 F=2048 V=32000
dh=$((E / H))
/usr/bin/python3 bench/make_hf_llama.py "$WORK" $L $E $H $G $F $V
D="$WORK/model" F32="$WORK/f32.h5"
grep -m1 "model name" /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "model: $L layers, E=$E, H=$H, G=$G, F=$F, V=$V; $(du -m "$D/model.safetensors" | cut -f1) MB of bf16, $(du -m "$F32" | cut -f1) MB float32"
/usr/bin/python3 -c "
import numpy as np, h5py
r = np.random.default_rng(2)
with h5py.File('$WORK/p16.h5', 'w') as f: f['ids'] = r.integers(3, $V, (1, 16))
with h5py.File('$WORK/p256.h5', 'w') as f: f['ids'] = r.integers(3, $V, (4, 256))"
bw=$("$BUILD/bench/mem_bandwidth" 512 2)
weights16=$((2 * (L * (2 * E * E + 2 * E * G * dh + 3 * E * F) + 2 * V * E) + 4 * (2 * L + 1) * E))
kv=$((4 * 2 * L * G * dh * 144))
# per token: every Linear weight in 2 bytes (q, o, k, v, FFN, lm_head; embeddings: one row) and on
# average half the cache of 16..144 positions
bytes=$((2 * (L * (2 * E * E + 2 * E * G * dh + 3 * E * F) + V * E) + 4 * 2 * L * G * dh * 80))
bound_ms=$(echo "$bytes / ($bw * 1000000)" | bc -l)
echo "memory bandwidth (bench/mem_bandwidth, this run): $bw GB/s; bound per token $(printf %.2f "$bound_ms") ms ($((bytes / 1048576)) MiB)"

# run WEIGHTS ARGS...: "wall_s compute_s peak_MiB" of one decode process
run() {
  local w=$1 start end
  shift
  start=$EPOCHREALTIME
  /usr/bin/time -v "$T/decode" --weights "$w" --threads 2 --verbose "$@" -o "$WORK/o.h5" >"$WORK/log" 2>&1
  end=$EPOCHREALTIME
  echo "$(echo "scale=4; $(elapsed_us "$start" "$end") / 1000000" | bc) $(sed -n 's/.*generate: \([0-9.]*\) s$/\1/p' "$WORK/log" | tail -1) $(awk '/Maximum resident/ {printf "%.1f", $6 / 1024}' "$WORK/log")"
}
GEN=(--generate --prompt "$WORK/p16.h5:ids" --max-len 128)
PRE=(--generate --prompt "$WORK/p256.h5:ids" --max-len 1)
SHORT=(--generate --prompt "$WORK/p16.h5:ids" --max-len 1)
printf "%-6s %-30s %-30s %-22s %s\n" round "generate bf16: wall/gen/outside/RSS" "generate f32: wall/gen/RSS" "prefill bf16/f32" \
  "short bf16/f32"
outs=() tok=() rss=() pre=() short=()
for r in $(seq "$ROUNDS"); do
  read -r w16 g16 m16 < <(run "$D" "${GEN[@]}")
  read -r w32 g32 m32 < <(run "$F32" "${GEN[@]}")
  if ((r % 2)); then # the pair in either order by turns: the first runs after the float32 generation
    read -r _ p16 _ < <(run "$D" "${PRE[@]}")
    read -r _ p32 _ < <(run "$F32" "${PRE[@]}")
  else
    read -r _ p32 _ < <(run "$F32" "${PRE[@]}")
    read -r _ p16 _ < <(run "$D" "${PRE[@]}")
  fi
  read -r s16 _ _ < <(run "$D" "${SHORT[@]}")
  read -r s32 _ _ < <(run "$F32" "${SHORT[@]}")
  out=$(echo "100 * ($w16 - $g16) / $w16" | bc -l)
  outs+=("$out") tok+=("$(echo "1000 * $g16 / 128 / $bound_ms" | bc -l)") rss+=("$m16") pre+=("$(echo "$p32 / $p16" | bc -l)")
  short+=("$(echo "$s32 / $s16" | bc -l)")
  printf "%-6s %6.3f %6.3f %5.1f%% %6.0fM   %6.3f %6.3f %6.0fM      %.4f %.4f        %.3f %.3f\n" "$r" "$w16" "$g16" \
    "$out" "$m16" "$w32" "$g32" "$m32" "$p16" "$p32" "$s16" "$s32"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
limit=$(echo "($weights16 * 1.1 + $kv) / 1048576" | bc -l)
printf "medians over %s rounds:\n" "$ROUNDS"
printf "  outside the generation: %.1f%% of the process (goal <= 5%%)\n" "$(median "${outs[@]}")"
printf "  peak RSS %.0f MiB; 16-bit weights %.0f MiB + 10%% + KV cache %.1f MiB = %.0f MiB\n" "$(median "${rss[@]}")" \
  "$(echo "$weights16 / 1048576" | bc -l)" "$(echo "$kv / 1048576" | bc -l)" "$limit"
printf "  generation: %.2fx the streaming bound for 2-byte weights (goal <= 1.15x)\n" "$(median "${tok[@]}")"
printf "  prefill: bf16 at %.3fx float32's rate (goal >= 0.95x)\n" "$(median "${pre[@]}")"
printf "  short run (16 + 1 tokens), whole process: bf16 %.2fx as fast as float32\n" "$(median "${short[@]}")"
g++ -O2 -std=c++20 bench/half_rows_rate.cpp -Ilib/include -L"$BUILD/lib" -lattn-toolkit -lfmt -fopenmp -ldl \
  -o "$WORK/half_rows_rate"
echo "== batch-1 steps over 16-bit weights from memory, rows in place against column tiles (2 threads):"
for shape in "$((H * dh)) $E 100" "$((G * dh)) $E 200" "$F $E 40" "$E $F 40" "$V $E 4"; do
  "$WORK/half_rows_rate" $shape bf16
done
"$WORK/half_rows_rate" $F $E 40 f16
