#!/bin/sh
# Programs that start on a local GPU (FERRY_DEVICES=local:N), on the CPU
# simulation: the vGPU runs in a ferry-mhelper from its first call, with its
# replay log, so that it can be moved to a server and back while it runs.
# Results are compared with runs that never moved.
# usage: local_start.sh BUILD_DIR CASE
#   round_trip: local -> server A -> local -> server B, from outside; the
#               same with four threads running
#   mixed:      a local and a remote vGPU in one program
#   errors:     bad local:N values and helpers that cannot start
set -u
build=$(cd "$1" && pwd)
case_name=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-lstart.XXXXXX")
e2e_name="e2e local_start"
. "$(dirname "$0")/lib.sh"
# FERRY_TEST_TAG marks this run's helpers (helpers_of below)
export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so" FERRY_CONTROL_DIR="$work" \
  FERRY_TEST_TAG="$work" FERRY_DEVICES=local:0
unset FERRY_MIGRATE_AT FERRY_FAULT FERRY_MHELPER FERRY_MHELPER_BIN FERRY_SIM_TOTAL_MEM \
  FERRY_SIM_GPUS RCUDA_DEVICE_COUNT

# the ferry-mhelper processes of this run (by the tag they inherit)
# (comm is read by the shell itself: a fork per process of a busy machine,
# a build's hundreds, made each poll slow)
helpers_of() {
  for p in /proc/[0-9]*; do
    comm=
    { read -r comm <"$p/comm"; } 2>/dev/null
    [ "$comm" = ferry-mhelper ] || continue
    tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "FERRY_TEST_TAG=$work" && echo "${p#/proc/}"
  done
}
no_helpers() { [ -z "$(helpers_of)" ]; }

# reference N: migrate_iter N on local:0 without migration; $want its
# checksum (made once per N: background runs mostly end at $LIVE's count)
reference() {
  if ! grep -q "^PASSED" "$work/ref$1.out" 2>/dev/null; then
    rc=$(FERRY_CONTROL=off run "ref$1" migrate_iter "$1")
    passed "ref$1" "$rc"
  fi
  want=$(value "ref$1" checksum)
  [ -n "$want" ] || fail "ref$1 printed no checksum"
}

# same_result LABEL: the checksum of a run without migration of as many
# iterations, and no more device memory left at exit than that run leaves
same_result() {
  n=$(value "$1" iterations)
  [ -n "$n" ] || fail "$1 printed no iteration count"
  reference "$n"
  got=$(value "$1" checksum)
  [ "$got" = "$want" ] || fail "$1: checksum $got after $n iterations, $want without migration"
  used=$(value "$1" "device memory in use at exit")
  [ -n "$used" ] && [ "$used" = "$(value "ref$n" "device memory in use at exit")" ] ||
    fail "$1: $used bytes of device memory in use at exit, $(value "ref$n" "device memory in use at exit") without migration"
}

# in_helper: status says the vGPU runs on local GPU 0 in a live ferry-mhelper
# of this run, with a replay log; $hpid is that helper
in_helper() {
  status_json
  json_has backend '"helper"'
  json_has local_gpu 0
  hpid=$(sed -n 's/.*"helper_pid": *\([0-9]*\).*/\1/p' "$work/status.log")
  [ "${hpid:-0}" -gt 0 ] || fail "status gives helper_pid '$hpid'"
  [ "$hpid" != "$pid" ] || fail "the helper is the program itself"
  helpers_of | grep -qx "$hpid" || fail "helper pid $hpid is not a ferry-mhelper of this run"
  grep -q "\"where\": *\"local GPU 0 in ferry-mhelper pid $hpid" "$work/status.log" ||
    fail "status does not say where: $(cat "$work/status.log")"
  records=$(sed -n 's/.*"records": *\([0-9]*\).*/\1/p' "$work/status.log")
  [ "${records:-0}" -gt 0 ] || fail "no replay log in the helper (records: '$records')"
}

# on_server URL: status says the vGPU runs there, and no helper of this run is left
on_server() {
  status_json
  json_has backend '"remote"'
  grep -q "\"where\": *\"$1" "$work/status.log" || fail "status does not show $1"
  wait_for "the helper to exit" no_helpers
}

# moved_to LABEL URL: `ferry migrate` of vGPU 0 to URL (a server, or 0)
moved_to() {
  "$bin/ferry" migrate --pid "$pid" 0 "$2" >"$work/$1.log" 2>&1 || fail "ferry migrate to $2 exited $?"
}

case $case_name in
round_trip)
  start_sim_server
  a="tcp://127.0.0.1:$port/0"
  start_sim_server
  b="tcp://127.0.0.1:$port/0"
  # unmoved: local:0 gives what a server gives
  reference 40
  rc=$(FERRY_DEVICES=$a FERRY_CONTROL=off run remote40 migrate_iter 40)
  passed remote40 "$rc"
  [ "$(value remote40 checksum)" = "$want" ] || fail "local:0 and $a give different checksums"
  expect_not_in ref40.err "."
  # local -> A -> local (a helper again: FERRY_MHELPER=always) -> B while it runs
  FERRY_MHELPER=always start ctl migrate_iter $LIVE "$work/stop"
  unset FERRY_MHELPER # in shells that keep a function's assignments
  in_helper
  first=$hpid
  "$bin/ferry" ls >"$work/ls.log" 2>&1 || fail "ferry ls exited $?"
  grep -E "^$pid +0 +helper +local GPU 0 in ferry-mhelper pid $first" "$work/ls.log" >/dev/null ||
    fail "ferry ls does not show pid $pid in a helper: $(cat "$work/ls.log")"
  "$bin/ferry" status --pid "$pid" >"$work/st.log" 2>&1 || fail "ferry status exited $?"
  grep -q "ferry-mhelper pid $first" "$work/st.log" || fail "ferry status does not name the helper"
  moved_to to_a "$a"
  on_server "$a"
  moved_to back 0
  in_helper
  [ "$hpid" != "$first" ] || fail "the vGPU came back to the helper it left"
  moved_to to_b "$b"
  on_server "$b"
  finish
  passed ctl "$rc"
  same_result ctl
  expect_in ctl.err "ferry: device 0 now runs on $a"
  expect_in ctl.err "ferry: device 0 now runs on local GPU 0 in ferry-mhelper pid"
  expect_in ctl.err "ferry: device 0 now runs on $b"
  [ "$(grep -c "now runs on" "$work/ctl.err")" = 3 ] || fail "expected exactly three moves"
  expect_not_in ctl.err "failed"
  # by default (FERRY_MHELPER=auto) a vGPU that started local comes back
  # into a helper too, so it can be evicted again
  start auto migrate_iter $LIVE "$work/stop"
  in_helper
  moved_to auto_a "$a"
  on_server "$a"
  moved_to auto_back 0
  in_helper
  finish
  passed auto "$rc"
  same_result auto
  [ "$(grep -c "now runs on" "$work/auto.err")" = 2 ] || fail "expected exactly two moves"
  expect_in auto.err "ferry-mhelper pid"
  # evicted while the program's four threads run, then back
  start threads migrate_threads 1000000 500 "$work/stop"
  in_helper
  moved_to threads_a "$a"
  on_server "$a"
  ran_on threads # the threads go on remotely
  moved_to threads_back 0
  in_helper
  finish
  passed threads "$rc"
  for t in 0 1 2 3; do
    r=$(sed -n "s/^thread $t: \([0-9]*\) rounds ok/\1/p" "$work/threads.out")
    [ "${r:-0}" -gt 0 ] || fail "thread $t ran no rounds"
  done
  [ "$(grep -c "now runs on" "$work/threads.err")" = 2 ] || fail "threads: expected exactly two moves"
  ;;
mixed)
  # vGPU 0 on local GPU 1 (in a helper), vGPU 1 on a server: the result of
  # two remote vGPUs, unmoved and with vGPU 0 moved to the server and back
  export FERRY_SIM_GPUS=2
  start_sim_server
  a="tcp://127.0.0.1:$port/0"
  rc=$(FERRY_DEVICES="$a,$a" FERRY_CONTROL=off run ref multi_gpu 12)
  passed ref "$rc"
  want=$(value ref checksum)
  [ -n "$want" ] || fail "ref printed no checksum"
  export FERRY_DEVICES="local:1,$a"
  rc=$(FERRY_STATS=1 FERRY_CONTROL=off run still multi_gpu 12)
  passed still "$rc"
  [ "$(value still checksum)" = "$want" ] || fail "local:1 + $a: checksum $(value still checksum), want $want"
  expect_in still.err "stats: device=0 launches=[1-9][0-9]* backend=helper"
  expect_in still.err "stats: device=1 launches=[1-9][0-9]* backend=remote"
  rc=$(FERRY_STATS=1 FERRY_MIGRATE_AT="0:$a:launch=10,0:1:launch=20" run mix multi_gpu 12)
  passed mix "$rc"
  [ "$(value mix checksum)" = "$want" ] || fail "local:1 + $a: checksum $(value mix checksum), want $want"
  expect_in mix.out "multi_gpu: 2 devices"
  expect_in mix.err "ferry: device 0 now runs on $a"
  expect_in mix.err "ferry: device 0 now runs on local GPU 1"
  [ "$(grep -c "now runs on" "$work/mix.err")" = 2 ] || fail "expected exactly two moves"
  expect_in mix.err "stats: device=1 launches=[1-9][0-9]* backend=remote"
  wait_for "the helpers to exit" no_helpers
  ;;
errors)
  # each: one line naming FERRY_DEVICES and the value, and the first CUDA
  # call fails (no crash: CHECK exits 3); nothing else runs it instead
  # helpers start through a wrapper that notes their arguments in $started
  cat >"$work/mhelper.sh" <<EOF
#!/bin/sh
echo "\$*" >>"$work/started.txt"
exec "$bin/ferry-mhelper" "\$@"
EOF
  chmod +x "$work/mhelper.sh"
  export FERRY_MHELPER_BIN="$work/mhelper.sh"
  # (run_bad LABEL LIST ERROR [ENTRY VALUE]: FERRY_DEVICES=LIST, whose entry
  # ENTRY (0) is VALUE (LIST), and the first call fails with ERROR)
  run_bad() {
    entry=${4:-0} val=${5:-$2}
    rm -f "$work/started.txt"
    rc=$(FERRY_DEVICES=$2 run "$1" migrate_iter 5)
    started=$(cat "$work/started.txt" 2>/dev/null)
    [ "$rc" = 3 ] || fail "FERRY_DEVICES=$2: exit status $rc, expected 3 (a failed CUDA call)"
    expect_in "$1.out" "^FAIL .* -> $3$"
    n=$(grep -c "^ferry: FERRY_DEVICES entry $entry '$val': ." "$work/$1.err")
    [ "$n" = 1 ] || fail "FERRY_DEVICES=$2: $n lines naming entry $entry '$val', expected 1"
    reason=$(sed -n "s/^ferry: FERRY_DEVICES entry $entry '[^']*': //p" "$work/$1.err")
    # nothing else (the helper leaves the refused hello to the program)
    while IFS= read -r line; do
      case $line in
      "ferry: FERRY_DEVICES entry $entry '$val': $reason") ;;
      *) fail "FERRY_DEVICES=$2: another line on stderr: $line" ;;
      esac
    done <"$work/$1.err"
    echo "FERRY_DEVICES=$2: $reason"
    wait_for "the helpers to exit" no_helpers
  }
  for bad in local: local:x local:-1 local:+1 "local: 1" local:1x local:4096 \
    local:99999999999999999999; do
    run_bad bad "$bad" cudaErrorNoDevice
    echo "$reason" | grep -q "expected local:N" || fail "'$bad': the reason does not say what is expected"
    [ -z "$started" ] || fail "'$bad' started a helper: $started"
  done
  # a GPU the machine lacks (the simulation has one)
  run_bad absent local:3 cudaErrorInvalidDevice
  echo "$reason" | grep -q "GPU 3" || fail "the reason '$reason' does not name GPU 3"
  echo "$started" | grep -q -- "--gpu 3 " || fail "no helper was asked for GPU 3: $started"
  # no local driver: only where this machine has none
  if [ -e /dev/nvidiactl ]; then
    echo "errors: this machine has an NVIDIA driver; no test without one"
  else
    export FERRY_LOCAL_BACKEND=cuda
    run_bad nodriver local:0 cudaErrorNoDevice
    export FERRY_LOCAL_BACKEND=sim
  fi
  # a helper that cannot start: missing, or one that exits at once
  FERRY_MHELPER_BIN=$work/absent
  run_bad nobin local:0 cudaErrorNoDevice
  echo "$reason" | grep -q "FERRY_MHELPER_BIN" || fail "the reason '$reason' does not name FERRY_MHELPER_BIN"
  FERRY_MHELPER_BIN=/bin/false
  run_bad dies local:0 cudaErrorNoDevice
  echo "$reason" | grep -q "/bin/false exited with status 1" || fail "the reason '$reason' does not say the helper exited"
  FERRY_MHELPER_BIN=$work/mhelper.sh
  # FERRY_MHELPER=never allows no helper, and so no local:N
  export FERRY_MHELPER=never
  run_bad never local:0 cudaErrorNoDevice
  echo "$reason" | grep -q "FERRY_MHELPER=never" || fail "the reason '$reason' does not name FERRY_MHELPER"
  [ -z "$started" ] || fail "FERRY_MHELPER=never started a helper: $started"
  unset FERRY_MHELPER
  # a bad entry after a good one: refused before any helper starts
  run_bad second local:0,local:x cudaErrorNoDevice 1 local:x
  [ -z "$started" ] || fail "'local:0,local:x' started a helper: $started"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "e2e local_start $case_name: ok"
