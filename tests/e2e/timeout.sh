#!/bin/sh
# A call's liveness end to end (FERRY_CALL_TIMEOUT): a call that runs long
# keeps its connection alive through the server's keepalives and succeeds;
# a server that stops answering (SIGSTOP: its sockets stay open, nothing
# comes) fails the program's calls after the timeout with one clear line,
# instead of hanging it for ever; the same through a ferry-mhelper. Bad
# FERRY_CALL_TIMEOUT and FERRY_CONNECT_TIMEOUT values are refused in one
# line, and a sub-millisecond timeout is 1 ms, not "wait for ever".
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
bad_values)
  # FERRY_CALL_TIMEOUT and FERRY_CONNECT_TIMEOUT: a value that is not all
  # a finite number in range is refused in one line naming the variable,
  # the value and the range, and the default is used (nan passed the range
  # check and waited for ever; garbage was read as 0)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  for v in nan inf 1e999 -1 86401 5s 0x10 ' 5' ''; do
    rc=$(FERRY_CALL_TIMEOUT=$v run bad vecadd 1000 1)
    [ "$rc" = 0 ] || fail "vecadd with FERRY_CALL_TIMEOUT='$v' exited $rc"
    n=$(grep -c "FERRY_CALL_TIMEOUT" "$work/bad.err")
    if [ -z "$v" ]; then [ "$n" = 0 ] || fail "an empty FERRY_CALL_TIMEOUT is not unset"; continue; fi
    [ "$n" = 1 ] || fail "$n lines about FERRY_CALL_TIMEOUT='$v', expected 1"
    grep -qxF "ferry: FERRY_CALL_TIMEOUT=$v ignored: expected seconds from 0 (wait for ever) to 86400; using 60" \
      "$work/bad.err" || fail "FERRY_CALL_TIMEOUT='$v': $(cat "$work/bad.err")"
  done
  for v in garbage nan 0 -2 1e6 10x; do
    rc=$(FERRY_CONNECT_TIMEOUT=$v run bad vecadd 1000 1)
    [ "$rc" = 0 ] || fail "vecadd with FERRY_CONNECT_TIMEOUT='$v' exited $rc"
    n=$(grep -c "FERRY_CONNECT_TIMEOUT" "$work/bad.err")
    [ "$n" = 1 ] || fail "$n lines about FERRY_CONNECT_TIMEOUT='$v', expected 1"
    grep -qxF "ferry: FERRY_CONNECT_TIMEOUT=$v ignored: expected seconds above 0, at most 86400; using 10" \
      "$work/bad.err" || fail "FERRY_CONNECT_TIMEOUT='$v': $(cat "$work/bad.err")"
  done
  # 0.0001 s is not 0 ms (wait for ever) but 1 ms: a server that says
  # nothing is given up on
  stopped=$server_pid
  kill -STOP $stopped
  FERRY_CALL_TIMEOUT=0.0001 app timeout 30 "$bin/ferry" run -- "$apps/vecadd" 1000 1 \
    >"$work/tiny.out" 2>"$work/tiny.err"
  rc=$?
  resume
  [ "$rc" != 124 ] || fail "FERRY_CALL_TIMEOUT=0.0001 waited for ever"
  [ "$rc" != 0 ] || fail "vecadd ran on a stopped server"
  expect_in tiny.err "nothing came from it for 0.001 s"
  expect_not_in tiny.err "FERRY_CALL_TIMEOUT=0.0001 ignored"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "e2e timeout $case_name: ok"
