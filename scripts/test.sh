#!/bin/sh
# Builds ferry three times (gcc; gcc with AddressSanitizer + UBSan; clang with
# the fuzz harnesses) and runs every test: cmocka unit tests, server
# robustness, end-to-end runs of nvcc-built programs through shim -> tcp ->
# ferry-server -> CPU simulation, the install tree and the .deb, a minute of
# each fuzz harness, and the ib:// tests in a soft-RoCE VM.
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
ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE slurm # Slurm runs once, above
# the second compiler, with the fuzz harnesses (their corpora replayed by
# ctest), then a short run of each harness: any finding fails CI
# the clang build: every unit test and the fuzzers (the CUDA programs, which
# clang does not change, come from the gcc builds above)
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_WERROR=ON -DFERRY_FUZZ=ON \
  -DFERRY_CUDA_APPS=OFF >/dev/null
cmake --build build-fuzz -j "$jobs"
ctest --test-dir build-fuzz --output-on-failure -j "$jobs" -R "fuzz_|test_"
sh tests/fuzz/run.sh build-fuzz "${FERRY_FUZZ_SECONDS:-40}" # 4 harnesses: CI stays under 20 minutes

bash tests/ib/run.sh build # verbs tests and ib:// end to end, in a soft-RoCE VM
