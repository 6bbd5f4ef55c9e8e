#!/usr/bin/env bash
# The demo pipeline, from the shell alone: make inputs, add positional encodings, rotate them with
# RoPE, and build ALiBi biases, with the tools piped into each other; then run a trained
# sequence-to-sequence Transformer (testdata/reverse_model.h5, which reverses digit sequences) on
# 1000 held-out sequences with encode | decode --generate, score it, and look at its cross-attention
# with attn-view. Writes demo-out/ (or $1).
# Run through scripts/demo.sh, which installs, builds and puts the tools on PATH.
set -euo pipefail
out=${1:-demo-out}
data=${ATTN_TESTDATA:-$(dirname "$0")/../testdata}
mkdir -p "$out"

echo "1. Inputs (2 sequences of 16 tokens, 64 features), sinusoidal encodings added, RoPE over 4 heads:"
tensor-gen --shape 2,16,64 --seed 1 -o - |
  pe-gen --add - -o - |
  pe-gen --kind rope --apply - --heads 4 -o "$out/x.h5"
h5ls "$out/x.h5"

echo "2. The tables themselves, several runs in one results file:"
pe-gen --len 16 --dim 64 -o "$out/tables.h5:/sinusoidal/pe"
pe-gen --kind rope --len 16 --dim 16 -o "$out/tables.h5:/rope/cos"
pe-gen --kind alibi --heads 6 --len 16 -o "$out/tables.h5:/alibi/bias"
h5ls -r "$out/tables.h5"

echo "3. ALiBi slopes for 6 heads (not a power of two) and the bias seen by the last query of head 0:"
h5dump -d /alibi/bias -s 0,0,15,0 -c 1,1,1,16 "$out/tables.h5" | sed -n '/DATA {/,/}/p'

echo "4. Causal self-attention over those inputs, as full attention and as a window of 4, weights kept:"
attn-score -q "$out/x.h5" -k "$out/x.h5" -v "$out/x.h5" --causal --emit weights -o "$out/attention.h5:/full/output"
attn-score -q "$out/x.h5" -k "$out/x.h5" -v "$out/x.h5" --causal --window 4 --emit weights -o "$out/attention.h5:/window/output"
h5ls -r "$out/attention.h5"
echo "   weights of the last query of sequence 0 over its window (keys 11..15 only):"
h5dump -d /window/weights -s 0,15,0 -c 1,1,16 "$out/attention.h5" | sed -n '/DATA {/,/}/p'

echo "5. A trained Transformer (nn.Transformer, d_model 64, 2+2 layers, 4 heads; trained by"
echo "   tests/golden/train_demo_model.py to reverse 3-10 digits; digit d is token d + 3, 2 ends):"
model=$data/reverse_model.h5
test=$data/reverse_test.h5
encode --tokens "$test:/src" --weights "$model" --lengths "$test:/src_lengths" -o - |
  decode --generate --max-len 11 --memory - --memory-lengths "$test:/src_lengths" --weights "$model" -o "$out/reversed.h5"
# rows FILE DATASET: an integer dataset's rows, one per line, without the trailing padding (0)
rows() { h5dump -w 0 -d "$2" "$1" | sed -n 's/^ *([0-9]*,0): //p' | sed 's/,* *$//; s/\(, 0\)*$//'; }
echo "   first held-out sequence, the model's answer and the expected one:"
echo "     in:  $(rows "$test" /src | head -1)"
echo "     out: $(rows "$out/reversed.h5" /tokens | head -1)"
echo "     ref: $(rows "$test" /expected | head -1)"
paste -d '|' <(rows "$out/reversed.h5" /tokens) <(rows "$test" /expected) |
  awk -F'|' '$1 == $2 { ok++ } END { printf "   exact match: %d/%d = %.2f%%\n", ok, NR, 100 * ok / NR }'

echo "6. Its cross-attention on one sequence, teacher-forced (digits 1 3 5 7 9 2 4 6 8 0 as tokens;"
echo "   the target input is the start token and the answer), shown by attn-view. Last layer, head 0:"
echo "   output position i (rows) reads around input position n-1-i (columns), an anti-diagonal band:"
echo 4 6 8 10 12 5 7 9 11 3 | tensor-gen --from-text - --shape 10 --dtype i64 -o "$out/example_src.h5"
echo 1 3 11 9 7 5 12 10 8 6 4 | tensor-gen --from-text - --shape 11 --dtype i64 -o "$out/example_tgt_in.h5"
encode --tokens "$out/example_src.h5" --weights "$model" -o - |
  decode --tokens "$out/example_tgt_in.h5" --memory - --weights "$model" --emit-weights -o "$out/example.h5"
cross="$out/example.h5:weights/layer1/cross"
attn-view "$cross" --index 0 --width 60
attn-view "$cross" --index 0 --stats | sed -n '/^row sums/,$p'
attn-view "$cross" --index 0 --png "$out/cross_attention.png" \
  --labels-x 1,3,5,7,9,2,4,6,8,0 --labels-y "<s>,0,8,6,4,2,9,7,5,3,1"
echo "   the same as a picture with the digits as labels: $out/cross_attention.png"

echo "7. A LLaMA-layout model (decoder-only: RMSNorm, SwiGLU, RoPE, 2 key/value heads for 4 query"
echo "   heads), trained by tests/golden/train_reverse_llama.py and exported with LlamaForCausalLM's"
echo "   weight names; prompted with '<s> 3 1 4 1 5 <sep>' (digit d is token d + 4), it continues:"
llama=$data/llama_reverse.h5
echo 1 7 5 8 5 9 3 | tensor-gen --from-text - --shape 1,7 --dtype i64 -o "$out/prompt.h5"
decode --generate --max-len 9 --prompt "$out/prompt.h5" --weights "$llama:/w" -o "$out/continued.h5"
echo "     tokens $(rows "$out/continued.h5" /tokens): digits 5 1 4 1 3, then the end token"
echo "   and its last layer's self-attention on the whole sequence, head 0: the rows that emit the"
echo "   answer (6..11) read back into the prompt (columns 1..5); rows 6, 7, 8 read positions 5, 4, 3,"
echo "   the digit each emits next:"
decode --tokens "$llama:/example/ids" --weights "$llama:/w" --emit-weights -o "$out/llama_example.h5"
attn-view "$out/llama_example.h5:weights/layer1/self" --index 0,0 --width 60

echo "8. Every result says how it was made:"
h5dump -a /command "$out/x.h5" | sed -n 's/^ *(0): /  /p'
echo "Done: results in $out/"
