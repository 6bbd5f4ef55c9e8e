#!/usr/bin/env bash
# T5, BART and ViT benchmark (issue 57): figures from one run, never pass/fail. Random models of one size
# (bench/make_seq2seq_models.py; 6 + 6 layers, d_model 512, 8 heads, FFN 2048, V 1000: t5-small's
# shape) beside the nn.Transformer of bench_transformer.sh at the same size, the bar the issue sets:
#   1. encode (8, 512) token ids: tokens/s and the fraction of the sgemm ceiling (flops per token and
#      layer 8 E^2 + 4 E F + 4 n E), for the three models in alternated rounds;
#   2. decode teacher-forced, target (8, 128), memory (8, 512): the same;
#   3. decode --generate, 64 greedy steps, batch 1, memory (1, 512): per token against the
#      weight-streaming bound (bytes per token over the memory bandwidth measured in this run);
#   4. ViT (the same stack, GELU) on (16, 3, 256, 256) pixels: 16 x 257 tokens, the fraction of the
#      sgemm ceiling beside the encoder's of 1.
# Ours on 2 threads, OPENBLAS_CORETYPE unset. Usage: bench/bench_seq2seq.sh [BUILD_DIR] [ROUNDS]
source "$(dirname "$0")/lib.sh"
L=6 E=512 H=8 F=2048 V=1000 ROUNDS=${2:-5}
/usr/bin/python3 bench/torch_transformer.py export "$WORK" $L $E $H $F $V
/usr/bin/python3 bench/make_seq2seq_models.py "$WORK" $L $E $H $F $V
declare -A W=([transformer]="$WORK/s2s.h5" [t5]="$WORK/t5" [bart]="$WORK/bart")
machine_limits
echo "== models: $L+$L layers, E=$E, H=$H, F=$F, V=$V: nn.Transformer, T5 (relu, relative bias), BART"

# stack_s TOOL ARGS...: the stack's seconds of one run (--verbose's timing line).
stack_s() {
  local tool=$1
  shift
  "$T/$tool" "$@" --threads 2 --verbose 2>&1 >/dev/null | sed -n 's/.*: \([0-9.]*\) s\(,.*\)\?$/\1/p' | tail -1
}
B=8 N=512 Tt=128
"$T/tensor-gen" --shape $B,$N --fill uniform --low 3 --high $V --dtype i64 --seed 1 -o "$WORK/src.h5"
"$T/tensor-gen" --shape $B,$Tt --fill uniform --low 3 --high $V --dtype i64 --seed 2 -o "$WORK/tgt.h5"
"$T/tensor-gen" --shape 1,$N --fill uniform --low 3 --high $V --dtype i64 --seed 3 -o "$WORK/src1.h5"
for m in transformer t5 bart; do
  "$T/encode" --tokens "$WORK/src.h5" --weights "${W[$m]}" -o "$WORK/mem_$m.h5"
  "$T/encode" --tokens "$WORK/src1.h5" --weights "${W[$m]}" -o "$WORK/mem1_$m.h5"
done

"$T/tensor-gen" --shape 16,3,256,256 --seed 4 -o "$WORK/pixels.h5"
declare -A enc dec gen
vit=""
for ((r = 0; r < ROUNDS; r++)); do
  for m in transformer t5 bart; do
    enc[$m]+="$(stack_s encode --tokens "$WORK/src.h5" --weights "${W[$m]}" -o "$WORK/o.h5") "
    dec[$m]+="$(stack_s decode --tokens "$WORK/tgt.h5" --memory "$WORK/mem_$m.h5" --weights "${W[$m]}" -o "$WORK/o.h5") "
    gen[$m]+="$(stack_s decode --generate --max-len 64 --memory "$WORK/mem1_$m.h5" --weights "${W[$m]}" -o "$WORK/g_$m.h5") "
  done
  vit+="$(stack_s encode --pixels "$WORK/pixels.h5" --weights "$WORK/vit" -o "$WORK/o.h5") "
done
med() { tr ' ' '\n' <<<"$1" | grep . | median; }

echo "-- 1. encoder, ids (8, 512): medians of $ROUNDS alternated rounds"
flops=$((L * B * N * (8 * E * E + 4 * E * F + 4 * N * E)))
for m in transformer t5 bart; do
  s=$(med "${enc[$m]}")
  printf "  %-11s %.4f s = %.0f tokens/s, %s GFLOP/s = %.0f%% of sgemm\n" "$m" "$s" "$(echo "$B * $N / $s" | bc -l)" \
    "$(gflops $flops "$s")" "$(pct_of_rate $flops "$s" "$sg2")"
done
echo "-- 2. decoder, target (8, 128), memory (8, 512)"
flops=$((L * (B * Tt * (12 * E * E + 4 * E * F + 2 * Tt * E + 4 * N * E) + B * N * 4 * E * E)))
for m in transformer t5 bart; do
  s=$(med "${dec[$m]}")
  printf "  %-11s %.4f s = %.0f target tokens/s, %s GFLOP/s = %.0f%% of sgemm\n" "$m" "$s" \
    "$(echo "$B * $Tt / $s" | bc -l)" "$(gflops $flops "$s")" "$(pct_of_rate $flops "$s" "$sg2")"
done
echo "-- 3. generate 64 tokens, batch 1, memory (1, 512)"
bw=$("$BUILD/bench/mem_bandwidth" 512 2)
bytes=$((4 * (L * (6 * E * E + 2 * E * F + 2 * N * E + 2 * 32 * E) + V * E)))
bound_ms=$(echo "$bytes / ($bw * 1000000)" | bc -l)
for m in transformer t5 bart; do
  s=$(med "${gen[$m]}")
  # a random model may end before 64 tokens: per token generated
  n=$(h5ls "$WORK/g_$m.h5/tokens" | sed 's/.*{1, \([0-9]*\)}.*/\1/')
  per=$(echo "1000 * $s / $n" | bc -l)
  printf "  %-11s %2d tokens, per token %.2f ms; bound %.2f ms (%.1f MiB per token at %s GB/s) => %.2fx the bound\n" "$m" "$n" "$per" \
    "$bound_ms" "$(echo "$bytes / 1048576" | bc -l)" "$bw" "$(echo "$per / $bound_ms" | bc -l)"
done
echo "-- 4. ViT, pixels (16, 3, 256, 256): 16 x 257 tokens"
Nv=257 Bv=16
flops=$((L * Bv * Nv * (8 * E * E + 4 * E * F + 4 * Nv * E)))
s=$(med "$vit")
printf "  %-11s %.4f s = %.0f tokens/s, %s GFLOP/s = %.0f%% of sgemm (the patch projection and heads not counted)\n" "vit" \
  "$s" "$(echo "$Bv * $Nv / $s" | bc -l)" "$(gflops $flops "$s")" "$(pct_of_rate $flops "$s" "$sg2")"
