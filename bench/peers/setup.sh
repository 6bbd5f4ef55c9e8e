#!/usr/bin/env bash
# The peers of bench/bench_peers.sh, from the npm registry (never at test time): ONNX Runtime
# (onnxruntime-node 1.30.0, whose CPU runtime ships in the package; its install step, which would
# fetch CUDA files, skipped) and llama.cpp v0.5.0 (the git bundle node-llama-cpp 3.22.1 ships in
# llama/, built here with CMake for this CPU: -DGGML_NATIVE=ON -DLLAMA_CURL=OFF), and llama_run
# (bench/peers/llama_run.cpp) against it. Idempotent; prints the directory it filled.
#
#   bench/peers/setup.sh [DIR]     (default: $ATTN_PEERS, else ~/.cache/attn-toolkit-peers)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${ATTN_PEERS:-$HOME/.cache/attn-toolkit-peers}}
mkdir -p "$dir"
cd "$dir"
if [ ! -d node_modules/onnxruntime-node ] || [ ! -d node_modules/node-llama-cpp ]; then
  [ -f package.json ] || echo '{"private": true}' >package.json
  ONNXRUNTIME_NODE_INSTALL=skip npm install --ignore-scripts --no-audit --no-fund \
    onnxruntime-node@1.30.0 node-llama-cpp@3.22.1 >&2
fi
if [ ! -d llama.cpp ]; then
  git clone -q node_modules/node-llama-cpp/llama/gitRelease.bundle llama.cpp 2>/dev/null
fi
tag=$(sed -n 's/.*"tag": "\(.*\)".*/\1/p' node_modules/node-llama-cpp/llama/llama.cpp.info.json)
# On a CPU with AMX, v0.5.0's Q8_0 products take ggml's AMX tiles, whose tile configuration is built
# on the stack, where GCC drops its stores (ldtilecfg's builtin is not seen to read it): tileloadd
# then raises SIGILL (seen on a Xeon with AMX). The fix of llama.cpp PR 26954 (the configuration in
# static storage), applied here; a no-op once applied.
sed -i 's/^    alignas(64) tile_config_t tc = {};$/    alignas(64) static thread_local tile_config_t tc = {};/' \
  llama.cpp/ggml/src/ggml-cpu/amx/mmq.cpp
if [ ! -f llama.cpp/build/CMakeCache.txt ]; then
  cmake -S llama.cpp -B llama.cpp/build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF >&2
fi
cmake --build llama.cpp/build -j"$(nproc)" --target llama >&2
if [ ! -x llama_run ] || [ "$here/llama_run.cpp" -nt llama_run ]; then
  g++ -O2 -std=c++17 "$here/llama_run.cpp" -Illama.cpp/include -Illama.cpp/ggml/include \
    -Lllama.cpp/build/bin -lllama -lggml -lggml-base -Wl,-rpath,"$dir/llama.cpp/build/bin" -o llama_run
fi
echo "llama.cpp $tag: $dir/llama.cpp (GGML_NATIVE), llama_run: $dir/llama_run" >&2
echo "$dir"
