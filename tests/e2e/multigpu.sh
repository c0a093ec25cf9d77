#!/bin/sh
# Multi-GPU programs end to end, on the CPU simulation: tests/apps/multi_gpu
# drives two or three vGPUs (one thread with cudaSetDevice, or a thread per
# device) that exchange halos every iteration through every kind of copy
# between devices. Its vGPUs start on ferry-servers and move one by one onto
# "local GPUs" (the simulation), in the program's process or in
# ferry-mhelper processes, in every order and under every FERRY_MHELPER
# policy; every result is compared with a run that never moved.
# usage: multigpu.sh BUILD_DIR CASE
#   FERRY_MIGRATE_KS="k1 k2 ..." replaces the random launch counts.
set -u
build=$(cd "$1" && pwd)
case_name=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-mgpu.XXXXXX")
e2e_name="e2e multigpu"
. "$(dirname "$0")/lib.sh"
# two simulated local GPUs; helpers inherit all of this. FERRY_TEST_TAG
# marks this run's processes (helpers_of below)
export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so" FERRY_CONTROL_DIR="$work" \
  FERRY_SIM_GPUS=2 FERRY_TEST_TAG="$work"
unset FERRY_MIGRATE_AT FERRY_FAULT FERRY_MHELPER FERRY_MHELPER_BIN FERRY_SIM_TOTAL_MEM

# devices N: FERRY_DEVICES with N vGPUs, all on GPU 0 of the one server
devices() {
  d="tcp://127.0.0.1:$port/0"
  list=$d
  i=1
  while [ $i -lt "$1" ]; do
    list="$list,$d"
    i=$((i + 1))
  done
  export FERRY_DEVICES="$list"
}

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
# no_helpers_left: every helper of this run is gone (within 60 s and more:
# a loaded machine reaps them slowly)
no_helpers_left() {
  i=0
  while [ -n "$(helpers_of)" ]; do
    i=$((i + 1))
    [ $i -lt 600 ] || fail "ferry-mhelper processes left behind: $(helpers_of)"
    sleep 0.1
  done
}

# ITERATIONS PAUSE_US of multi_gpu in the background: at most 60, then it
# holds (lib.sh's LIVE says why); a program that must keep calling (a lost
# device is noticed by a call) runs until stopped instead
MGPU_LIVE="60 3000"

# sessions_ended N: the server logged the end of at least N sessions
sessions_ended() { [ "$(grep -c 'session from .* ended' "$work/server.log")" -ge "$1" ]; }

# reference LABEL ARGS...: multi_gpu without migration; $want its checksum
# (a LABEL that passed already is not run again)
reference() {
  ref=$1
  shift
  if ! grep -q "^PASSED" "$work/$ref.out" 2>/dev/null; then
    rc=$(FERRY_CONTROL=off run "$ref" multi_gpu "$@")
    passed "$ref" "$rc"
  fi
  want=$(value "$ref" checksum)
  [ -n "$want" ] || fail "$ref printed no checksum"
}

# moves LABEL N_INPROCESS N_HELPER: exactly that many migrations of each kind
moves() {
  inproc=$(grep "now runs on local GPU" "$work/$1.err" | grep -vc "ferry-mhelper")
  helped=$(grep "now runs on local GPU" "$work/$1.err" | grep -c "in ferry-mhelper pid")
  [ "$inproc" = "$2" ] || fail "$1: $inproc in-process migrations, expected $2"
  [ "$helped" = "$3" ] || fail "$1: $helped migrations to helpers, expected $3"
}

# same LABEL: PASSED, the reference checksum, and no device memory left
same() {
  passed "$1" "$rc"
  [ "$(value "$1" checksum)" = "$want" ] || fail "$1: checksum $(value "$1" checksum), want $want"
  for m in $(sed -n 's/^device [0-9]* memory in use at exit: //p' "$work/$1.out"); do
    [ "$m" = 0 ] || fail "$1: a device holds $m bytes at exit"
  done
}

# same_live LABEL ARGS...: like same, against a run without migration of
# as many iterations as LABEL (stopped by its STOP_FILE) made, with ARGS
same_live() {
  label=$1
  shift
  n=$(value "$label" iterations)
  [ -n "$n" ] || fail "$label printed no iteration count"
  reference "ref_$(echo "$*" | tr -c 'a-z0-9' _)$n" "$@" "$n"
  same "$label"
}

# a launch count on one device from 1 to its total, or FERRY_MIGRATE_KS's
pick() {
  if [ -n "${FERRY_MIGRATE_KS:-}" ]; then
    echo "$FERRY_MIGRATE_KS" | cut -d' ' -f"$2"
  else
    shuf -i 1-"$1" -n 1
  fi
}

case $case_name in
peer)
  # two vGPUs on the two GPUs of one server: peer access mirrors device 1's
  # memory in device 0's session, and copies between them stay on the server
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0,tcp://127.0.0.1:$port/1"
  rc=$(FERRY_STATS=1 run peer peer_access)
  passed peer "$rc"
  expect_in peer.out "^peer 0->1: can=1"
  expect_in peer.out "^peer 1->0: can=1"
  expect_not_in peer.err "ferry: cudaDeviceEnablePeerAccess"
  # device 0 ran the three copies made with peer access on, the
  # asynchronous one in its stream; none came through this host (two of
  # them would have reached device 0 as host-to-device copies)
  [ "$(calls peer memcpy_dtod)" = 2 ] && [ "$(calls peer memcpy_dtod_async)" = 1 ] ||
    fail "the peer copies did not run on the server: $(calls peer memcpy_dtod) + $(calls peer memcpy_dtod_async) device copies on device 0"
  [ "$(calls peer memcpy_htod)" = 0 ] && [ "$(calls peer memcpy_htod_async)" = 0 ] ||
    fail "device 0 got host-to-device copies: peer copies went through this host"
  ;;
peer_refused)
  # vGPUs on two servers, or two on one GPU: no peer access, in one line,
  # and copies between them still work through this host
  start_sim_server
  first=$port
  start_sim_server
  for list in "tcp://127.0.0.1:$first/0,tcp://127.0.0.1:$port/1" "tcp://127.0.0.1:$port/0,tcp://127.0.0.1:$port/0"; do
    rc=$(FERRY_DEVICES=$list run refused peer_access)
    [ "$rc" = 4 ] || fail "peer_access on $list exited $rc, not 4 (no peer access)"
    expect_in refused.out "^peer 0->1: can=0"
  done
  # two GPUs of one server, with peer access turned off (FERRY_PEER=0); a
  # bad value is refused in one line and the default kept
  rc=$(FERRY_PEER=0 FERRY_DEVICES=tcp://127.0.0.1:$port/0,tcp://127.0.0.1:$port/1 run off peer_access)
  [ "$rc" = 4 ] || fail "peer_access with FERRY_PEER=0 exited $rc, not 4 (no peer access)"
  expect_in off.out "^peer 0->1: can=0"
  rc=$(FERRY_PEER=yes FERRY_DEVICES=tcp://127.0.0.1:$port/0,tcp://127.0.0.1:$port/1 run bad peer_access)
  passed bad "$rc"
  expect_in bad.err "FERRY_PEER=yes ignored: expected 0 or 1; using 1"
  devices 2
  reference ref 6
  expect_in ref.out "peer 0->1 enable: cudaErrorPeerAccessUnsupported"
  expect_in ref.err "ferry: cudaDeviceEnablePeerAccess(1) from device 0: ferry gives device 0 access to device 1.s memory only where both are GPUs of one ferry-server"
  ;;
peer_migrate)
  # a move asked while peer access is on waits, and runs once it is off
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0,tcp://127.0.0.1:$port/1"
  rc=$(FERRY_MIGRATE_AT=0:0:launch=2 run moved peer_access)
  passed moved "$rc"
  expect_in moved.err "waiting to move to local GPU 0: device 0 shares memory or events with another program through CUDA IPC, or with another device through peer access"
  expect_in moved.err "device 0 now runs on local GPU 0"
  expect_not_in moved.err "did not start"
  ;;
remote)
  start_sim_server
  for n in 1 2 3; do
    devices $n
    reference "ref$n" 12
    one=$want
    reference "thr$n" --threads 12
    [ "$want" = "$one" ] || fail "$n vGPUs: --threads gives $want, one thread $one"
    expect_in "ref$n.out" "multi_gpu: $n devices"
    [ $n = 1 ] || expect_in "ref$n.out" "peer 0->1 enable: cudaErrorPeerAccessUnsupported"
  done
  # two servers, one vGPU each: the same program, the same result
  first=$port
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$first/0,tcp://127.0.0.1:$port/0"
  reference two 12
  [ "$want" = "$(value ref2 checksum)" ] || fail "two servers give $want, one server $(value ref2 checksum)"
  ;;
orders)
  # FERRY_MHELPER=auto: the first vGPU to move runs in the process, the
  # next in a helper; both orders, onto two GPUs and onto the same one
  start_sim_server
  devices 2
  reference ref 20
  per=$(value ref "device 0 launches")
  for plan in "1:0 0:1" "0:1 1:0" "1:0 0:0" "0:0 1:0"; do
    a=${plan% *} b=${plan#* }
    ka=$(pick "$per" 1) kb=$(pick "$per" 2)
    at="${a%:*}:${a#*:}:launch=$ka,${b%:*}:${b#*:}:launch=$kb"
    echo "orders: FERRY_MIGRATE_AT=$at"
    label=o$(echo "$at" | tr -c '0-9\n' _)
    rc=$(FERRY_MIGRATE_AT=$at run "$label" multi_gpu 20)
    same "$label"
    expect_not_in "$label.err" "migration of device .* failed"
    moves "$label" 1 1
  done
  # a thread per device, both moving at the same launch: the two migrations
  # run at once, and still only one of them may take the process
  k=$(pick "$per" 3)
  rc=$(FERRY_MIGRATE_AT=0:0:launch=$k,1:0:launch=$k run together multi_gpu --threads 20)
  same together
  expect_not_in together.err "migration of device .* failed"
  moves together 1 1
  no_helpers_left
  ;;
policies)
  start_sim_server
  devices 3
  reference ref --threads 16
  per=$(value ref "device 0 launches")
  # always: every vGPU in its own helper, two on the same GPU
  at="0:0:launch=$(pick "$per" 1),1:1:launch=$(pick "$per" 2),2:0:launch=$(pick "$per" 3)"
  echo "policies: always, FERRY_MIGRATE_AT=$at"
  rc=$(FERRY_MHELPER=always FERRY_MIGRATE_AT=$at run always multi_gpu --threads 16)
  same always
  expect_not_in always.err "migration of device .* failed"
  moves always 0 3
  # never: all in the process, one per GPU; a third onto a GPU already in
  # use is refused, and that vGPU stays remote with its results intact
  at="0:0:launch=$(pick "$per" 1),1:1:launch=$(pick "$per" 2),2:0:launch=$per"
  rc=$(FERRY_MHELPER=never FERRY_MIGRATE_AT=$at run never multi_gpu --threads 16)
  same never
  expect_in never.err "migration of device 2 to local GPU 0 failed: local GPU 0 already runs device 0 in this process"
  n=$(grep -c "now runs on local GPU" "$work/never.err")
  [ "$n" = 2 ] || fail "never: $n migrations, expected 2"
  expect_not_in never.err "ferry-mhelper"
  # a value FERRY_MHELPER does not know: refused, in words
  rc=$(FERRY_MHELPER=sometimes FERRY_MIGRATE_AT=0:0:launch=3 run bogus multi_gpu 16)
  passed bogus "$rc"
  expect_in bogus.err "FERRY_MHELPER='sometimes': expected auto, always or never"
  no_helpers_left
  ;;
control)
  start_sim_server
  devices 2
  start ctl multi_gpu $MGPU_LIVE "$work/stop"
  "$bin/ferry" migrate --pid "$pid" 1 0 >"$work/m1.log" 2>&1 || fail "ferry migrate 1 0 exited $?"
  "$bin/ferry" migrate --pid "$pid" 0 1 >"$work/m2.log" 2>&1 || fail "ferry migrate 0 1 exited $?"
  grep -q "in ferry-mhelper pid" "$work/m2.log" || fail "the second migration names no helper: $(cat "$work/m2.log")"
  status_json
  grep -q '"backend": *"local"' "$work/status.log" || fail "status shows no in-process vGPU"
  grep -q '"backend": *"helper"' "$work/status.log" || fail "status shows no helper"
  hp=$(sed -n 's/.*"helper_pid": *\([1-9][0-9]*\).*/\1/p' "$work/status.log")
  [ -n "$hp" ] && kill -0 "$hp" 2>/dev/null || fail "status names helper pid '$hp', which does not run"
  [ "$(helpers_of)" = "$hp" ] || fail "helpers running: $(helpers_of), status says $hp"
  "$bin/ferry" ls >"$work/ls.log" 2>&1 || fail "ferry ls exited $?"
  grep -q helper "$work/ls.log" || fail "ferry ls does not show the helper"
  "$bin/ferry" status --pid "$pid" >"$work/st.log" 2>&1 || fail "ferry status exited $?"
  grep -q "ferry-mhelper pid $hp" "$work/st.log" || fail "ferry status does not name helper $hp"
  # bad input: each refused in words, nothing changes
  expect_reply 'migrate 0 1' '^error .*already runs on a local GPU'
  expect_reply 'migrate 1 0' '^error .*already runs on a local GPU'
  expect_reply 'migrate 2 0' '^error no vgpu 2'
  ran_on ctl # both go on locally
  finish
  same_live ctl
  expect_not_in ctl.err "migration of device .* failed"
  no_helpers_left
  ;;
helper_killed)
  # a helper that dies: its vGPU's calls fail in one clear line, the others
  # go on, nothing hangs, nothing is left behind
  start_sim_server
  devices 3
  FERRY_MHELPER=always start ctl multi_gpu --tolerate-loss 1000000 3000 "$work/stop"
  unset FERRY_MHELPER
  "$bin/ferry" migrate --pid "$pid" 1 0 >"$work/m.log" 2>&1 || fail "ferry migrate exited $?"
  hp=$(helpers_of)
  [ -n "$hp" ] || fail "no helper runs after the migration"
  kill -9 $hp
  wait_for "the program to notice" grep -q "device 1 lost: cudaErrorDevicesUnavailable" "$work/ctl.out"
  finish
  passed ctl "$rc"
  n=$(grep -c "lost connection to local GPU 0 in ferry-mhelper pid $hp" "$work/ctl.err")
  [ "$n" = 1 ] || fail "$n 'lost connection' lines for the helper, expected 1"
  expect_in ctl.out "^device 0: verified"
  expect_in ctl.out "^device 2: verified"
  expect_not_in ctl.out "^device 1: verified"
  no_helpers_left
  ;;
program_killed)
  # a program that dies: its helpers follow it, its server sessions end
  start_sim_server
  devices 2
  FERRY_MHELPER=always start ctl multi_gpu $MGPU_LIVE "$work/stop"
  unset FERRY_MHELPER
  "$bin/ferry" migrate --pid "$pid" 0 0 >"$work/m.log" 2>&1 || fail "ferry migrate exited $?"
  [ -n "$(helpers_of)" ] || fail "no helper runs after the migration"
  kill -9 "$pid"
  wait "$bg_pid" 2>/dev/null
  bg_pid=
  no_helpers_left
  wait_for "the server sessions to end" sessions_ended 2
  ;;
bad_input)
  start_sim_server
  devices 2
  reference ref 16
  # a GPU this machine lacks, asked of a helper: refused with the helper's
  # reason; the vGPU stays remote, the helper is gone
  rc=$(FERRY_MIGRATE_AT=0:0:launch=5,1:7:launch=9 run absent multi_gpu 16)
  same absent
  moves absent 1 0
  line=$(grep "migration of device 1 to local GPU 7 failed: " "$work/absent.err")
  echo "$line" | grep -q "GPU 7 is out of range: this machine has 2 GPUs" ||
    fail "the refusal does not say why: '$line'"
  # no ferry-mhelper to start: said so, nothing lost
  rc=$(FERRY_MHELPER=always FERRY_MHELPER_BIN=$work/none FERRY_MIGRATE_AT=0:0:launch=5 run nobin multi_gpu 16)
  same nobin
  expect_in nobin.err "migration of device 0 to local GPU 0 failed: FERRY_MHELPER_BIN=$work/none"
  no_helpers_left
  ;;
helper_faults)
  # every step of a move onto a helper fails once: the helper is gone, the
  # program goes on remotely, and a second move succeeds
  start_sim_server
  devices 2
  for point in reserve replay memsync vars; do
    export FERRY_MHELPER=always
    FERRY_FAULT=$point FERRY_MIGRATE_AT=0:0:launch=9 start "f$point" multi_gpu $MGPU_LIVE "$work/stop"
    wait_for "the failed migration" grep -q "migration of device 0 to local GPU 0 failed" "$work/f$point.err"
    no_helpers_left
    status_json
    json_has backend '"remote"'
    json_has state '"failed"'
    "$bin/ferry" migrate --pid "$pid" 0 1 >"$work/retry.log" 2>&1 || fail "$point: the retry exited $?"
    grep -q "in ferry-mhelper pid" "$work/retry.log" || fail "$point: the retry names no helper"
    finish
    unset FERRY_MHELPER
    same_live "f$point"
    n=$(grep -c "now runs on local GPU 1 in ferry-mhelper pid" "$work/f$point.err")
    [ "$n" = 1 ] || fail "$point: $n successful migrations after the fault, expected 1"
    no_helpers_left
  done
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "e2e multigpu $case_name: ok"
