#!/bin/sh
# A call's liveness end to end (FERRY_CALL_TIMEOUT): a call that runs long
# keeps its connection alive through the server's keepalives and succeeds;
# a server that stops answering (SIGSTOP: its sockets stay open, nothing
# comes) fails the program's calls after the timeout with one clear line,
# instead of hanging it for ever; the same through a ferry-mhelper.
# usage: timeout.sh BUILD_DIR CASE
set -u
build=$(cd "$1" && pwd)
case_name=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-timeout.XXXXXX")
e2e_name="e2e timeout"
. "$(dirname "$0")/lib.sh"
export FERRY_CONTROL=off
unset FERRY_MIGRATE_AT FERRY_MHELPER
stopped=
resume() { [ -n "$stopped" ] && kill -CONT $stopped 2>/dev/null; stopped=; }
trap 'resume; cleanup' EXIT INT TERM

case $case_name in
long_call)
  # three kernels of 2.5 s each, a 1 s timeout: alive all along
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(FERRY_CALL_TIMEOUT=1 run slow long_run 3 0 2500)
  [ "$rc" = 0 ] || fail "a 2.5 s kernel with FERRY_CALL_TIMEOUT=1 exited $rc"
  expect_in slow.out "3 iterations PASSED"
  expect_not_in slow.err "lost connection"
  # the same on a ferry-mhelper: its session keeps the channel alive too
  rc=$(FERRY_CALL_TIMEOUT=1 FERRY_MHELPER=always FERRY_LOCAL_BACKEND=sim \
    FERRY_SIM_KERNELS="$apps/app_twins.so" FERRY_MIGRATE_AT=0:0:launch=1 run slowh long_run 3 0 2500)
  [ "$rc" = 0 ] || fail "a 2.5 s kernel on a helper with FERRY_CALL_TIMEOUT=1 exited $rc"
  expect_in slowh.out "3 iterations PASSED"
  expect_in slowh.err "in ferry-mhelper pid"
  expect_not_in slowh.err "lost connection"
  ;;
silent_server)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  FERRY_CALL_TIMEOUT=2 app timeout 60 "$bin/ferry" run -- "$apps/long_run" 100000 20 \
    >"$work/run.out" 2>"$work/run.err" &
  bg_pid=$!
  i=0
  until grep -q "long_run: running" "$work/run.out" 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 300 ] || fail "long_run did not start"
    sleep 0.1
  done
  # the server and its session stop; their sockets stay open
  stopped="$server_pid $(pgrep -P "$server_pid" | tr '\n' ' ')"
  kill -STOP $stopped
  t0=$(date +%s)
  wait "$bg_pid"
  rc=$?
  bg_pid=
  dt=$(($(date +%s) - t0))
  resume
  [ "$rc" = 3 ] || fail "the program exited $rc, expected 3 (a CUDA error)"
  [ "$dt" -le 10 ] || fail "the program took $dt s to give up (FERRY_CALL_TIMEOUT=2)"
  n=$(grep -c "nothing came from it for 2 s" "$work/run.err")
  [ "$n" = 1 ] || fail "$n lines about the silent server, expected 1"
  expect_in run.out "CUDA error cudaErrorDevicesUnavailable"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "e2e timeout $case_name: ok"
