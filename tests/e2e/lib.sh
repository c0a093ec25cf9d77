# Shared by the end-to-end scripts (e2e.sh, migrate.sh); sourced, not run.
# The caller sets build, case_name, e2e_name (for messages) and work, and
# may set bg_pid (a program running in the background).
apps=$build/tests/apps
bin=$build/bin
# a sanitizer build of the shim runs inside programs nvcc built without it:
# its runtime must be loaded first (leaks of the test programs are not ours)
if grep -q '^FERRY_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  export FERRY_PRELOAD="$(cc -print-file-name=libasan.so)"
  export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
fi

# app CMD...: runs a CUDA program (with the sanitizer runtime when needed)
app() { LD_PRELOAD="${FERRY_PRELOAD:-}" "$@"; }
server_pid=
server_pids=
bg_pid=
cleanup() {
  [ -n "$bg_pid" ] && kill "$bg_pid" 2>/dev/null && wait "$bg_pid" 2>/dev/null
  for s in $server_pids; do kill "$s" 2>/dev/null && wait "$s" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

fail() {
  echo "$e2e_name $case_name: FAIL: $*"
  for f in "$work"/*.log "$work"/*.out "$work"/*.err; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }
  done
  exit 1
}

# start_sim_server [ARGS...]: ferry-server on the simulation, port 0; sets $port
start_sim_server() {
  # several servers share server.log: this one's port is the next line that says it listens
  before=$(grep -c "listening on tcp://" "$work/server.log" 2>/dev/null)
  "$bin/ferry-server" --listen tcp://127.0.0.1:0 --backend sim \
    --sim-kernels "$apps/app_twins.so" "$@" 2>>"$work/server.log" &
  server_pid=$!
  server_pids="$server_pids $server_pid"
  i=0
  while [ $i -lt 600 ]; do # 60 s and more: a loaded machine starts it slowly
    port=$(sed -n 's/.*listening on tcp:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/server.log" |
      sed -n "$((${before:-0} + 1))p")
    [ -n "$port" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "ferry-server did not start"
    sleep 0.1
    i=$((i + 1))
  done
  fail "ferry-server did not report its port"
}

# ---- programs through `ferry run`, in the foreground or the background ----
# (the caller has set FERRY_DEVICES; ctl_client is tests/e2e/ctl_client)
ctl_client=$build/tests/e2e/ctl_client

# ITERATIONS PAUSE_US of migrate_iter in the background: at most 100, then
# it holds until its STOP_FILE. A run until stopped did more iterations the
# longer a loaded machine made the steps between take, and its own check at
# the end and the run without migration it is compared with grew with them
# (a test that takes 15 s took over 180 s beside two builds); now a loaded
# machine's runs end at the same count, whose reference is made once. 20 ms
# between iterations keep it running through the steps of an idle machine.
LIVE="100 20000"

# run LABEL APP ARGS...: the app through `ferry run`, output in
# $work/LABEL.out and .err; prints the exit status
# local_sim: the local GPU of a migration is the simulation, control
# sockets go to $work, no setting of the caller's environment leaks in, and
# a case named *_helper ($helper_policy) moves onto a ferry-mhelper
local_sim() {
  export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so" FERRY_CONTROL_DIR="$work"
  unset FERRY_MIGRATE_AT FERRY_FAULT FERRY_SIM_TOTAL_MEM FERRY_MHELPER
  [ -z "${helper_policy:-}" ] || export FERRY_MHELPER=$helper_policy
}

# kill_server: the last server started, sessions included, at once
kill_server() {
  pkill -KILL -P "$server_pid" 2>/dev/null
  kill -KILL "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=
}

run() {
  label=$1 name=$2
  shift 2
  app timeout 120 "$bin/ferry" run -- "$apps/$name" "$@" >"$work/$label.out" 2>"$work/$label.err"
  echo $?
}

# start LABEL APP ARGS...: the same in the background; once the program
# says it runs, $pid is its process id and $sock its control socket
start() {
  label=$1 name=$2
  shift 2
  app timeout 150 "$bin/ferry" run -- "$apps/$name" "$@" >"$work/$label.out" 2>"$work/$label.err" &
  bg_pid=$!
  wait_for "$label to run" grep -q "running pid" "$work/$label.out"
  pid=$(sed -n 's/.* running pid \([0-9]*\).*/\1/p' "$work/$label.out")
  sock=$work/ferry-$pid.sock
  wait_for "the control socket of $label" test -S "$sock"
}

# finish: stops the background program (its STOP_FILE); $rc is its exit status
finish() {
  touch "$work/stop"
  wait "$bg_pid"
  rc=$?
  bg_pid=
  rm -f "$work/stop"
}

# running PID: the process exists and has not exited (a zombie has)
running() {
  case $(ps -o stat= -p "$1" 2>/dev/null) in
  '' | Z*) return 1 ;;
  esac
}

# wait_for WHAT CMD...: polls CMD for up to 60 s
wait_for() {
  what=$1
  shift
  i=0
  until "$@" 2>/dev/null; do
    [ -z "$bg_pid" ] || running "$bg_pid" || fail "the program ended while waiting for $what"
    i=$((i + 1))
    [ $i -lt 600 ] || fail "timed out waiting for $what"
    sleep 0.1
  done
}

# launches_now: the launches of the program's vGPU 0 so far (status)
launches_now() {
  "$bin/ferry" status --pid "$pid" --json 2>/dev/null | tr -d '\n' | grep -o '"launches": *[0-9]*' |
    head -n 1 | grep -o '[0-9]*$'
}
went_on() { grep -q "holding after" "$work/$1.out" || [ "$(launches_now)" -gt "$2" ]; }
# ran_on LABEL: waits until the program launched more than it had (or it
# holds, its iterations done): it went on after what the test just did,
# however slow the machine (a fixed sleep may see nothing run)
ran_on() {
  n0=$(launches_now)
  [ -n "$n0" ] || fail "$1: status gives no launch count"
  wait_for "$1 to go on" went_on "$1" "$n0"
}

expect_in() { grep -q -- "$2" "$work/$1" || fail "'$2' not found in $1"; }
expect_not_in() { ! grep -q -- "$2" "$work/$1" || fail "'$2' found in $1"; }
value() { sed -n "s/^$2: //p" "$work/$1.out" | head -n 1; }

# calls LABEL NAME: how many NAME calls FERRY_STATS counted on device 0 in
# LABEL's run (0 when it names none)
calls() {
  n=$(sed -n "s/.*stats: device=0 calls:.* $2=\([0-9]*\).*/\1/p" "$work/$1.err" | head -n 1)
  echo "${n:-0}"
}

# async_loop_placements APP: tests/apps/async_loop (APP: its build) remote,
# moved into the process at its first launch, and onto a ferry-mhelper:
# ferry makes exactly the calls the program asked for, and no stream
# synchronize it did not (CUDA does not wait for a memset or a device to
# device copy)
async_loop_placements() {
  for placement in remote never always; do
    label=loop_$placement
    if [ "$placement" = remote ]; then
      rc=$(FERRY_STATS=1 run "$label" "$1" 65536 10)
    else
      rc=$(FERRY_STATS=1 FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so" \
        FERRY_MIGRATE_AT=0:0:launch=1 FERRY_MHELPER=$placement run "$label" "$1" 65536 10)
      expect_in "$label.err" "ferry: device 0 now runs on local GPU 0"
    fi
    passed "$label" "$rc"
    for pair in memset:memsets launch:launches memcpy2d_dtod:copies2d; do
      got=$(calls "$label" "${pair%%:*}") want=$(value "$label" "${pair#*:}")
      [ "$got" = "$want" ] || fail "$label: ferry made $got ${pair%%:*} calls, the program asked for $want"
    done
    # its synchronizes, and its cudaFrees, which wait for the device as CUDA's do
    want=$(($(value "$label" synchronizes) + $(value "$label" frees)))
    [ "$(calls "$label" device_synchronize)" = "$want" ] ||
      fail "$label: ferry made $(calls "$label" device_synchronize) device synchronizes, the program $want"
    [ "$(calls "$label" stream_synchronize)" = 0 ] ||
      fail "$label: ferry added $(calls "$label" stream_synchronize) stream synchronizes"
  done
}

# same_checksum LABEL: LABEL printed the checksum of the reference run ($want)
same_checksum() {
  got=$(value "$1" checksum)
  [ -n "$got" ] && [ "$got" = "$want" ] || fail "$1: checksum '$got', the reference run gives '$want'"
}

# passed LABEL RC: the program exited 0 and its own checks passed
passed() {
  [ "$2" = 0 ] || fail "$1 exited $2"
  expect_in "$1.out" "^PASSED"
}

# status_json: `ferry status --pid $pid --json` into $work/status.log, on one line
status_json() {
  "$bin/ferry" status --pid "$pid" --json >"$work/status.json" 2>&1 ||
    fail "ferry status --pid $pid --json exited $?"
  tr -d '\n' <"$work/status.json" >"$work/status.log"
}
json_has() { grep -q -- "\"$1\": *$2" "$work/status.log" || fail "status lacks \"$1\": $2"; }

# ask LINE: one request on a raw connection to $sock; $reply is its one reply line
ask() {
  printf '%s\n' "$1" | "$ctl_client" "$sock" >"$work/reply.log" 2>&1 ||
    fail "no reply to '$1'"
  [ "$(wc -l <"$work/reply.log")" = 1 ] || fail "'$1' got not exactly one reply line"
  reply=$(cat "$work/reply.log")
}
# expect_reply LINE PATTERN: the reply to LINE matches the extended regex PATTERN
expect_reply() {
  ask "$1"
  echo "$reply" | grep -Eq -- "$2" || fail "'$1' got '$reply', expected /$2/"
}


# migrated LABEL [GPU]: exactly one migration, which succeeded (onto a
# ferry-mhelper where $helper_policy is set); the local GPU (the simulation)
# holds no memory once the program freed its own
migrated() {
  expect_in "$1.err" "ferry: device 0 now runs on local GPU ${2:-0}"
  expect_not_in "$1.err" "migration of device .* failed"
  n=$(grep -c "now runs on local GPU" "$work/$1.err")
  [ "$n" = 1 ] || fail "$1: $n migration messages, expected 1"
  [ -z "${helper_policy:-}" ] || expect_in "$1.err" "now runs on local GPU ${2:-0} in ferry-mhelper pid"
  if grep -q "^device memory in use at exit" "$work/$1.out"; then
    expect_in "$1.out" "^device memory in use at exit: 0$"
  fi
}
