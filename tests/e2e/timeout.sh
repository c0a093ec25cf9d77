#!/bin/sh
# A call's liveness end to end (FERRY_CALL_TIMEOUT): a call that runs long
# keeps its connection alive through the server's keepalives and succeeds;
# a server that stops answering (SIGSTOP: its sockets stay open, nothing
# comes) fails the program's calls after the timeout with one clear line,
# instead of hanging it for ever; the same through a ferry-mhelper. Bad
# FERRY_CALL_TIMEOUT and FERRY_CONNECT_TIMEOUT values are refused in one
# line, and a sub-millisecond timeout is 1 ms, not "wait for ever". And the
# handshake's own deadline (FERRY_CONNECT_TIMEOUT): a port that accepts and
# never answers costs a program's start, a prepare or a migration that
# deadline, not the call timeout, and `cancel` stops a prepare waiting there.
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

# start_silent: a listener that accepts and never answers; sets $sport
start_silent() {
  "$build/tests/e2e/silent_listener" "$work/silent.port" >"$work/silent.log" 2>&1 &
  server_pids="$server_pids $!"
  wait_for "the silent listener" test -s "$work/silent.port"
  sport=$(cat "$work/silent.port")
}
accepted() { grep -c '^accepted' "$work/silent.log"; }
more_accepted() { [ "$(accepted)" -gt "$1" ]; }
gone() { ! running "$1"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# ask_timed LINE: ask, and $ms is how long the reply took
ask_timed() {
  t0=$(now_ms)
  printf '%s\n' "$1" | "$ctl_client" "$sock" --wait 150 >"$work/reply.log" 2>&1 || fail "no reply to '$1'"
  ms=$(($(now_ms) - t0))
  [ "$(wc -l <"$work/reply.log")" = 1 ] || fail "'$1' got not exactly one reply line: $(cat "$work/reply.log")"
  reply=$(cat "$work/reply.log")
}

case $case_name in
long_call)
  # two kernels of 4 s each, a 2 s timeout: alive all along (the server's
  # keepalives every 0.5 s leave a loaded machine 2 s to send one)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(FERRY_CALL_TIMEOUT=2 run slow long_run 2 0 4000)
  [ "$rc" = 0 ] || fail "a 4 s kernel with FERRY_CALL_TIMEOUT=2 exited $rc"
  expect_in slow.out "2 iterations PASSED"
  expect_not_in slow.err "lost connection"
  # the same on a ferry-mhelper: its session keeps the channel alive too
  rc=$(FERRY_CALL_TIMEOUT=2 FERRY_MHELPER=always FERRY_LOCAL_BACKEND=sim \
    FERRY_SIM_KERNELS="$apps/app_twins.so" FERRY_MIGRATE_AT=0:0:launch=1 run slowh long_run 2 0 4000)
  [ "$rc" = 0 ] || fail "a 4 s kernel on a helper with FERRY_CALL_TIMEOUT=2 exited $rc"
  expect_in slowh.out "2 iterations PASSED"
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
    [ $i -lt 600 ] || fail "long_run did not start"
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
  # 2 s, and room for a loaded machine; without the timeout it would hang
  # until `timeout 60` kills it
  [ "$dt" -le 30 ] || fail "the program took $dt s to give up (FERRY_CALL_TIMEOUT=2)"
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
  # nothing once the session is open (the hello has its own deadline,
  # FERRY_CONNECT_TIMEOUT) is given up on. A 1 ms timeout may also end the
  # program before the server stops, with the same line: either shows it
  FERRY_CALL_TIMEOUT=0.0001 app timeout 30 "$bin/ferry" run -- "$apps/long_run" 100000 20 \
    >"$work/tiny.out" 2>"$work/tiny.err" &
  tiny=$!
  started_or_ended() { grep -q 'long_run: running' "$work/tiny.out" 2>/dev/null || ! running "$tiny"; }
  wait_for "long_run to start or end" started_or_ended
  bg_pid=$tiny
  stopped="$server_pid $(pgrep -P "$server_pid" | tr '\n' ' ')"
  kill -STOP $stopped
  wait "$bg_pid"
  rc=$?
  bg_pid=
  resume
  [ "$rc" != 124 ] || fail "FERRY_CALL_TIMEOUT=0.0001 waited for ever"
  [ "$rc" != 0 ] || fail "vecadd ran on a stopped server"
  expect_in tiny.err "nothing came from it for 0.001 s"
  expect_not_in tiny.err "FERRY_CALL_TIMEOUT=0.0001 ignored"
  ;;
silent_hello)
  # the program's server accepts and never answers its hello: the start
  # fails at the connect deadline (2 s), not the call timeout (60 s), in one
  # line, and the program gets cudaErrorNoDevice
  start_silent
  export FERRY_DEVICES=tcp://127.0.0.1:$sport/0
  t0=$(now_ms)
  rc=$(FERRY_CONNECT_TIMEOUT=2 FERRY_CALL_TIMEOUT=60 run hello vecadd 1000 1)
  ms=$(($(now_ms) - t0))
  [ "$rc" != 0 ] || fail "vecadd passed without a server"
  # 2 s, and room for a loaded machine; far below the 60 s of a call
  [ "$ms" -lt 30000 ] || fail "the program took $ms ms to give up (FERRY_CONNECT_TIMEOUT=2, FERRY_CALL_TIMEOUT=60)"
  [ "$(grep -c '^ferry: ' "$work/hello.err")" = 1 ] || fail "not one line from ferry"
  expect_in hello.err "^ferry: device 0 (tcp://127.0.0.1:$sport/0): no answer to the hello within 2 s (FERRY_CONNECT_TIMEOUT)"
  expect_in hello.err "no CUDA-capable device"
  ;;
silent_target)
  # a prepare or a migration to a port that accepts and never answers fails
  # at the connect deadline with one line that names the target; `cancel`
  # stops a prepare that waits there, at once; the program goes on
  unset FERRY_CONTROL
  export FERRY_CONTROL_DIR=$work FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so"
  start_silent
  s=tcp://127.0.0.1:$sport/0
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  FERRY_CONNECT_TIMEOUT=2 FERRY_CALL_TIMEOUT=60 start fast migrate_iter 1000000 2000 "$work/stop"
  for verb in prepare migrate; do
    ask_timed "$verb 0 $s"
    echo "$reply" | grep -q "^error $s: no answer to the hello within 2 s (FERRY_CONNECT_TIMEOUT)" ||
      fail "'$verb 0 $s' got '$reply'"
    [ "$ms" -lt 30000 ] || fail "'$verb 0 $s' took $ms ms (FERRY_CONNECT_TIMEOUT=2, FERRY_CALL_TIMEOUT=60)"
  done
  ask_timed status
  echo "$reply" | grep -q '"backend": *"remote"' || fail "the program left its server: $reply"
  finish
  passed fast "$rc"
  # the failed migration is one line that blames the target, not device 0
  [ "$(grep -c '^ferry: ' "$work/fast.err")" = 1 ] || fail "not one line from ferry about the target"
  expect_in fast.err "^ferry: migration of device 0 to $s failed: $s: no answer to the hello"
  expect_not_in fast.err "lost connection"
  # a long deadline, and cancel: the prepare stops at once
  FERRY_CONNECT_TIMEOUT=120 start slow migrate_iter 1000000 2000 "$work/stop"
  before=$(accepted)
  printf 'prepare 0 %s\n' "$s" | "$ctl_client" "$sock" --wait 150 >"$work/prep.log" 2>&1 &
  prep=$!
  wait_for "the prepare to connect" more_accepted "$before"
  ask_timed "cancel 0"
  [ "$reply" = "ok vgpu 0: its prepare is stopped" ] || fail "cancel during the prepare got '$reply'"
  [ "$ms" -lt 15000 ] || fail "cancel took $ms ms"
  # cancel answers once the prepare has ended: its reply is there or coming
  wait_for "the prepare's reply" gone "$prep"
  wait "$prep" || fail "no reply to the prepare"
  grep -qx "error the prepare of device 0 on $s was cancelled" "$work/prep.log" ||
    fail "the cancelled prepare got '$(cat "$work/prep.log")'"
  ask_timed status
  echo "$reply" | grep -q '"prepared": *""' || fail "status after cancel: $reply"
  ask_timed "cancel 0"
  [ "$reply" = "error device 0 has no prepared target" ] || fail "a second cancel got '$reply'"
  # the vGPU is free for the next prepare and migration
  ask_timed "prepare 0 0"
  echo "$reply" | grep -q '^ok vgpu 0 prepared on 0' || fail "prepare after cancel got '$reply'"
  ask_timed "migrate 0 0"
  echo "$reply" | grep -q '^ok vgpu 0 now on local GPU 0' || fail "migrate after cancel got '$reply'"
  finish
  passed slow "$rc"
  expect_not_in slow.err "lost connection"
  expect_not_in slow.err "failed"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "e2e timeout $case_name: ok"
