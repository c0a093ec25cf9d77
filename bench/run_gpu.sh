#!/bin/bash
# Runs on a GPU machine: ferry's own GPU tests and benchmarks, natively and
# through ferry (ferry-server on the same machine, over loopback), plus the
# raw TCP baseline, all in one run so that ratios compare like with like.
# usage: bench/run_gpu.sh PREFIX OUTDIR [tests|bench|all]
#   PREFIX holds bin/ (ferry, ferry-server, ferry-bench-tcp), lib/ (the shim),
#   apps/ (tests/apps binaries) and bench_calls. Results go to OUTDIR.
set -u
prefix=$(cd "$1" && pwd)
out=$2
what=${3:-all}
mkdir -p "$out"
out=$(cd "$out" && pwd)
native_lib=${CUDA_RUNTIME_DIR:-/usr/local/cuda/lib64}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current --format=csv,noheader
  echo "cpus: $(nproc)"
} >"$out/machine.txt" 2>&1

. "$(dirname "$0")/server_start.sh"
server_start "$prefix/bin" "$out/server.log" --backend "${FERRY_BACKEND:-cuda}" \
  ${FERRY_SIM_KERNELS:+--sim-kernels "$FERRY_SIM_KERNELS"}
trap 'kill $server 2>/dev/null' EXIT
export FERRY_DEVICES=tcp://127.0.0.1:$port/0
ferry="$prefix/bin/ferry"

native() { LD_LIBRARY_PATH=$native_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@"; }

if [ "$what" != bench ]; then
  for app in "vecadd 1000000 10" "api_tour" "long_run 50 1" "arrays"; do
    set -- $app
    name=$1
    shift
    t0=$(date +%s.%N)
    native timeout 120 "$prefix/apps/$name" "$@" >"$out/test_native_$name.log" 2>&1
    rn=$?
    t1=$(date +%s.%N)
    timeout 120 "$ferry" run -- "$prefix/apps/$name" "$@" >"$out/test_ferry_$name.log" 2>&1
    rf=$?
    t2=$(date +%s.%N)
    awk -v n="$name" -v rn=$rn -v rf=$rf -v a=$t0 -v b=$t1 -v c=$t2 \
      'BEGIN { printf "%-10s native rc=%s %.2fs  ferry rc=%s %.2fs\n", n, rn, b - a, rf, c - b }' |
      tee -a "$out/tests.txt"
  done
fi

if [ "$what" != tests ]; then
  b="$prefix/bench_calls"
  native timeout 200 "$b" all >"$out/bench_native.txt" 2>&1
  timeout 300 "$ferry" run -- "$b" all >"$out/bench_ferry.txt" 2>&1
  tcp="$prefix/bin/ferry-bench-tcp"
  # latency is the noisiest figure: five rounds, alternating ferry, native
  # and raw TCP, so that report.py can take medians of neighbouring runs
  for round in 1 2 3 4 5; do
    timeout 60 "$ferry" run -- "$b" latency >>"$out/bench_ferry.txt" 2>&1
    native timeout 60 "$b" latency >>"$out/bench_native.txt" 2>&1
    timeout 60 "$tcp" pingpong 4 20000 >>"$out/bench_tcp.txt" 2>&1
  done
  {
    for s in 4 48; do timeout 60 "$tcp" pingpong $s 20000; done
    for s in 4096 16384 65536 262144 1048576 4194304 16777216 67108864 268435456 1073741824; do
      total=$((s * 4)); [ $total -lt 1073741824 ] && total=1073741824
      timeout 60 "$tcp" stream $s $total
      reps=$((1073741824 / s)); [ $reps -gt 2000 ] && reps=2000; [ $reps -lt 3 ] && reps=3
      timeout 60 "$tcp" put $s $reps
      timeout 60 "$tcp" get $s $reps
    done
  } >>"$out/bench_tcp.txt" 2>&1
fi
echo "done" >>"$out/machine.txt"
