#!/bin/sh
# ferry's libcuda.so.1 beside NVIDIA's libcudart.so.13 (beside.cmake): the
# programs load NVIDIA's runtime first (DT_RPATH, as PyTorch's and JAX's
# libraries do), which opens libcuda.so.1 and must get ferry's, whose only
# need is libferry-client.so.0. Results must equal those of the programs
# built against ferry's runtime, remotely and migrated.
# usage: beside.sh BUILD_DIR CASE NVIDIA_LIB_DIR
set -u
build=$(cd "$1" && pwd)
case_name=$2
nvidia=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-beside.XXXXXX")
e2e_name="e2e beside"
. "$(dirname "$0")/lib.sh"
export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so" FERRY_CONTROL_DIR="$work"
unset FERRY_MIGRATE_AT FERRY_FAULT FERRY_MHELPER

# ok LABEL RC: it passed through ferry, nothing refused
ok() {
  passed "$1" "$2"
  expect_not_in "$1.err" "not supported"
}
# loaded LABEL FILE: the dynamic loader initialised FILE in LABEL's run
loaded() { expect_in "$1.err" "calling init: $2\$"; }
# nvidia_first LABEL: NVIDIA's runtime and ferry's driver, never ferry's runtime
nvidia_first() {
  loaded "$1" "$nvidia/libcudart.so.13"
  loaded "$1" "$build/lib/libcuda.so.1"
  loaded "$1" "$build/lib/libferry-client.so.0"
  expect_not_in "$1.err" "calling init: $build/lib/libcudart.so.13"
}
# same LABEL: the checksum of the build against ferry's runtime ($want)
same() { same_checksum "$1"; }
# reference: migrate_iter built against ferry's runtime, unmoved; sets $want, $launches
reference() {
  rc=$(FERRY_CONTROL=off run shared migrate_iter)
  passed shared "$rc"
  want=$(value shared checksum) launches=$(value shared launches)
}

[ -f "$nvidia/libcudart.so.13" ] || fail "no NVIDIA runtime at $nvidia/libcudart.so.13"
start_sim_server
export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
case $case_name in
rpath)
  rc=$(export LD_DEBUG=libs; run vecadd vecadd_rpath 100000 5)
  [ "$rc" = 0 ] || fail "vecadd exited $rc"
  expect_in vecadd.out "vecadd: n=100000 iterations=5 PASSED"
  expect_not_in vecadd.err "not supported"
  nvidia_first vecadd
  expect_in vecadd.out "ferry CPU simulation"
  ;;
api_tour_rpath)
  rc=$(export LD_DEBUG=libs; run api_tour api_tour_rpath)
  [ "$rc" = 0 ] || fail "api_tour exited $rc"
  nvidia_first api_tour
  expect_in api_tour.out " 0 failed"
  expect_in api_tour.out "hello from the GPU, tag 42"
  ;;
rpath_migrate | rpath_migrate_helper)
  [ "$case_name" = rpath_migrate ] || export FERRY_MHELPER=always
  reference
  rc=$(export LD_DEBUG=libs; FERRY_CONTROL=off run ref migrate_iter_rpath)
  ok ref "$rc"
  nvidia_first ref
  same ref
  for k in 1 $((launches / 2)) $((launches - 2)); do
    rc=$(FERRY_MIGRATE_AT=0:0:launch=$k run "at$k" migrate_iter_rpath)
    ok "at$k" "$rc"
    same "at$k"
    expect_in "at$k.err" "ferry: device 0 now runs on local GPU 0"
    expect_not_in "at$k.err" "migration of device .* failed"
    expect_in "at$k.out" "^device memory in use at exit: 0$"
    [ "$case_name" = rpath_migrate ] || expect_in "at$k.err" "in ferry-mhelper pid"
  done
  ;;
runpath)
  # a DT_RUNPATH loses to LD_LIBRARY_PATH: ferry's runtime and driver, one core
  reference
  rc=$(export LD_DEBUG=libs; FERRY_MIGRATE_AT=0:0:launch=$((launches / 2)) run moved migrate_iter_runpath)
  ok moved "$rc"
  same moved
  loaded moved "$build/lib/libcudart.so.13"
  loaded moved "$build/lib/libferry-client.so.0"
  expect_not_in moved.err "calling init: $nvidia/libcudart.so.13"
  expect_in moved.err "ferry: device 0 now runs on local GPU 0"
  ;;
dlopen)
  rc=$(run dlopen dlopen_driver "$nvidia/libcudart.so.13")
  [ "$rc" = 0 ] || fail "dlopen_driver exited $rc"
  expect_in dlopen.out "libcuda.so.1 loaded beside NVIDIA's runtime"
  expect_in dlopen.out "ferry's driver front end: yes"
  expect_in dlopen.out "cuInit, cuDeviceGetCount: 0, 1 devices"
  ;;
nvidia_driver_loaded)
  # NVIDIA's libcuda.so.1 (the toolkit's stub stands for it) in the process
  # beside ferry's runtime: ferry says so in one line, and its own calls
  # still reach the vGPU
  export FERRY_PRELOAD="${FERRY_PRELOAD:+$FERRY_PRELOAD:}$nvidia/stubs/libcuda.so"
  rc=$(run vecadd vecadd 1000 2)
  [ "$rc" = 0 ] || fail "vecadd exited $rc"
  expect_in vecadd.out "vecadd: n=1000 iterations=2 PASSED"
  expect_in vecadd.out "ferry CPU simulation"
  expect_in vecadd.err "ferry: warning: $nvidia/stubs/libcuda.so is loaded in this process"
  [ "$(grep -c "is loaded in this process" "$work/vecadd.err")" = 1 ] || fail "the warning is not one line"
  ;;
run_warning)
  # `ferry run` warns about a program that cannot reach ferry (it names
  # neither front end and cannot dlopen), and not about an interpreter that
  # loads CUDA libraries at run time (python3 with PyTorch; perl stands in:
  # Essential in Debian, and it imports dlopen)
  "$bin/ferry" run -- /bin/true >"$work/true.out" 2>"$work/true.err" || fail "ferry run /bin/true failed"
  expect_in true.err "ferry run: warning: /bin/true loads neither libcudart.so.13 nor libcuda.so.1"
  "$bin/ferry" run -- perl -e 'exit 0' >"$work/perl.out" 2>"$work/perl.err" || fail "ferry run perl failed"
  expect_not_in perl.err "loads neither"
  ;;
*) fail "unknown case" ;;
esac
echo "$e2e_name $case_name: ok"
