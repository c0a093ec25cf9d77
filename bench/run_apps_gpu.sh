#!/bin/bash
# Runs on a GPU machine: test programs of tests/apps natively, through ferry
# on a remote vGPU, and migrated at 50 % of their launches (in-process and
# onto a ferry-mhelper); the last line of each run's output and its status.
# usage: bench/run_apps_gpu.sh NEW OUTDIR "APP ARGS" ...   (NEW: bin/ lib/ apps/;
#   an ARG "@fatbin" is NEW/apps/drv_kernels.fatbin, "@FILE" NEW/apps/FILE)
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
trap 'kill $server 2>/dev/null' EXIT
url=tcp://127.0.0.1:$port/0
table=$out/table.txt
native_lib=${CUDA_RUNTIME_DIR:-/usr/local/cuda/lib64}
for spec in "$@"; do
  set -- $spec
  app=$1
  shift
  args=()
  for a in "$@"; do
    [ "$a" = @fatbin ] && a=@drv_kernels.fatbin
    [ "${a#@}" != "$a" ] && a=$new/apps/${a#@}
    args+=("$a")
  done
  LD_LIBRARY_PATH=$native_lib:${LD_LIBRARY_PATH:-} timeout 120 "$new/apps/$app" "${args[@]}" >"$out/${app}_native.txt" 2>&1
  echo "$app native rc=$? | $(tail -n1 "$out/${app}_native.txt")" >>"$table"
  FERRY_DEVICES=$url FERRY_STATS=1 timeout 120 "$new/bin/ferry" run -- "$new/apps/$app" "${args[@]}" >"$out/${app}_remote.txt" 2>"$out/${app}_remote.err"
  echo "$app remote rc=$? | $(tail -n1 "$out/${app}_remote.txt")" >>"$table"
  launches=$(sed -n 's/.*device=0 launches=\([0-9]*\).*/\1/p' "$out/${app}_remote.err" | tail -n1)
  [ -n "$launches" ] && [ "$launches" -gt 1 ] || continue
  for mode in never always; do
    FERRY_DEVICES=$url FERRY_MHELPER=$mode FERRY_MIGRATE_AT=0:0:launch=$((launches / 2)) timeout 120 \
      "$new/bin/ferry" run -- "$new/apps/$app" "${args[@]}" >"$out/${app}_m_$mode.txt" 2>"$out/${app}_m_$mode.err"
    echo "$app moved@50 helper=$mode rc=$? moves=$(grep -c 'now runs on' "$out/${app}_m_$mode.err") | $(tail -n1 "$out/${app}_m_$mode.txt")" >>"$table"
  done
done
echo done >>"$out/machine.txt"
