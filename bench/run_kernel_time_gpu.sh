#!/bin/bash
# Runs on a GPU machine: issue 24's GPU work at native speed. kernel_time
# (kernel times by CUDA events, and loops of memset + launch timed on the
# host) and async_loop (the probe's loop: a 4-byte memset and a launch that
# reads 200 MiB and atomicAdds, 100 per block size, one synchronize each),
# both runtime builds, natively, remotely, moved into the process at the
# first launch and onto a ferry-mhelper, FERRY_STATS on; two rounds,
# alternating. Then device_assert natively and through ferry.
# Last, copies of every size through ferry and natively (bench_calls
# bandwidth), beside iperf3 over the same loopback with 1 and 4 streams
# when PREFIX/iperf holds it (bin/iperf3 and its libraries).
# usage: bench/run_kernel_time_gpu.sh PREFIX OUTDIR
#   PREFIX: bin/ (ferry, ferry-server, ferry-mhelper), lib/, bench/
#   (kernel_time, kernel_time_static), apps/ (async_loop, async_loop_static,
#   device_assert)
set -u
pre=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/server_start.sh"
bench_out "$2"
server_start "$pre/bin" "$out/server.log" --backend "${FERRY_BACKEND:-cuda}" \
  ${FERRY_SIM_KERNELS:+--sim-kernels "$FERRY_SIM_KERNELS"}
trap 'kill $server 2>/dev/null' EXIT
export FERRY_DEVICES=tcp://127.0.0.1:$port/0

# place LABEL-PREFIX PROGRAM ARGS...: native, remote, inproc and helper runs,
# appended to OUT/LABEL-PREFIX_<placement>.txt
place() {
  local label=$1
  shift
  LD_LIBRARY_PATH=$native_lib timeout 300 "$@" >>"$out/${label}_native.txt" 2>&1
  FERRY_STATS=1 timeout 300 "$pre/bin/ferry" run -- "$@" >>"$out/${label}_remote.txt" 2>&1
  for mode in never:inproc always:helper; do
    FERRY_STATS=1 FERRY_MIGRATE_AT=0:0:launch=1 FERRY_MHELPER=${mode%%:*} timeout 300 \
      "$pre/bin/ferry" run -- "$@" >>"$out/${label}_${mode#*:}.txt" 2>&1
  done
}
for round in 1 2; do
  place kt_shared "$pre/bench/kernel_time" 200
  place kt_static "$pre/bench/kernel_time_static" 200
  place loop_shared "$pre/apps/async_loop" $((50 << 20)) 100
  place loop_static "$pre/apps/async_loop_static" $((50 << 20)) 100
done
LD_LIBRARY_PATH=$native_lib timeout 60 "$pre/apps/device_assert" >"$out/assert_native.out" 2>"$out/assert_native.err"
echo "rc=$?" >>"$out/assert_native.out"
timeout 60 "$pre/bin/ferry" run -- "$pre/apps/device_assert" >"$out/assert_ferry.out" 2>"$out/assert_ferry.err"
echo "rc=$?" >>"$out/assert_ferry.out"
b=$pre/bench/bench_calls
LD_LIBRARY_PATH=$native_lib timeout 200 "$b" bandwidth >"$out/bw_native.txt" 2>&1
timeout 300 "$pre/bin/ferry" run -- "$b" bandwidth >"$out/bw_ferry.txt" 2>&1
if [ -x "$pre/iperf/bin/iperf3" ]; then
  ip="env LD_LIBRARY_PATH=$pre/iperf/lib $pre/iperf/bin/iperf3"
  for streams in 1 4; do
    $ip -s -1 -p $((5200 + streams)) >/dev/null 2>&1 &
    iperf_server=$!
    sleep 0.5
    $ip -c 127.0.0.1 -p $((5200 + streams)) -t 4 -P $streams >"$out/iperf3_$streams.txt" 2>&1
    wait $iperf_server # not the ferry-server, which runs until the trap
  done
fi
echo done >>"$out/machine.txt"
