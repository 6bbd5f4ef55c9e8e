#!/usr/bin/env bash
# Quantized weight files (issue 20): figures from one run, never pass/fail (times: medians of
# interleaved rounds in shuffled order; speeds: medians of each round's ratio, see below). The random
# nn.Transformer of bench_transformer.sh (6+6 layers, d_model 512, 8 heads, FFN 2048, V 1000) as
# float32, int8 (a scale per block of 32, and per row) and float16 (quantize): file size, then
#   1. encode (8, 512, 512): time of the stack, and the max |error| against float32 over the
#      output's largest value;
#   2. decode --generate, 64 greedy steps, batch 1: time per token, and the fraction of tokens equal
#      to float32's. Per token twice: the 64-step run's time over 64 (with what a run does once:
#      the memory's keys and values, laying weights out), and the marginal cost of a token, the
#      time of 256 steps less that of 64, over 192.
#   3. the int8 product alone against oneDNN's (bench/int8_matmul.cpp).
# int8 and float16 weights stay so in memory. int8 runs the int8 product (inputs quantized per row,
# integer dot products with AVX-512 VNNI); float16 is widened in registers (the bits of float32 over
# its values), read in place up to 128 rows and widened into packed panels past that.
# Usage: bench/bench_quantize.sh [BUILD_DIR]   (default build/; run scripts/build.sh first)
source "$(dirname "$0")/lib.sh"
L=6 E=512 H=8 F=2048 V=1000
/usr/bin/python3 bench/torch_transformer.py export "$WORK" $L $E $H $F $V
M="$WORK/s2s.h5"
"$T/quantize" --weights "$M" -o "$WORK/int8.h5"
"$T/quantize" --weights "$M" --block 0 -o "$WORK/int8row.h5"
"$T/quantize" --weights "$M" --scheme f16 -o "$WORK/f16.h5"
cp "$M" "$WORK/f32.h5"
"$T/tensor-gen" --shape 8,512,$E --seed 1 -o "$WORK/x.h5"
"$T/tensor-gen" --shape 1,512,$E --seed 3 -o "$WORK/m1.h5"

# stage_s TOOL ARGS...: the stack's own time (--verbose's last timing line), one run.
stage_s() {
  local tool=$1
  shift
  "$T/$tool" "$@" --threads 2 --verbose 2>&1 >/dev/null | sed -n 's/.*: \([0-9.]*\) s\(,.*\)\?$/\1/p' | tail -1
}
# median FILE: the median of the numbers in FILE, one a line.
median() { sort -n "$1" | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# tokens FILE: the values of /tokens, one a line (h5dump -o: the data alone, not its shape).
tokens() {
  local t
  t=$(mktemp)
  h5dump -d /tokens -y -o "$t" "$1" >/dev/null && tr -s ' ,\n' '\n' <"$t" | grep -E '^[0-9]+$'
  rm -f "$t"
}
# max_rel A B DATASET: max |a - b| / max |b|.
max_rel() {
  paste <(h5dump -d "/$3" -y -m %.9g "$1" | tr -s ' ,' '\n\n' | grep -E '^-?[0-9]') \
    <(h5dump -d "/$3" -y -m %.9g "$2" | tr -s ' ,' '\n\n' | grep -E '^-?[0-9]') |
    awk '{d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; a = $2 < 0 ? -$2 : $2; if (a > t) t = a} END {printf "%.2e", m / t}'
}
f32_size=$(stat -c %s "$WORK/f32.h5")
echo "== model: $L+$L layers, E=$E, H=$H, F=$F, V=$V; float32 file $((f32_size / 1048576)) MiB"
formats="f32 int8 int8row f16"
# The host's speed drifts within a run (float32's memory-bound stages by up to 1.5x in minutes,
# and the same 64-step run by 20% between neighbouring runs), so formats are timed in turns: each
# round runs every format once, in a shuffled order, and a speed is the median over rounds of that
# round's float32 time over the format's (quartiles beside it), which cancels the drift between
# rounds. ROUNDS rounds of encode and of 256 steps (default 5), GEN_ROUNDS of 64 steps (default 21).
ROUNDS=${ROUNDS:-5} GEN_ROUNDS=${GEN_ROUNDS:-21}
for q in $formats; do : >"$WORK/t_enc_$q" && : >"$WORK/t_g64_$q" && : >"$WORK/t_g256_$q"; done
for r in $(seq "$GEN_ROUNDS"); do
  for q in $(shuf -e $formats); do
    w="$WORK/$q.h5"
    if [ "$r" -le "$ROUNDS" ]; then
      stage_s encode -i "$WORK/x.h5" --weights "$w" -o "$WORK/enc_$q.h5" >>"$WORK/t_enc_$q"
      stage_s decode --generate --max-len 256 --memory "$WORK/m1.h5" --weights "$w" -o "$WORK/g256.h5" >>"$WORK/t_g256_$q"
    fi
    stage_s decode --generate --max-len 64 --memory "$WORK/m1.h5" --weights "$w" -o "$WORK/gen_$q.h5" >>"$WORK/t_g64_$q"
  done
done
# paired FILE32 FILE: the median over rounds of line i of FILE32 over line i of FILE (the same
# round's times), and its quartiles.
paired() {
  paste "$1" "$2" | awk '{print $1 / $2}' | sort -n |
    awk '{v[NR] = $1} END {q = int((NR + 3) / 4); printf "%.2fx (%.2f-%.2f)", v[int((NR + 1) / 2)], v[q], v[NR + 1 - q]}'
}
# marginal Q: per round of 256 steps, (time of 256 steps - the median of 64) / 192: a token's cost
# once the run's fixed work is paid.
marginal() {
  local g64
  g64=$(median "$WORK/t_g64_$1")
  awk -v g="$g64" '{print ($1 - g) / 192}' "$WORK/t_g256_$1"
}
printf "  %-8s %9s %7s %12s %8s %12s %14s %19s %14s %19s %12s\n" weights "file MiB" ratio "encode (s)" "speed" \
  "enc error" "ms/token (64)" "speed (quartiles)" "ms/token marg." "speed (quartiles)" "tokens same"
for q in $formats; do marginal "$q" >"$WORK/m_$q"; done
for q in $formats; do
  w="$WORK/$q.h5"
  size=$(stat -c %s "$w")
  enc=$(median "$WORK/t_enc_$q") gen=$(median "$WORK/t_g64_$q") marg=$(median "$WORK/m_$q")
  same=$(paste <(tokens "$WORK/gen_$q.h5") <(tokens "$WORK/gen_f32.h5") | awk '$1 == $2 {n++} END {printf "%d/%d", n, NR}')
  printf "  %-8s %9.1f %7.3f %12.4f %8s %12s %14.2f %19s %14.2f %19s %12s\n" "$q" \
    "$(echo "$size / 1048576" | bc -l)" "$(echo "$size / $f32_size" | bc -l)" "$enc" \
    "$(paired "$WORK/t_enc_f32" "$WORK/t_enc_$q" | cut -d' ' -f1)" \
    "$(max_rel "$WORK/enc_$q.h5" "$WORK/enc_f32.h5" output)" "$(echo "$gen * 1000 / 64" | bc -l)" \
    "$(paired "$WORK/t_g64_f32" "$WORK/t_g64_$q")" "$(echo "$marg * 1000" | bc -l)" \
    "$(paired "$WORK/m_f32" "$WORK/m_$q")" "$same"
done
echo "  (decode --generate runs the cache of the memory's keys and values in float16 with quantized weights:"
echo "   --kv-cache auto)"

# The int8 product alone against oneDNN's (libdnnl-dev; the tools never use it): GMAC/s on 2 threads.
g++ -O2 -std=c++20 bench/int8_matmul.cpp -Ilib/include -L"$BUILD/lib" -lattn-toolkit -lfmt -fopenmp -ldl -ldnnl \
  -o "$WORK/int8_matmul"
echo "== int8 products (M, K) x (K, N), GMAC/s on 2 threads: ours with blocks of 32 and per row (inputs"
echo "   quantized inside), oneDNN per row (inputs given quantized; it has no per-block scales)"
for s in "4096 512 2048" "4096 2048 512" "1 512 2048"; do
  echo "  $s: $(OMP_NUM_THREADS=2 "$WORK/int8_matmul" $s 2 | tr '\n' ' ')"
done
