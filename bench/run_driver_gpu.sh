#!/bin/bash
# Issue 10 on a real GPU: ferry's driver front end (libcuda.so.1) and the
# static CUDA runtime through it. ferry's own driver-API programs and its
# test programs built with nvcc's default -cudart static run natively,
# remotely (ferry-server --backend cuda on loopback) and migrated (into the
# process, onto a ferry-mhelper), and one static program logs which driver
# calls its runtime resolves that ferry does not serve.
# usage: bench/run_driver_gpu.sh BUILD OUTDIR
#   BUILD: bin/ (ferry, ferry-server, ferry-mhelper), lib/, tests/apps/
set -u
build=$(cd "$1" && pwd) || exit 2
out=$2
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
bin=$build/bin apps=$build/tests/apps
export FERRY_CONTROL_DIR=$out
unset FERRY_MHELPER FERRY_MIGRATE_AT
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "libcuda: $(ls -l /usr/lib/x86_64-linux-gnu/libcuda.so.1 2>&1)"
} >"$out/machine.txt" 2>&1
. "$(dirname "$0")/server_start.sh"
server_start "$bin" "$out/server.log" --backend cuda
trap 'kill $server 2>/dev/null' EXIT
url=tcp://127.0.0.1:$port/0

# run TAG MODE CMD...: MODE native | ferry | ferry:AT (FERRY_MIGRATE_AT) | helper:AT
run() {
  local tag=$1 mode=$2 rc t0 t1
  shift 2
  t0=$(date +%s.%N)
  case $mode in
  native) timeout 120 "$@" >"$out/$tag.out" 2>"$out/$tag.err" ;;
  ferry) FERRY_DEVICES=${DEVICES:-$url} timeout 120 "$bin/ferry" run -- "$@" >"$out/$tag.out" 2>"$out/$tag.err" ;;
  ferry:*) FERRY_DEVICES=${DEVICES:-$url} FERRY_MIGRATE_AT=${mode#ferry:} timeout 120 "$bin/ferry" run -- "$@" \
             >"$out/$tag.out" 2>"$out/$tag.err" ;;
  helper:*) FERRY_MHELPER=always FERRY_DEVICES=${DEVICES:-$url} FERRY_MIGRATE_AT=${mode#helper:} timeout 120 \
              "$bin/ferry" run -- "$@" >"$out/$tag.out" 2>"$out/$tag.err" ;;
  esac
  rc=$?
  t1=$(date +%s.%N)
  local sum=$(sed -n 's/^checksum: //p' "$out/$tag.out" | head -n 1)
  local pass=$(grep -c "PASSED\| 0 failed" "$out/$tag.out")
  local moved=$(grep -c "now runs on local GPU" "$out/$tag.err")
  local refused=$(grep -c "not supported" "$out/$tag.err")
  awk -v t="$tag" -v rc=$rc -v p=$pass -v m=$moved -v r=$refused -v s="$sum" -v a=$t0 -v b=$t1 \
    'BEGIN { printf "%-34s rc=%s passed=%s moved=%s refused=%s s=%.2f checksum=%s\n", t, rc, p, m, r, b - a, s }' |
    tee -a "$out/runs.txt"
}
k=$apps/drv_kernels
kernels="$k.fatbin $k.cubin $k.ptx"
cd "$out" || exit 2

# driver-API programs
for m in native ferry "ferry:0:0:launch=20" "helper:0:0:launch=20"; do
  t=${m%%:*}
  case $m in *launch=*) t="$t@${m##*=}" ;; esac
  run "drv_tour.$t" "$m" "$apps/drv_tour" $kernels 24
  run "drv_tour_static.$t" "$m" "$apps/drv_tour_static" $kernels 24
  run "drv_mixed.$t" "$m" "$apps/drv_mixed" "$k.fatbin" 24
done
run drv_export.ferry ferry "$apps/drv_export" "$k.fatbin"
run drv_unsupported.ferry ferry "$apps/drv_unsupported"

# the static runtime: the same programs as the shared builds
run vecadd.shared.ferry ferry "$apps/vecadd" 1000000 10
for m in native ferry; do
  run "vecadd_static.$m" "$m" "$apps/vecadd_static" 1000000 10
  run "api_tour_static.$m" "$m" "$apps/api_tour_static"
  run "arrays_static.$m" "$m" "$apps/arrays_static"
done
run migrate_iter.shared.ferry ferry "$apps/migrate_iter"
for m in native ferry "ferry:0:0:launch=50" "ferry:0:0:launch=150" "helper:0:0:launch=100"; do
  t=${m%%:*}
  case $m in *launch=*) t="$t@${m##*=}" ;; esac
  run "migrate_iter_static.$t" "$m" "$apps/migrate_iter_static"
done
DEVICES=$url,$url run multi_gpu_static.ferry2 ferry "$apps/multi_gpu_static" 12
DEVICES=$url,$url run multi_gpu.shared.ferry2 ferry "$apps/multi_gpu" 12
DEVICES=$url,$url run multi_gpu_static.ferry2@5,9 "ferry:0:0:launch=5,1:0:launch=9" "$apps/multi_gpu_static" 12

# which driver calls NVIDIA's runtime resolves that ferry does not serve
FERRY_DEBUG=1 FERRY_DEVICES=$url timeout 60 "$bin/ferry" run -- "$apps/api_tour_static" \
  >"$out/debug.out" 2>"$out/debug.err"
grep -c "cuGetProcAddress" "$out/debug.err" >"$out/procaddr_count.txt"
grep "not served" "$out/debug.err" | sed 's/.*-> //' | sort -u >"$out/not_served.txt"
grep "cuGetExportTable" "$out/debug.err" | sort | uniq -c >"$out/export_tables.txt"
echo "done: $(wc -l <"$out/runs.txt") runs"
