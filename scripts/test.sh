#!/usr/bin/env bash
# Install what is needed, build, and run every test (unit, golden, CLI, fuzz corpus) through CTest.
#   scripts/test.sh              Release build in build/; the suite with OPENBLAS_CORETYPE unset, as
#                                users run it (OpenBLAS picks its core for the CPU)
#   scripts/test.sh --cores      the tests labelled numeric (those whose results go through OpenBLAS)
#                                once per core forced with OPENBLAS_CORETYPE: Prescott, Haswell and
#                                SkylakeX (each when the CPU has its instructions); byte-identity and
#                                goldens must hold under every one. The unset case is the plain run's.
#   scripts/test.sh --sanitize   the same suite built with AddressSanitizer and UndefinedBehaviorSanitizer
#                                in build-asan/; any report fails the test that triggered it
#   scripts/test.sh --mpi [--sanitize]
#                                the MPI build (-DATTN_MPI=ON, Open MPI and parallel HDF5) in build-mpi/
#                                (build-mpi-asan/ with the sanitizers): unit tests and tests/mpi/, which
#                                run the tools under mpirun against their one-process output
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE # users do not set it; --cores sets it per run
if [ "${1:-}" = --mpi ]; then
  scripts/install-deps.sh mpi
  dir=build-mpi flags=(-DCMAKE_BUILD_TYPE=Release)
  if [ "${2:-}" = --sanitize ]; then
    dir=build-mpi-asan flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTN_SANITIZE=ON)
    export ASAN_OPTIONS=halt_on_error=1:detect_leaks=0 # LeakSanitizer would report Open MPI's own allocations
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  elif [ -n "${2:-}" ]; then
    echo "test.sh: unknown option '$2' after --mpi (--sanitize)" >&2
    exit 2
  fi
  cmake -S . -B "$dir" -DATTN_MPI=ON "${flags[@]}" >/dev/null
  cmake --build "$dir" -j "$(nproc)"
  cd "$dir" && exec ctest --output-on-failure -j "$(nproc)"
fi
scripts/install-deps.sh
case "${1:-}" in
--sanitize)
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTN_SANITIZE=ON >/dev/null
  cmake --build build-asan -j "$(nproc)"
  # halt_on_error and exit codes make every report a failure; leaks are reported too.
  export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  cd build-asan && ctest --output-on-failure -j "$(nproc)"
  ;;
--cores)
  scripts/build.sh
  flags=" $(grep -m1 '^flags' /proc/cpuinfo) "
  has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
  cores=(Prescott)
  has avx2 fma && cores+=(Haswell)
  has avx512f avx512bw avx512dq avx512vl avx512cd && cores+=(SkylakeX)
  cd build
  for core in "${cores[@]}"; do
    echo "== OPENBLAS_CORETYPE=$core"
    OPENBLAS_CORETYPE=$core ctest --output-on-failure -j "$(nproc)" -L numeric --no-tests=error
  done
  ;;
"")
  scripts/build.sh
  cd build && ctest --output-on-failure -j "$(nproc)"
  ;;
*)
  echo "test.sh: unknown option '$1' (--cores, --sanitize, --mpi)" >&2
  exit 2
  ;;
esac
