#!/bin/bash
# Issue 10's library benchmarks on a GPU machine, in one run: bench_libs
# (bench/apps/bench_libs.cu) built with -cudart shared and with nvcc's
# default static runtime, natively, through ferry (loopback TCP) and, where
# LUPINE_DIR is given, through Lupine:
#   sgemm   cuBLAS SGEMM, n = 4096, 100 calls
#   fft     cuFFT C2C forward + inverse, 2^22 points, 100 pairs
#   mixed   cuBLAS and the program's own kernels on the same buffers, also
#           migrated onto the local GPU at 25, 50 and 75 % of its launches,
#           and once through ferry without its query cache
# Every run prints a checksum of its result; bench/libs_report.py OUTDIR
# compares them with native and writes the tables.
# usage: bench/run_libs_gpu.sh BUILD OUTDIR [LUPINE_DIR]
#   BUILD: bin/ (ferry, ferry-server), lib/, bench/ (bench_libs_shared, bench_libs_static)
set -u
build=$(cd "$1" && pwd) || exit 2
out=$2
lupine=${3:+$(cd "$3" && pwd)}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
. "$(dirname "$0")/server_start.sh"
machine_info "$out"
server_start "$build/bin" "$out/server.log" --backend cuda
trap 'kill $server 2>/dev/null' EXIT
export FERRY_DEVICES=tcp://127.0.0.1:$port/0
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ferry=$build/bin/ferry
runs=$out/runs.txt
: >"$runs"

# one NAME TIMEOUT CMD...: NAME.out/.err, a line in runs.txt
one() {
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s.%N)
  timeout -k 5 "$limit" "$@" >"$out/$name.out" 2>"$out/$name.err"
  rc=$?
  awk -v n="$name" -v rc="$rc" -v a="$t0" -v z="$(date +%s.%N)" \
    'BEGIN { printf "%s rc=%s wall_s=%.2f\n", n, rc, z - a }' >>"$runs"
}

sizes_sgemm="4096 100" sizes_fft="4194304 100" sizes_mixed="2048 40"
for b in shared static; do
  app=$build/bench/bench_libs_$b
  for what in sgemm fft mixed; do
    eval "args=\$sizes_$what"
    # shellcheck disable=SC2154,SC2086 # args is set by eval; words on purpose
    one "$what.$b.native" 120 "$app" $what $args
    # shellcheck disable=SC2086
    FERRY_STATS=1 one "$what.$b.ferry" 300 "$ferry" run -- "$app" $what $args
    if [ -n "$lupine" ] && [ "$what" != mixed ]; then
      # shellcheck disable=SC2086
      one "$what.$b.lupine" 300 "$lupine/run.sh" "$app" $what $args
    fi
  done
  # what the query cache saves: cuBLAS's per-GEMM attribute and occupancy questions
  # shellcheck disable=SC2086
  FERRY_NO_QUERY_CACHE=1 FERRY_STATS=1 one "mixed.$b.ferry_nocache" 300 "$ferry" run -- "$app" mixed $sizes_mixed
  # the mixed program migrated: K = 25/50/75 % of the launches ferry counted
  n=$(sed -n 's/.*stats: device=0 launches=\([0-9]*\).*/\1/p' "$out/mixed.$b.ferry.err" | tail -n 1)
  for pct in 25 50 75; do
    k=$(( ${n:-0} * pct / 100 ))
    [ "$k" -ge 1 ] || k=1
    # shellcheck disable=SC2086
    FERRY_MIGRATE_AT=0:0:launch=$k FERRY_STATS=1 one "mixed.$b.migrated$pct" 300 "$ferry" run -- \
      "$app" mixed $sizes_mixed
  done
done
echo "done" >>"$out/machine.txt"
