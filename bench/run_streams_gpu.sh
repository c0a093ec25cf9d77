#!/bin/bash
# Runs on a GPU machine: what FERRY_STREAMS buys, in one run. Copy
# bandwidth through ferry (bench_calls bandwidth, 4 KiB..MAX) with
# FERRY_STREAMS=1 and each N, beside the raw transport doing the same
# exchange over one and N connections (ferry-bench-tcp-streams put/get),
# and iperf3 -P N where iperf3 is installed, all over loopback.
# usage: bench/run_streams_gpu.sh BUILD OUTDIR [MAX_BYTES=1073741824] [N...=4 8 16]
#   BUILD: a build tree (bin/ferry, bin/ferry-server, bin/ferry-bench-tcp-streams,
#   bench/bench_calls). Results: OUTDIR/ferry_sN.txt, tcp_streams.txt, iperf3.txt
set -u
build=$(cd "$1" && pwd)
out=$2
max=${3:-1073741824}
shift $(($# < 3 ? $# : 3))
ns=${*:-4 8 16}
mkdir -p "$out"
out=$(cd "$out" && pwd)
. "$(dirname "$0")/server_start.sh"
machine_info "$out"
server_start "$build/bin" "$out/server.log" --backend "${FERRY_BACKEND:-cuda}" \
  ${FERRY_SIM_KERNELS:+--sim-kernels "$FERRY_SIM_KERNELS"}
trap 'kill $server 2>/dev/null' EXIT
export FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_STATS=1

for n in 1 $ns; do
  FERRY_STREAMS=$n timeout 600 "$build/bin/ferry" run -- "$build/bench/bench_calls" bandwidth "$max" \
    >"$out/ferry_s$n.txt" 2>"$out/ferry_s$n.err"
  echo "FERRY_STREAMS=$n rc=$? $(grep -o 'striped_out=[0-9]* striped_in=[0-9]*' "$out/ferry_s$n.err")"
done | tee "$out/ferry.txt"

tcp="$build/bin/ferry-bench-tcp-streams"
for s in 4194304 16777216 67108864 268435456; do
  reps=$((1073741824 / s)); [ $reps -gt 100 ] && reps=100; [ $reps -lt 4 ] && reps=4
  for dir in put get; do timeout 120 "$tcp" $dir $s $reps 1 $ns; done
done >"$out/tcp_streams.txt" 2>&1

if command -v iperf3 >/dev/null; then
  for n in 1 $ns; do
    iperf3 -s -1 -p 5299 >/dev/null 2>&1 & # one client, then it ends
    sleep 0.5
    iperf3 -c 127.0.0.1 -p 5299 -P "$n" -t 5 2>&1 | grep -E "SUM.*receiver|^\[ *[0-9]+\].*receiver" |
      tail -n 1 | sed "s/^/P=$n /"
  done >"$out/iperf3.txt"
fi
echo "done" >>"$out/machine.txt"
