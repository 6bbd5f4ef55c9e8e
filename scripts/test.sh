#!/usr/bin/env bash
# Install what is needed, build, and run every test (unit, golden and CLI) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build && ctest --output-on-failure -j "$(nproc)"
