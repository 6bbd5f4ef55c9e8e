#!/usr/bin/env bash
# Install what is needed, build, and run every test (unit, golden, CLI, fuzz corpus) through CTest.
#   scripts/test.sh              Release build in build/
#   scripts/test.sh --sanitize   the same suite built with AddressSanitizer and UndefinedBehaviorSanitizer
#                                in build-asan/; any report fails the test that triggered it
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ "${1:-}" = "--sanitize" ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTN_SANITIZE=ON >/dev/null
  cmake --build build-asan -j "$(nproc)"
  # halt_on_error and exit codes make every report a failure; leaks are reported too.
  export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  cd build-asan && ctest --output-on-failure -j "$(nproc)"
else
  scripts/build.sh
  cd build && ctest --output-on-failure -j "$(nproc)"
fi
