#!/bin/sh
# Migration end to end: nvcc-built programs start on a ferry-server (CPU
# simulation) and move, while they run, onto a "local GPU" that is the
# simulation inside their own process. Results are checked against runs
# without migration; failures must roll back with nothing lost.
# usage: migrate.sh BUILD_DIR CASE
#   FERRY_MIGRATE_KS="k1 k2 ..." replaces the random launch counts of
#   at_random and threads (each run prints the ones it used).
set -u
build=$(cd "$1" && pwd)
case_name=$2
# CASE_helper: the same case, every migration onto a ferry-mhelper
helper_policy=
case $case_name in
*_helper) case_name=${case_name%_helper} helper_policy=always ;;
esac
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-mig.XXXXXX")
e2e_name="e2e migrate"
. "$(dirname "$0")/lib.sh"
# the "local GPU" is the CPU simulation in the app's process; sockets of
# these programs go to $work, where `ferry ls` looks too
local_sim
# (pageable copies through shared memory split across threads, as on a big node)
[ -z "$helper_policy" ] || export FERRY_COPY_THREADS=3
moved_backend=${helper_policy:+helper}
moved_backend=${moved_backend:-local}

# start_server: lib.sh's, with FERRY_DEVICES pointing at it
start_server() {
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
}

# reference N: migrate_iter N without migration; $want is its checksum
# (made once per N: background runs mostly end at $LIVE's count)
reference() {
  if ! grep -q "^PASSED" "$work/ref$1.out" 2>/dev/null; then
    rc=$(FERRY_CONTROL=off run "ref$1" migrate_iter "$1")
    passed "ref$1" "$rc"
  fi
  want=$(value "ref$1" checksum)
}

# same_result LABEL: migrate_iter ended with the checksum of a run without migration
same_result() {
  n=$(value "$1" iterations)
  [ -n "$n" ] || fail "$1 printed no iteration count"
  reference "$n"
  got=$(value "$1" checksum)
  [ "$got" = "$want" ] || fail "$1: checksum $got after $n iterations, $want without migration"
}

# failed_once LABEL GPU: one migration failed with a reason, none succeeded
failed_once() {
  expect_not_in "$1.err" "now runs on local GPU"
  line=$(grep "ferry: migration of device 0 to local GPU $2 failed: " "$work/$1.err")
  [ -n "$line" ] || fail "$1: no 'migration of device 0 to local GPU $2 failed: <reason>' line"
  [ "$(echo "$line" | wc -l)" = 1 ] || fail "$1: more than one failure line"
  reason=${line#*failed: }
  [ -n "$reason" ] || fail "$1: the failure gives no reason"
}

# blames_target LABEL TARGET: LABEL's failed migration to TARGET is said
# of TARGET, with what happened to it (its connection lost, refused, ...),
# and nothing blames the vGPU's own link, which is healthy
blames_target() {
  expect_in "$1.err" "^ferry: migration of device 0 to $2 failed: $2: lost the connection while [a-z ]*: "
  expect_not_in "$1.err" "lost connection to"
  expect_not_in "$1.err" "(device 0)"
  expect_not_in "$1.err" "refused the session"
}

# stats LABEL: $pre, $same and $copied (bytes copied ahead, found
# unchanged, copied in the pause) of LABEL's last migration
stats() {
  line=$(grep "migration stats:" "$work/$1.err" | tail -n 1)
  [ -n "$line" ] || fail "$1: no migration stats"
  pre=$(echo "$line" | sed -n 's/.* bytes_precopied=\([0-9]*\).*/\1/p')
  same=$(echo "$line" | sed -n 's/.* bytes_unchanged=\([0-9]*\).*/\1/p')
  copied=$(echo "$line" | sed -n 's/.* bytes=\([0-9]*\).*/\1/p')
}

# move_then_finish LABEL TARGET: the running program moved to TARGET, run
# on a while, stopped; it passed with the result of a run without migration
move_then_finish() {
  "$bin/ferry" migrate --pid "$pid" 0 "$2" >"$work/$1.mig" 2>&1 ||
    fail "$1: ferry migrate to $2 exited $? ($(cat "$work/$1.mig"))"
  ran_on "$1"
  finish
  passed "$1" "$rc"
  same_result "$1"
}

# killed_in_pause LABEL TARGET SERVER_PID: the running program's move to
# TARGET, whose server is killed while the program is held (FERRY_FAULT=
# pause_stall holds it a second): the move fails, and says so in status
killed_in_pause() {
  "$bin/ferry" migrate --pid "$pid" 0 "$2" >"$work/$1.mig" 2>&1 &
  mig=$!
  wait_for "the hold" sh -c "\"$bin/ferry\" status --pid $pid --json | grep -q '\"phase\": *\"drain\"'"
  kill "$3"
  wait "$3" 2>/dev/null
  wait "$mig" && fail "$1: the migration to a server killed in the pause succeeded"
  grep -q "^ferry migrate: $2: lost the connection while" "$work/$1.mig" ||
    fail "$1: ferry migrate does not say what happened to $2: $(cat "$work/$1.mig")"
  status_json
  json_has state '"failed"'
  json_has error "\"$2: lost the connection"
}

# prepared_then_dies LABEL TARGET SERVER_PID: the running program's vGPU
# prepared on TARGET, whose server is then killed: the migration there fails
prepared_then_dies() {
  "$bin/ferry" migrate --prepare --pid "$pid" 0 "$2" >"$work/$1.prep" 2>&1 || fail "$1: prepare to $2 exited $?"
  kill "$3"
  wait "$3" 2>/dev/null
  "$bin/ferry" migrate --pid "$pid" 0 "$2" >"$work/$1.mig" 2>&1 && fail "$1: a migration to the dead server succeeded"
  status_json
}

# copied_again LABEL: its last migration copied ahead, and what changed or
# went wrong since was found by its hash and copied again in the pause
copied_again() {
  stats "$1"
  [ "${pre:-0}" -gt 0 ] || fail "$1: nothing was copied before the hold"
  [ "${copied:-0}" -gt 0 ] || fail "$1: the pause copied nothing again"
  [ "${same:-0}" -lt "$pre" ] || fail "$1: every copied byte counted as unchanged"
}

# launch counts at which to migrate: 25/50/75% of L, both ends, past the
# end (no migration), and random ones (printed, for reproduction)
launch_counts() {
  l=$1
  if [ -n "${FERRY_MIGRATE_KS:-}" ]; then
    echo "$FERRY_MIGRATE_KS"
    return
  fi
  r=$(shuf -i 1-"$l" -n 3 | tr '\n' ' ')
  echo "$((l / 4)) $((l / 2)) $((l * 3 / 4)) 1 $l ${r% }"
}

case $case_name in
at_random)
  start_server
  rc=$(run ref migrate_iter 40)
  passed ref "$rc"
  expect_not_in ref.err "local GPU"
  want=$(value ref checksum)
  launches=$(value ref launches)
  [ "${launches:-0}" -gt 100 ] || fail "reference run reports $launches launches"
  ks=$(launch_counts "$launches")
  echo "at_random: $launches launches; migrating at launch $ks (FERRY_MIGRATE_KS=\"$ks\" repeats this)"
  for k in $ks; do
    rc=$(FERRY_MIGRATE_AT=0:0:launch=$k run "at$k" migrate_iter 40)
    passed "at$k" "$rc"
    [ "$(value "at$k" checksum)" = "$want" ] || fail "migrated at launch $k: checksum $(value "at$k" checksum), want $want"
    [ "$(value "at$k" launches)" = "$launches" ] || fail "migrated at launch $k: launch count differs"
    migrated "at$k"
  done
  # one past the last launch: the program ends before it, remotely
  k=$((launches + 1))
  rc=$(FERRY_MIGRATE_AT=0:0:launch=$k run "at$k" migrate_iter 40)
  passed "at$k" "$rc"
  [ "$(value "at$k" checksum)" = "$want" ] || fail "launch $k: checksum differs"
  expect_not_in "at$k.err" "local GPU"
  ;;
threads)
  start_server
  rc=$(run ref migrate_threads 300)
  passed ref "$rc"
  launches=$(value ref launches)
  [ "$launches" = 1200 ] || fail "reference run reports $launches launches, expected 1200"
  if [ -n "${FERRY_MIGRATE_KS:-}" ]; then ks=$FERRY_MIGRATE_KS; else
    r=$(shuf -i 2-"$launches" -n 2 | tr '\n' ' ')
    ks="$((launches / 2)) ${r% }"
  fi
  echo "threads: migrating at launch $ks (FERRY_MIGRATE_KS=\"$ks\" repeats this)"
  for k in $ks; do
    rc=$(FERRY_MIGRATE_AT=0:0:launch=$k run "at$k" migrate_threads 300)
    passed "at$k" "$rc"
    [ "$(value "at$k" launches)" = "$launches" ] || fail "migrated at launch $k: launch count differs"
    migrated "at$k"
  done
  # from outside, while all four threads run
  start ctl migrate_threads 1000000 500 "$work/stop"
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/migrate.log" 2>&1 || fail "ferry migrate exited $?"
  ran_on ctl # the threads go on locally
  finish
  passed ctl "$rc"
  migrated ctl
  for t in 0 1 2 3; do
    r=$(sed -n "s/^thread $t: \([0-9]*\) rounds ok/\1/p" "$work/ctl.out")
    [ "${r:-0}" -gt 0 ] || fail "thread $t ran no rounds"
  done
  ;;
control)
  start_server
  start ctl migrate_iter $LIVE "$work/stop"
  "$bin/ferry" ls >"$work/ls.log" 2>&1 || fail "ferry ls exited $?"
  grep -qw -- "$pid" "$work/ls.log" || fail "ferry ls does not list pid $pid"
  status_json
  json_has backend '"remote"'
  # a GPU this machine lacks: refused, nothing changes
  "$bin/ferry" migrate --pid "$pid" 0 7 >"$work/absent.log" 2>&1
  rc=$?
  [ "$rc" = 1 ] || fail "ferry migrate to local GPU 7 exited $rc, expected 1"
  grep -qi "gpu" "$work/absent.log" || fail "the refusal does not name the GPU"
  status_json
  json_has backend '"remote"'
  json_has state '"failed"'
  # the real one
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/migrate.log" 2>&1 || fail "ferry migrate exited $?"
  status_json
  json_has backend "\"$moved_backend\""
  json_has state '"done"'
  # the remote session is closed (this program's was the only one so far)
  wait_for "the remote session to end" grep -q "session from .* ended" "$work/server.log"
  # a time for each of the seven phases
  phases=$(sed -n 's/.*"phase_ms": *{\([^}]*\)}.*/\1/p' "$work/status.log" | tr ',' '\n' |
    grep -cE '^ *"[a-z_-]+": *[0-9.]+ *$')
  [ "${phases:-0}" -ge 7 ] || fail "status gives times for ${phases:-0} phases, expected 7"
  total=$(sed -n 's/.*"total_ms": *\([0-9.]*\).*/\1/p' "$work/status.log")
  awk "BEGIN { exit !(${total:-0} > 0) }" || fail "status gives total_ms '$total'"
  "$bin/ferry" status --pid "$pid" >"$work/status_text.log" 2>&1 || fail "ferry status exited $?"
  grep -q "local" "$work/status_text.log" || fail "ferry status does not say local"
  "$bin/ferry" ls >"$work/ls.log" 2>&1 || fail "ferry ls exited $?"
  grep -q local "$work/ls.log" || fail "ferry ls does not show that pid $pid runs locally"
  # twice in a row: refused, clearly
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/again.log" 2>&1
  rc=$?
  [ "$rc" = 1 ] || fail "a second ferry migrate exited $rc, expected 1"
  grep -qi "already" "$work/again.log" || fail "a second migration is not refused as 'already' local"
  finish
  passed ctl "$rc"
  [ "$(grep -c "now runs on local GPU 0" "$work/ctl.err")" = 1 ] || fail "not one success message"
  expect_in ctl.out "^device memory in use at exit: 0$"
  same_result ctl
  # the socket goes with the program
  [ ! -e "$sock" ] || fail "$sock is left behind"
  ;;
bad_control)
  start_server
  start ctl migrate_iter $LIVE "$work/stop"
  expect_reply help '^ok'
  expect_reply frobnicate '^error .*frobnicate'
  expect_reply '' '^error'
  expect_reply 'migrate 9 0' '^error .*9'
  expect_reply 'migrate 0 -1' '^error .*-1'
  expect_reply 'migrate x 0' "^error .*'?x'?"
  expect_reply 'migrate 0 x' "^error .*'?x'?"
  expect_reply 'migrate 0' '^error'
  expect_reply 'migrate 0 0 0' '^error'
  expect_reply 'migrate 99999999999999999999 0' '^error'
  expect_reply 'status now' '^error'
  long=$(printf '%300s' '' | tr ' ' a)
  expect_reply "$long" '^error .*too long'
  # more bytes than any line, with no newline at all: refused, not buffered forever
  printf '%5000s' '' | tr ' ' b | "$ctl_client" "$sock" >"$work/reply.log" 2>&1 || fail "no reply to 5000 bytes"
  grep -q '^error .*too long' "$work/reply.log" || fail "5000 bytes without a newline got '$(cat "$work/reply.log")'"
  # a NUL byte, bytes that are not text, CRLF, two requests on one connection
  printf 'status\000x\n' | "$ctl_client" "$sock" >"$work/reply.log" 2>&1 || fail "no reply to a NUL byte"
  grep -q '^error' "$work/reply.log" || fail "a NUL byte got '$(cat "$work/reply.log")'"
  printf '\377\376\001 migrate\n' | "$ctl_client" "$sock" >"$work/reply.log" 2>&1 || fail "no reply to binary bytes"
  grep -q '^error' "$work/reply.log" || fail "binary bytes got '$(cat "$work/reply.log")'"
  printf 'status\r\n' | "$ctl_client" "$sock" >"$work/reply.log" 2>&1 || fail "no reply to CRLF"
  grep -q '^ok' "$work/reply.log" || fail "'status' with CRLF got '$(cat "$work/reply.log")'"
  printf 'help\nstatus\n' | "$ctl_client" "$sock" >"$work/reply.log" 2>&1 || fail "no reply to two lines"
  [ "$(grep -c '^ok' "$work/reply.log")" = 2 ] || fail "two requests on one connection: $(cat "$work/reply.log")"
  # peers that hang up mid-line: a partial request never runs
  printf 'migrate 0 0' | "$ctl_client" "$sock" --hangup || fail "connect failed"
  printf 'sta' | "$ctl_client" "$sock" --hangup || fail "connect failed"
  printf '%200s' '' | "$ctl_client" "$sock" --hangup || fail "connect failed"
  # many at once, each hanging up
  i=0 clients=
  while [ $i -lt 24 ]; do
    printf 'status' | "$ctl_client" "$sock" --hangup &
    clients="$clients $!"
    i=$((i + 1))
  done
  for c in $clients; do wait "$c"; done
  # after all that, the program still answers and is still remote
  expect_reply status '^ok .*"backend": *"remote"'
  expect_not_in ctl.err "local GPU"
  # a migration over the raw socket, and a second one refused
  expect_reply 'migrate 0 0' '^ok'
  expect_reply status '^ok .*"backend": *"local"'
  expect_reply 'migrate 0 0' '^error .*already'
  expect_reply 'migrate 0 1' '^error'
  finish
  passed ctl "$rc"
  migrated ctl
  same_result ctl
  ;;
fail_absent)
  start_server
  reference 40
  rc=$(FERRY_MIGRATE_AT=0:7:launch=50 run absent migrate_iter 40)
  passed absent "$rc"
  [ "$(value absent checksum)" = "$want" ] || fail "checksum after the failed migration differs"
  failed_once absent 7
  echo "$reason" | grep -qi "gpu" || fail "the reason '$reason' does not mention the GPU"
  ;;
fail_full)
  start_server
  reference 40
  # the program holds about 8 MiB; the local GPU has 6
  rc=$(FERRY_SIM_TOTAL_MEM=$((6 << 20)) FERRY_MIGRATE_AT=0:0:launch=100 run full migrate_iter 40)
  passed full "$rc"
  [ "$(value full checksum)" = "$want" ] || fail "checksum after the failed migration differs"
  failed_once full 0
  echo "$reason" | grep -Eqi "memory|full" || fail "the reason '$reason' does not say the GPU is full"
  ;;
texture)
  start_server
  reference 40
  rc=$(run tex migrate_iter --texture 40)
  passed tex "$rc"
  [ "$(value tex checksum)" = "$want" ] || fail "--texture changes the checksum"
  # iteration 0 launches 6 kernels; iteration 1 launches 7 and 8, makes its
  # texture object, launches 9, 10 and 11 (which reads it), destroys it
  # with a texture object alive (the program already destroyed others, so it
  # holds a later number): it moves and keeps the object's value
  rc=$(FERRY_MIGRATE_AT=0:0:launch=11 run tex11 migrate_iter --texture 40)
  passed tex11 "$rc"
  [ "$(value tex11 checksum)" = "$want" ] || fail "checksum after migrating with a live texture differs"
  migrated tex11
  # with no texture object alive, it moves, and makes new ones locally
  rc=$(FERRY_MIGRATE_AT=0:0:launch=7 run tex7 migrate_iter --texture 40)
  passed tex7 "$rc"
  [ "$(value tex7 checksum)" = "$want" ] || fail "checksum after migrating at launch 7 differs"
  migrated tex7
  ;;
fail_reserve | fail_replay | fail_memsync | fail_vars)
  point=${case_name#fail_}
  start_server
  # the fault fires once, at launch 30; the program goes on remotely ...
  FERRY_FAULT=$point FERRY_MIGRATE_AT=0:0:launch=30 start ctl migrate_iter $LIVE "$work/stop"
  unset FERRY_FAULT FERRY_MIGRATE_AT # in shells that keep a function's assignments
  wait_for "the failed migration" grep -q "migration of device 0 to local GPU 0 failed" "$work/ctl.err"
  failed_once ctl 0
  echo "failing at $point: $reason"
  status_json
  json_has backend '"remote"'
  json_has state '"failed"'
  grep -q '"error": *"[^"]' "$work/status.log" || fail "status gives no reason for the failure"
  # ... and a second migration, without the fault, succeeds
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/migrate.log" 2>&1 || fail "ferry migrate after the fault exited $?"
  status_json
  json_has backend '"local"'
  finish
  passed ctl "$rc"
  same_result ctl
  [ "$(grep -c "now runs on local GPU 0" "$work/ctl.err")" = 1 ] || fail "no success message after the retry"
  expect_in ctl.out "^device memory in use at exit: 0$"
  ;;
to_server)
  # remote to remote: to a second server at 25/50/75 % of the launches, then
  # chains (on to a third session, back to the first, then to the local GPU)
  start_server
  a=$FERRY_DEVICES
  start_sim_server
  b="tcp://127.0.0.1:$port/0"
  reference 40
  launches=$(value ref40 launches)
  for k in $((launches / 4)) $((launches / 2)) $((launches * 3 / 4)); do
    rc=$(FERRY_MIGRATE_AT="0:$b:launch=$k" run "rr$k" migrate_iter 40)
    passed "rr$k" "$rc"
    [ "$(value "rr$k" checksum)" = "$want" ] || fail "checksum after the move to $b at launch $k differs"
    expect_in "rr$k.err" "ferry: device 0 now runs on $b"
    expect_not_in "rr$k.err" "local GPU"
  done
  rc=$(FERRY_MIGRATE_AT="0:$b:launch=20,0:$a:launch=60,0:$b:launch=100,0:0:launch=140" \
    run chain migrate_iter 40)
  passed chain "$rc"
  [ "$(value chain checksum)" = "$want" ] || fail "checksum after remote, remote, remote, local differs"
  [ "$(grep -c "now runs on tcp://" "$work/chain.err")" = 3 ] || fail "expected three moves between servers"
  migrated chain
  # from a ferry-mhelper to a server and back to a helper
  rc=$(FERRY_MHELPER=always FERRY_MIGRATE_AT="0:0:launch=20,0:$b:launch=60,0:0:launch=100" \
    run helper_rr migrate_iter 40)
  passed helper_rr "$rc"
  [ "$(value helper_rr checksum)" = "$want" ] || fail "checksum after helper, remote, helper differs"
  [ "$(grep -c "in ferry-mhelper pid" "$work/helper_rr.err")" = 2 ] || fail "expected two moves onto helpers"
  expect_in helper_rr.err "ferry: device 0 now runs on $b"
  # from outside, with the program's four threads running, then to the local GPU
  start ctl migrate_threads 1000000 500 "$work/stop"
  "$bin/ferry" migrate --pid "$pid" 0 "$b" >"$work/migrate.log" 2>&1 || fail "ferry migrate to $b exited $?"
  grep -q "now on $b" "$work/migrate.log" || fail "ferry migrate did not say where the vGPU went"
  status_json
  json_has backend '"remote"'
  grep -q "\"where\": *\"$b" "$work/status.log" || fail "status does not show $b"
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/migrate2.log" 2>&1 || fail "ferry migrate to the local GPU exited $?"
  # from the GPU in this process back to a server, threads still running
  "$bin/ferry" migrate --pid "$pid" 0 "$a" >"$work/back.log" 2>&1 || fail "the move from local back to $a exited $? ($(cat "$work/back.log"))"
  status_json
  json_has backend '"remote"'
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/migrate3.log" 2>&1 || fail "the second move to the local GPU exited $?"
  finish
  passed ctl "$rc"
  [ "$(grep -c "now runs on local GPU 0" "$work/ctl.err")" = 2 ] || fail "expected two moves to the local GPU"
  expect_in ctl.err "ferry: device 0 now runs on $a"
  expect_not_in ctl.err "migration of device .* failed"
  ;;
from_process)
  # a vGPU that runs on the GPU in this process moves on: back to a server,
  # to another one, again and again; with copying ahead, prepare, faults
  start_server
  a=$FERRY_DEVICES
  start_sim_server
  b="tcp://127.0.0.1:$port/0"
  reference 40
  # (1 MiB buffers: each move's mem-sync in several requests)
  rc=$(FERRY_MEMSYNC_BUFFER=1048576 \
    FERRY_MIGRATE_AT="0:0:launch=20,0:$b:launch=60,0:0:launch=100,0:$a:launch=140,0:0:launch=180" \
    run chain migrate_iter 40)
  passed chain "$rc"
  expect_not_in chain.err "FERRY_MEMSYNC_BUFFER"
  [ "$(value chain checksum)" = "$want" ] || fail "checksum after local, remote, local, remote, local differs"
  [ "$(grep -c "now runs on local GPU 0" "$work/chain.err")" = 3 ] || fail "expected three moves to the local GPU"
  [ "$(grep -c "now runs on tcp://" "$work/chain.err")" = 2 ] || fail "expected two moves back to servers"
  expect_not_in chain.err "migration of device .* failed"
  # four threads launch: the second point comes while the first move runs,
  # and waits for it instead of being refused
  rc=$(FERRY_MIGRATE_AT="0:0:launch=100,0:$b:launch=101" run close migrate_threads 300)
  passed close "$rc"
  [ "$(grep -c "now runs on" "$work/close.err")" = 2 ] || fail "expected two moves, one right after the other"
  expect_not_in close.err "migration of device .* failed"
  # a buffer size out of range: one line, the default used; the same for
  # the other numeric settings of a move (-8 was read as 2^64 - 8, 80G as 0)
  rc=$(FERRY_MEMSYNC_BUFFER=4k FERRY_PRECOPY_CHUNK=-8 FERRY_SIM_TOTAL_MEM=80G \
    FERRY_MIGRATE_AT="0:0:launch=20" run badbuf migrate_iter 10)
  passed badbuf "$rc"
  [ "$(grep -c "FERRY_MEMSYNC_BUFFER=4k ignored" "$work/badbuf.err")" = 1 ] || fail "a bad FERRY_MEMSYNC_BUFFER is not said once"
  [ "$(grep -c "^ferry: FERRY_PRECOPY_CHUNK=-8 ignored: expected bytes, a multiple of 8 from 8 to 1073741824; using 1048576$" "$work/badbuf.err")" = 1 ] ||
    fail "a bad FERRY_PRECOPY_CHUNK is not said once"
  [ "$(grep -c "^ferry: FERRY_SIM_TOTAL_MEM=80G ignored: expected bytes from 1048576 to 1125899906842624; using 85899345920$" "$work/badbuf.err")" = 1 ] ||
    fail "a bad FERRY_SIM_TOTAL_MEM is not said once"
  expect_in badbuf.err "now runs on local GPU 0"
  # the way back copies ahead too: what kernels change after that copy,
  # or what goes wrong on the target, is found by hash and copied again
  for fault in precopy_stall precopy_corrupt; do
    FERRY_STATS=1 FERRY_FAULT=$fault@2 start "$fault" migrate_iter $LIVE "$work/stop"
    "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/$fault.in" 2>&1 || fail "$fault: the move in exited $?"
    ran_on "$fault"
    move_then_finish "$fault" "$b"
    expect_in "$fault.err" "ferry: device 0 now runs on $b"
    copied_again "$fault"
  done
  # prepared on a server while local; cancel, prepare again, migrate
  FERRY_STATS=1 start prep migrate_iter $LIVE "$work/stop"
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/prep.in" 2>&1 || fail "the move in exited $?"
  "$bin/ferry" migrate --prepare --pid "$pid" 0 "$b" >"$work/prep.log" 2>&1 || fail "prepare to $b exited $? ($(cat "$work/prep.log"))"
  "$bin/ferry" migrate --cancel --pid "$pid" 0 >"$work/cancel.log" 2>&1 || fail "cancel exited $?"
  "$bin/ferry" migrate --prepare --pid "$pid" 0 "$b" >"$work/prep.log" 2>&1 || fail "the second prepare exited $?"
  status_json
  json_has backend '"local"'
  json_has prepared "\"$b"
  ran_on prep # changes since the prepare, for the pause to replay
  "$bin/ferry" migrate --pid "$pid" 0 "$b" >"$work/prep.mig" 2>&1 || fail "the migration after prepare exited $?"
  status_json
  json_has backend '"remote"'
  finish
  passed prep "$rc"
  same_result prep
  grep "migration stats:" "$work/prep.err" | tail -n 1 | grep -q " setup_ms=0.000 " ||
    fail "the migration to $b opened its own target"
  # the target server dies in the pause: the program goes on in this process
  start_sim_server
  c="tcp://127.0.0.1:$port/0" cpid=$server_pid
  FERRY_FAULT=pause_stall@2 start killed migrate_iter $LIVE "$work/stop"
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/killed.in" 2>&1 || fail "the move in exited $?"
  killed_in_pause killed "$c" "$cpid"
  json_has backend '"local"'
  finish
  passed killed "$rc"
  same_result killed
  blames_target killed "$c"
  # prepared on a server that then dies: the migration fails, the program
  # goes on in this process; then one prepared and the program ends
  start_sim_server
  d="tcp://127.0.0.1:$port/0" dpid=$server_pid
  start gone migrate_iter $LIVE "$work/stop"
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/gone.in" 2>&1 || fail "the move in exited $?"
  prepared_then_dies gone "$d" "$dpid"
  json_has backend '"local"'
  "$bin/ferry" migrate --prepare --pid "$pid" 0 "$b" >"$work/gone.prep2" 2>&1 || fail "prepare to $b exited $?"
  finish
  passed gone "$rc"
  same_result gone
  blames_target gone "$d"
  [ "$(grep -c "now runs on" "$work/gone.err")" = 1 ] || fail "gone: expected only the move in"
  # FERRY_PRECOPY=0, and a vGPU already in this process is refused a second local move
  FERRY_STATS=1 FERRY_PRECOPY=0 start off migrate_threads 1000000 500 "$work/stop"
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/off.in" 2>&1 || fail "the move in exited $?"
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/again.log" 2>&1 && fail "a second move to the local GPU succeeded"
  grep -q "already runs on a local GPU" "$work/again.log" || fail "the refusal does not say why"
  "$bin/ferry" migrate --pid "$pid" 0 "$b" >"$work/off.mig" 2>&1 || fail "the move out exited $?"
  finish
  passed off "$rc"
  stats off
  [ "$pre" = 0 ] || fail "FERRY_PRECOPY=0 still copied $pre bytes before the hold"
  ;;
to_server_fail)
  # a target that cannot take the vGPU: one line, the program goes on where it was
  start_server
  start_sim_server
  b="tcp://127.0.0.1:$port/0"
  reference 40
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null
  rc=$(FERRY_CONNECT_TIMEOUT=2 FERRY_MIGRATE_AT="0:$b:launch=50" run dead migrate_iter 40)
  passed dead "$rc"
  [ "$(value dead checksum)" = "$want" ] || fail "checksum after the failed move differs"
  expect_in dead.err "ferry: migration of device 0 to $b failed: cannot reach ${b%/0}: Connection refused$"
  expect_not_in dead.err "now runs on"
  expect_not_in dead.err "lost connection"
  # a fault in the middle (mem-sync): nothing lost, and a retry succeeds
  start_sim_server
  c="tcp://127.0.0.1:$port/0"
  FERRY_FAULT=memsync FERRY_MIGRATE_AT="0:$c:launch=30" start ctl migrate_iter $LIVE "$work/stop"
  unset FERRY_FAULT FERRY_MIGRATE_AT
  wait_for "the failed move" grep -q "migration of device 0 to $c failed" "$work/ctl.err"
  # a very long URL (a 200-byte host) is quoted cut, in its host, as every
  # input a reply quotes (docs/control.md), so the reason still shows
  a200=$(printf '%200s' '' | tr ' ' a)
  long="tcp://$a200:7420/0"
  expect_reply "prepare 0 $long" "^error cannot reach tcp://a+\\.\\.\\.:7420: cannot resolve its host name: "
  expect_reply "migrate 0 $long" "^error cannot reach tcp://a+\\.\\.\\.:7420: cannot resolve its host name: "
  expect_reply "migrate 0 tcp://$a200:99999/0" "^error 'tcp://a+\\.\\.\\.:99999/0' is neither a local GPU nor a server URL \\(bad server address 'tcp://a+\\.\\.\\.:99999/0': port must be"
  expect_in ctl.err "^ferry: migration of device 0 to tcp://a*\.\.\.:7420/0 failed: cannot reach tcp://a*\.\.\.:7420: cannot resolve"
  ! grep -q "a\{40\}" "$work/ctl.err" "$work/reply.log" || fail "a long URL is quoted whole"
  "$bin/ferry" migrate --pid "$pid" 0 "$c" >"$work/migrate.log" 2>&1 || fail "the retry exited $?"
  finish
  passed ctl "$rc"
  same_result ctl
  expect_in ctl.err "ferry: device 0 now runs on $c"
  # not a URL, not a number
  "$bin/ferry" migrate --pid 1 0 nowhere >"$work/bad.log" 2>&1
  [ $? = 2 ] || fail "ferry migrate to 'nowhere' should be a usage error"
  ;;
precopy)
  # copied while the program runs, then only what changed: a copy that the
  # program changes after it (kernels keep running for a second) and one
  # that goes wrong on the target must both be copied again; the results
  # must be those of a run without migration
  start_server
  a=$FERRY_DEVICES
  start_sim_server
  b="tcp://127.0.0.1:$port/0"
  for target in 0 "$b"; do
    for fault in precopy_stall precopy_corrupt; do
      label=$fault$( [ "$target" = 0 ] && echo _local || echo _remote )
      FERRY_STATS=1 FERRY_FAULT=$fault start "$label" migrate_iter $LIVE "$work/stop"
      ran_on "$label"
      move_then_finish "$label" "$target"
      copied_again "$label"
    done
  done
  # 16 MiB the program never changes after the start: found unchanged by
  # hash and not copied again (the program checks them at its end)
  FERRY_STATS=1 start quiet migrate_iter --readonly $LIVE "$work/stop"
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/quiet.mig" 2>&1 || fail "ferry migrate exited $?"
  finish
  passed quiet "$rc"
  same_result quiet
  stats quiet
  [ "${same:-0}" -ge 16777216 ] || fail "quiet: only ${same:-0} bytes found unchanged, the 16 MiB read-only buffer not among them"
  # the target server dies while the program is held (after the copy
  # ahead): the migration fails, the program goes on on the first server
  start_sim_server
  c="tcp://127.0.0.1:$port/0" cpid=$server_pid
  FERRY_FAULT=pause_stall start killed migrate_iter $LIVE "$work/stop"
  killed_in_pause killed "$c" "$cpid"
  json_has backend '"remote"'
  finish
  passed killed "$rc"
  same_result killed
  blames_target killed "$c"
  expect_not_in killed.err "now runs on"
  # FERRY_PRECOPY=0: everything in the pause, as before
  FERRY_STATS=1 FERRY_PRECOPY=0 start off migrate_iter $LIVE "$work/stop"
  "$bin/ferry" migrate --pid "$pid" 0 "$b" >"$work/off.mig" 2>&1 || fail "ferry migrate exited $?"
  finish
  passed off "$rc"
  same_result off
  stats off
  [ "$pre" = 0 ] || fail "FERRY_PRECOPY=0 still copied $pre bytes before the hold"
  ;;
prepare)
  # prepare, then migrate: the migration takes the opened target
  start_server
  a=$FERRY_DEVICES
  start_sim_server
  b="tcp://127.0.0.1:$port/0"
  bpid=$server_pid
  FERRY_STATS=1 start ctl migrate_iter $LIVE "$work/stop"
  "$bin/ferry" migrate --prepare --pid "$pid" 0 0 >"$work/prep.log" 2>&1 || fail "ferry migrate --prepare exited $?"
  grep -q "^vgpu 0 prepared on 0 (" "$work/prep.log" || fail "prepare did not say so: $(cat "$work/prep.log")"
  "$bin/ferry" migrate --prepare --pid "$pid" 0 0 >"$work/prep2.log" 2>&1 && fail "a second prepare succeeded"
  grep -q "already has a prepared target" "$work/prep2.log" || fail "the second prepare gives no reason"
  status_json
  json_has backend '"remote"'
  json_has prepared '"local GPU 0'
  "$bin/ferry" status --pid "$pid" >"$work/st.log" 2>&1 || fail "ferry status exited $?"
  grep -q "prepared: local GPU 0" "$work/st.log" || fail "ferry status does not show the prepared target"
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/migrate.log" 2>&1 || fail "ferry migrate after prepare exited $?"
  status_json
  json_has prepared '""'
  finish
  passed ctl "$rc"
  same_result ctl
  migrated ctl
  # the target was the prepared one: the migration opened nothing itself
  grep -q "migration stats: .* setup_ms=0.000 " "$work/ctl.err" || fail "the migration opened its own target"
  # prepare, then cancel: nothing moves, the program goes on
  start ctl2 migrate_iter $LIVE "$work/stop"
  "$bin/ferry" migrate --prepare --pid "$pid" 0 0 >"$work/prep.log" 2>&1 || fail "prepare exited $?"
  "$bin/ferry" migrate --cancel --pid "$pid" 0 >"$work/cancel.log" 2>&1 || fail "ferry migrate --cancel exited $?"
  "$bin/ferry" migrate --cancel --pid "$pid" 0 >"$work/cancel2.log" 2>&1 && fail "a second cancel succeeded"
  grep -q "has no prepared target" "$work/cancel2.log" || fail "the second cancel gives no reason"
  ran_on ctl2
  # ... and a later migration opens its own target
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/migrate2.log" 2>&1 || fail "ferry migrate after cancel exited $?"
  finish
  passed ctl2 "$rc"
  same_result ctl2
  migrated ctl2
  # prepare, then the program ends: nothing left behind, nothing crashes
  start ctl3 migrate_iter $LIVE "$work/stop"
  "$bin/ferry" migrate --prepare --pid "$pid" 0 0 >"$work/prep.log" 2>&1 || fail "prepare exited $?"
  finish
  passed ctl3 "$rc"
  same_result ctl3
  expect_not_in ctl3.err "now runs on"
  # prepared on server B, then B dies: the migration fails, the program goes on
  start ctl4 migrate_iter $LIVE "$work/stop"
  prepared_then_dies ctl4 "$b" "$bpid"
  json_has backend '"remote"'
  # prepared for the local GPU, moved elsewhere: the prepared target is dropped
  start_sim_server
  c="tcp://127.0.0.1:$port/0"
  "$bin/ferry" migrate --prepare --pid "$pid" 0 0 >"$work/prep.log" 2>&1 || fail "prepare exited $?"
  "$bin/ferry" migrate --pid "$pid" 0 "$c" >"$work/toc.log" 2>&1 || fail "ferry migrate to $c exited $?"
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/local.log" 2>&1 || fail "ferry migrate to the local GPU exited $?"
  finish
  passed ctl4 "$rc"
  same_result ctl4
  expect_in ctl4.err "ferry: device 0 now runs on $c"
  blames_target ctl4 "$b"
  expect_in ctl4.err "ferry: device 0 now runs on local GPU 0"
  ;;
bad_at)
  # FERRY_MIGRATE_AT values that cannot be: one line each, nothing moves
  start_server
  reference 10
  for at in 0:0:launch=-1 0:0:launch=99999999999999999999999 3:0:launch=5 0:0:launch=0 \
    0:0:launch=5,x 0:x:launch=5; do
    rc=$(FERRY_MIGRATE_AT=$at run bad migrate_iter 10)
    passed bad "$rc"
    [ "$(value bad checksum)" = "$want" ] || fail "FERRY_MIGRATE_AT=$at changed the result"
    n=$(grep -c "^ferry: FERRY_MIGRATE_AT='$at' ignored: ." "$work/bad.err")
    [ "$n" = 1 ] || fail "FERRY_MIGRATE_AT=$at: $n lines saying why it is ignored, expected 1"
    expect_not_in bad.err "now runs on local GPU"
  done
  ;;
status_during)
  # status answers while a migration holds the vGPU (its replay stalls,
  # holding the gate, the arena and the log, until the test releases it),
  # and shows it running
  start_server
  FERRY_FAULT=stall FERRY_FAULT_RELEASE="$work/release" start ctl migrate_iter $LIVE "$work/stop"
  unset FERRY_FAULT FERRY_FAULT_RELEASE
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/migrate.log" 2>&1 &
  mig=$!
  # (a status that waited for the migration would never come: it is not released yet)
  stalled() { timeout 30 "$bin/ferry" status --pid "$pid" --json | grep -q '"state": *"running"'; }
  wait_for "the migration to stall" stalled
  timeout 30 "$bin/ferry" status --pid "$pid" --json >"$work/status.json" 2>&1 ||
    fail "ferry status failed or waited during the migration"
  tr -d '\n' <"$work/status.json" >"$work/status.log"
  json_has state '"running"'
  touch "$work/release"
  wait "$mig" || fail "ferry migrate exited $?"
  finish
  passed ctl "$rc"
  migrated ctl
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "e2e migrate $case_name: ok"
