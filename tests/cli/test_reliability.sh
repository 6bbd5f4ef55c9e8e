#!/usr/bin/env bash
# Reliability (issue 7): a file-size limit during writing is a clean one-line error with no output
# and no temporary file (HDF5 to a file, HDF5 to standard output, PNG); interruption of a streaming
# run (a huge input included) leaves nothing; progress shows the time left; --threads 0 and more
# threads than cores work; and the same command gives byte-identical datasets across runs and
# across --threads 1, 2 and 8.
source "$(dirname "$0")/lib.sh"
M="$TESTDATA/reverse_model.h5"

# limited CMD...: CMD under a 100 KiB file-size limit, its status in $status and stderr in err.txt.
limited() {
  (
    ulimit -f 200
    "$@" >limited.out 2>err.txt
  )
  status=$?
}
limited pe-gen --len 100000 --dim 64 -o big.h5
[ "$status" -eq 1 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "^pe-gen: error: cannot write big.h5:/pe (File too large)$" err.txt &&
  pass || fail "ulimit -f, file: status $status: $(cat err.txt)"
[ ! -e big.h5 ] && [ -z "$(ls -A | grep '\.tmp$')" ] && pass || fail "ulimit -f left: $(ls -A | tr '\n' ' ')"
limited tensor-gen --shape 100000,64 -o -
[ "$status" -eq 1 ] && grep -q "cannot write standard output:/data (File too large)" err.txt && [ -z "$(ls -A tmp)" ] && pass ||
  fail "ulimit -f, standard output: status $status: $(cat err.txt); staged: $(ls -A tmp)"
tensor-gen --shape 512,512 --fill uniform -o u.h5
limited attn-view u.h5 --png u.png
[ "$status" -eq 1 ] && grep -q "^attn-view: error: cannot write u.png: " err.txt && [ ! -e u.png ] &&
  [ -z "$(ls -A | grep '\.tmp$')" ] && pass || fail "ulimit -f, PNG: status $status: $(cat err.txt)"

# SIGINT and SIGTERM while encode streams a long batch: no output, no temporary file.
tensor-gen --shape 2000,8 --fill uniform --high 13 --dtype i64 -o ids.h5
set -m
for sig in INT TERM; do
  encode --tokens ids.h5 --weights "$M" --chunk 1 -o enc.h5 2>/dev/null &
  pid=$!
  for _ in $(seq 200); do ls -A | grep -q '^\.enc\.h5\..*\.tmp$' && break; sleep 0.02; done
  kill -$sig $pid
  wait $pid
  status=$?
  [ $status -ne 0 ] && [ ! -e enc.h5 ] && [ -z "$(ls -A | grep '\.tmp$')" ] && pass ||
    fail "encode SIG$sig: status $status, left: $(ls -A | tr '\n' ' ')"
done

# A huge input that fits one sequence at a time is not refused: h5py_absurd.h5:huge declares
# (2^20, 2^20, 64) floats (256 TiB, nothing stored). The streaming encode says what it starts on
# and stops cleanly on SIGINT; so does attn-view --stats reading it slice by slice.
A="$TESTDATA/h5py_absurd.h5"
encode -i "$A:huge" --init xavier --embed-dim 64 --heads 4 --layers 1 --ffn-dim 64 --verbose -o huge.h5 2>err.txt &
pid=$!
for _ in $(seq 200); do ls -A | grep -q '^\.huge\.h5\..*\.tmp$' && break; sleep 0.02; done
sleep 0.5
kill -INT $pid
wait $pid
status=$?
[ $status -ne 0 ] && [ ! -e huge.h5 ] && [ -z "$(ls -A | grep '\.tmp$')" ] &&
  grep -q "input b=1048576 n=1048576; 1 per chunk" err.txt && pass ||
  fail "encode of a huge input, SIGINT: status $status, $(cat err.txt), left: $(ls -A | tr '\n' ' ')"
attn-view "$A:huge" --stats >huge.txt 2>err.txt &
pid=$!
sleep 1
kill -INT $pid
wait $pid
status=$?
[ $status -ne 0 ] && [ ! -s huge.txt ] && pass || fail "attn-view --stats of a huge input, SIGINT: status $status"
set +m

# Progress reports the time left: with --verbose, a line after the first chunk.
tensor-gen --shape 256,16,32 --seed 2 -o eta.h5
encode -i eta.h5 --init xavier --embed-dim 32 --heads 4 --layers 1 --ffn-dim 64 --chunk 16 --verbose \
  -o eta_out.h5 2>err.txt
grep -Eq '^encode: 16/256 sequences, [0-9.]+ s, [0-9.e+]+ (s|min|h|days|years) left$' err.txt && pass ||
  fail "no time left in: $(cat err.txt)"

# Threads: 0 (every core) and more than there are cores are fine; datasets are byte-identical
# across runs and thread counts (each output element is computed by one thread, in a fixed order).
tensor-gen --shape 4,48,32 --seed 9 -o x.h5
tensor-gen --shape 4,12 --fill uniform --high 13 --dtype i64 --seed 4 -o src.h5
encode --tokens src.h5 --weights "$M" -o mem.h5
# runs T: every tool once with --threads T into dir t$T/.
runs() {
  local T=$1 d=t$1
  mkdir -p "$d"
  tensor-gen --shape 3,50,70 --seed 5 --threads "$T" -o "$d/tg.h5" &&
    pe-gen --len 300 --dim 96 --threads "$T" -o "$d/pe.h5" &&
    pe-gen --kind rope --apply x.h5 --heads 4 --threads "$T" -o "$d/rope.h5" &&
    attn-score -q x.h5 -k x.h5 -v x.h5 --causal --emit weights,scores --threads "$T" -o "$d/as.h5" &&
    attn-score -q x.h5 -k x.h5 --score additive --init xavier --hidden 16 --seed 2 --threads "$T" -o "$d/add.h5" &&
    mha-run -q x.h5 --init xavier --embed-dim 32 --heads 4 --kv-heads 2 --rope half --seed 3 --need-weights \
      --threads "$T" -o "$d/mha.h5" &&
    encode -i x.h5 --init xavier --layers 2 --embed-dim 32 --heads 4 --ffn-dim 64 --seed 1 --emit-weights \
      --threads "$T" -o "$d/enc.h5" &&
    decode --tokens src.h5 --memory mem.h5 --weights "$M" --emit-weights --threads "$T" -o "$d/dec.h5" &&
    decode --generate --beam 3 --max-len 12 --memory mem.h5 --weights "$M" --threads "$T" -o "$d/gen.h5"
}
for T in 1 2 8 0; do
  runs "$T" >/dev/null 2>err.txt && pass || fail "--threads $T: $(cat err.txt)"
done
runs 2 >/dev/null 2>&1 && mkdir -p again && mv t2 again/ && runs 2 >/dev/null 2>&1 && pass || fail "second run"
# datasets FILE: its dataset paths.
datasets() { h5ls -r "$1" | awk '$2 == "Dataset" { print $1 }'; }
for f in tg pe rope as add mha enc dec gen; do
  for other in t1 t8 t0 again/t2; do
    ok=1
    for ds in $(datasets "t2/$f.h5"); do
      cmp -s <(values "t2/$f.h5" "${ds#/}") <(values "$other/$f.h5" "${ds#/}") || ok=0
    done
    [ "$ok" -eq 1 ] && [ -n "$(datasets "t2/$f.h5")" ] && pass || fail "$f.h5: --threads 2 and $other differ"
  done
done

finish
