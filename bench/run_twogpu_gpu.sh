#!/bin/bash
# Issue 9 on a machine with two GPUs, in one run: multi-GPU programs remote
# on both GPUs (one ferry-server serving both with --gpus 0,1, and two
# servers, one per GPU), then moved vGPU by vGPU onto the two local GPUs in
# both orders (the first in the program's process, the second in a
# ferry-mhelper; and both in helpers with FERRY_MHELPER=always), with peer
# copies between the vGPUs in every iteration before and after each move;
# the multi-GPU cuda-samples natively, remotely and migrated at 25/50/75 %;
# the helper benchmarks with the helper on the second GPU.
# Every run's checksum is compared with the native run's (summary.txt).
#
# usage: bench/run_twogpu_gpu.sh BUILD OUTDIR [SAMPLES_BIN]
#   BUILD: bin/, lib/, tests/apps/ (multi_gpu), bench/ (helper_bench)
#   SAMPLES_BIN: simpleMultiGPU, simpleP2P, MonteCarloMultiGPU, cudaOpenMP,
#   conjugateGradientMultiDeviceCG built with -cudart shared
set -u
build=$(cd "$1" && pwd) || exit 2
out=$2
samples=${3:-}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
bin=$build/bin ferry=$build/bin/ferry apps=$build/tests/apps
native_lib=${CUDA_RUNTIME_DIR:-/usr/local/cuda/lib64}
export FERRY_CONTROL_DIR=$out FERRY_STATS=1
unset FERRY_MHELPER FERRY_MIGRATE_AT
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv,noheader
  nvidia-smi topo -m
  echo "cpus: $(nproc)"
} >"$out/machine.txt" 2>&1

. "$(dirname "$0")/server_start.sh"
server_start "$bin" "$out/server_both.log" --backend cuda --gpus 0,1
both=$server pboth=$port
server_start "$bin" "$out/server_gpu0.log" --backend cuda --gpus 0
s0=$server p0=$port
server_start "$bin" "$out/server_gpu1.log" --backend cuda --gpus 1
s1=$server p1=$port
trap 'kill $both $s0 $s1 2>/dev/null' EXIT
# the two ways of offering both GPUs
one_server=tcp://127.0.0.1:$pboth/0,tcp://127.0.0.1:$pboth/1
two_servers=tcp://127.0.0.1:$p0/0,tcp://127.0.0.1:$p1/0

native() { LD_LIBRARY_PATH=$native_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@"; }
launches() { sed -n "s/.*stats: device=$2 launches=\([0-9]*\).*/\1/p" "$1" | tail -n 1; }
sum_of() { sed -n 's/^checksum: \([0-9a-f]*\)$/\1/p' "$1" | tail -n 1; }

# run TAG DEVICES AT CMD...: one run through ferry, a line in runs.txt
run() {
  local tag=$1 devs=$2 at=$3
  shift 3
  local t0 t1 rc
  t0=$(date +%s.%N)
  FERRY_DEVICES=$devs FERRY_MIGRATE_AT=$at timeout 300 "$ferry" run -- "$@" \
    >"$out/$tag.out" 2>"$out/$tag.err"
  rc=$?
  t1=$(date +%s.%N)
  local inp hlp failed
  inp=$(grep "now runs on local GPU" "$out/$tag.err" | grep -vc ferry-mhelper)
  hlp=$(grep -c "in ferry-mhelper pid" "$out/$tag.err")
  failed=$(grep -c "migration of device .* failed" "$out/$tag.err")
  awk -v t="$tag" -v rc=$rc -v i="$inp" -v h="$hlp" -v f="$failed" -v a="$t0" -v b="$t1" \
    -v s="$(sum_of "$out/$tag.out")" -v at="$at" \
    'BEGIN { printf "%s rc=%s in_process=%s helpers=%s failed=%s s=%.2f checksum=%s at=%s\n", t, rc, i, h, f, b - a, s, at }' |
    tee -a "$out/runs.txt"
}

# moves: "0>1@25,1>0@50" = vGPU 0 to local GPU 1 at 25 % of its launches, vGPU 1 to GPU 0 at 50 %
at_spec() { # LOG MOVES
  local spec= m d g p k
  for m in ${2//,/ }; do
    d=${m%%>*} g=${m#*>} g=${g%@*} p=${m#*@}
    k=$(($(launches "$1" "$d") * p / 100))
    [ "$k" -ge 1 ] || k=1
    spec="$spec${spec:+,}$d:$g:launch=$k"
  done
  echo "$spec"
}

# ---- ferry's multi-GPU program: peer copies around the ring every iteration ----
native timeout 120 "$apps/multi_gpu" 40 >"$out/mg_native.out" 2>&1
echo "mg_native rc=$? checksum=$(sum_of "$out/mg_native.out")" | tee -a "$out/runs.txt"
native timeout 120 "$apps/multi_gpu" --threads 40 >"$out/mg_native_thr.out" 2>&1
echo "mg_native_thr rc=$? checksum=$(sum_of "$out/mg_native_thr.out")" | tee -a "$out/runs.txt"
for layout in one_server two_servers; do
  devs=${!layout}
  for mode in "" --threads; do
    t=mg_${layout}${mode:+_thr}
    run "${t}_remote" "$devs" "" "$apps/multi_gpu" $mode 40
    # vGPU 1 onto GPU 0 first (in-process), then vGPU 0 onto GPU 1 (helper); and the reverse order
    for order in "1>0@25,0>1@50" "0>1@25,1>0@50"; do
      o=$( [ "$order" = "1>0@25,0>1@50" ] && echo v1first || echo v0first)
      at=$(at_spec "$out/${t}_remote.err" "$order")
      run "${t}_${o}" "$devs" "$at" "$apps/multi_gpu" $mode 40
      FERRY_MHELPER=always run "${t}_${o}_always" "$devs" "$at" "$apps/multi_gpu" $mode 40
    done
  done
done
# each vGPU onto the GPU it had remotely (the second in a helper)
at=$(at_spec "$out/mg_one_server_remote.err" "0>0@25,1>1@50")
run mg_same_gpus "$one_server" "$at" "$apps/multi_gpu" 40

# ---- cuda-samples that use several GPUs ----
if [ -n "$samples" ]; then
  for s in simpleMultiGPU simpleP2P MonteCarloMultiGPU cudaOpenMP conjugateGradientMultiDeviceCG; do
    [ -x "$samples/$s" ] || continue
    (cd "$samples" && native timeout 120 "./$s" >"$out/s_${s}_native.out" 2>&1)
    echo "s_${s}_native rc=$?" | tee -a "$out/runs.txt"
    (cd "$samples" && run "s_${s}_remote" "$one_server" "" "./$s")
    for p in 25 50 75; do
      at=$(at_spec "$out/s_${s}_remote.err" "0>1@$p,1>0@$p")
      (cd "$samples" && run "s_${s}_m$p" "$one_server" "$at" "./$s")
    done
  done
fi

# ---- the helper benchmarks, the helper on the second GPU ----
helper_bench_runs "$build" "$out" "tcp://127.0.0.1:$pboth/1" 1

# ---- summary: every multi_gpu run against its native checksum ----
{
  want=$(sum_of "$out/mg_native.out") want_thr=$(sum_of "$out/mg_native_thr.out")
  grep '^mg_' "$out/runs.txt" | grep -v native | while read -r line; do
    tag=${line%% *} w=$want
    case $tag in *_thr*) w=$want_thr ;; esac
    got=$(sum_of "$out/$tag.out")
    echo "$tag: $([ -n "$got" ] && [ "$got" = "$w" ] && echo "as native" || echo "DIFFERS ($got vs $w)")"
  done
  echo "after the run:"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
  echo "ferry-mhelper processes left: $(pgrep -c ferry-mhelper)"
} >"$out/summary.txt" 2>&1
echo "done" >>"$out/machine.txt"
