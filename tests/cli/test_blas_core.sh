#!/usr/bin/env bash
# The BLAS core and threads (issue 15): --verbose and -V name an OpenBLAS core that fits this CPU;
# when OpenBLAS's own pick is an old core (simulated with ATTN_TEST_OPENBLAS_PICK, since this CPU may
# be one OpenBLAS knows) the tools switch it to SkylakeX or Haswell, which OpenBLAS itself then
# reports; a user's OPENBLAS_CORETYPE is kept; OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set the
# default threads; OpenBLAS is loaded only by a run that needs it; and the projections give the same
# bytes on every instruction set.
source "$(dirname "$0")/lib.sh"
unset OPENBLAS_CORETYPE OMP_NUM_THREADS OPENBLAS_NUM_THREADS ATTN_LINEAR_ISA ATTN_TEST_OPENBLAS_PICK
M="$TESTDATA/reverse_model.h5"

flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]]; }
fit=""
if has avx512f && has avx512bw && has avx512dq && has avx512vl && has avx512cd && has fma; then
  fit=SkylakeX
elif has avx2 && has fma; then
  fit=Haswell
fi
avx2_cores="Haswell Zen SkylakeX Cooperlake SapphireRapids Excavator"

core_of() { sed -n 's/.*BLAS: OpenBLAS core \([A-Za-z0-9]*\) .*/\1/p' err.txt | head -1; }

# Unset: a core with AVX2 kernels on a CPU that has AVX2 and FMA
check "--verbose" pe-gen --len 16 --dim 64 --verbose -o pe.h5
core=$(core_of)
if [ -n "$fit" ]; then
  [[ " $avx2_cores " == *" $core "* ]] && pass || fail "core '$core' does not fit this CPU ($fit): $(cat err.txt)"
else
  [ -n "$core" ] && pass || fail "no core named: $(cat err.txt)"
fi
pe-gen -V >v.txt && grep -q "^BLAS: OpenBLAS core $core (" v.txt && pass || fail "-V: $(cat v.txt)"

# OpenBLAS falling back to Prescott: switched to the core that fits, as OpenBLAS itself reports
if [ -n "$fit" ]; then
  ATTN_TEST_OPENBLAS_PICK=Prescott OPENBLAS_VERBOSE=2 check "Prescott pick" pe-gen --len 16 --dim 64 --verbose -o pe2.h5
  grep -q "BLAS: OpenBLAS core $fit (chosen for this CPU; OpenBLAS picked Prescott)" err.txt && pass ||
    fail "Prescott pick not switched to $fit: $(cat err.txt)"
  grep -q "^Core: $fit$" out.txt err.txt && pass || fail "OpenBLAS did not load $fit: $(cat out.txt err.txt)"
  h5diff -q pe.h5 pe2.h5 /pe /pe && pass || fail "the switch changed pe-gen's output"
  # and a BLAS-heavy tool computes the same with the switched core as with that core set by hand
  echo 4 6 8 10 12 | tensor-gen --from-text - --shape 1,5 --dtype i64 -o src.h5
  ATTN_TEST_OPENBLAS_PICK=Prescott check "encode after the switch" encode --tokens src.h5 --weights "$M" -o m1.h5
  OPENBLAS_CORETYPE=$fit check "encode on $fit" encode --tokens src.h5 --weights "$M" -o m2.h5
  h5diff -q m1.h5 m2.h5 /output /output && pass || fail "switched core and OPENBLAS_CORETYPE=$fit differ"
  ATTN_TEST_OPENBLAS_PICK=$fit check "a fitting pick is kept" pe-gen --len 4 --dim 8 --verbose -o pe3.h5
  grep -q "OpenBLAS's pick)" err.txt && pass || fail "a fitting pick was changed: $(cat err.txt)"
fi

# The user's OPENBLAS_CORETYPE always wins, even an old core
OPENBLAS_CORETYPE=Prescott ATTN_TEST_OPENBLAS_PICK=Prescott check "user core" pe-gen --len 4 --dim 8 --verbose -o pe4.h5
grep -q "BLAS: OpenBLAS core Prescott (OPENBLAS_CORETYPE=Prescott)" err.txt && pass || fail "user core: $(cat err.txt)"

# Threads: --threads, else OMP_NUM_THREADS, else OPENBLAS_NUM_THREADS, else the CPUs allowed
OMP_NUM_THREADS=1 check "OMP_NUM_THREADS" pe-gen --len 4 --dim 8 --verbose -o t1.h5
grep -q "; 1 threads$" err.txt && pass || fail "OMP_NUM_THREADS=1: $(grep BLAS err.txt)"
OPENBLAS_NUM_THREADS=3 check "OPENBLAS_NUM_THREADS" pe-gen --len 4 --dim 8 --verbose -o t2.h5
grep -q "; 3 threads$" err.txt && pass || fail "OPENBLAS_NUM_THREADS=3: $(grep BLAS err.txt)"
OMP_NUM_THREADS=2,1 OPENBLAS_NUM_THREADS=3 check "OMP list" pe-gen --len 4 --dim 8 --threads 5 --verbose -o t3.h5
grep -q "; 5 threads$" err.txt && pass || fail "--threads 5 must win: $(grep BLAS err.txt)"
OMP_NUM_THREADS=2,1 check "OMP list" pe-gen --len 4 --dim 8 --verbose -o t4.h5
grep -q "; 2 threads$" err.txt && pass || fail "OMP_NUM_THREADS=2,1: $(grep BLAS err.txt)"
if command -v taskset >/dev/null && [ "$(nproc --all)" -gt 1 ]; then
  check "taskset" taskset -c 0 pe-gen --len 4 --dim 8 --verbose -o t5.h5
  grep -q "; 1 threads$" err.txt && pass || fail "one allowed CPU: $(grep BLAS err.txt)"
fi

# OpenBLAS is loaded when a product first needs it (or --verbose names its core), not with the tool
loads_openblas() { # CMD...: CMD succeeds, and the dynamic loader loaded OpenBLAS on the way
  LD_DEBUG=files LD_DEBUG_OUTPUT="$WORK/ld" "$@" >/dev/null 2>&1 || fail "$*: failed"
  cat "$WORK"/ld.* | grep -q "file=libopenblas"
  local loaded=$?
  rm -f "$WORK"/ld.*
  return $loaded
}
tensor-gen --shape 2,64,32 --seed 1 -o qkv.h5
loads_openblas pe-gen --len 16 --dim 64 -o lz1.h5 && fail "pe-gen loaded OpenBLAS, which it never calls" || pass
loads_openblas attn-score -q qkv.h5 -k qkv.h5 -v qkv.h5 -o lz2.h5 && fail "attn-score (fused kernel) loaded OpenBLAS" ||
  pass
loads_openblas attn-score -q qkv.h5 -k qkv.h5 -v qkv.h5 --emit weights -o lz3.h5 && pass ||
  fail "attn-score --emit weights (P V by sgemm) did not load OpenBLAS"
loads_openblas pe-gen --len 16 --dim 64 --verbose -o lz4.h5 && pass || fail "--verbose named a core without OpenBLAS"
h5diff -q lz1.h5 lz4.h5 /pe /pe && pass || fail "loading OpenBLAS changed pe-gen's output"
# An OpenBLAS that cannot be loaded (simulated by name): one error line from a run that needs it,
# nothing from one that does not
export ATTN_TEST_OPENBLAS_SONAME=libattn-no-such-blas.so.0
expect_fail 1 "cannot load OpenBLAS: libattn-no-such-blas.so.0" \
  attn-score -q qkv.h5 -k qkv.h5 -v qkv.h5 --emit weights -o lz5.h5
expect_fail 1 "cannot load OpenBLAS" attn-score -q qkv.h5 -k qkv.h5 -v qkv.h5 --score additive --init xavier \
  --hidden 16 -o lz6.h5
expect_fail 1 "cannot load OpenBLAS" attn-score -q qkv.h5 -k qkv.h5 -v qkv.h5 --attention performer -o lz6.h5
check "pe-gen without OpenBLAS" pe-gen --len 16 --dim 64 -o lz7.h5
unset ATTN_TEST_OPENBLAS_SONAME

# The projections' instruction sets give the same bytes (encode, decode teacher-forced and
# generated, mha-run): the FMA chain is the same on each
echo 4 6 8 10 12 | tensor-gen --from-text - --shape 1,5 --dtype i64 -o src.h5
echo 1 12 10 8 6 4 | tensor-gen --from-text - --shape 1,6 --dtype i64 -o tgt.h5
tensor-gen --shape 3,40,48 --seed 5 -o x.h5
run_all() { # DIR: every run into DIR
  mkdir -p "$1"
  encode --tokens src.h5 --weights "$M" -o "$1/mem.h5" &&
    decode --tokens tgt.h5 --memory "$1/mem.h5" --weights "$M" --emit-weights -o "$1/dec.h5" &&
    decode --generate --max-len 8 --beam 3 --memory "$1/mem.h5" --weights "$M" -o "$1/gen.h5" &&
    mha-run -q x.h5 --init xavier --embed-dim 48 --heads 4 --seed 2 --need-weights -o "$1/mha.h5"
}
run_all wide && pass || fail "runs on the widest instruction set"
for isa in scalar avx2; do
  ATTN_LINEAR_ISA=$isa run_all "$isa" && pass || fail "runs with ATTN_LINEAR_ISA=$isa"
  for f in mem dec gen mha; do
    for d in $(h5ls -r "wide/$f.h5" | awk '$2 == "Dataset" {print $1}'); do
      h5diff -q "wide/$f.h5" "$isa/$f.h5" "$d" "$d" >/dev/null && pass || fail "ATTN_LINEAR_ISA=$isa changes $f.h5:$d"
    done
  done
done
ATTN_LINEAR_ISA=scalar pe-gen -V | grep -q "linear kernels scalar, int8 scalar$" && pass || fail "-V names the linear kernels"
ATTN_LINEAR_ISA=avx2 pe-gen -V | grep -Eq "linear kernels (avx2, int8 avx2|scalar, int8 scalar)$" && pass ||
  fail "-V under avx2: $(ATTN_LINEAR_ISA=avx2 pe-gen -V | tail -1)"
if grep -qw avx512_vnni /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo; then # the int8 kernel this CPU fits
  want="int8 avx512-vnni"
  grep -qw amx_int8 /proc/cpuinfo && want="int8 avx512-vnni, amx-int8 for 32 rows or more"
  pe-gen -V | grep -q "$want\$" && pass || fail "-V: $(pe-gen -V | tail -1), expected $want"
fi

finish
