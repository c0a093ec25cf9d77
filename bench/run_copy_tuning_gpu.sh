#!/bin/bash
# Runs on a GPU machine: ferry's copies of 4 KiB to MAX against iperf3 with
# as many streams, over loopback, in one run: one stream, and
# FERRY_STREAMS=4 for each smallest striped copy (FERRY_STRIPE_MIN, read by
# both ends), each measured just after iperf3.
# usage: bench/run_copy_tuning_gpu.sh DIR OUTDIR
#   DIR: bin/{ferry,ferry-server}, lib/, bench/bench_calls, iperf/ (bin/iperf3
#   and its libraries). environment: STRIPE_MINS (bytes), MAX (bytes),
#   FERRY_BACKEND=sim FERRY_SIM_KERNELS=twins.so (a smoke run without a GPU)
# Results: OUTDIR/s1.txt, s4_MIN.txt (bench_calls bandwidth), iperf3.txt
# (a line per configuration, measured just before it);
# bench/copy_tuning_report.py OUTDIR turns them into a table.
set -u
dir=$(cd "$1" && pwd) || exit 2
out=$2
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
. "$(dirname "$0")/server_start.sh"
machine_info "$out"
max=${MAX:-268435456}

run_with() { # label server_env... -- client_env...
  local label=$1 senv=() cenv=() kv
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do senv+=("$1"); shift; done
  shift
  cenv=("$@")
  for kv in "${senv[@]}"; do export "${kv?}"; done
  server_start "$dir/bin" "$out/server_$label.log" --backend "${FERRY_BACKEND:-cuda}" \
    ${FERRY_SIM_KERNELS:+--sim-kernels "$FERRY_SIM_KERNELS"}
  for kv in "${senv[@]}"; do unset "${kv%%=*}"; done
  env "${cenv[@]}" FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_STATS=1 timeout 300 \
    "$dir/bin/ferry" run -- "$dir/bench/bench_calls" bandwidth "$max" >"$out/$label.txt" 2>"$out/$label.err"
  echo "$label rc=$? $(grep -o 'striped_out=[0-9]* striped_in=[0-9]*' "$out/$label.err" | tail -n 1)"
  kill $server
  wait $server 2>/dev/null
}

# iperf3 -P N beside each configuration (loopback varies between minutes)
iperf() { # N label
  [ -x "$dir/iperf/bin/iperf3" ] || return 0
  local ip="env LD_LIBRARY_PATH=$dir/iperf/lib $dir/iperf/bin/iperf3"
  $ip -s -1 -p 5299 >/dev/null 2>&1 & # one client, then it ends
  sleep 0.5
  $ip -c 127.0.0.1 -p 5299 -P "$1" -t 3 2>&1 | grep -E "SUM.*receiver|^\[ *[0-9]+\].*receiver" |
    tail -n 1 | sed "s/^/$2 P=$1 /" >>"$out/iperf3.txt"
  wait
}

{
  iperf 1 s1
  run_with s1 -- FERRY_STREAMS=1
} | tee "$out/runs.txt"
for m in ${STRIPE_MINS:-1048576 4194304}; do
  iperf 4 "s4_$m"
  run_with "s4_$m" FERRY_STRIPE_MIN=$m -- FERRY_STREAMS=4 FERRY_STRIPE_MIN=$m
done | tee -a "$out/runs.txt"
echo done >>"$out/machine.txt"
