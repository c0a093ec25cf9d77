#!/bin/sh
# CUDA IPC end to end (tests/apps/ipc_pair): two programs whose vGPUs are
# sessions of one ferry-server on the CPU simulation share memory and an
# event through the server's broker; and what is refused: a handle whose
# exporter was killed, a handle taken to a second server, a vGPU on a
# local GPU (a ferry-mhelper), a migration while a handle is open; and
# the same for VMM shareable handles (tests/apps/drv_vmm_ipc, cases vmm*).
# usage: ipc.sh BUILD_DIR CASE
set -u
build=$(cd "$1" && pwd)
case_name=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-ipc.XXXXXX")
e2e_name="e2e ipc"
. "$(dirname "$0")/lib.sh"
local_sim
export FERRY_CONTROL_DIR="$work"
mkdir "$work/h"

start_server() {
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
}

# exported: the exporter in the background wrote its handles
exported() { test -s "$work/h/mem" && test -s "$work/h/event"; }

# sessions_finished: how many sessions the server's log says have ended;
# reaped: more than $ended of them
sessions_finished() { grep -c "session from .* finished" "$work/server.log"; }
reaped() { [ "$(sessions_finished)" -gt "$ended" ]; }

case $case_name in
pair)
  start_server
  app timeout 120 "$bin/ferry" run -- "$apps/ipc_pair" export "$work/h" >"$work/exp.out" 2>"$work/exp.err" &
  bg_pid=$!
  wait_for "the exporter's handles" exported
  rc=$(run imp ipc_pair import "$work/h")
  passed imp "$rc"
  wait "$bg_pid"
  rc=$?
  bg_pid=
  passed exp "$rc"
  expect_not_in exp.err "ferry:"
  expect_not_in imp.err "ferry:"
  ;;
pool)
  # a memory pool and its pointers shared (streamOrderedAllocationIPC's way)
  start_server
  app timeout 120 "$bin/ferry" run -- "$apps/pool_ipc" export "$work/h" >"$work/pexp.out" 2>"$work/pexp.err" &
  bg_pid=$!
  pool_exported() { test -s "$work/h/pool"; }
  wait_for "the pool exporter's handles" pool_exported
  rc=$(run pimp pool_ipc import "$work/h")
  passed pimp "$rc"
  wait "$bg_pid"
  rc=$?
  bg_pid=
  passed pexp "$rc"
  expect_not_in pexp.err "ferry:"
  expect_not_in pimp.err "ferry:"
  ;;
exporter_killed)
  start_server
  app timeout 120 "$bin/ferry" run -- "$apps/ipc_pair" export "$work/h" hold >"$work/exp.out" 2>"$work/exp.err" &
  bg_pid=$!
  wait_for "the exporter's handles" exported
  ended=$(sessions_finished)
  # the program itself, not `ferry run`: its connection drops, its session ends
  pid=$(sed -n 's/.* running pid \([0-9]*\).*/\1/p' "$work/exp.out")
  [ -n "$pid" ] || fail "the exporter did not say its pid"
  kill -KILL "$pid"
  wait "$bg_pid"
  bg_pid=
  wait_for "the server to reap the exporter's session" reaped
  rc=$(run open ipc_pair open "$work/h")
  [ "$rc" = 0 ] || fail "open exited $rc"
  expect_in open.out "^open: cudaErrorMapBufferObjectFailed"
  expect_in open.err "the program that exported it ended"
  [ "$(grep -c '^ferry:' "$work/open.err")" = 1 ] || fail "not exactly one line from ferry"
  ;;
other_server)
  start_server
  first=$port
  app timeout 120 "$bin/ferry" run -- "$apps/ipc_pair" export "$work/h" hold >"$work/exp.out" 2>"$work/exp.err" &
  bg_pid=$!
  wait_for "the exporter's handles" exported
  start_sim_server
  rc=$(FERRY_DEVICES="tcp://127.0.0.1:$port/0" run open ipc_pair open "$work/h")
  [ "$rc" = 0 ] || fail "open exited $rc"
  expect_in open.out "^open: cudaErrorInvalidValue"
  expect_in open.err "made on another ferry-server"
  [ "$(grep -c '^ferry:' "$work/open.err")" = 1 ] || fail "not exactly one line from ferry"
  # on the exporter's own server the same handle opens (the refusal was the server's)
  rc=$(FERRY_DEVICES="tcp://127.0.0.1:$first/0" run open2 ipc_pair open "$work/h")
  expect_in open2.out "^open: cudaSuccess"
  touch "$work/h/stop" "$work/h/after"
  wait "$bg_pid"
  rc=$?
  bg_pid=
  passed exp "$rc"
  ;;
migrate_waits)
  # a move asked while the export is open waits ("waiting" in status, one
  # line), and runs at the first launch after the program frees what it
  # shares
  start_server
  start exp ipc_pair export "$work/h" hold
  wait_for "the exporter's handles" exported
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/mig.log" 2>&1 || fail "a waiting migration was refused"
  expect_in mig.log "waiting to move to local GPU 0: device 0 shares memory or events with another program through CUDA IPC"
  [ "$(wc -l <"$work/mig.log")" = 1 ] || fail "the answer is not one line"
  status_json
  json_has state '"waiting"'
  json_has backend '"remote"'
  expect_in exp.err "waiting to move to local GPU 0"
  # freed: the move runs at the program's next launch, which then runs on
  # the local GPU and checks its result
  touch "$work/h/stop" "$work/h/after"
  wait "$bg_pid"
  rc=$?
  bg_pid=
  passed exp "$rc"
  expect_in exp.err "device 0 now runs on local GPU 0"
  ;;
vmm)
  # VMM shareable handles (drv_vmm_ipc): descriptors passed with SCM_RIGHTS
  # to two programs on the same server, the bytes checked both ways; each
  # refusal returns its error with one line
  start_server
  rc=$(run vmm drv_vmm_ipc)
  passed vmm "$rc"
  expect_in vmm.out "^exported$"
  for what in "import pipe=CUDA_ERROR_INVALID_VALUE" "import /dev/null=CUDA_ERROR_INVALID_VALUE" \
    "export untyped=CUDA_ERROR_INVALID_VALUE" "map exported=CUDA_ERROR_NOT_SUPPORTED"; do
    expect_in vmm.out "^refused: $what$"
  done
  for line in "descriptor [0-9]* is a descriptor that cannot be read as a file" \
    "descriptor [0-9]* is a file that is not a handle ferry exported" \
    "cuMemExportToShareableHandle: the handle was not created with this handle type" \
    "cuMemMap of an exported handle away from its memory"; do
    n=$(grep -c "^ferry: .*$line" "$work/vmm.err")
    [ "$n" = 1 ] || fail "expected one line '$line', got $n"
  done
  [ "$(grep -c '^ferry:' "$work/vmm.err")" = 4 ] || fail "lines from ferry other than the refusals"
  ;;
vmm_two_gpus)
  # the shape of NCCL's P2P transport: each program on its own GPU of one
  # server, the children mapping memory of the parent's GPU
  FERRY_SIM_GPUS=2 start_server
  rc=$(DRV_VMM_IPC_CHILD_DEVICES="tcp://127.0.0.1:$port/1" run vmm2 drv_vmm_ipc)
  passed vmm2 "$rc"
  expect_in vmm2.out "^exported$"
  # the simulation's GPU 1 is at bus 0x3b
  expect_in vmm2.out "^writer on 00000000:3b:00.0$"
  expect_in vmm2.out "^reader on 00000000:3b:00.0$"
  ;;
vmm_migrate_cancel)
  # exported VMM handles hold the vGPU on its server: a move waits, and
  # cancel drops it
  start_server
  mkfifo "$work/go"
  start vmm drv_vmm_ipc hold "$work/go"
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/mig.log" 2>&1 || fail "a waiting migration was refused"
  expect_in mig.log "waiting to move to local GPU 0"
  status_json
  json_has state '"waiting"'
  "$bin/ferry" migrate --cancel --pid "$pid" 0 >"$work/cancel.log" 2>&1 || fail "cancel failed"
  expect_in cancel.log "waiting migration is dropped"
  status_json
  json_has state '"none"'
  echo go >"$work/go"
  wait "$bg_pid"
  rc=$?
  bg_pid=
  passed vmm "$rc"
  expect_not_in vmm.err "now runs on local GPU"
  ;;
vmm_helper_refused)
  # a vGPU in a ferry-mhelper: no broker there, one line
  rc=$(FERRY_DEVICES=local:0 run local drv_vmm_ipc local)
  [ "$rc" = 0 ] || fail "local exited $rc"
  expect_in local.out "^local: CUDA_ERROR_NOT_SUPPORTED"
  expect_in local.err "cuMemExportToShareableHandle: device 0 runs on a local GPU in a ferry-mhelper"
  [ "$(grep -c '^ferry:' "$work/local.err")" = 1 ] || fail "not exactly one line from ferry"
  ;;
helper_refused)
  # a vGPU in a ferry-mhelper: no broker there, one line
  rc=$(FERRY_DEVICES=local:0 run get ipc_pair get)
  [ "$rc" = 0 ] || fail "get exited $rc"
  expect_in get.out "^get: cudaErrorNotSupported"
  expect_in get.err "runs on a local GPU in a ferry-mhelper"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "$e2e_name $case_name: PASSED"
