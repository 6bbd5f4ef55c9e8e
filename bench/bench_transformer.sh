#!/usr/bin/env bash
# encode and decode benchmark (issue 5): figures and ratios from one run, never pass/fail.
# A random nn.Transformer, 6+6 layers, d_model 512, 8 heads, FFN 2048, V 1000, shared by both sides:
#   1. encode (8, 512, 512) against nn.TransformerEncoder (fast path), tokens/s and the fraction of
#      the sgemm ceiling (flops per token and layer: 8 E^2 projections + 4 E F FFN + 4 n E attention);
#      then with --matmul-precision bf16 against float32, alternated over 5 rounds (median of the
#      per-round ratios), and the output's error against float32's; and the products alone
#      (bench/bf16_products.cpp) at the encoder's shapes;
#   2. decode, target (8, 128, 512), memory (8, 512, 512), against nn.TransformerDecoder;
#   3. decode --generate, 64 greedy steps, batch 1, memory (1, 512, 512): KV cache, --no-cache, and
#      PyTorch's loop that recomputes the prefix each step; per token against the weight-streaming
#      bound (bytes read per token over the memory bandwidth measured in the same run);
#   4. encode of a (4096, 128, 512) float32 file (1 GiB): peak memory.
# PyTorch at its best of (torch threads, OpenBLAS threads) = (2,2), (1,2), (1,1), each at OpenBLAS's
# default core and the core that fits the CPU (bench/lib.sh); ours on 2 threads, OPENBLAS_CORETYPE unset.
# Usage: bench/bench_transformer.sh [BUILD_DIR] [--no-big]   (default build/; run scripts/build.sh first)
source "$(dirname "$0")/lib.sh"
L=6 E=512 H=8 F=2048 V=1000
/usr/bin/python3 bench/torch_transformer.py export "$WORK" $L $E $H $F $V
M="$WORK/s2s.h5"
machine_limits
echo "== model: $L+$L layers, E=$E, H=$H, F=$F, V=$V"

# ours_s TOOL ARGS...: "best median" seconds of 5 runs, the stack alone (--verbose's timing line).
ours_s() {
  local tool=$1
  shift
  for _ in 1 2 3 4 5; do
    "$T/$tool" "$@" --threads 2 --verbose 2>&1 >/dev/null | sed -n 's/.*: \([0-9.]*\) s\(,.*\)\?$/\1/p' | tail -1
  done | sort -n | awk '{t[NR] = $1} END {print t[1], t[3]}'
}
echo "-- 1. encoder, input (8, 512, $E)"
B=8 N=512
"$T/tensor-gen" --shape $B,$N,$E --seed 1 -o "$WORK/x.h5"
read -r ours ours_med < <(ours_s encode -i "$WORK/x.h5" --weights "$M" -o "$WORK/o.h5")
read -r pt pt_med _ < <(torch_best bench/torch_transformer.py encoder "$WORK" $B $N)
tokens=$((B * N))
flops=$((L * tokens * (8 * E * E + 4 * E * F + 4 * N * E)))
ceiling=$(echo "$sg2 * 1000000000 * $tokens / $flops" | bc)
printf "  encode: best %.4f s (median %.4f) = %.0f tokens/s, %s GFLOP/s = %.0f%% of sgemm (ceiling %s tokens/s), %.0f%% of the FMA peak\n" \
  "$ours" "$ours_med" "$(echo "$tokens / $ours" | bc -l)" "$(gflops $flops "$ours")" \
  "$(pct_of_rate $flops "$ours" "$sg2")" "$ceiling" "$(pct_of_rate $flops "$ours" "$peak2")"
printf "  PyTorch best %.0f tokens/s => %.2fx (medians %.2fx)\n" "$(echo "$tokens / $pt" | bc -l)" \
  "$(echo "$pt / $ours" | bc -l)" "$(echo "$pt_med / $ours_med" | bc -l)"
ceiling_bound "$flops" "$pt" "$sg2" "$peak2"
# encode_s PRECISION: the stack's seconds of one run (--verbose)
encode_s() {
  "$T/encode" -i "$WORK/x.h5" --weights "$M" --threads 2 --verbose --matmul-precision "$1" -o "$WORK/o_$1.h5" 2>&1 |
    sed -n 's/.*encoder: \([0-9.]*\) s,.*/\1/p'
}
ratios=()
for _ in 1 2 3 4 5; do
  f32=$(encode_s f32) bf16=$(encode_s bf16)
  ratios+=("$(echo "$f32 / $bf16" | bc -l)")
done
/usr/bin/python3 -c "
import h5py, numpy as np
a = h5py.File('$WORK/o_f32.h5')['output'][:]; b = h5py.File('$WORK/o_bf16.h5')['output'][:]
print('  --matmul-precision bf16: %.2fx float32 (median of 5 alternated rounds); output rms error %.3g (rms %.3g), max %.3g'
      % ($(printf '%s\n' "${ratios[@]}" | median), np.sqrt(((b - a) ** 2).mean()), np.sqrt((a ** 2).mean()), abs(b - a).max()))"
g++ -O2 -std=c++20 bench/bf16_products.cpp -Ilib/include -L"$BUILD/lib" -lattn-toolkit -lfmt -fopenmp -ldl \
  -o "$WORK/bf16_products"
for shape in "$((B * N)) $((3 * E)) $E" "$((B * N)) $F $E" "$((B * N)) $E $F"; do
  echo "  $("$WORK/bf16_products" $shape)"
done

echo "-- 2. decoder, target (8, 128, $E), memory (8, 512, $E)"
Tt=128
"$T/tensor-gen" --shape $B,$Tt,$E --seed 2 -o "$WORK/t.h5"
read -r ours ours_med < <(ours_s decode -i "$WORK/t.h5" --memory "$WORK/x.h5" --weights "$M" -o "$WORK/o.h5")
read -r pt pt_med _ < <(torch_best bench/torch_transformer.py decoder "$WORK" $B $Tt $N)
# flops per layer: per target token 8 E^2 (self-attention projections) + 4 E^2 (cross query and
# output) + 4 E F + 2 t E (causal self-attention: half the 4 t E) + 4 s E (cross-attention), and per
# memory token 4 E^2 (cross keys and values)
flops=$((L * (B * Tt * (12 * E * E + 4 * E * F + 2 * Tt * E + 4 * N * E) + B * N * 4 * E * E)))
printf "  decode: best %.4f s (median %.4f) = %.0f target tokens/s, %s GFLOP/s = %.0f%% of sgemm, %.0f%% of the FMA peak\n" \
  "$ours" "$ours_med" "$(echo "$B * $Tt / $ours" | bc -l)" "$(gflops $flops "$ours")" \
  "$(pct_of_rate $flops "$ours" "$sg2")" "$(pct_of_rate $flops "$ours" "$peak2")"
printf "  => %.2fx PyTorch's best (medians %.2fx)\n" "$(echo "$pt / $ours" | bc -l)" "$(echo "$pt_med / $ours_med" | bc -l)"
ceiling_bound "$flops" "$pt" "$sg2" "$peak2"

echo "-- 3. generate 64 tokens, batch 1, memory (1, 512, $E)"
"$T/tensor-gen" --shape 1,$N,$E --seed 3 -o "$WORK/m1.h5"
G="--generate --max-len 64 --memory $WORK/m1.h5 --weights $M -o $WORK/g.h5"
# shellcheck disable=SC2086
read -r cache cache_med < <(ours_s decode $G)
# shellcheck disable=SC2086
read -r nocache nocache_med < <(ours_s decode $G --no-cache)
read -r pt pt_med _ < <(torch_best bench/torch_transformer.py generate "$WORK" $N 64)
# shellcheck disable=SC2086
"$T/decode" $G --threads 2 && [ "$(h5ls "$WORK/g.h5/tokens" | sed 's/.*{\(.*\)}.*/\1/')" = "1, 64" ] ||
  echo "  (warning: decode did not generate 64 tokens)"
printf "  cache %.4f s (median %.4f), --no-cache %.4f s (median %.4f) => cache %.1fx faster\n" \
  "$cache" "$cache_med" "$nocache" "$nocache_med" "$(echo "$nocache / $cache" | bc -l)"
printf "  PyTorch's prefix-recomputing loop %.4f s => cache %.1fx, --no-cache %.2fx\n" "$pt" \
  "$(echo "$pt / $cache" | bc -l)" "$(echo "$pt / $nocache" | bc -l)"
# The weight-streaming bound: per token every decoder weight used per step (self-attention in/out
# 4 E^2, cross-attention query/out 2 E^2, FFN 2 E F; the cross keys/values are projected once) and
# the generator (V E) are read once, plus the cached cross keys/values (2 s E per layer) and on
# average half of the 64-step self-attention cache; over the memory bandwidth measured now.
bw=$("$BUILD/bench/mem_bandwidth" 512 2)
bytes=$((4 * (L * (6 * E * E + 2 * E * F + 2 * N * E + 2 * 32 * E) + V * E)))
bound_ms=$(echo "$bytes / ($bw * 1000000)" | bc -l)
per_token_ms=$(echo "1000 * $cache / 64" | bc -l)
printf "  per token %.2f ms; bound %.2f ms (%.1f MiB per token at %s GB/s, read-only bandwidth on 2 threads) => %.2fx the bound\n" \
  "$per_token_ms" "$bound_ms" "$(echo "$bytes / 1048576" | bc -l)" "$bw" "$(echo "$per_token_ms / $bound_ms" | bc -l)"

if [ "${2:-}" != "--no-big" ]; then
  echo "-- 4. encode a (4096, 128, $E) float32 file (1 GiB)"
  "$T/tensor-gen" --shape 4096,128,$E --seed 4 -o "$WORK/big.h5"
  start=$EPOCHREALTIME
  peak=$(peak_mib "$T/encode" -i "$WORK/big.h5" --weights "$M" --threads 2 -o "$WORK/big_out.h5")
  end=$EPOCHREALTIME
  secs=$(echo "scale=1; $(elapsed_us "$start" "$end") / 1000000" | bc)
  printf "  peak %s MiB (input %s MiB, output the same), %s s = %.0f tokens/s\n" "$peak" \
    "$(($(stat -c %s "$WORK/big.h5") / 1048576))" "$secs" "$(echo "4096 * 128 / $secs" | bc -l)"
fi
