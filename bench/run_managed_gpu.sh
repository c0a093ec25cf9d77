#!/bin/bash
# Runs on a GPU machine: issue 22's managed-memory stencil
# (bench/apps/managed_stencil.cu), on demand and prefetched, natively,
# through ferry on a remote vGPU (FERRY_STATS: the bytes exchanged) and
# moved into the program's process at half of its launches, and remotely
# with four connections for bulk data (FERRY_STREAMS=4); then iperf3
# over the same loopback with one stream (the link's speed the targets
# name), when PREFIX/iperf holds it.
# usage: bench/run_managed_gpu.sh PREFIX OUTDIR [N ITERS]
#   PREFIX: bin/ (ferry, ferry-server), lib/, bench/managed_stencil
# FERRY_BENCH_SIM=1: all on the CPU simulation (bench/bench_twins.so in PREFIX/bench)
set -u
pre=$(cd "$1" && pwd)
n=${3:-2048} iters=${4:-50}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/server_start.sh"
bench_out "$2"
backend=(--backend cuda)
if [ "${FERRY_BENCH_SIM:-0}" = 1 ]; then
  backend=(--backend sim --sim-kernels "$pre/bench/bench_twins.so")
  export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS=$pre/bench/bench_twins.so
fi
server_start "$pre/bin" "$out/server.log" "${backend[@]}"
trap 'kill $server 2>/dev/null' EXIT
export FERRY_DEVICES=tcp://127.0.0.1:$port/0
s=$pre/bench/managed_stencil
for variant in demand prefetch; do
  for round in 1 2; do
    if [ "${FERRY_BENCH_SIM:-0}" != 1 ]; then
      LD_LIBRARY_PATH=$native_lib timeout 120 "$s" "$n" "$iters" $variant \
        >"$out/${variant}_native_$round.txt" 2>&1
    fi
    FERRY_STATS=1 timeout 300 "$pre/bin/ferry" run -- "$s" "$n" "$iters" $variant \
      >"$out/${variant}_remote_$round.txt" 2>&1
    FERRY_STATS=1 FERRY_MIGRATE_AT=0:0:launch=$((iters / 2)) timeout 300 "$pre/bin/ferry" run -- \
      "$s" "$n" "$iters" $variant >"$out/${variant}_moved_$round.txt" 2>&1
    FERRY_STATS=1 FERRY_STREAMS=4 timeout 300 "$pre/bin/ferry" run -- "$s" "$n" "$iters" $variant \
      >"$out/${variant}_streams4_$round.txt" 2>&1
  done
done
if [ -x "$pre/iperf/bin/iperf3" ]; then
  ip="env LD_LIBRARY_PATH=$pre/iperf/lib $pre/iperf/bin/iperf3"
  $ip -s -1 -p 5301 >/dev/null 2>&1 &
  iperf_server=$!
  sleep 0.5
  $ip -c 127.0.0.1 -p 5301 -t 4 >"$out/iperf3_1.txt" 2>&1
  wait $iperf_server # not the ferry-server, which runs until the trap
fi
echo done >>"$out/machine.txt"
