#!/usr/bin/env bash
# The one place that knows which Debian packages the toolkit needs.
#
#   scripts/install-deps.sh            build, test and run (the default)
#   scripts/install-deps.sh golden     + PyTorch, NumPy, h5py, networkx (and matplotlib's viridis table) to regenerate
#                                      testdata/ and lib/src/view/viridis_table.inc (never needed by tests)
#   scripts/install-deps.sh bench      + what bench/ compares against (PyTorch, NumPy, GNU time, Node.js for the peers)
#   scripts/install-deps.sh fuzz       + clang with libFuzzer and OpenMP, for scripts/fuzz.sh
#   scripts/install-deps.sh mpi        + Open MPI and parallel HDF5, for the MPI build (build-mpi/,
#                                      -DATTN_MPI=ON); the serial build is unaffected by them
#
# Idempotent: when every package is already installed it changes nothing and needs no network.
set -euo pipefail

build=(build-essential cmake pkg-config libcli11-dev libfmt-dev libopenblas-dev libhdf5-dev
       doctest-dev libpng-dev libsimdjson-dev libpcre2-dev libutf8proc-dev libboost-graph-dev hdf5-tools
       groff-base dpkg-dev file)  # the last two: cpack -G DEB (dpkg-shlibdeps, file)
# networkx: the attention flow's reference (tests/golden/make_probe_goldens.py)
golden=(python3 python3-torch python3-numpy python3-h5py python3-matplotlib python3-networkx)
# libdnnl-dev: bench/int8_matmul.cpp's comparison only; nodejs, npm and git: bench/peers/setup.sh (the
# peers from the npm registry; npm only where no npm came with the machine's Node.js)
bench=("${golden[@]}" time bc libdnnl-dev nodejs git)
command -v npm >/dev/null 2>&1 || bench+=(npm)
fuzz=(clang libclang-rt-dev libomp-dev)
mpi=(openmpi-bin libopenmpi-dev libhdf5-openmpi-dev)

want=("${build[@]}")
for group in "$@"; do
  case "$group" in
    build) ;;
    golden) want+=("${golden[@]}") ;;
    bench) want+=("${bench[@]}") ;;
    fuzz) want+=("${fuzz[@]}") ;;
    mpi) want+=("${mpi[@]}") ;;
    *) echo "install-deps.sh: unknown group '$group' (build, golden, bench, fuzz, mpi)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps.sh: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
