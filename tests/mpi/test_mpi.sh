#!/usr/bin/env bash
# The MPI build (ATTN_MPI, issue 17): `mpirun -n R TOOL ...` splits the batch over R ranks and
# writes one file, byte for byte the one-process output of the same command (cmp), for 1, 2 and 3
# ranks, odd batches and more ranks than items; failures are collective (one error line, the
# contract's exit status, nothing left), SIGTERM leaves nothing, and what is not split is refused.
source "$(dirname "$0")/../cli/lib.sh"
: "${MPIRUN:=mpirun}"
# As root Open MPI wants --allow-run-as-root; more ranks than cores need --oversubscribe; -q keeps
# its own messages out, so a failure prints only the tool's line.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() {
  local n=$1
  shift
  "$MPIRUN" --oversubscribe -q -n "$n" "$@"
}
# Open MPI's leak-free shutdown is not ours to fix: LeakSanitizer would report its allocations.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"

G="$TESTDATA"
mkdir one many
# same_bytes NAME CMD...: CMD (writing -o out.h5) run as one process in one/ and under mpirun with
# 1, 2 and 3 ranks in many/: the files are identical (the `command` attribute included).
same_bytes() {
  local name=$1
  shift
  (cd one && rm -f out.h5 && "$@" >/dev/null 2>../err.txt) || {
    fail "$name: one process: $(cat err.txt)"
    return
  }
  for n in 1 2 3; do
    if ! (cd many && rm -f out.h5 && mpi "$n" "$@" >/dev/null 2>../err.txt); then
      fail "$name: $n ranks: $(cat err.txt)"
    elif cmp -s one/out.h5 many/out.h5; then
      pass
    else
      fail "$name: $n ranks write other bytes than one process ($(cmp one/out.h5 many/out.h5))"
    fi
  done
}

# --- every tool that splits its batch, with every output it writes ---
tensor-gen --shape 5,9,16 --seed 3 -o x5.h5 # an odd batch
tensor-gen --shape 5,9,16 --seed 3 --dtype f16 -o x5h.h5
tensor-gen --shape 2,9,16 --seed 4 -o x2.h5 # fewer items than ranks
tensor-gen --shape 9,16 --seed 5 -o x2d.h5  # no batch axis: one item
tensor-gen --shape 5 --fill arange --dtype i64 -o len5.h5
W="$G/encoder.h5:/w/pre_gelu_3_norm"
X="$G/encoder.h5:/w/extra_keys_pre_relu_2"
for x in x5 x2 x2d; do
  same_bytes "encode $x" encode -i "$PWD/$x.h5" --weights "$W" --emit-weights -o out.h5
done
same_bytes "encode, one item per chunk, lengths, causal" encode -i "$PWD/x5.h5" --weights "$W" --chunk 1 --causal \
  --lengths "$PWD/len5.h5" --emit-weights -o out.h5
same_bytes "encode, bias_k and add_zero_attn" encode -i "$PWD/x5.h5" --weights "$X" --emit-weights -o out.h5
same_bytes "encode --tokens" encode --tokens "$G/decoder.h5:/s2s_src" --weights "$G/decoder.h5:/s2s" -o out.h5
D="$G/decoder.h5"
same_bytes "decode, logits and weights" decode --tokens "$D:/s2s_tgt" --memory "$D:/s2s_memory" \
  --memory-lengths "$D:/s2s_src_lengths" --weights "$D:/s2s" --emit-weights --chunk 1 -o out.h5
same_bytes "decode -i" decode -i "$D:/tgt" --memory "$D:/mem" --weights "$D:/w/pre_gelu_3_norm" --emit-weights -o out.h5
for K in 1 3; do
  same_bytes "decode --generate --beam $K" decode --generate --max-len 8 --beam $K --chunk 1 --memory "$D:/s2s_memory" \
    --memory-lengths "$D:/s2s_src_lengths" --weights "$D:/s2s" -o out.h5
done
tensor-gen --shape 7,16 --seed 6 -o mem2d.h5
same_bytes "decode --generate, 2-D memory" decode --generate --max-len 5 --memory "$PWD/mem2d.h5" --weights "$D:/s2s" -o out.h5
M="$G/mha.h5"
same_bytes "mha-run, weights per head, float mask" mha-run -q "$M:/q5" -k "$M:/k7" -v "$M:/v7" --weights "$M:/w/packed" \
  --attn-mask "$M:/masks/float3" --need-weights -o out.h5
same_bytes "mha-run, averaged weights, lengths" mha-run -q "$PWD/x5.h5" --weights "$M:/w/packed" --lengths "$PWD/len5.h5" \
  --causal --average-weights -o out.h5
same_bytes "mha-run, 2-D" mha-run -q "$PWD/x2d.h5" --weights "$M:/w/bias_kv" --need-weights -o out.h5
same_bytes "mha-run --init --save-weights" mha-run -q "$PWD/x5.h5" --init xavier --embed-dim 16 --heads 4 --seed 2 -o out.h5
A="$G/attn_score.h5"
same_bytes "attn-score, weights and scores" attn-score -q "$A:/q5" -k "$A:/k7" -v "$A:/v7" --causal --emit weights,scores -o out.h5
same_bytes "attn-score additive, window" attn-score -q "$PWD/x5.h5" -k "$PWD/x5.h5" --score additive --init xavier \
  --hidden 3 --window 2 -o out.h5
L="$G/linear_attention.h5"
same_bytes "attn-score --attention linear, causal, lengths" attn-score --attention linear -q "$L:/q5" -k "$L:/k7" \
  -v "$L:/v7" --causal --lengths "$L:/masks/lengths" --emit weights -o out.h5
same_bytes "attn-score --attention performer, seeded" attn-score --attention performer -q "$PWD/x5.h5" -k "$PWD/x5.h5" \
  -v "$PWD/x5.h5" --features 32 --seed 3 --save-params "$PWD/feat_mpi.h5" -o out.h5
same_bytes "attn-score --attention linformer" attn-score --attention linformer -q "$L:/q5" -k "$L:/k7" -v "$L:/v7" \
  --params "$L:/params/lf3" --key-padding-mask "$L:/masks/kpm" -o out.h5
MO="$G/monotonic_attention.h5"
same_bytes "attn-score --attention monotonic, additive, key padding" attn-score --attention monotonic -q "$MO:/q5" \
  -k "$MO:/k7" -v "$MO:/v7" --score additive --params "$MO:/params/additive" --key-padding-mask "$MO:/masks/kpm" \
  --emit weights,scores -o out.h5
same_bytes "attn-score --attention monotonic --hard" attn-score --attention monotonic --hard -q "$MO:/q5" -k "$MO:/k7" \
  -v "$MO:/v7" --lengths "$MO:/masks/lengths" --emit weights -o out.h5
LO="$G/location_attention.h5"
same_bytes "attn-score --score location-aware, lengths, causal" attn-score --score location-aware -q "$LO:/q5" \
  -k "$LO:/k7" -v "$LO:/v7" --params "$LO:/params/la" --causal --lengths "$LO:/masks/lengths" --emit weights,scores \
  -o out.h5
CF="$G/conv_ffn.h5"
same_bytes "encode, convolutional feed-forward, lengths" encode -i "$CF:/x" --weights "$CF:/w/enc_swiglu_k5_pre" \
  --lengths "$CF:/lengths" -o out.h5
same_bytes "decode, causal convolutional feed-forward" decode -i "$CF:/tgt" --memory "$CF:/mem" \
  --weights "$CF:/w/dec_relu_k3" --lengths "$CF:/tgt_lengths" --chunk 1 -o out.h5
same_bytes "mha-run --dtype bf16 from a float16 input" mha-run -q "$PWD/x5h.h5" --init xavier --embed-dim 16 \
  --heads 2 --dtype bf16 --need-weights -o out.h5
LM="$G/linear_mha.h5"
same_bytes "mha-run performer, GQA cross, key padding" mha-run -q "$LM:/x" -k "$LM:/y" --weights "$LM:/mha/perf_gqa" \
  --key-padding-mask "$LM:/kpm9" --need-weights -o out.h5
same_bytes "encode, linear and performer layers" encode -i "$LM:/x" --weights "$LM:/enc" --lengths "$LM:/lengths" -o out.h5
# an output added to an existing file (-o FILE:NAME keeps its other datasets)
cp x5.h5 one/base.h5 && cp x5.h5 many/base.h5
(cd one && encode -i ../x5.h5 --weights "$W" -o base.h5:/enc/out) &&
  (cd many && mpi 3 encode -i ../x5.h5 --weights "$W" -o base.h5:/enc/out) && cmp -s one/base.h5 many/base.h5 && pass ||
  fail "-o FILE:NAME into an existing file: other bytes under MPI"

# --- threads per rank: the CPUs each rank may use (mpirun binds one each); --threads wins ---
mpi 2 encode -i x5.h5 --weights "$W" --verbose -o t.h5 2>err.txt && grep -q "; 1 threads" err.txt &&
  [ "$(grep -c "MPI: rank [01] of 2" err.txt)" -eq 2 ] && pass || fail "threads per rank: $(grep -E 'threads|MPI' err.txt)"
mpi 2 encode -i x5.h5 --weights "$W" --threads 2 --verbose -o t.h5 2>err.txt && grep -q "; 2 threads" err.txt && pass ||
  fail "--threads 2 under MPI: $(grep threads err.txt)"
rm -f t.h5

# --- failure is collective: one line, the contract's status, nothing left ---
# a NaN in the last element: item 4, which only the last rank reads
{ seq 1 719; echo nan; } >nan.txt
tensor-gen --shape 5,9,16 --from-text nan.txt --allow-nonfinite -o nan.h5
expect_fail 1 "nan.h5:/data: NaN at index [4, 8, 15]" mpi 3 encode -i nan.h5:/data --weights "$W" -o out.h5
expect_fail 1 "nan.h5:/data: NaN at index [4, 8, 15]" mpi 2 encode -i nan.h5:/data --weights "$W" --chunk 1 -o out.h5
tensor-gen --shape 3,5 --from-text <(echo 3 4 5 6 7 8 9 3 3 4 5 6 7 8 11) --dtype i64 -o ids_bad.h5
expect_fail 1 "ids_bad.h5:/data: token id 11 at index [2, 4] is outside the vocabulary 0..10" \
  mpi 3 decode --tokens ids_bad.h5 --memory "$D:/s2s_memory" --weights "$D:/s2s" -o out.h5
# attn-score's float32 bound is over every rank's items: the same decision and message as one process
attn-score -q x5.h5 -k x5.h5 --scale 1e37 -o out.h5 2>one_err.txt
expect_fail 1 "$(sed 's/^attn-score: error: //' one_err.txt)" mpi 3 attn-score -q x5.h5 -k x5.h5 --scale 1e37 -o out.h5
expect_fail 2 "--heads: must be positive, got 0" mpi 2 encode -i x5.h5 --init xavier --layers 1 --embed-dim 16 \
  --heads 0 --ffn-dim 8 -o out.h5
expect_fail 2 "pe-gen does not split its work over MPI ranks; run it as one process, not as 2 ranks" \
  mpi 2 pe-gen --kind sinusoidal --len 4 --dim 8 -o out.h5
check "pe-gen as one rank" mpi 1 pe-gen --kind sinusoidal --len 4 --dim 8 -o pe.h5
expect_fail 2 "standard output is not written under MPI (2 ranks): give -o FILE" mpi 2 encode -i x5.h5 --weights "$W" -o -
expect_fail 2 "standard input is not read under MPI (2 ranks): give a file" mpi 2 encode -i - --weights "$W" -o out.h5
# a failed write: the output's file system fills up (a 64 KiB tmpfs; the tests run as root)
mkdir full && mount -t tmpfs -o size=64k tmpfs full || fail "cannot mount a small tmpfs for the failed-write test"
trap 'umount "$WORK/full" 2>/dev/null; rm -rf "$WORK"' EXIT
tensor-gen --shape 8,64,64 -o x8.h5
expect_fail 1 "cannot write full/out.h5:/weights/layer0" mpi 2 encode -i x8.h5 --init xavier --layers 1 --embed-dim 64 \
  --heads 4 --ffn-dim 64 --emit-weights -o full/out.h5
[ -z "$(ls -A full)" ] && pass || fail "a failed write left $(ls -A full)"
umount full

# --- SIGTERM to mpirun mid-run: every rank stops, no output, no temporary file ---
tensor-gen --shape 32,512,512 --seed 1 -o big.h5
state >state.txt
# mpirun passes the signal on about 1 s after it gets it (SIGCONT first): the run must outlast that.
# 6 layers (2.5 s here) finished first and committed its output; 24 layers take about 10 s.
"$MPIRUN" --oversubscribe -q -n 2 encode -i big.h5 --init xavier --layers 24 --embed-dim 512 --heads 8 --ffn-dim 2048 \
  -o big_out.h5 2>/dev/null & # mpirun itself, not a subshell, gets the signal
pid=$!
sleep 1.5
kill -TERM "$pid"
wait "$pid" # mpirun returns once every rank has stopped
status=$?
[ "$status" -ne 0 ] && state | diff -q - state.txt >/dev/null && pass ||
  fail "SIGTERM: exit $status, files: $(state | diff - state.txt | head -5)"
pgrep -f "encode -i big.h5" >/dev/null && fail "SIGTERM: ranks still running" || pass

# --- each build refuses the other's HDF5 at configure time ---
: "${SRC:?}"
cmake -S "$SRC" -B cfg-serial -DHDF5_C_COMPILER_EXECUTABLE=/usr/bin/h5pcc >cfg.txt 2>&1 && fail "serial build on parallel HDF5 configured" ||
  { grep -q "parallel HDF5 found for a serial build" cfg.txt && pass || fail "serial on parallel HDF5: $(grep -m1 Error -A2 cfg.txt)"; }
cmake -S "$SRC" -B cfg-mpi -DATTN_MPI=ON -DHDF5_C_COMPILER_EXECUTABLE=/usr/bin/h5cc >cfg.txt 2>&1 && fail "MPI build on serial HDF5 configured" ||
  { grep -q "ATTN_MPI=ON needs parallel HDF5" cfg.txt && pass || fail "MPI on serial HDF5: $(grep -m1 Error -A2 cfg.txt)"; }
rm -rf cfg-serial cfg-mpi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
