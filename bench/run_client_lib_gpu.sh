#!/bin/bash
# Runs on a GPU machine: issue 20's checks of the client library. Programs
# that load NVIDIA's libcudart.so.13 first (DT_RPATH) natively, through
# ferry's libcuda.so.1 and migrated; the call latency and launch rate of
# this build against the build before the change (OLD), in one run,
# alternating; and how far PyTorch and JAX get through ferry.
# usage: bench/run_client_lib_gpu.sh NEW OLD OUTDIR
#   NEW: bin/ (ferry, ferry-server, ferry-mhelper), lib/ (the client),
#        apps/ (vecadd_rpath, api_tour_rpath, migrate_iter_rpath, migrate_iter),
#        bench/ (bench_calls, bench_calls_static, helper_bench)
#   OLD: bin/ and lib/ of the build before the change
set -u
new=$(cd "$1" && pwd) old=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/server_start.sh"
bench_out "$3"
ls -l "$native_lib/libcudart.so.13" >>"$out/machine.txt" 2>&1
server_start "$new/bin" "$out/server_new.log" --backend "${FERRY_BACKEND:-cuda}" ${FERRY_SIM_KERNELS:+--sim-kernels "$FERRY_SIM_KERNELS"}
srv_new=$server url_new=tcp://127.0.0.1:$port/0
server_start "$old/bin" "$out/server_old.log" --backend "${FERRY_BACKEND:-cuda}" ${FERRY_SIM_KERNELS:+--sim-kernels "$FERRY_SIM_KERNELS"}
srv_old=$server url_old=tcp://127.0.0.1:$port/0
trap 'kill $srv_new $srv_old 2>/dev/null' EXIT
log=$out/rpath.txt

# ---- programs with NVIDIA's runtime first (DT_RPATH) ----
for app in "vecadd_rpath 1000000 10" "api_tour_rpath"; do
  set -- $app
  timeout 120 "$new/apps/$@" >"$out/native_$1.log" 2>&1
  echo "$1 native rc=$?" >>"$log"
  LD_DEBUG=libs FERRY_DEVICES=$url_new timeout 120 "$new/bin/ferry" run -- "$new/apps/$@" \
    >"$out/ferry_$1.log" 2>"$out/ferry_$1.err"
  echo "$1 ferry rc=$?" >>"$log"
  grep -E "calling init: .*(libcudart|libcuda|libferry)" "$out/ferry_$1.err" | sed 's/^ *[0-9]*: *//' >>"$log"
  grep -v '^ *[0-9]*:' "$out/ferry_$1.err" >>"$log"
done
tail -n 2 "$out/native_vecadd_rpath.log" "$out/ferry_vecadd_rpath.log" >>"$log"
tail -n 1 "$out/native_api_tour_rpath.log" "$out/ferry_api_tour_rpath.log" >>"$log"
mi=$new/apps/migrate_iter_rpath
timeout 120 "$mi" >"$out/mi_native.log" 2>&1
echo "migrate_iter_rpath native rc=$? $(grep checksum "$out/mi_native.log")" >>"$log"
FERRY_DEVICES=$url_new timeout 120 "$new/bin/ferry" run -- "$mi" >"$out/mi_remote.log" 2>&1
echo "migrate_iter_rpath remote rc=$? $(grep checksum "$out/mi_remote.log")" >>"$log"
launches=$(sed -n 's/^launches: //p' "$out/mi_remote.log")
for mode in never always; do
  for pct in 25 50 75; do
    k=$((launches * pct / 100))
    FERRY_DEVICES=$url_new FERRY_MIGRATE_AT=0:0:launch=$k FERRY_MHELPER=$mode timeout 120 \
      "$new/bin/ferry" run -- "$mi" >"$out/mi_${mode}_$pct.log" 2>&1
    echo "migrate_iter_rpath moved at $pct% (FERRY_MHELPER=$mode) rc=$? $(grep checksum "$out/mi_${mode}_$pct.log") $(grep -c 'now runs on local GPU' "$out/mi_${mode}_$pct.log") move(s)" >>"$log"
  done
done

# ---- call latency and launch rate: OLD and NEW alternating, three rounds ----
for round in 1 2 3; do
  for b in bench_calls bench_calls_static; do
    LD_LIBRARY_PATH=$native_lib timeout 60 "$new/bench/$b" latency >>"$out/calls_native_$b.txt" 2>&1
    LD_LIBRARY_PATH=$native_lib timeout 60 "$new/bench/$b" launch >>"$out/calls_native_$b.txt" 2>&1
    for v in old new; do
      eval "pre=\$$v url=\$url_$v"
      FERRY_DEVICES=$url timeout 60 "$pre/bin/ferry" run -- "$new/bench/$b" latency >>"$out/calls_${v}_$b.txt" 2>&1
      FERRY_DEVICES=$url timeout 60 "$pre/bin/ferry" run -- "$new/bench/$b" launch >>"$out/calls_${v}_$b.txt" 2>&1
    done
  done
  for v in old new; do
    eval "pre=\$$v url=\$url_$v"
    FERRY_DEVICES=$url FERRY_MIGRATE_AT=0:0:launch=1 FERRY_MHELPER=never timeout 120 \
      "$pre/bin/ferry" run -- "$new/bench/helper_bench" calls 200000 >>"$out/inproc_$v.txt" 2>&1
  done
done

# ---- frameworks: natively, then through ferry ----
export PYTHONUNBUFFERED=1
timeout 150 python3 "$here/frameworks/torch_probe.py" >"$out/torch_native.txt" 2>"$out/torch_native.err"
FERRY_DEVICES=$url_new timeout 150 "$new/bin/ferry" run -- python3 "$here/frameworks/torch_probe.py" \
  >"$out/torch_ferry.txt" 2>"$out/torch_ferry.err"
echo "rc=$?" >>"$out/torch_ferry.txt"
JAX_PLATFORMS=cuda timeout 150 python3 "$here/frameworks/jax_probe.py" >"$out/jax_native.txt" 2>"$out/jax_native.err"
FERRY_DEVICES=$url_new JAX_PLATFORMS=cuda timeout 150 "$new/bin/ferry" run -- python3 \
  "$here/frameworks/jax_probe.py" >"$out/jax_ferry.txt" 2>"$out/jax_ferry.err"
echo "rc=$?" >>"$out/jax_ferry.txt"
echo done >>"$out/machine.txt"
