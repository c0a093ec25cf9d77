#!/bin/bash
# Issue 13's pause benchmark, one run on one machine: the paper's Fig. 13
# program (bench/apps/mig_iterative, a Jacobi solver whose 512 MiB change
# every iteration) and the same with 4 GiB of read-only data beside it,
# moved while it runs in each direction (remote to local, remote to a
# second server, local to a server: FERRY_DEVICES=local:0, in a helper;
# p2r: moved into the program's own process first, then to a server), three ways:
# everything in the pause (FERRY_PRECOPY=0), copying ahead inside
# `ferry migrate` (the default), and after `ferry migrate --prepare`. Every run has FERRY_STATS=1; the pause is the stats
# line's pause_ms (hold to resume). iperf3 over the same loopback, if it is
# in DIR/iperf (bin/iperf3 and its libraries), gives mem-sync's yardstick.
# bench/pause_report.py OUTDIR turns the logs into a table.
#
# usage: bench/run_pause_gpu.sh DIR OUTDIR
#   DIR: bin/{ferry,ferry-server,ferry-mhelper}, lib/ (the shim), bench/mig_iterative
# environment: PAUSE_N (grid side, 8192: 512 MiB), PAUSE_IT (iterations,
#   30000), PAUSE_RO_MIB (4096), PAUSE_ROUNDS (1), PAUSE_AT_S (seconds
#   before the move, 2), PAUSE_DIRS (r2l r2r l2r p2r), PAUSE_SIM=1 (a smoke run on the CPU simulation:
#   small sizes, no native run)
set -u
dir=$(cd "$1" && pwd) || exit 2
out=$2
mkdir -p "$out/runs" || exit 2
out=$(cd "$out" && pwd)
. "$(dirname "$0")/server_start.sh"
ferry=$dir/bin/ferry
prog=$dir/bench/mig_iterative
n=${PAUSE_N:-8192} it=${PAUSE_IT:-30000} ro=${PAUSE_RO_MIB:-4096}
rounds=${PAUSE_ROUNDS:-1} at_s=${PAUSE_AT_S:-2}
backend=(--backend cuda)
if [ "${PAUSE_SIM:-0}" = 1 ]; then
  backend=(--backend sim --sim-kernels "$dir/bench/bench_twins.so") n=${PAUSE_N:-512} it=${PAUSE_IT:-4000} ro=${PAUSE_RO_MIB:-16}
  export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS=$dir/bench/bench_twins.so
fi
export FERRY_CONTROL_DIR=$out/sockets FERRY_STATS=1
mkdir -p "$FERRY_CONTROL_DIR"
machine_info "$out"

server_start "$dir/bin" "$out/server_a.log" "${backend[@]}"
server_a=$server a="tcp://127.0.0.1:$port/0"
server_start "$dir/bin" "$out/server_b.log" "${backend[@]}"
server_b=$server b="tcp://127.0.0.1:$port/0"
trap 'kill $server_a $server_b 2>/dev/null' EXIT

# the yardstick: iperf3 over the same loopback, one and four streams
if [ -x "$dir/iperf/bin/iperf3" ]; then
  ip="env LD_LIBRARY_PATH=$dir/iperf/lib $dir/iperf/bin/iperf3"
  $ip -s -1 -p 5201 >/dev/null 2>&1 &
  sleep 0.5
  $ip -c 127.0.0.1 -p 5201 -t 4 -P 1 >"$out/iperf3_1.txt" 2>&1
  $ip -s -1 -p 5202 >/dev/null 2>&1 &
  sleep 0.5
  $ip -c 127.0.0.1 -p 5202 -t 4 -P 4 >"$out/iperf3_4.txt" 2>&1
  # the same stream written 1 MiB at a time (iperf3's largest), nearer a gather's
  # 4 MiB writes (its default 128 KiB writes and reads stay in the CPU caches)
  $ip -s -1 -p 5203 >/dev/null 2>&1 &
  sleep 0.5
  $ip -c 127.0.0.1 -p 5203 -t 4 -P 1 -l 1M >"$out/iperf3_1_1m.txt" 2>&1
fi

# native: the checksum every run must end with
[ "${PAUSE_SIM:-0}" = 1 ] || LD_LIBRARY_PATH=${CUDA_RUNTIME_DIR:-/usr/local/cuda/lib64} \
  timeout 120 "$prog" "$n" "$it" >"$out/native.txt" 2>&1

# one LABEL DIRECTION PREPARE PRECOPY READONLY_MIB: start the program, move
# it AT_S seconds in (after --prepare, if asked), let it finish
one() {
  local label=$1 dirn=$2 prep=$3 pre=$4 mib=$5 target app
  local env=(FERRY_PRECOPY=$pre FERRY_DEVICES=$a)
  case $dirn in
  r2l) target=0 ;;
  r2r) target=$b ;;
  l2r) target=$b env=(FERRY_PRECOPY=$pre FERRY_DEVICES=local:0) ;;
  p2r) target=$b ;;
  esac
  # (no timeout(1) in front: $! must be the program, whose pid names its socket)
  env "${env[@]}" "$ferry" run -- "$prog" "$n" "$it" 50 "$mib" \
    >"$out/runs/$label.out" 2>"$out/runs/$label.err" &
  app=$!
  sleep "$at_s"
  if [ "$dirn" = p2r ]; then # into this process first (not measured: the last stats line is)
    timeout 120 "$ferry" migrate --pid "$app" 0 0 >>"$out/runs/$label.mig" 2>&1
    sleep "$at_s"
  fi
  if [ "$prep" = 1 ]; then
    timeout 120 "$ferry" migrate --prepare --pid "$app" 0 "$target" >>"$out/runs/$label.mig" 2>&1
    sleep 0.5
  fi
  timeout 120 "$ferry" migrate --pid "$app" 0 "$target" >>"$out/runs/$label.mig" 2>&1
  wait "$app"
  echo "rc $?" >>"$out/runs/$label.out"
}

# per direction and program: everything in the pause (as before issue
# 13), copying ahead inside `migrate`, and after `migrate --prepare`
for round in $(seq "$rounds"); do
  for mib in 0 "$ro"; do
    for dirn in ${PAUSE_DIRS:-r2l r2r l2r p2r}; do
      for mode in 0:0 0:1 1:1; do
        prep=${mode%:*} pre=${mode#*:}
        one "${dirn}_ro${mib}_prep${prep}_pre${pre}_r$round" "$dirn" "$prep" "$pre" "$mib"
      done
    done
  done
done
echo done >"$out/finished"
