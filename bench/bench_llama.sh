#!/usr/bin/env bash
# A LLaMA-layout model (issue 18): figures and ratios from one run, never pass/fail. A random
# LlamaForCausalLM (6 layers, hidden 512, 8 heads, 2 key/value heads, intermediate 1408, V 32000),
# exported by name with scripts/export_torch.py, shared by both sides (bench/torch_llama.py: LLaMA's
# forward pass in PyTorch):
#   1. prefill: a (8, 512) prompt through the stack and one generated token (decode --generate
#      --max-len 1 --prompt: the cache filled at once) against PyTorch's forward pass over the same
#      ids, at its best of (torch threads, OpenBLAS threads) and cores (bench/lib.sh);
#   2. the same prefill with --matmul-precision bf16 (bfloat16 products, float32 sums) against
#      float32, alternated over 5 rounds (median of the per-round ratios; float32 unless the CPU has
#      AVX512-BF16), and the logits' error of a (1, 256) prompt, teacher-forced, against float32's;
#   3. generation of 64 tokens at batch 1 with the KV cache, against PyTorch's cached loop and the
#      weight-streaming bound (bytes of weights and cache read per token over the bandwidth
#      measured in the same run).
# Usage: bench/bench_llama.sh [BUILD_DIR]   (default build/; run scripts/build.sh first)
source "$(dirname "$0")/lib.sh"

L=6 E=512 H=8 G=2 F=1408 V=32000
/usr/bin/python3 bench/torch_llama.py export "$WORK" $L $E $H $G $F $V
M="$WORK/llama.h5:/w"
machine_limits "model: $L layers, E=$E, H=$H, G=$G, F=$F, V=$V"

# ours_s ARGS...: "best median" seconds of 5 runs of decode (--verbose's timing line).
ours_s() {
  for _ in 1 2 3 4 5; do
    "$T/decode" "$@" --threads 2 --verbose 2>&1 >/dev/null | sed -n 's/.*: \([0-9.]*\) s\(,.*\)\?$/\1/p' | tail -1
  done | sort -n | awk '{t[NR] = $1} END {print t[1], t[3]}'
}

echo "-- 1. prefill, (8, 512) token ids"
B=8 N=512
/usr/bin/python3 -c "import numpy as np, h5py; h5py.File('$WORK/ids.h5', 'w')['ids'] = np.random.default_rng(1).integers(3, $V, ($B, $N))"
read -r ours ours_med < <(ours_s --generate --max-len 1 --prompt "$WORK/ids.h5:ids" --weights "$M" -o "$WORK/o.h5")
read -r pt pt_med _ < <(torch_best bench/torch_llama.py prefill "$WORK" $B $N)
dh=$((E / H))
# the stack over every position (causal attention: half the n^2 scores) and the logits of the last
flops=$((2 * B * N * L * (2 * E * E + 2 * E * G * dh + 3 * E * F) + 2 * B * N * N * L * E + 2 * B * E * V))
printf "  prefill: best %.4f s (median %.4f), %s GFLOP/s = %.0f%% of sgemm\n" "$ours" "$ours_med" \
  "$(gflops $flops "$ours")" "$(pct_of_rate $flops "$ours" "$sg2")"
printf "  => %.2fx PyTorch's best (medians %.2fx)\n" "$(echo "$pt / $ours" | bc -l)" "$(echo "$pt_med / $ours_med" | bc -l)"

echo "-- 2. prefill with bfloat16 products (--matmul-precision bf16) against float32, (8, 512) token ids"
# prefill_s PRECISION: seconds of one prefill (--verbose's generate line)
prefill_s() {
  "$T/decode" --generate --max-len 1 --prompt "$WORK/ids.h5:ids" --weights "$M" --threads 2 --verbose \
    --matmul-precision "$1" -o "$WORK/o.h5" 2>&1 | sed -n 's/.*generate: \([0-9.]*\) s$/\1/p' | tail -1
}
"$T/decode" --weights "$M" --tokens "$WORK/ids.h5:ids" --matmul-precision bf16 --verbose -o "$WORK/o.h5" 2>&1 |
  grep -o "products of many rows in bfloat16.*\|no AVX512-BF16.*" | sed 's/^/  /'
ratios=()
for r in 1 2 3 4 5; do
  f32=$(prefill_s f32) bf16=$(prefill_s bf16)
  ratios+=("$(echo "$f32 / $bf16" | bc -l)")
  printf "  round %s: float32 %.4f s, bf16 %.4f s\n" "$r" "$f32" "$bf16"
done
printf "  => bf16 %.2fx float32's prefill (median of per-round ratios)\n" "$(printf '%s\n' "${ratios[@]}" | median)"
/usr/bin/python3 -c "import numpy as np, h5py; h5py.File('$WORK/ids1.h5', 'w')['ids'] = np.random.default_rng(2).integers(3, $V, (1, 256))"
for p in f32 bf16; do
  "$T/decode" --weights "$M" --tokens "$WORK/ids1.h5:ids" --matmul-precision $p --threads 2 -o "$WORK/tf_$p.h5"
done
/usr/bin/python3 -c "
import h5py, numpy as np
a = h5py.File('$WORK/tf_f32.h5')['logits'][:]; b = h5py.File('$WORK/tf_bf16.h5')['logits'][:]
print('  logits of a (1, 256) prompt: rms error %.3g against rms %.3g; max %.3g; argmax agrees at %.1f%% of positions'
      % (np.sqrt(((b - a) ** 2).mean()), np.sqrt((a ** 2).mean()), abs(b - a).max(), 100 * (a.argmax(-1) == b.argmax(-1)).mean()))"

echo "-- 3. generate 64 tokens from <s>, batch 1"
read -r cache cache_med < <(ours_s --generate --max-len 64 --weights "$M" -o "$WORK/g.h5")
"$T/decode" --generate --max-len 64 --weights "$M" --threads 2 -o "$WORK/g.h5" &&
  [ "$(h5ls "$WORK/g.h5/tokens" | sed 's/.*{\(.*\)}.*/\1/')" = "64" ] || echo "  (warning: decode did not generate 64 tokens)"
read -r pt pt_med _ < <(torch_best bench/torch_llama.py generate "$WORK" 64)
# per token: every weight once (q, o: E^2; k, v: E G dh; FFN 3 E F; lm_head V E) and on average half
# of the 64-position cache (2 G dh per position and layer)
bw=$("$BUILD/bench/mem_bandwidth" 512 2)
bytes=$((4 * (L * (2 * E * E + 2 * E * G * dh + 3 * E * F + 2 * 32 * G * dh) + V * E)))
bound_ms=$(echo "$bytes / ($bw * 1000000)" | bc -l)
per_token_ms=$(echo "1000 * $cache / 64" | bc -l)
printf "  decode: best %.4f s (median %.4f); PyTorch's cached loop %.4f s => %.2fx\n" "$cache" "$cache_med" "$pt" \
  "$(echo "$pt / $cache" | bc -l)"
printf "  per token %.2f ms; bound %.2f ms (%.1f MiB per token at %s GB/s) => %.2fx the bound\n" "$per_token_ms" \
  "$bound_ms" "$(echo "$bytes / 1048576" | bc -l)" "$bw" "$(echo "$per_token_ms / $bound_ms" | bc -l)"
