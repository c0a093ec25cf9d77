#!/bin/sh
# Stream-ordered memory end to end (cudaMallocAsync, cudaFreeAsync and
# memory pools, kept by the client): tests/apps/mempool (runtime API) and
# drv_mempool (driver API) through ferry over TCP to a ferry-server on the
# CPU simulation, migrated at random launches into the process and onto a
# ferry-mhelper, with the checksum of a run that did not move; and
# FERRY_STATS shows that cudaFreeAsync adds no synchronization and that a
# warm pool maps nothing new, however long the loop runs.
# usage: mempool.sh BUILD_DIR CASE
#   FERRY_MIGRATE_KS="k1 k2 ..." replaces the random launch counts of the
#   migrate cases (each run prints the ones it used).
set -u
build=$(cd "$1" && pwd)
case_name=$2
helper_policy=
case $case_name in
*_helper) case_name=${case_name%_helper} helper_policy=always ;;
esac
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-pool.XXXXXX")
e2e_name="e2e mempool"
. "$(dirname "$0")/lib.sh"
local_sim
fatbin=$apps/drv_kernels.fatbin

start_server() {
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
}

# no_added_syncs LABEL: FERRY_STATS counted the stream and device
# synchronizes the program made (its cudaFrees wait for the device, as
# CUDA's do), and not one more
no_added_syncs() {
  got=$(calls "$1" stream_synchronize) want=$(value "$1" "stream synchronizes")
  [ "$got" = "$want" ] || fail "$1: ferry made $got stream synchronizes, the program $want"
  got=$(calls "$1" device_synchronize)
  want=$(($(value "$1" "device synchronizes") + $(value "$1" frees)))
  [ "$got" = "$want" ] || fail "$1: ferry made $got device synchronizes, the program $want"
}

# random launch counts within L (both ends and three random ones)
launch_counts() {
  if [ -n "${FERRY_MIGRATE_KS:-}" ]; then
    echo "$FERRY_MIGRATE_KS"
    return
  fi
  r=$(shuf -i 2-"$1" -n 3 | tr '\n' ' ')
  echo "1 $(($1 / 2)) $1 ${r% }"
}

# migrate_at LABEL APP ARGS...: the reference run, then runs migrated at
# launch counts in it: each passes with the reference's checksum
migrate_at() {
  label=$1
  shift
  rc=$(FERRY_CONTROL=off run "${label}_ref" "$@")
  passed "${label}_ref" "$rc"
  want=$(value "${label}_ref" checksum)
  launches=$(value "${label}_ref" launches)
  [ -n "$want" ] && [ "${launches:-0}" -gt 20 ] || fail "${label}_ref: no checksum or too few launches"
  ks=$(launch_counts "$launches")
  echo "$label: $launches launches; migrating at launch $ks (FERRY_MIGRATE_KS=\"$ks\" repeats this)"
  for k in $ks; do
    rc=$(FERRY_MIGRATE_AT=0:0:launch=$k run "$label$k" "$@")
    passed "$label$k" "$rc"
    same_checksum "$label$k"
    [ "$(value "$label$k" launches)" = "$launches" ] || fail "$label$k: launch count differs"
    migrated "$label$k"
  done
}

case $case_name in
remote)
  start_server
  rc=$(FERRY_STATS=1 run pool mempool 40)
  passed pool "$rc"
  expect_not_in pool.out "^FAIL"
  no_added_syncs pool
  # TrimTo(0) after a device sync gives everything back; a pool at CUDA's
  # default threshold (0) keeps nothing past a synchronization
  expect_in pool.out "^pool reserved after trim: 0$"
  expect_in pool.out "^own pool reserved after sync: 0$"
  rc=$(run drv drv_mempool "$fatbin" 30)
  passed drv "$rc"
  expect_not_in drv.out "^FAIL"
  expect_in drv.out "^pool reserved after trim: 0$"
  ;;
refusals)
  start_server
  rc=$(run ref mempool refusals)
  passed ref "$rc"
  for line in win32_pool=cudaErrorNotSupported host_pool=cudaErrorNotSupported \
    export_pointer=cudaErrorInvalidValue export_pool=cudaErrorInvalidValue \
    access_other_device=cudaErrorInvalidDevice free_async_twice=cudaErrorInvalidValue \
    free_pooled=cudaErrorInvalidValue free_async_host=cudaErrorInvalidValue \
    destroy_default=cudaErrorInvalidValue destroyed_pool=cudaErrorInvalidValue \
    bad_attribute=cudaErrorInvalidValue pool_after_reset=cudaErrorInvalidValue threshold_after_reset=0; do
    expect_in ref.out "^$line$"
  done
  expect_in ref.err "cudaMemPoolCreate with handle types 0x2: ferry shares pools as POSIX file descriptors only"
  expect_in ref.err "cudaMemPoolCreate of a host or NUMA location is not supported by ferry"
  expect_in ref.err "cudaMemPoolExportPointer: 0x[0-9a-f]* is not a block of a pool made with POSIX file descriptor handles"
  expect_in ref.err "cudaMemPoolExportToShareableHandle: ferry exports pools made with POSIX file descriptor handles"
  # two vGPUs on one GPU: another device's access is refused as peer access is
  one=$FERRY_DEVICES
  export FERRY_DEVICES="$one,$one"
  rc=$(run two mempool refusals)
  export FERRY_DEVICES="$one"
  passed two "$rc"
  for line in access_other_device=cudaErrorPeerAccessUnsupported \
    pool_of_other_device=cudaErrorNotSupported free_in_other_device_order=cudaSuccess; do
    expect_in two.out "^$line$"
  done
  expect_in two.err "cudaMemPoolSetAccess for device 1 on a pool of device 0: ferry gives device 1 access to device 0.s memory only where both are GPUs of one ferry-server"
  expect_in two.err "cudaMallocFromPoolAsync with a stream of another device is not supported by ferry"
  rc=$(run drv drv_mempool "$fatbin" refusals)
  passed drv "$rc"
  expect_in drv.err "cudaMemPoolExportPointer: 0x[0-9a-f]* is not a block of a pool made with POSIX file descriptor handles"
  ;;
warm)
  # a longer loop maps and unmaps nothing more once the pool is warm (each
  # block is larger than a mapping granule, so each new block would map)
  start_server
  for iters in 80 160; do
    rc=$(FERRY_STATS=1 run "warm$iters" mempool "$iters" 600000)
    passed "warm$iters" "$rc"
    no_added_syncs "warm$iters"
  done
  for call in mem_map mem_unmap; do
    a=$(calls warm80 $call) b=$(calls warm160 $call)
    [ "$a" -gt 0 ] || fail "warm80 made no $call call"
    [ "$a" = "$b" ] || fail "$call: $a calls in 80 iterations, $b in 160: the pool did not keep its blocks"
  done
  ;;
migrate)
  start_server
  migrate_at pool mempool 24
  migrate_at drv drv_mempool "$fatbin" 24
  ;;
*)
  echo "unknown case $case_name"
  exit 2
  ;;
esac
echo "$e2e_name $case_name${helper_policy:+_helper}: PASS"
