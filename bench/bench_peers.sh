#!/usr/bin/env bash
# Against llama.cpp (issue 56): figures and ratios from one run, never pass/fail. One random
# LlamaForCausalLM (12 layers, hidden 768, 12 heads, 4 key/value heads, FFN 2048, V 32000; its end
# token never wins) exported by name (bench/torch_llama.py export), and from those weights llama.cpp's
# GGUF files (bench/peers/make_gguf.py, as convert_hf_to_gguf.py writes LlamaForCausalLM): F32, F16
# and Q8_0 against our float32 file and `quantize --all` f16 and int8 files (both sides quantize the
# embeddings and the output layer too). llama.cpp v0.5.0 built for this CPU (bench/peers/setup.sh),
# run by bench/peers/llama_run.cpp as its examples/simple runs a model, at its defaults (flash
# attention on, float16 cache), 2 threads both sides.
#   0. the same computation: float32 logits of a 512-token prompt, llama.cpp with a float32 cache
#      and flash attention off against ours (max |difference|);
#   1. int8 against Q8_0: the rms of each side's logits against our float32 logits (Q8_0 at
#      llama.cpp's defaults and at the exact settings);
#   2. prefill 512 (one token generated) and 3. generation of 128 tokens after a 16-token prompt,
#      at each precision: whole process (wall time of the command) and computation (ours: decode
#      --verbose's generation time; llama.cpp: llama_run's time after the model is loaded), in
#      ROUNDS rounds alternating the sides; per row the medians of each side and of the per-round
#      ratios (above 1: ours faster).
# Against ONNX Runtime 1.30 (onnxruntime-node, CPU, optimisation level "all", 2 intra-op threads,
# bench/peers/ort_run.mjs): one set of random weights both ways (bench/peers/make_onnx.py:
# torch.onnx.export and our HDF5 file by name), the encoder 6 x 512 (8 heads, FFN 2048, ReLU) on
# (8, 512, 512), nn.MultiheadAttention 512/8 on (8, 512, 512) and a BERT-base-shaped encoder 12 x 768
# (12 heads, 3072, GELU) on (8, 128, 768):
#   4. both sides against PyTorch's output (max |difference|);
#   5. whole process (wall time: our tool, node running the script) and computation (ours: the
#      tool's --verbose time of the stack; ONNX Runtime: its second run, buffers allocated), ROUNDS
#      rounds alternating the sides, medians as above.
# The machine's bounds first: sgemm, the FMA peak, the memory bandwidth.
# Usage: bench/bench_peers.sh [BUILD_DIR] [ROUNDS]   (default build/, 5 rounds)
source "$(dirname "$0")/lib.sh"
ROUNDS=${2:-5}
PEERS=$(bench/peers/setup.sh)
L=12 E=768 H=12 G=4 F=2048 V=32000
machine_limits "memory bandwidth $("$BUILD/bench/mem_bandwidth" 512 2) GB/s; model: $L layers, E=$E, H=$H, G=$G, F=$F, V=$V"
echo "== llama.cpp: $(cd "$PEERS/llama.cpp" && git describe --tags 2>/dev/null || sed -n 's/.*"tag": "\(.*\)".*/\1/p' \
  "$PEERS/node_modules/node-llama-cpp/llama/llama.cpp.info.json") (GGML_NATIVE), CPU: $(lscpu | sed -n 's/^Model name: *//p')"

/usr/bin/python3 bench/torch_llama.py export "$WORK" $L $E $H $G $F $V
M="$WORK/llama.h5"
for t in f32 f16 q8_0; do GGUF_PY="$PEERS/llama.cpp/gguf-py" /usr/bin/python3 bench/peers/make_gguf.py "$M" /w "$WORK/m_$t.gguf" $t; done
"$T/quantize" --weights "$M:/w" --scheme f16 --all -o "$WORK/f16.h5"
"$T/quantize" --weights "$M:/w" --scheme int8 --all -o "$WORK/int8.h5"
/usr/bin/python3 - "$WORK" "$V" <<'EOF'
import sys, h5py, numpy as np
d, V = sys.argv[1], int(sys.argv[2])
ids = np.random.default_rng(1).integers(3, V, 512)
h5py.File(f"{d}/ids.h5", "w")["ids"] = ids[None, :]
h5py.File(f"{d}/ids16.h5", "w")["ids"] = ids[None, :16]
open(f"{d}/ids.txt", "w").write(" ".join(map(str, ids)))
EOF
RUN="$PEERS/llama_run"

echo "-- 0. the same computation (float32, llama.cpp with a float32 cache and flash attention off)"
"$RUN" "$WORK/m_f32.gguf" "$WORK/ids.txt" 512 1 2 --exact --logits "$WORK/lc_f32.bin" >/dev/null
"$RUN" "$WORK/m_q8_0.gguf" "$WORK/ids.txt" 512 1 2 --exact --logits "$WORK/lc_q8x.bin" >/dev/null
"$RUN" "$WORK/m_q8_0.gguf" "$WORK/ids.txt" 512 1 2 --logits "$WORK/lc_q8.bin" >/dev/null
for w in "$M:/w" "$WORK/int8.h5"; do "$T/decode" --tokens "$WORK/ids.h5:ids" --weights "$w" --threads 2 -o "$WORK/tf_$(basename "${w%%:*}")"; done
/usr/bin/python3 - "$WORK" <<'EOF'
import sys, h5py, numpy as np
d = sys.argv[1]
ours = h5py.File(f"{d}/tf_llama.h5")["logits"][0]
lc = lambda n: np.fromfile(f"{d}/{n}.bin", np.float32).reshape(ours.shape)
print(f"  max |ours - llama.cpp| {abs(ours - lc('lc_f32')).max():.3g} (logits up to {abs(ours).max():.3g})")
rms = lambda x: float(np.sqrt(((x - ours) ** 2).mean()))
i8 = rms(h5py.File(f"{d}/tf_int8.h5")["logits"][0])
q8, q8x = rms(lc("lc_q8")), rms(lc("lc_q8x"))
print("-- 1. int8 against Q8_0: rms of the logits against float32's")
print(f"  ours int8 {i8:.4g}; llama.cpp Q8_0 {q8:.4g} (its defaults), {q8x:.4g} (float32 cache, no flash attention)"
      f" => ours {i8 / q8:.3f}x / {i8 / q8x:.3f}x Q8_0's")
EOF

# ours_run WEIGHTS PROMPT GEN: "wall computation" seconds of one decode run.
ours_run() {
  local s e c
  s=$EPOCHREALTIME
  c=$("$T/decode" --generate --max-len "$3" --prompt "$2" --weights "$1" --threads 2 --verbose -o "$WORK/o.h5" 2>&1 |
    sed -n 's/^decode: generate: \([0-9.]*\) s$/\1/p')
  e=$EPOCHREALTIME
  echo "$(elapsed_s "$s" "$e") $c"
}
# peer_run GGUF PROMPT GEN: "wall computation" seconds of one llama_run.
peer_run() {
  local s e out
  s=$EPOCHREALTIME
  out=$("$RUN" "$1" "$WORK/ids.txt" "$2" "$3" 2)
  e=$EPOCHREALTIME
  echo "$(elapsed_s "$s" "$e") $(echo "$out" | awk '{print $2}')"
}
# col C: the median of column C of the rows in $v.
col() { echo "$v" | awk -v c="$1" 'NF {print $c}' | median; }

echo "-- 2./3. whole process and computation, $ROUNDS rounds alternating the sides (2 threads)"
declare -A res
rows=("prefill 512|ids.h5|512|1" "generate 16+128|ids16.h5|16|128")
precisions=("f32|$M:/w|m_f32.gguf" "f16|$WORK/f16.h5|m_f16.gguf" "int8/Q8_0|$WORK/int8.h5|m_q8_0.gguf")
for r in $(seq "$ROUNDS"); do
  for row in "${rows[@]}"; do
    IFS='|' read -r name ids plen gen <<<"$row"
    for p in "${precisions[@]}"; do
      IFS='|' read -r pname ours gguf <<<"$p"
      key="$name|$pname"
      if [ $((r % 2)) -eq 1 ]; then
        read -r ow oc < <(ours_run "$ours" "$WORK/$ids:ids" "$gen")
        read -r pw pc < <(peer_run "$WORK/$gguf" "$plen" "$gen")
      else
        read -r pw pc < <(peer_run "$WORK/$gguf" "$plen" "$gen")
        read -r ow oc < <(ours_run "$ours" "$WORK/$ids:ids" "$gen")
      fi
      res[$key]+="$ow $oc $pw $pc $(echo "$pw / $ow" | bc -l) $(echo "$pc / $oc" | bc -l)
"
    done
  done
done
printf "  %-16s %-10s %28s %28s\n" row precision "whole: ours / llama.cpp (s)" "computation: ours / llama.cpp"
for row in "${rows[@]}"; do
  IFS='|' read -r name _ _ _ <<<"$row"
  for p in "${precisions[@]}"; do
    IFS='|' read -r pname _ _ <<<"$p"
    v=${res["$name|$pname"]}
    printf "  %-16s %-10s %8.3f / %-8.3f => %5.2fx   %8.3f / %-8.3f => %5.2fx\n" "$name" "$pname" \
      "$(col 1)" "$(col 3)" "$(col 5)" "$(col 2)" "$(col 4)" "$(col 6)"
  done
done
echo "  (medians over $ROUNDS rounds; ratios are medians of per-round ratios, above 1 = ours faster)"
for t in f32 f16 int8; do
  w=$M:/w
  [ $t = f32 ] || w=$WORK/$t.h5
  printf "  peak memory, prefill 512, %s: ours %s MiB" $t "$(peak_mib "$T/decode" --generate --max-len 1 --prompt "$WORK/ids.h5:ids" --weights "$w" --threads 2 -o "$WORK/o.h5")"
  g=f32
  [ $t = f16 ] && g=f16
  [ $t = int8 ] && g=q8_0
  printf ", llama.cpp %s MiB\n" "$(peak_mib "$RUN" "$WORK/m_$g.gguf" "$WORK/ids.txt" 512 1 2)"
done

echo "-- 4. ONNX Runtime $(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$PEERS/node_modules/onnxruntime-node/package.json" | head -1): the same computation"
ORT="node bench/peers/ort_run.mjs"
export ORT_MODULES="$PEERS/node_modules"
onnx_rows=("encoder 6x512|encoder|6 512 8 2048 relu 8 512|8,512,512|encode"
  "MHA 512/8|mha|512 8 8 512|8,512,512|mha-run"
  "BERT-base shape|encoder|12 768 12 3072 gelu 8 128|8,128,768|encode")
for i in "${!onnx_rows[@]}"; do
  IFS='|' read -r name mode args dims tool <<<"${onnx_rows[$i]}"
  mkdir -p "$WORK/onnx$i"
  # shellcheck disable=SC2086
  /usr/bin/python3 bench/peers/make_onnx.py "$mode" "$WORK/onnx$i" $args 2>/dev/null
  d="$WORK/onnx$i/$mode"
  flag=-i
  [ "$tool" = mha-run ] && flag=-q
  "$T/$tool" "$flag" "${d}_x.h5:x" --weights "$d.h5" --threads 2 -o "$d.ours.h5"
  $ORT "$d.onnx" "${d}_x.bin" "$dims" "$d.ort.bin" >/dev/null
  /usr/bin/python3 - "$d" "$name" <<'EOF'
import sys, h5py, numpy as np
d, name = sys.argv[1:3]
ref = h5py.File(f"{d}_ref.h5")["y"][()]
ours = h5py.File(f"{d}.ours.h5")["output"][()]
ort = np.fromfile(f"{d}.ort.bin", np.float32).reshape(ref.shape)
print(f"  {name}: max |ours - PyTorch| {abs(ours - ref).max():.3g}, |ONNX Runtime - PyTorch| {abs(ort - ref).max():.3g}"
      f" (output up to {abs(ref).max():.3g})")
EOF
done

# ours_once I / ort_once I: "wall computation" seconds of one run of ONNX row I.
onnx_row() { IFS='|' read -r name mode args dims tool <<<"${onnx_rows[$1]}"; d="$WORK/onnx$1/$mode"; }
ours_once() {
  onnx_row "$1"
  local s e c flag=-i
  [ "$tool" = mha-run ] && flag=-q
  s=$EPOCHREALTIME
  c=$("$T/$tool" "$flag" "${d}_x.h5:x" --weights "$d.h5" --threads 2 --verbose -o "$d.ours.h5" 2>&1 >/dev/null |
    sed -n 's/.*: \([0-9.]*\) s\(,.*\)\?$/\1/p' | tail -1)
  e=$EPOCHREALTIME
  echo "$(elapsed_s "$s" "$e") $c"
}
ort_once() {
  onnx_row "$1"
  local s e out
  s=$EPOCHREALTIME
  out=$($ORT "$d.onnx" "${d}_x.bin" "$dims")
  e=$EPOCHREALTIME
  echo "$(elapsed_s "$s" "$e") $(echo "$out" | awk '{print $3}')"
}
echo "-- 5. whole process and computation, $ROUNDS rounds alternating the sides (2 threads)"
declare -A ores
for r in $(seq "$ROUNDS"); do
  for i in "${!onnx_rows[@]}"; do
    if [ $((r % 2)) -eq 1 ]; then
      read -r ow oc < <(ours_once "$i")
      read -r pw pc < <(ort_once "$i")
    else
      read -r pw pc < <(ort_once "$i")
      read -r ow oc < <(ours_once "$i")
    fi
    ores[$i]+="$ow $oc $pw $pc $(echo "$pw / $ow" | bc -l) $(echo "$pc / $oc" | bc -l)
"
  done
done
printf "  %-16s %32s %34s\n" row "whole: ours / ONNX Runtime (s)" "computation: ours / ONNX Runtime"
for i in "${!onnx_rows[@]}"; do
  onnx_row "$i"
  v=${ores[$i]}
  printf "  %-16s %8.3f / %-8.3f => %5.2fx      %8.4f / %-8.4f => %5.2fx\n" "$name" \
    "$(col 1)" "$(col 3)" "$(col 5)" "$(col 2)" "$(col 4)" "$(col 6)"
done
echo "  (medians over $ROUNDS rounds; ratios are medians of per-round ratios, above 1 = ours faster)"
