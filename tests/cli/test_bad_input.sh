#!/usr/bin/env bash
# The bad-input matrix (issue 7): every tool that reads tensors, against every kind of bad file,
# plus bad standard input, bad outputs, bad ids, masks and weights. Each case (expect_fail in
# lib.sh) asserts the exit status, a one-line "TOOL: error:" message containing the expected
# words, and that no file changed, appeared (output or temporary) or vanished.
source "$(dirname "$0")/lib.sh"
H="$TESTDATA/h5py_inputs.h5"
A="$TESTDATA/h5py_absurd.h5"
M="$TESTDATA/reverse_model.h5"

# Fixtures: good inputs, and files that are not what they claim.
tensor-gen --shape 2,4,8 -o x.h5
tensor-gen --shape 2,5,64 -o mem.h5
tensor-gen --shape 2,3,64 -o tgt.h5
tensor-gen --shape 64,1024 -o big.h5
: >empty.h5
echo "not hdf5" >text.h5
head -c 3000 big.h5 >trunc.h5
mkdir dir.h5
# Non-finite and integer tensors of the right width for each tool (8 features; 64 for decode).
for w in 8 64; do
  { echo nan; seq 2 $((4 * w)); } | tensor-gen --from-text - --shape 2,2,$w --allow-nonfinite -o nan$w.h5
  { seq 1 $((4 * w - 1)); echo -inf; } | tensor-gen --from-text - --shape 2,2,$w --allow-nonfinite -o inf$w.h5
  tensor-gen --shape 2,2,$w --fill zeros --dtype i64 -o int$w.h5
done

# run_tool TOOL X [OUT]: the tool reading tensor X as its main input, writing OUT (default o.h5,
# or o.png for attn-view).
run_tool() {
  local t=$1 x=$2 o=${3:-o.h5}
  case $t in
  pe-gen) pe-gen --add "$x" -o "$o" ;;
  attn-score) attn-score -q "$x" -k x.h5 -o "$o" ;;
  mha-run) mha-run -q "$x" --init xavier --embed-dim 8 --heads 2 -o "$o" ;;
  encode) encode -i "$x" --init xavier --layers 1 --embed-dim 8 --heads 2 --ffn-dim 8 -o "$o" ;;
  decode) decode -i "$x" --memory mem.h5 --weights "$M" -o "$o" ;;
  attn-view) attn-view "$x" --png "${3:-o.png}" ;;
  esac
}
tools="pe-gen attn-score mha-run encode decode attn-view"

for t in $tools; do
  expect_fail 1 "missing.h5: no such file" run_tool "$t" missing.h5
  expect_fail 1 "empty.h5: is empty, not an HDF5 file" run_tool "$t" empty.h5
  expect_fail 1 "text.h5: not an HDF5 file" run_tool "$t" text.h5
  expect_fail 1 "trunc.h5" run_tool "$t" trunc.h5
  expect_fail 1 "dir.h5: is a directory" run_tool "$t" dir.h5
  expect_fail 1 "no dataset or group '/nope'" run_tool "$t" x.h5:nope
  expect_fail 1 "holds string data" run_tool "$t" "$H:string"
  expect_fail 1 "holds compound data" run_tool "$t" "$H:compound"
  expect_fail 1 "is a scalar" run_tool "$t" "$H:scalar"
  expect_fail 1 "has a dimension of size 0" run_tool "$t" "$H:empty"
  expect_fail 1 "more elements than fit in 64 bits" run_tool "$t" "$A:overflow"
  expect_fail_stdin 1 "standard input is empty" /dev/null run_tool "$t" -
  expect_fail_stdin 1 "standard input is not an HDF5 file" text.h5 run_tool "$t" -
  good=x.h5
  case $t in decode) good=tgt.h5 ;; attn-view) good=x.h5 ;; esac
  expect_fail 1 "no such directory 'nodir'" run_tool "$t" "$good" nodir/o.h5
  expect_fail 2 "names the input" run_tool "$t" "$good" "$good"
  expect_fail 1 "/proc" run_tool "$t" "$good" /proc/o.h5 # a read-only file system, even for root
  if [ "$t" != attn-view ]; then # attn-view shows any rank, any type, NaN and Inf
    w=8
    [ "$t" = decode ] && w=64
    expect_fail 1 "got shape (1, 1, 1, 1, 2)" run_tool "$t" "$H:rank5"
    expect_fail 1 "int$w.h5:/data: holds int64 data; expected a float tensor" run_tool "$t" "int$w.h5"
    expect_fail 1 "nan$w.h5:/data: NaN at index [0, 0, 0]" run_tool "$t" "nan$w.h5"
    expect_fail 1 "inf$w.h5:/data: Inf at index [1, 1, $((w - 1))]" run_tool "$t" "inf$w.h5"
  fi
done

# Absurd shapes in tiny files: refused before anything is allocated (the tools that read whole
# tensors; encode and decode stream one batch chunk at a time).
expect_fail 1 "of memory is available" run_tool pe-gen "$A:huge"
# attn-score reads its items once the shapes agree (huge is (2^20, 2^20, 64)); mha-run reads a group
# of items at a time, so it refuses an absurd item (huge_item: 1 TiB) before allocating
expect_fail 1 "of memory is available" mha-run -q "$A:huge_item" --init xavier --embed-dim 64 --heads 2 -o o.h5
expect_fail 1 "of memory is available" attn-score -q "$A:huge" -k "$A:huge" -o o.h5
expect_fail 1 "of memory is available" encode --tokens "$A:huge_ids" --weights "$M" -o o.h5
expect_fail 1 "of memory is available" tensor-gen --shape 100000,100000,1000 -o o.h5
expect_fail 2 "more elements than fit in 64 bits" tensor-gen --shape 4294967296,4294967296 -o o.h5

# Writing HDF5 to a terminal (a pseudo-terminal from script(1)).
for t in tensor-gen pe-gen attn-score; do
  case $t in
  tensor-gen) cmd="tensor-gen --shape 2,2" ;;
  pe-gen) cmd="pe-gen --len 2 --dim 2" ;;
  attn-score) cmd="attn-score -q x.h5 -k x.h5" ;;
  esac
  TERM=xterm script -qec "$cmd" /dev/null >tty.txt 2>&1
  status=$?
  [ "$status" -eq 2 ] && grep -q "refusing to write HDF5 to a terminal" tty.txt && [ ! -e o.h5 ] && pass ||
    fail "$t to a terminal: $status $(cat tty.txt)"
done

# Token ids: negative, beyond the vocabulary, of a float type.
echo "4 -1 5" | tensor-gen --from-text - --shape 1,3 --dtype i64 -o neg.h5
echo "4 13 5" | tensor-gen --from-text - --shape 1,3 --dtype i64 -o over.h5
tensor-gen --shape 1,5,64 -o mem1.h5
tensor-gen --shape 2,4 -o f2.h5
expect_fail 1 "token id -1 at index [0, 1] is outside the vocabulary 0..12" encode --tokens neg.h5 --weights "$M" -o o.h5
expect_fail 1 "token id 13 at index [0, 1] is outside the vocabulary 0..12" encode --tokens over.h5 --weights "$M" -o o.h5
expect_fail 1 "token id 13 at index [0, 1]" decode --tokens over.h5 --memory mem1.h5 --weights "$M" -o o.h5
expect_fail 1 "f2.h5:/data: holds float32 data; expected integers" encode --tokens f2.h5 --weights "$M" -o o.h5

# Masks: wrong shape, wrong type.
tensor-gen --shape 2,9 --fill zeros --dtype i64 -o kpm9.h5
tensor-gen --shape 2 --fill ones -o flen.h5
expect_fail 1 "kpm9.h5" attn-score -q x.h5 -k x.h5 --key-padding-mask kpm9.h5 -o o.h5
expect_fail 1 "expected integers or bool" attn-score -q x.h5 -k x.h5 --lengths flen.h5 -o o.h5
expect_fail 1 "kpm9.h5" mha-run -q x.h5 --init xavier --embed-dim 8 --heads 2 --key-padding-mask kpm9.h5 -o o.h5

# Weight files: a missing dataset, a wrong shape, attributes that contradict the datasets.
# (the golden files' bad/ groups; mha-run's, encode's and decode's own tests have more)
W="$TESTDATA/mha.h5"
tensor-gen --shape 2,5,16 -o x16.h5
expect_fail 1 "missing dataset /bad/no_out/out_proj/weight (expected shape (16, 16)" mha-run -q x16.h5 --weights "$W:/bad/no_out" -o o.h5
expect_fail 1 "attribute num_heads = 3 does not divide the embed dim 16" mha-run -q x16.h5 --weights "$W:/bad/heads3" -o o.h5
expect_fail 1 "in_proj_weight: expected shape (32, 16) (E = 16, num_heads = 4, num_kv_heads = 2), got (48, 16)" mha-run -q x16.h5 --weights "$W:/bad/kv_disagree" -o o.h5
expect_fail 1 "no num_heads attribute" mha-run -q x16.h5 --weights "$W:/bad/no_heads" -o o.h5
expect_fail 1 "attribute num_kv_heads = 3 does not divide num_heads = 4" mha-run -q x16.h5 --weights "$W:/bad/kv3" -o o.h5
expect_fail 1 "feature size 8 differs from the embed dim" mha-run -q x.h5 --weights "$W:/w/packed" -o o.h5
expect_fail 1 "linear2" encode -i x16.h5 --weights "$TESTDATA/encoder.h5:/bad/no_linear2" -o o.h5
expect_fail 1 "multihead_attn" decode -i x16.h5 --memory x16.h5 --weights "$TESTDATA/decoder.h5:/bad/no_cross" -o o.h5

# Hyperparameters out of their range or of the wrong type (issue 16): each refused with the file,
# the attribute and its value, by encode and by decode (generation too), never run as something else
RM="$TESTDATA/reverse_model.h5"
echo 4 6 8 | tensor-gen --from-text - --shape 1,3 --dtype i64 -o ids3.h5
encode --tokens ids3.h5 --weights "$RM" -o mem3.h5
bad_attr() { # FILE ATTR TYPE VALUE MESSAGE: FILE is the demo model with ATTR set
  cp "$RM" "$1"
  h5attr "$1" / "$2" "$3" "$4"
  expect_fail 1 "$1:/ attribute $2 = $5" encode --tokens ids3.h5 --weights "$1" -o o.h5
  expect_fail 1 "$1:/ attribute $2 = $5" decode --tokens ids3.h5 --memory mem3.h5 --weights "$1" -o o.h5
  expect_fail 1 "$1:/ attribute $2 = $5" decode --generate --max-len 3 --memory mem3.h5 --weights "$1" -o o.h5
}
bad_attr eps_neg.h5 layer_norm_eps float -1 "-1: expected a finite number > 0"
bad_attr eps_zero.h5 layer_norm_eps float 0 "0: expected a finite number > 0"
bad_attr eps_nan.h5 layer_norm_eps float nan "nan: expected a finite number > 0"
bad_attr nf2.h5 norm_first int 2 "2: expected 0 or 1"
bad_attr nf_neg.h5 norm_first int -1 "-1: expected 0 or 1"
bad_attr heads_bool.h5 num_heads bool 1 "True (a boolean): expected an integer"
bad_attr heads0.h5 num_heads int 0 "0: expected a positive integer"
bad_attr dmodel.h5 d_model int 32 "32 contradicts the datasets: dmodel.h5:/" # then /encoder or /decoder: E = 64
bad_attr pe_bad.h5 pe string sideways "'sideways': expected sinusoidal, learned, rope, alibi or none"
bad_attr window0.h5 sliding_window int 0 "0: expected a positive integer"
cp "$RM" rope_rm.h5 && h5attr rope_rm.h5 / pe string rope # RoPE's attributes (the demo model's heads are 16 wide)
RM=rope_rm.h5 bad_attr rotary_bool.h5 rotary_dim bool 1 "True (a boolean): expected an integer"
RM=rope_rm.h5 bad_attr rotary3.h5 rotary_dim int 3 "3: RoPE turns pairs of a head's 16 elements: expected an even number at most 16"
RM=rope_rm.h5 bad_attr rotary18.h5 rotary_dim int 18 "18: RoPE turns pairs of a head's 16 elements"
RM=rope_rm.h5 bad_attr style.h5 rope_style string sideways "'sideways': expected half or interleaved"
RM=rope_rm.h5 bad_attr theta0.h5 rope_theta float 0 "0: expected a finite number > 0"
cp "$TESTDATA/encoder.h5" xk_rope.h5 && h5attr xk_rope.h5 /w/extra_keys_pre_relu_2 pe string rope
expect_fail 1 "xk_rope.h5:/w/extra_keys_pre_relu_2/layers/0/self_attn: bias_k or add_zero_attn with xk_rope.h5:/w/extra_keys_pre_relu_2 attribute pe = 'rope': the extra keys have no position" \
  encode -i "$TESTDATA/encoder.h5:/x" --weights xk_rope.h5:/w/extra_keys_pre_relu_2 -o o.h5
cp "$RM" pe_learned.h5
h5attr pe_learned.h5 / pe string learned # and no pos_embed/weight
expect_fail 1 "pe_learned.h5: missing dataset /pos_embed/weight (the learned position table (positions, E = 64) that pe_learned.h5:/ attribute pe = 'learned' needs)" \
  encode --tokens ids3.h5 --weights pe_learned.h5 -o o.h5
# a learned table sliced at an offset near 2^63 (it wrapped around and read memory before the table)
tensor-gen --shape 10,8 -o table10.h5
expect_fail 1 "--offset 9223372036854775807: 2 positions from it are outside the 10 rows of the learned table table10.h5:/data" \
  pe-gen --kind learned --table table10.h5 --len 2 --offset 9223372036854775807 -o o.h5
expect_fail 1 "--offset 9: 3 positions from it are outside the 10 rows of the learned table table10.h5:/data" \
  pe-gen --kind learned --table table10.h5 --len 3 --offset 9 -o o.h5
tensor-gen --shape 2,4,8 -o x48.h5
expect_fail 1 "--offset 9223372036854775806: 4 positions from it are outside the 10 rows of the learned table table10.h5:/data" \
  pe-gen --kind learned --table table10.h5 --add x48.h5 --offset 9223372036854775806 -o o.h5
# --threads beyond 1024 is a usage error (100000 crashed inside the OpenMP runtime and left the
# temporary output behind); OMP_NUM_THREADS beyond it counts as 1024
expect_fail 2 "--threads: Value 100000 not in range 0 to 1024" encode --tokens ids3.h5 --weights "$RM" --threads 100000 -o o.h5
expect_fail 2 "--threads: Value 100000 not in range 0 to 1024" mha-run -q x16.h5 --init xavier --embed-dim 16 --heads 2 --threads 100000 -o o.h5
OMP_NUM_THREADS=100000 encode --tokens ids3.h5 --weights "$RM" --verbose -o omp.h5 2>err.txt &&
  grep -q "; 1024 threads$" err.txt && pass || fail "OMP_NUM_THREADS=100000: $(cat err.txt)"
# Flag values that are NaN, infinite or beyond float32 (issue 16): usage errors, exit 2
tensor-gen --shape 2,6,8 --seed 3 -o q8.h5
for v in nan inf -inf 1e39; do
  expect_fail 2 "--scale: must be a finite number within float32's range, got $v" attn-score -q q8.h5 -k q8.h5 --scale "$v" -o o.h5
  # the bound of tensor-gen's fill parameters is its --dtype's (f32 by default; issue 52)
  [ "$v" = 1e39 ] && must="must be within f32's range" || must="must be a finite number"
  expect_fail 2 "--mean: $must" tensor-gen --shape 2 --mean "$v" -o o.h5
  expect_fail 2 "--low: $must" tensor-gen --shape 2 --fill uniform --low "$v" -o o.h5
  expect_fail 2 "--high: $must" tensor-gen --shape 2 --fill uniform --high "$v" -o o.h5
done
for v in nan inf; do
  expect_fail 2 "--base: must be a finite number, got $v" pe-gen --len 4 --dim 8 --base "$v" -o o.h5
  expect_fail 2 "--base: must be a finite number, got $v" pe-gen --kind rope --len 4 --dim 8 --base "$v" -o o.h5
  expect_fail 2 "--rope-base: must be a finite number, got $v" mha-run -q x16.h5 --init xavier --embed-dim 16 --heads 2 --rope half --rope-base "$v" -o o.h5
  expect_fail 2 "--std: must be a finite number, got $v" tensor-gen --shape 2 --std "$v" -o o.h5
done
# a finite scale whose scores overflow float32 gave all-NaN output: a data error, exit 1
expect_fail 1 "scores would overflow float32: |scale| 1e+38 x largest |q|" attn-score -q q8.h5 -k q8.h5 -v q8.h5 --scale 1e38 -o o.h5
tensor-gen --shape 1,4,8 --fill uniform --low 1e19 --high 2e19 -o huge.h5
expect_fail 1 "(huge.h5) = " attn-score -q huge.h5 -k huge.h5 --score dot -o o.h5
# in_proj_weight (48, 17) beside out_proj/weight (16, 16): reported as the in_proj_weight's shape
# (it blamed num_heads = 4 for not dividing 17); the bad matrix is spliced in with HDF5's h5copy
mha-run -q x16.h5 --init xavier --embed-dim 16 --heads 4 --save-weights w16.h5 -o o16.h5
tensor-gen --shape 48,17 -o ip17.h5
h5copy -i w16.h5 -o w17.h5 -s /out_proj -d /out_proj && h5copy -i w16.h5 -o w17.h5 -s /in_proj_bias -d /in_proj_bias &&
  h5copy -i ip17.h5 -o w17.h5 -s /data -d /in_proj_weight && h5attr w17.h5 / num_heads int 4
expect_fail 1 "w17.h5:/in_proj_weight: expected shape (48, 16) (E = 16, num_heads = 4), got (48, 17)" mha-run -q x16.h5 --weights w17.h5 -o o.h5
# Strict weights (issue 16): a dataset the layout does not use is an error naming it (bias_k and
# bias_v of add_bias_kv=True were dropped: output off by 7e-2, before the tools read them);
# --ignore-unknown-weights runs without it, giving the numbers of the file without it
tensor-gen --shape 1,1,16 -o b116.h5
cp w16.h5 wkx.h5
h5copy -i b116.h5 -o wkx.h5 -s /data -d /bias_x && h5copy -p -i b116.h5 -o wkx.h5 -s /data -d /extra/bias_y
expect_fail 1 "wkx.h5: 2 datasets are not part of the layout this tool reads (PyTorch state_dict names, '.' as '/'; man attn-toolkit, WEIGHT FILES): /bias_x, /extra/bias_y; --ignore-unknown-weights runs without them" \
  mha-run -q x16.h5 --weights wkx.h5 -o o.h5
mha-run -q x16.h5 --weights wkx.h5 --ignore-unknown-weights -o ig.h5 && h5diff -q ig.h5 o16.h5 /output /output &&
  pass || fail "--ignore-unknown-weights: not the numbers of the file without its extra datasets"
# add_bias_kv's bias_k and bias_v: a pair, (1, 1, E), agreeing with an add_bias_kv attribute
cp w16.h5 wk1.h5 && h5copy -i b116.h5 -o wk1.h5 -s /data -d /bias_k
expect_fail 1 "wk1.h5: missing dataset /bias_v (bias_k and bias_v of add_bias_kv=True come as a pair)" mha-run -q x16.h5 --weights wk1.h5 -o o.h5
tensor-gen --shape 1,16 -o b16x.h5
cp wk1.h5 wk2.h5 && h5copy -i b16x.h5 -o wk2.h5 -s /data -d /bias_v
expect_fail 1 "wk2.h5:/bias_v: expected shape (1, 1, 16) (E = 16, num_heads = 4), got (1, 16)" mha-run -q x16.h5 --weights wk2.h5 -o o.h5
cp wk1.h5 wkv.h5 && h5copy -i b116.h5 -o wkv.h5 -s /data -d /bias_v
check "bias_k and bias_v" mha-run -q x16.h5 --weights wkv.h5 -o okv.h5
h5attr wkv.h5 / add_bias_kv int 0
expect_fail 1 "wkv.h5:/ attribute add_bias_kv = 0 contradicts the datasets: wkv.h5:/bias_k is there" mha-run -q x16.h5 --weights wkv.h5 -o o.h5
cp w16.h5 wz.h5 && h5attr wz.h5 / add_zero_attn int 2
expect_fail 1 "wz.h5:/ attribute add_zero_attn = 2: expected 0 or 1" mha-run -q x16.h5 --weights wz.h5 -o o.h5
h5attr wz.h5 / add_bias_kv bool 1
h5attr wz.h5 / add_zero_attn bool 1
expect_fail 1 "wz.h5:/ attribute add_bias_kv = 1 contradicts the datasets: wz.h5:/bias_k is missing" mha-run -q x16.h5 --weights wz.h5 -o o.h5
h5attr wz.h5 / add_bias_kv bool 0
expect_fail 1 "--rope is not defined with the extra keys of wz.h5:/ (bias_k, add_zero_attn): they have no position" \
  mha-run -q x16.h5 --weights wz.h5 --rope half -o o.h5
# separate q/k/v biases are not PyTorch's names: refused with where they belong
mha-run -q x16.h5 --init xavier --embed-dim 16 --heads 4 --kv-heads 2 --save-weights wsep.h5 -o osep.h5
tensor-gen --shape 16 -o b16.h5
h5copy -i b16.h5 -o wsep.h5 -s /data -d /q_proj_bias
expect_fail 1 "/q_proj_bias (nn.MultiheadAttention keeps the query, key and value biases in one in_proj_bias" mha-run -q x16.h5 --weights wsep.h5 -o o.h5
# inside a stack, and beside it at a sequence-to-sequence root; the other stack's parts are known
cp "$RM" rm_extra.h5
h5copy -i b16.h5 -o rm_extra.h5 -s /data -d /encoder/layers/0/self_attn/bias_q
expect_fail 1 "rm_extra.h5: 1 dataset is not part of the layout this tool reads" encode --tokens ids3.h5 --weights rm_extra.h5 -o o.h5
decode --tokens ids3.h5 --memory mem3.h5 --weights rm_extra.h5 -o dx.h5 && pass || fail "decode refused the encoder's extra dataset"
cp "$RM" rm_extra2.h5
h5copy -i b16.h5 -o rm_extra2.h5 -s /data -d /generator/scale
expect_fail 1 "/generator/scale" decode --generate --max-len 3 --memory mem3.h5 --weights rm_extra2.h5 -o o.h5
h5copy -i b16.h5 -o rm_extra2.h5 -s /data -d /srcembed
expect_fail 1 "/srcembed" encode --tokens ids3.h5 --weights rm_extra2.h5 -o o.h5
cp "$RM" nf_true.h5
h5attr nf_true.h5 / norm_first bool 1 # h5py's True is a valid flag: runs as pre-norm
cp "$RM" nf_one.h5
h5attr nf_one.h5 / norm_first int 1
encode --tokens ids3.h5 --weights nf_true.h5 -o nt.h5 && encode --tokens ids3.h5 --weights nf_one.h5 -o n1.h5 &&
  h5diff -q nt.h5 n1.h5 /output /output && pass || fail "norm_first = True differs from norm_first = 1"

# Damaged files from the fuzzers (tests/fuzz/corpus/): a string attribute pointing into a corrupt
# global heap, which HDF5 would read forever, is refused by the heap check.
cp "$SRC/tests/fuzz/corpus/fuzz_weights/hang-vlen-attribute-corrupt-heap" heap.h5
expect_fail 1 "heap.h5:/: attribute 'activation' points into a corrupt global heap" encode -i x16.h5 --weights heap.h5 -o o.h5
# A 15 KB file whose /f64 header claims (2, 3, 838860804) contiguous float64s: refused before a
# 20 GB buffer is allocated.
cp "$SRC/tests/fuzz/corpus/fuzz_tensor_file/oom-slice-declared-20gb" short.h5
expect_fail 1 "short.h5:/f64: file truncated or corrupt: the data needs 40265318592 bytes at offset 2192, the file has 15536" attn-view short.h5:/f64 --stats
expect_fail 1 "short.h5:/f64: file truncated or corrupt" pe-gen --kind rope --apply short.h5:/f64 --heads 1 -o o.h5

# Conflicting and out-of-range flags.
expect_fail 2 "--init" mha-run -q x.h5 --weights "$W:/bad/heads3" --init xavier --embed-dim 8 --heads 2 -o o.h5
expect_fail 2 "--heads" mha-run -q x.h5 --init xavier --embed-dim 8 -o o.h5
expect_fail 2 "--threads" pe-gen --len 2 --dim 2 --threads -1 -o o.h5
expect_fail 2 "--max-len" decode --generate --max-len 0 --memory mem.h5 --weights "$M" -o o.h5

# The serial build started by an MPI launcher as one of several ranks (the launcher's environment,
# as mpirun sets it) refuses instead of doing the whole job once per rank; only rank 0 says so.
expect_fail 2 "encode was built without MPI and was started as one of 2 ranks" \
  env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 encode -i x.h5 --init xavier --layers 1 --embed-dim 8 --heads 2 --ffn-dim 4 -o o.h5
env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 pe-gen --len 2 --dim 2 -o o.h5 2>err.txt
[ $? -eq 2 ] && [ ! -s err.txt ] && [ ! -e o.h5 ] && pass || fail "rank 1 of a serial build: $(cat err.txt)"
expect_fail 2 "started as one of 3 ranks" env PMI_SIZE=3 PMI_RANK=0 pe-gen --len 2 --dim 2 -o o.h5
check "one rank is the serial run" env OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0 pe-gen --len 2 --dim 2 -o o1.h5

finish
