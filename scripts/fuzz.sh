#!/usr/bin/env bash
# Build the libFuzzer targets with clang (ASan + UBSan) into build-fuzz/ and run each for SECONDS
# (default 600) over its corpus in tests/fuzz/corpus/TARGET/. New interesting inputs go to
# build-fuzz/corpus/TARGET/ (merge worthwhile ones by hand); a crash is written to
# build-fuzz/crash-TARGET-* and stops that target: fix it, then add the file to
# tests/fuzz/corpus/TARGET/ so CTest replays it from then on. A crash file written while the target
# keeps running comes from the preflight child (lib/src/h5/h5guard.cpp), which read the input first:
# HDF5 crashed there and the input was refused. Those are guarded; keep the telling ones in the
# corpus too.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      e.g. scripts/fuzz.sh 60 fuzz_tensor_ref
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_tensor_file fuzz_tensor_ref fuzz_weights fuzz_safetensors fuzz_hf_config)
scripts/install-deps.sh fuzz
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DATTN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  echo "== $t for ${seconds}s" >&2
  # One process; -timeout flags a hang (an input taking over 10 s), -rss_limit_mb memory that
  # grows (the targets cap their own tensors at 512 MiB). -malloc_limit_mb is higher: HDF5 asks
  # for many GB on some corrupt headers, lazily mapped and harmless, and the preflight child meets
  # those first. HDF5 itself asks malloc for absurd sizes
  # on corrupt files and handles the NULL it gets (allocator_may_return_null), and leaks a little
  # on some of its error paths (detect_leaks=0: not ours to fix, and not a crash). A small
  # quarantine keeps the process small, so the preflight's fork per input stays cheap.
  ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=0:quarantine_size_mb=16 "build-fuzz/tests/fuzz/$t" "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=16384 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/crash-$t-" 2>&1 | tee "build-fuzz/$t.log" | grep -E '^#[0-9]+.*(DONE|pulse)|ERROR|SUMMARY|stat::' >&2 || true
done
