#!/usr/bin/env bash
# Install what is needed, build, and run the demo pipeline (examples/demo.sh) with the built tools.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
PATH="$PWD/build/tools:$PATH" examples/demo.sh
