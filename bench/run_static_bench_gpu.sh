#!/bin/bash
# Issue 10's benchmarks on a GPU machine, in one run: bench_calls built with
# nvcc's default static runtime (it reaches ferry through libcuda.so.1, the
# driver front end) against native, against the raw TCP transport, and
# against the -cudart shared build through ferry (the runtime front end).
# bench/static_report.py OUTDIR writes the tables.
# usage: bench/run_static_bench_gpu.sh BUILD OUTDIR [LUPINE_DIR]
#   BUILD: bin/ (ferry, ferry-server, ferry-bench-tcp), lib/, bench/ (bench_calls, bench_calls_static)
#   LUPINE_DIR: a Lupine build with its run.sh (bench/lupine.md): the same
#   static-runtime program through the peer, in the same run
set -u
build=$(cd "$1" && pwd) || exit 2
out=$2
lupine=${3:+$(cd "$3" && pwd)}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
. "$(dirname "$0")/server_start.sh"
machine_info "$out" pcie.link.gen.current
server_start "$build/bin" "$out/server.log" --backend cuda
trap 'kill $server 2>/dev/null' EXIT
export FERRY_DEVICES=tcp://127.0.0.1:$port/0
ferry=$build/bin/ferry tcp=$build/bin/ferry-bench-tcp
st=$build/bench/bench_calls_static sh=$build/bench/bench_calls

timeout 200 "$st" all >"$out/bench_native_static.txt" 2>&1
timeout 300 "$ferry" run -- "$st" all >"$out/bench_ferry_static.txt" 2>&1
timeout 300 "$ferry" run -- "$sh" all >"$out/bench_ferry_shared.txt" 2>&1
[ -z "$lupine" ] || timeout 400 "$lupine/run.sh" "$st" all >"$out/bench_lupine_static.txt" 2>&1
# latencies and launch rates are the noisiest: seven rounds, the builds
# alternating and taking turns at going first (report.py takes medians)
for round in 1 2 3 4 5 6 7; do
  for what in latency launch; do
    if [ $((round % 2)) = 1 ]; then
      timeout 60 "$ferry" run -- "$st" $what >>"$out/bench_ferry_static.txt" 2>&1
      timeout 60 "$ferry" run -- "$sh" $what >>"$out/bench_ferry_shared.txt" 2>&1
    else
      timeout 60 "$ferry" run -- "$sh" $what >>"$out/bench_ferry_shared.txt" 2>&1
      timeout 60 "$ferry" run -- "$st" $what >>"$out/bench_ferry_static.txt" 2>&1
    fi
    timeout 60 "$st" $what >>"$out/bench_native_static.txt" 2>&1
    [ -z "$lupine" ] || timeout 120 "$lupine/run.sh" "$st" $what >>"$out/bench_lupine_static.txt" 2>&1
  done
  timeout 60 "$tcp" pingpong 4 20000 >>"$out/bench_tcp.txt" 2>&1
done
for s in 4096 65536 1048576 16777216 268435456 1073741824; do
  total=$((s * 4)); [ $total -lt 1073741824 ] && total=1073741824
  timeout 60 "$tcp" stream $s $total >>"$out/bench_tcp.txt" 2>&1
done
echo "done" >>"$out/machine.txt"
