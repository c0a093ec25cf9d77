#!/bin/sh
# Builds ferry twice (normal, and with AddressSanitizer + UBSan) and runs every
# test: cmocka unit tests, server robustness, and end-to-end runs of nvcc-built
# programs through shim -> tcp -> ferry-server -> CPU simulation.
set -e
cd "$(dirname "$0")/.."
sh scripts/deps.sh
bash tests/ib/run.sh --deps # rdma-core headers (the ib:// build) and the VM's tools
jobs=$(nproc 2>/dev/null || echo 2)
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_WERROR=ON >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
# the README's first command, as a user runs it: it must exit 0 (it says FAILED and exits 1 otherwise)
sh scripts/demo.sh >build/demo.log 2>&1 || { cat build/demo.log; echo "scripts/demo.sh failed"; exit 1; }
echo "scripts/demo.sh: ok"

cmake -S . -B build-asan -DFERRY_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DFERRY_WERROR=ON >/dev/null
cmake --build build-asan -j "$jobs"
ctest --test-dir build-asan --output-on-failure -j "$jobs"
bash tests/ib/run.sh build # verbs tests and ib:// end to end, in a soft-RoCE VM
