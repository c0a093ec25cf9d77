#!/bin/sh
# End-to-end cases of programs built with nvcc's default static CUDA
# runtime (tests/apps/*_static): NVIDIA's runtime inside the program talks
# only to the driver, so it reaches ferry through ferry's libcuda.so.1 (its
# private export tables included) and runs on a ferry-server using the CPU
# simulation. Results must equal those of the -cudart shared builds.
# usage: static.sh BUILD_DIR CASE
set -u
build=$(cd "$1" && pwd)
case_name=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-static.XXXXXX")
e2e_name="e2e static"
. "$(dirname "$0")/lib.sh"
export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so" FERRY_CONTROL_DIR="$work"
unset FERRY_MIGRATE_AT FERRY_FAULT FERRY_MHELPER

# ok LABEL RC: it passed, through ferry, with no call refused
ok() {
  passed "$1" "$2"
  expect_not_in "$1.err" "not supported"
  expect_not_in "$1.err" "loads neither"
}

# same LABEL: the checksum of the -cudart shared build's run ($want)
same() { same_checksum "$1"; }

start_sim_server
export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
case $case_name in
vecadd)
  rc=$(run vecadd vecadd_static 100000 5)
  [ "$rc" = 0 ] || fail "vecadd exited $rc"
  expect_in vecadd.out "PASSED"
  expect_not_in vecadd.err "not supported"
  expect_in vecadd.out "ferry CPU simulation"
  ;;
api_tour)
  rc=$(run api_tour api_tour_static)
  [ "$rc" = 0 ] || fail "api_tour exited $rc"
  expect_in api_tour.out " 0 failed"
  expect_in api_tour.out "hello from the GPU, tag 42"
  ;;
async_loop)
  async_loop_placements async_loop_static
  ;;
arrays)
  rc=$(run arrays arrays_static)
  ok arrays "$rc"
  ;;
migrate | migrate_helper)
  [ "$case_name" = migrate ] || export FERRY_MHELPER=always
  rc=$(FERRY_CONTROL=off run shared migrate_iter)
  passed shared "$rc"
  want=$(value shared checksum) launches=$(value shared launches)
  rc=$(FERRY_CONTROL=off run ref migrate_iter_static)
  ok ref "$rc"
  same ref
  [ "$(value ref launches)" = "$launches" ] || fail "the static build makes $(value ref launches) launches, the shared one $launches"
  for k in 1 $((launches / 4)) $((launches / 2)) $((launches - 2)); do
    rc=$(FERRY_MIGRATE_AT=0:0:launch=$k run "at$k" migrate_iter_static)
    ok "at$k" "$rc"
    same "at$k"
    expect_in "at$k.err" "ferry: device 0 now runs on local GPU 0"
    expect_not_in "at$k.err" "migration of device .* failed"
    expect_in "at$k.out" "^device memory in use at exit: 0$"
    [ "$case_name" = migrate ] || expect_in "at$k.err" "in ferry-mhelper pid"
  done
  ;;
multi_gpu)
  # two vGPUs, both moved: one into the process, one into a helper
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0,tcp://127.0.0.1:$port/0"
  rc=$(FERRY_CONTROL=off run shared multi_gpu 12)
  passed shared "$rc"
  want=$(value shared checksum)
  rc=$(FERRY_CONTROL=off run ref multi_gpu_static 12)
  ok ref "$rc"
  same ref
  expect_in ref.out "multi_gpu: 2 devices"
  rc=$(FERRY_MIGRATE_AT=0:0:launch=5,1:0:launch=9 run moved multi_gpu_static 12)
  ok moved "$rc"
  same moved
  n=$(grep -c "now runs on local GPU" "$work/moved.err")
  [ "$n" = 2 ] || fail "moved: $n migrations, expected 2"
  ;;
no_server)
  # nothing listens there: one line, and NVIDIA's runtime reports no device
  export FERRY_DEVICES="tcp://127.0.0.1:1/0"
  rc=$(run none vecadd_static 1000 2)
  [ "$rc" != 0 ] || fail "vecadd_static succeeded without a server"
  [ "$rc" != 124 ] || fail "vecadd_static hung"
  expect_in none.err "cannot reach tcp://127.0.0.1:1"
  expect_in none.err "no CUDA-capable device is detected"
  ;;
reset)
  # api_tour resets its device (cudaDeviceReset): the static runtime's
  # context-local state and loaded libraries must start again
  rc=$(run api_tour api_tour_static)
  [ "$rc" = 0 ] || fail "api_tour exited $rc"
  expect_not_in api_tour.err "protocol violation"
  expect_not_in api_tour.err "never created"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "e2e static $case_name: ok"
