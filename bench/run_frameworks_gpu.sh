#!/bin/bash
# Runs on a GPU machine: issue 21's framework workloads (frameworks/workloads.py)
# natively, through ferry on a remote vGPU, and migrated at 25/50/75 % of
# their launches onto the local GPU (in the program's process), and once
# local → a server → local; each run's result line and median step time.
# usage: bench/run_frameworks_gpu.sh NEW OUTDIR [CASE...]
#   NEW: bin/ and lib/ of the build; CASE: a workload, or workload@variant
#   (async: PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync; expand:
#   expandable_segments:True; nocb: XLA command buffers off; noat: XLA's
#   autotuner off, so that its timing-based choice of GEMM kernels cannot
#   change the bits of the result between runs; nocbsync: nocb, and the
#   program's own GPU after a move waits for each kernel and names the
#   first that fails, FERRY_SYNC_LAUNCHES=1).
#   MOVES="25 50 75 back" (default) picks the migrations; MOVES=none, none;
#   sP: to the second server at P % (remote to remote).
#   SERVER2_ENV="FERRY_SYNC_LAUNCHES=1": the second server's environment
#   (that one waits for each kernel and names the first that fails).
#   LUPINE_DIR=.gpu/lupine: each case also through Lupine (bench/lupine.md).
set -u
new=$(cd "$1" && pwd)
out=$2
shift 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/server_start.sh"
machine_info "$out"
server_start "$new/bin" "$out/server.log" --backend cuda
srv1=$server url=tcp://127.0.0.1:$port/0
for kv in ${SERVER2_ENV:-}; do export "${kv?}"; done
server_start "$new/bin" "$out/server2.log" --backend cuda
for kv in ${SERVER2_ENV:-}; do unset "${kv%%=*}"; done
srv2=$server url2=tcp://127.0.0.1:$port/0
trap 'kill $srv1 $srv2 2>/dev/null' EXIT
w=$here/frameworks/workloads.py
table=$out/table.txt
cases=${*:-mlp_train cnn_train transformer_fp32 transformer_bf16 cudagraph compile_default compile_ro mlp_train@async mlp_train@expand jax_train jax_train@nocb cupy_ops}
T=${RUN_TIMEOUT:-150}
line() { # file: "result ... | time"
  echo "$(sed -n 's/^result [^:]*: //p' "$1" | head -n1) | $(sed -n 's/^time [^:]*: \([0-9.]*\) ms.*/\1/p' "$1" | head -n1) ms"
}
for c in $cases; do
  name=${c%@*} variant=${c#*@}
  [ "$variant" = "$c" ] && variant=
  envs=(FERRY_NONE=1)
  case $variant in
  async) envs=(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) ;;
  expand) envs=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) ;;
  nocb) envs=(XLA_FLAGS=--xla_gpu_enable_command_buffer=) ;;
  nocbsync) envs=(XLA_FLAGS=--xla_gpu_enable_command_buffer= FERRY_SYNC_LAUNCHES=1) ;;
  noat) envs=(XLA_FLAGS=--xla_gpu_autotune_level=0) ;;
  esac
  # JAX takes 75 % of the GPU at start; here the server's vGPU and the
  # migration's target share one GPU, so each takes 30 %
  case $name in jax*) envs+=(JAX_PLATFORMS=cuda XLA_PYTHON_CLIENT_MEM_FRACTION=0.3) ;; esac
  tag=${c/@/_}
  env "${envs[@]}" timeout "$T" python3 "$w" "$name" >"$out/${tag}_native.txt" 2>"$out/${tag}_native.err"
  echo "$c native rc=$? $(line "$out/${tag}_native.txt")" >>"$table"
  env "${envs[@]}" FERRY_DEVICES=$url FERRY_STATS=1 timeout "$T" "$new/bin/ferry" run -- python3 "$w" "$name" \
    >"$out/${tag}_remote.txt" 2>"$out/${tag}_remote.err"
  echo "$c remote rc=$? $(line "$out/${tag}_remote.txt")" >>"$table"
  if [ -n "${LUPINE_DIR:-}" ]; then
    env "${envs[@]}" timeout "${LUPINE_TIMEOUT:-90}" "$LUPINE_DIR/run.sh" python3 "$w" "$name" \
      >"$out/${tag}_lupine.txt" 2>"$out/${tag}_lupine.err"
    echo "$c lupine rc=$? $(line "$out/${tag}_lupine.txt")" >>"$table"
  fi
  launches=$(sed -n 's/.*device=0 launches=\([0-9]*\).*/\1/p' "$out/${tag}_remote.err" | tail -n1)
  [ -n "$launches" ] && [ "$launches" -gt 4 ] || continue
  for m in ${MOVES:-25 50 75 back}; do
    [ "$m" = none ] && continue
    if [ "$m" = back ]; then
      at="0:0:launch=$((launches / 4)),0:$url2:launch=$((launches / 2)),0:0:launch=$((launches * 3 / 4))"
    elif [ "${m#s}" != "$m" ]; then
      at="0:$url2:launch=$((launches * ${m#s} / 100))"
    else
      at="0:0:launch=$((launches * m / 100))"
    fi
    env "${envs[@]}" FERRY_DEVICES=$url FERRY_MIGRATE_AT=$at timeout "$T" "$new/bin/ferry" run -- python3 "$w" "$name" \
      >"$out/${tag}_m$m.txt" 2>"$out/${tag}_m$m.err"
    echo "$c moved@$m rc=$? moves=$(grep -c 'now runs on' "$out/${tag}_m$m.err") $(line "$out/${tag}_m$m.txt")" >>"$table"
  done
done
echo done >>"$out/machine.txt"
