#!/bin/bash
# Issue 8 on one real GPU, in one run: multi-GPU programs whose vGPUs all
# name that GPU (each FERRY_DEVICES entry is its own server session), run
# natively (one device), remotely, and migrated vGPU by vGPU so that one
# runs in the program's process and the others in ferry-mhelper processes;
# then the helper benchmarks (the mrCUDA paper's Figs. 11-12: helper against
# in-process on the same GPU) and the raw shared-memory channel.
# bench/multigpu_report.py OUTDIR turns the logs into bench/results/.
#
# usage: bench/run_multigpu_gpu.sh BUILD OUTDIR [SAMPLES_BIN]
#   BUILD: a build tree (bin/, lib/, tests/apps/, bench/)
#   SAMPLES_BIN: cuda-samples built with -cudart shared (simpleMultiGPU,
#   simpleP2P, MonteCarloMultiGPU, cudaOpenMP, conjugateGradientMultiDeviceCG)
set -u
build=$(cd "$1" && pwd) || exit 2
out=$2
samples=${3:-}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
bin=$build/bin
ferry=$bin/ferry
native_lib=${CUDA_RUNTIME_DIR:-/usr/local/cuda/lib64}
export FERRY_CONTROL_DIR=$out FERRY_STATS=1
unset FERRY_MHELPER FERRY_MIGRATE_AT


. "$(dirname "$0")/server_start.sh"
machine_info "$out"
server_start "$bin" "$out/server.log" --backend "${FERRY_BACKEND:-cuda}" \
  ${FERRY_SIM_KERNELS:+--sim-kernels "$FERRY_SIM_KERNELS"}
trap 'kill $server 2>/dev/null' EXIT
url=tcp://127.0.0.1:$port/0
vgpus() { # N: FERRY_DEVICES naming GPU 0 N times
  local l=$url i
  for ((i = 1; i < $1; i++)); do l="$l,$url"; done
  echo "$l"
}
native() { LD_LIBRARY_PATH=$native_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@"; }
# launches LOG DEV: launches on vGPU DEV, from FERRY_STATS' exit line
launches() { sed -n "s/.*stats: device=$2 launches=\([0-9]*\).*/\1/p" "$1" | tail -n 1; }

# run TAG N_VGPUS AT CMD...: one run through ferry; a line in runs.txt
run() {
  local tag=$1 n=$2 at=$3
  shift 3
  local t0=$(date +%s.%N)
  FERRY_DEVICES=$(vgpus "$n") FERRY_MIGRATE_AT=$at timeout 300 "$ferry" run -- "$@" \
    >"$out/$tag.out" 2>"$out/$tag.err"
  local rc=$? t1=$(date +%s.%N)
  local inp=$(grep "now runs on local GPU" "$out/$tag.err" | grep -vc ferry-mhelper)
  local hlp=$(grep -c "in ferry-mhelper pid" "$out/$tag.err")
  local failed=$(grep -c "migration of device .* failed" "$out/$tag.err")
  awk -v t="$tag" -v rc=$rc -v i=$inp -v h=$hlp -v f=$failed -v a=$t0 -v b=$t1 \
    'BEGIN { printf "%s rc=%s in_process=%s helpers=%s failed=%s s=%.2f\n", t, rc, i, h, f, b - a }' |
    tee -a "$out/runs.txt"
}

# every vGPU moved at FRACTION of its launches: vGPU 0 first
at_fraction() { # LOG N PERCENT
  local spec= d k
  for ((d = 0; d < $2; d++)); do
    k=$(($(launches "$1" $d) * $3 / 100))
    [ "$k" -ge 1 ] || k=1
    spec="$spec${spec:+,}$d:0:launch=$k"
  done
  echo "$spec"
}

# ---- ferry's own multi-GPU program ----
apps=$build/tests/apps
native timeout 120 "$apps/multi_gpu" 20 >"$out/mg_native.out" 2>&1
echo "mg_native rc=$?" | tee -a "$out/runs.txt"
native timeout 120 "$apps/multi_gpu" --threads 20 >"$out/mg_native_thr.out" 2>&1
echo "mg_native_thr rc=$?" | tee -a "$out/runs.txt"
for n in 2 3; do
  for mode in "" --threads; do
    t=mg${n}${mode:+_thr}
    run "${t}_remote" $n "" "$apps/multi_gpu" $mode 20
    for p in 25 50 75; do
      at=$(at_fraction "$out/${t}_remote.err" $n $p)
      run "${t}_m$p" $n "$at" "$apps/multi_gpu" $mode 20
      FERRY_MHELPER=always run "${t}_always_m$p" $n "$at" "$apps/multi_gpu" $mode 20
    done
  done
done
# never: a second vGPU on the same GPU in the process is refused, in words
at=$(at_fraction "$out/mg2_remote.err" 2 50)
FERRY_MHELPER=never run mg2_never_m50 2 "$at" "$apps/multi_gpu" 20
# a helper killed mid-run: that vGPU fails clearly, the others go on
FERRY_DEVICES=$(vgpus 3) FERRY_MHELPER=always FERRY_MIGRATE_AT=1:0:launch=20 \
  timeout 120 "$ferry" run -- "$apps/multi_gpu" --tolerate-loss 1000000 2000 "$out/stop" \
  >"$out/mg3_kill.out" 2>"$out/mg3_kill.err" &
app=$!
for i in $(seq 200); do
  hp=$(sed -n 's/.*in ferry-mhelper pid \([0-9]*\).*/\1/p' "$out/mg3_kill.err" | head -n 1)
  [ -n "$hp" ] && break
  sleep 0.1
done
sleep 1
[ -n "$hp" ] && kill -9 "$hp"
sleep 1
touch "$out/stop"
wait $app
echo "mg3_kill rc=$? helper=$hp" | tee -a "$out/runs.txt"
# the migrate_iter program of issue 3, onto a helper, on a real GPU
run mi_remote 1 "" "$apps/migrate_iter" 40
for p in 25 50 75; do
  at=$(at_fraction "$out/mi_remote.err" 1 $p)
  FERRY_MHELPER=always run "mi_always_m$p" 1 "$at" "$apps/migrate_iter" 40
done
native timeout 120 "$apps/migrate_iter" 40 >"$out/mi_native.out" 2>&1

# ---- cuda-samples that use several GPUs ----
if [ -n "$samples" ]; then
  for s in simpleMultiGPU simpleP2P MonteCarloMultiGPU cudaOpenMP conjugateGradientMultiDeviceCG; do
    [ -x "$samples/$s" ] || continue
    native timeout 120 "$samples/$s" >"$out/s_${s}_native.out" 2>&1
    echo "s_${s}_native rc=$?" | tee -a "$out/runs.txt"
    for n in 2 3; do
      run "s_${s}_${n}_remote" $n "" "$samples/$s"
      for p in 25 50 75; do
        at=$(at_fraction "$out/s_${s}_${n}_remote.err" $n $p)
        run "s_${s}_${n}_m$p" $n "$at" "$samples/$s"
      done
    done
  done
fi

# ---- benchmarks: the helper against in-process, same GPU, same run ----
helper_bench_runs "$build" "$out" "$url" 0
{
  echo "after the run:"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
  echo "ferry-mhelper processes left: $(pgrep -c ferry-mhelper)"
  echo "done"
} >>"$out/machine.txt" 2>&1
