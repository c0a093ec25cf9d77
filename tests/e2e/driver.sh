#!/bin/sh
# End-to-end cases of ferry's driver API (its libcuda.so.1): programs that
# use cuda.h (tests/apps/drv_*) run through `ferry run`, over TCP on
# loopback, on a ferry-server using the CPU simulation; the migrate_* cases
# move them, at a given launch, onto a "local GPU" that is the simulation in
# their own process, and compare their results with runs that did not move.
# usage: driver.sh BUILD_DIR CASE
#   FERRY_MIGRATE_KS="k1 k2 ..." replaces the launch counts of migrate_*
#   (each run prints the ones it used).
set -u
build=$(cd "$1" && pwd)
case_name=$2
# migrate_*_helper: the same case, every migration onto a ferry-mhelper
helper_policy=
case $case_name in
*_helper) case_name=${case_name%_helper} helper_policy=always ;;
esac
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-drv.XXXXXX")
e2e_name="e2e driver"
. "$(dirname "$0")/lib.sh"
local_sim
kernels="$apps/drv_kernels.fatbin $apps/drv_kernels.cubin $apps/drv_kernels.ptx"
jitptx="$apps/drv_jit_step.ptx $apps/drv_jit_mix.ptx"
iters=24

start_server() {
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
}

# toured LABEL RC: a driver program passed every check, through ferry's
# libcuda.so.1 (the device is the server's simulation), and `ferry run` did
# not take it for a program whose CUDA calls stay local
toured() {
  passed "$1" "$2"
  expect_not_in "$1.out" "^FAIL"
  expect_not_in "$1.err" "loads neither"
}

# migrate_at KS LABEL_PREFIX APP ARGS...: for each launch count k in KS the
# program, migrated at launch k, passes and ends as the reference run
# ($want, $launches) did
migrate_at() {
  ks=$1 prefix=$2
  shift 2
  for k in $ks; do
    rc=$(FERRY_MIGRATE_AT=0:0:launch=$k run "$prefix$k" "$@")
    toured "$prefix$k" "$rc"
    got=$(value "$prefix$k" checksum)
    [ "$got" = "$want" ] || fail "migrated at launch $k: checksum $got, want $want"
    [ "$(value "$prefix$k" launches)" = "$launches" ] || fail "migrated at launch $k: launch count differs"
    migrated "$prefix$k"
  done
}

# reference LABEL APP ARGS...: a run without migration; sets $want, $launches
reference() {
  label=$1
  shift
  rc=$(FERRY_CONTROL=off run "$label" "$@")
  toured "$label" "$rc"
  expect_not_in "$label.err" "local GPU"
  want=$(value "$label" checksum)
  launches=$(value "$label" launches)
  [ -n "$want" ] || fail "$label printed no checksum"
  [ "${launches:-0}" -gt 8 ] || fail "$label reports ${launches:-no} launches"
}

case $case_name in
tour)
  start_server
  rc=$(FERRY_STATS=1 run tour drv_tour $kernels $iters)
  toured tour "$rc"
  expect_in tour.out "^device: ferry CPU simulation"
  expect_in tour.out "^iterations: $iters$"
  # a name a module lacks is asked once, not at every question
  asked=$(value tour "absent names asked")
  trips=$(sed -n 's/.*round_trips:.* module_function=\([0-9]*\)\/.*/\1/p' "$work/tour.err" | head -n 1)
  [ -n "$trips" ] && [ "$trips" -lt "$asked" ] ||
    fail "tour: ${trips:-no} module_function round trips for $asked questions about an absent name"
  ;;
tour_static)
  # the same source built by nvcc with -cudart static: the same results
  start_server
  rc=$(run static drv_tour_static $kernels $iters)
  toured static "$rc"
  expect_in static.out "^device: ferry CPU simulation"
  rc=$(run c drv_tour $kernels $iters)
  toured c "$rc"
  [ "$(value static checksum)" = "$(value c checksum)" ] || fail "the two builds end differently"
  ;;
mixed)
  start_server
  rc=$(run mixed drv_mixed "$apps/drv_kernels.fatbin" $iters)
  toured mixed "$rc"
  expect_in mixed.out "^iterations: $iters$"
  ! grep -qi "not supported" "$work/mixed.err" || fail "a call of drv_mixed was refused"
  ;;
unsupported)
  start_server
  rc=$(run unsupported drv_unsupported)
  toured unsupported "$rc"
  expect_in unsupported.out "cuMemAllocManaged=CUDA_SUCCESS"
  expect_in unsupported.out "cuGraphAddMemAllocNode=CUDA_ERROR_NOT_SUPPORTED"
  expect_in unsupported.out "cuLinkCreate GLOBAL_SYMBOL_ADDRESSES=CUDA_ERROR_NOT_SUPPORTED"
  expect_in unsupported.err "ferry: cuLinkCreate with CU_JIT_GLOBAL_SYMBOL_ADDRESSES is not supported by ferry"
  expect_in unsupported.out "cuLinkComplete 300 long names=CUDA_ERROR_NOT_SUPPORTED"
  expect_in unsupported.err "ferry: cuLinkComplete of a link whose options and names come to 1[0-9]* bytes (more than the 1044480 of one message) is not supported by ferry"
  # one line per call, however often it is called (cuGraphAddMemAllocNode: twice)
  for call in cuGraphAddMemAllocNode; do
    n=$(grep -ci "$call.*not supported" "$work/unsupported.err")
    [ "$n" = 1 ] || fail "expected one line saying $call is not supported, got $n"
  done
  ;;
export_tables)
  # each entry ferry serves in the driver's private tables, and one line
  # for each thing refused: an unknown table, two undecoded entries
  start_server
  rc=$(run export drv_export "$apps/drv_kernels.fatbin")
  toured export "$rc"
  expect_in export.err "private table 01020304-0506-0708-090a-0b0c0d0e0f10 (cuGetExportTable, asked by drv_export) is not supported"
  expect_in export.err "entry 1 of the driver's private table CONTEXT_CHECKS is not supported"
  expect_in export.err "entry 38 of the driver's private table TOOLS_CONTEXT is not supported"
  expect_in export.err "entry 39 of the driver's private table TOOLS_CONTEXT with an object entry 51 did not hand out is not supported"
  expect_in export.err "entry 7 of the driver's private table TOOLS_MODULE on a module of [0-9]* functions is not supported"
  expect_in export.err "entry 4 of the driver's private table LT_1734dc26 is not supported"
  expect_not_in export.err "f8cff951"
  n=$(grep -c "not supported" "$work/export.err")
  [ "$n" = 6 ] || fail "expected 6 refusals, got $n"
  # the simulation answers entry 39 as driver 580 did under cuBLAS
  expect_in export.out "^TOOLS_CONTEXT\[39\] value: 7$"
  # the same, moved at its one launch: TOOLS_CONTEXT's objects are replayed
  rc=$(FERRY_MIGRATE_AT=0:0:launch=1 run export_migrated drv_export "$apps/drv_kernels.fatbin")
  toured export_migrated "$rc"
  migrated export_migrated
  expect_in export_migrated.out "^TOOLS_CONTEXT\[39\] value after the launch: 7 (before: 7)$"
  ;;
no_config)
  # no device configured: a clear line and CUDA_ERROR_NO_DEVICE, no hang
  unset FERRY_DEVICES RCUDA_DEVICE_COUNT
  LD_LIBRARY_PATH=$build/lib app timeout 30 "$apps/drv_tour" $kernels 1 \
    >"$work/tour.out" 2>"$work/tour.err"
  rc=$?
  [ "$rc" != 0 ] || fail "drv_tour succeeded without a device"
  [ "$rc" != 124 ] || fail "drv_tour hung"
  expect_in tour.out "cuInit(0) -> CUDA_ERROR_NO_DEVICE"
  expect_in tour.err "no remote GPU configured"
  ;;
migrate_tour | migrate_tour_static)
  app=drv_tour
  [ "$case_name" = migrate_tour ] || app=drv_tour_static
  start_server
  reference ref "$app" $kernels $iters
  tour=$(value ref "tour launches")
  [ "${tour:-0}" -gt 0 ] || fail "reference run reports ${tour:-no} tour launches"
  # the loop's launches are tour+1 .. launches-2 (two follow it); launch 1
  # moves it early in the tour, and everything after runs locally
  if [ -n "${FERRY_MIGRATE_KS:-}" ]; then ks=$FERRY_MIGRATE_KS; else
    ks="1 $((tour + 3)) $(((tour + launches) / 2)) $((launches - 3)) $(shuf -i 1-"$launches" -n 1)"
  fi
  echo "$case_name: $launches launches, $tour in the tour; migrating at launch $ks" \
    "(FERRY_MIGRATE_KS=\"$ks\" repeats this)"
  migrate_at "$ks" at "$app" $kernels $iters
  # one past the last launch: no migration, the same result
  k=$((launches + 1))
  rc=$(FERRY_MIGRATE_AT=0:0:launch=$k run "at$k" "$app" $kernels $iters)
  toured "at$k" "$rc"
  [ "$(value "at$k" checksum)" = "$want" ] || fail "launch $k: checksum differs"
  expect_not_in "at$k.err" "local GPU"
  ;;
migrate_mixed)
  start_server
  reference ref drv_mixed "$apps/drv_kernels.fatbin" $iters
  # launches 1-3 come before the loop
  if [ -n "${FERRY_MIGRATE_KS:-}" ]; then ks=$FERRY_MIGRATE_KS; else
    ks="2 $((launches / 2)) $((launches - 1)) $(shuf -i 1-"$launches" -n 1)"
  fi
  echo "$case_name: $launches launches; migrating at launch $ks (FERRY_MIGRATE_KS=\"$ks\" repeats this)"
  migrate_at "$ks" at drv_mixed "$apps/drv_kernels.fatbin" $iters
  ;;
vmm)
  # program VMM: an expandable segment grown, shrunk and checked; each
  # refusal prints its one line (once, however often) and returns an error
  start_server
  rc=$(run vmm drv_vmm "$apps/drv_kernels.fatbin")
  toured vmm "$rc"
  expect_in vmm.out "^granularity: 2097152$"
  for what in "cuMemMap partial" "cuMemMap offset" "cuMemMap alias" "cuMemSetAccess read-only" \
    "cuMemCreate fabric" "cuMemCreate host" cuMulticastCreate; do
    expect_in vmm.out "^refused: $what=CUDA_ERROR_NOT_SUPPORTED$"
  done
  for line in "cuMemMap of part of a handle" "cuMemMap of a handle that is already mapped" \
    "cuMemSetAccess with access other than read/write" "cuMemCreate with a fabric or Win32 handle type" \
    "cuMemCreate of host memory" "cuMulticastCreate is"; do
    n=$(grep -c "ferry: $line.*not supported by ferry" "$work/vmm.err")
    [ "$n" = 1 ] || fail "expected one line '$line ... not supported by ferry', got $n"
  done
  n=$(grep -c "not supported" "$work/vmm.err")
  [ "$n" = 6 ] || fail "expected 6 refusals, got $n"
  expect_in vmm.err "cuMemAddressFree of a reservation whose memory is still mapped"
  # two vGPUs: each maps its own memory; between them, refused
  rc=$(FERRY_DEVICES="$FERRY_DEVICES,$FERRY_DEVICES" run vmm2 drv_vmm "$apps/drv_kernels.fatbin")
  toured vmm2 "$rc"
  expect_in vmm2.out "^refused: cuMemMap across devices=CUDA_ERROR_NOT_SUPPORTED$"
  expect_in vmm2.out "^refused: cuMemSetAccess peer=CUDA_ERROR_NOT_SUPPORTED$"
  expect_in vmm2.err "ferry: cuMemMap of device 1's memory into a reservation of device 0 is not supported by ferry"
  expect_in vmm2.err "ferry: cuMemSetAccess for a device other than the memory's own (peer access to program VMM memory) is not supported by ferry"
  [ "$(value vmm2 checksum)" = "$(value vmm checksum)" ] || fail "two devices: another checksum"
  ;;
migrate_vmm)
  # moved at launches through the rounds (while a handle the program keeps
  # is unmapped, too): the same results as a run that stayed
  start_server
  reference ref drv_vmm "$apps/drv_kernels.fatbin"
  if [ -n "${FERRY_MIGRATE_KS:-}" ]; then ks=$FERRY_MIGRATE_KS; else
    # each round launches four kernels, its fourth while the spare handle is
    # unmapped (in round 1 also moved out of a new mapping's way: launch 8)
    ks="1 4 8 $((launches / 2)) $((launches - 1)) $(shuf -i 1-"$launches" -n 1)"
  fi
  echo "$case_name: $launches launches; migrating at launch $ks (FERRY_MIGRATE_KS=\"$ks\" repeats this)"
  migrate_at "$ks" at drv_vmm "$apps/drv_kernels.fatbin"
  ;;
jitlink)
  # cuLink* linked on the server: two PTX pieces, from data and from a
  # file, loaded and run; broken links fail with an error log
  start_server
  rc=$(FERRY_STATS=1 run jitlink drv_jitlink $jitptx $iters)
  toured jitlink "$rc"
  expect_in jitlink.out "^iterations: $iters$"
  expect_in jitlink.out "^info log: ptxas info    : Compiling entry function 'jit_step'"
  expect_in jitlink.out "^broken PTX: CUDA_ERROR_INVALID_PTX$"
  expect_in jitlink.out "^error log: ptxas application ptx input, line [0-9]*; fatal   : Parsing error"
  expect_in jitlink.out "^missing function: CUDA_ERROR_INVALID_IMAGE$"
  expect_in jitlink.out "^error log: error   : Undefined reference to 'jit_mix'"
  [ "$(calls jitlink link_complete)" = 4 ] || fail "expected 4 link_complete calls, got $(calls jitlink link_complete)"
  ! grep -qi "not supported" "$work/jitlink.err" || fail "a call of drv_jitlink was refused"
  ;;
migrate_jitlink)
  # moved at launches through the loop: the linked modules are loaded
  # again on the target from their images, and the results are the same
  start_server
  reference ref drv_jitlink $jitptx $iters
  if [ -n "${FERRY_MIGRATE_KS:-}" ]; then ks=$FERRY_MIGRATE_KS; else
    ks="1 2 $((launches / 2)) $((launches - 1)) $(shuf -i 1-"$launches" -n 1)"
  fi
  echo "$case_name: $launches launches; migrating at launch $ks (FERRY_MIGRATE_KS=\"$ks\" repeats this)"
  migrate_at "$ks" at drv_jitlink $jitptx $iters
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "e2e driver $case_name${helper_policy:+_helper}: ok"
