#!/bin/sh
# End-to-end cases: a real nvcc-built program runs through ferry's shim,
# over TCP on loopback, to a ferry-server using the CPU simulation.
# usage: e2e.sh BUILD_DIR CASE
set -u
build=$(cd "$1" && pwd)
case_name=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-e2e.XXXXXX")
e2e_name=e2e
. "$(dirname "$0")/lib.sh"

case $case_name in
vecadd)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(run vecadd vecadd 100000 5)
  [ "$rc" = 0 ] || fail "vecadd exited $rc"
  expect_in vecadd.out "PASSED"
  expect_in vecadd.out "ferry CPU simulation"
  ;;
async_loop)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_CONTROL_DIR="$work"
  async_loop_placements async_loop
  ;;
query_cache)
  # answers kept instead of asked again: the stack limit until a limit is
  # set or a kernel runs for the first time since, function attributes
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(FERRY_STATS=1 run qc query_cache)
  [ "$rc" = 0 ] || fail "query_cache exited $rc"
  expect_in qc.out "^PASSED$"
  expect_in qc.err "round_trips:.* device_get_limit=5/"
  expect_in qc.err "round_trips:.* func_get_attributes=1/"
  # with the cache off every question is a round trip, and the answers agree
  rc=$(FERRY_STATS=1 FERRY_NO_QUERY_CACHE=1 run qc_off query_cache)
  [ "$rc" = 0 ] || fail "query_cache (cache off) exited $rc"
  expect_in qc_off.out "^PASSED$"
  expect_in qc_off.err "round_trips:.* device_get_limit=30/"
  ;;
device_assert)
  # printf on stdout, the assert's message on stderr, cudaErrorAssert from
  # the synchronize and every call after it: remote, and moved into the
  # process and onto a helper before the launch
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_CONTROL_DIR="$work"
  for placement in remote never always; do
    if [ "$placement" = remote ]; then
      rc=$(run "da_$placement" device_assert)
    else
      rc=$(FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so" FERRY_MIGRATE_AT=0:0:launch=1 \
        FERRY_MHELPER=$placement run "da_$placement" device_assert)
    fi
    [ "$rc" = 0 ] || fail "device_assert ($placement) exited $rc"
    expect_in "da_$placement.out" "^thread 0 checks$"
    expect_in "da_$placement.out" "^sync: cudaErrorAssert$"
    expect_in "da_$placement.out" "^after: cudaErrorAssert$"
    expect_in "da_$placement.err" "block: \[0,0,0\], thread: \[3,0,0\] Assertion \`i != bad\` failed."
    expect_not_in "da_$placement.out" "Assertion"
  done
  # and nothing of it in the server's log
  expect_not_in server.log "Assertion"
  expect_not_in server.log "thread 0 checks"
  ;;
deferred_refused)
  # more asynchronous device-to-host copies into pinned memory than the
  # server holds until a synchronize (--max-deferred 1M, 64 x 64 KiB): the
  # 16 that fit arrive, the synchronize returns cudaErrorMemoryAllocation,
  # the program hears why in one line (no line per copy, nothing about
  # unknown copies), and later copies that fit work again
  start_sim_server --max-deferred 1M
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(run deferred api_tour deferred 64 16384)
  [ "$rc" = 0 ] || fail "api_tour deferred exited $rc"
  expect_in deferred.out "^deferred: calls_failed=0 sync=cudaErrorMemoryAllocation intact=16 after=cudaSuccess after_intact=2$"
  [ "$(grep -c '^ferry: ' "$work/deferred.err")" = 1 ] || fail "not one line from ferry about the refused copies"
  expect_in deferred.err "^ferry: device 0 (tcp://127.0.0.1:$port/0): an asynchronous device-to-host copy of 65536 bytes was refused: the server holds at most 1 MiB (--max-deferred)"
  expect_in deferred.err "returns cudaErrorMemoryAllocation"
  expect_not_in deferred.err "unknown asynchronous copy"
  ;;
exit_free)
  # a static object frees its memory and stream after main returns: remote,
  # and moved into the process, where the local driver's teardown (it
  # started at the move) comes first: every call of the destructor succeeds
  local_sim
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(run remote exit_free)
  passed remote "$rc"
  expect_in remote.out "^at exit: cudaSuccess cudaSuccess cudaSuccess cudaSuccess$"
  rc=$(FERRY_MIGRATE_AT=0:0:launch=5 run moved exit_free)
  passed moved "$rc"
  expect_in moved.err "device 0 now runs on local GPU 0"
  expect_in moved.out "^at exit: cudaSuccess cudaSuccess cudaSuccess cudaSuccess$"
  ;;
api_tour)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(FERRY_STATS=1 run api_tour api_tour)
  [ "$rc" = 0 ] || fail "api_tour exited $rc"
  expect_in api_tour.out " 0 failed"
  expect_in api_tour.out "hello from the GPU, tag 42"
  # eleven sets of one value: one forwarded (what cuDNN does before each launch)
  n=$(calls api_tour func_set_attribute)
  [ "$n" = 1 ] || fail "expected 1 func_set_attribute call for 11 identical sets, got $n"
  ;;
unsupported)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(run unsupported unsupported)
  [ "$rc" = 0 ] || fail "unsupported exited $rc"
  expect_in unsupported.out "PASSED"
  expect_in unsupported.out "past_end=cudaErrorInvalidValue"
  expect_in unsupported.out "fork: child=refused parent_after=cudaSuccess value=1234"
  expect_in unsupported.err "CUDA cannot be used in a child made by fork()"
  n=$(grep -c "cudaGetMipmappedArrayLevel is not supported" "$work/unsupported.err")
  [ "$n" = 1 ] || fail "expected one warning for cudaGetMipmappedArrayLevel, got $n"
  expect_in unsupported.err "cudaGraphAddMemAllocNode is not supported"
  expect_in unsupported.out "programmatic_event=cudaErrorNotSupported"
  n=$(grep -c "cudaLaunchKernelEx with cudaLaunchAttributeProgrammaticEvent is not supported" \
    "$work/unsupported.err")
  [ "$n" = 1 ] || fail "expected one warning for cudaLaunchAttributeProgrammaticEvent, got $n"
  expect_in unsupported.err "launch attribute id 99 is not supported"
  ;;
rcuda)
  start_sim_server
  export RCUDA_DEVICE_COUNT=1 RCUDA_DEVICE_0=127.0.0.1@$port:0
  rc=$(run vecadd vecadd 5000 3)
  [ "$rc" = 0 ] || fail "vecadd over RCUDA_* variables exited $rc"
  expect_in vecadd.out "PASSED"
  ;;
manual_library_path)
  start_sim_server
  FERRY_DEVICES=tcp://127.0.0.1:$port/0 LD_LIBRARY_PATH=$build/lib \
    app timeout 60 "$apps/vecadd" 5000 2 >"$work/vecadd.out" 2>"$work/vecadd.err" || fail "vecadd failed"
  expect_in vecadd.out "PASSED"
  ;;
two_devices)
  start_sim_server
  # two vGPUs served by two sessions; api_tour runs on device 0, vecadd
  # proves device 1 answers
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0,tcp://127.0.0.1:$port/0
  rc=$(run api_tour api_tour)
  [ "$rc" = 0 ] || fail "api_tour with two devices exited $rc"
  ;;
no_config)
  unset FERRY_DEVICES RCUDA_DEVICE_COUNT
  LD_LIBRARY_PATH=$build/lib app timeout 30 "$apps/vecadd" 1000 1 >"$work/vecadd.out" 2>"$work/vecadd.err"
  rc=$?
  [ "$rc" != 0 ] || fail "vecadd succeeded without a device"
  [ "$rc" != 124 ] || fail "vecadd hung"
  expect_in vecadd.err "no remote GPU configured"
  ;;
no_server)
  # a port nobody listens on: bind-and-close gives a free one
  start_sim_server
  kill "$server_pid"; wait "$server_pid" 2>/dev/null; server_pid=
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  start=$(date +%s)
  # refused at once: it must fail long before a connect deadline of 100 s
  # (a bound that leaves a loaded machine room to start the program)
  rc=$(FERRY_CONNECT_TIMEOUT=100 run vecadd vecadd 1000 1)
  [ "$rc" != 0 ] || fail "vecadd succeeded without a server"
  [ "$rc" != 124 ] || fail "vecadd hung"
  [ $(( $(date +%s) - start )) -lt 60 ] || fail "took too long to fail"
  expect_in vecadd.err "cannot reach"
  expect_in vecadd.err "no CUDA-capable device"
  ;;
bad_gpu)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/7
  rc=$(run vecadd vecadd 1000 1)
  [ "$rc" != 0 ] || fail "vecadd succeeded on GPU 7"
  expect_in vecadd.err "out of range"
  ;;
server_killed)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  app timeout 120 "$bin/ferry" run -- "$apps/long_run" 100000 5 >"$work/long_run.out" 2>"$work/long_run.err" &
  app=$!
  i=0
  until grep -q running "$work/long_run.out" 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
    [ $i -lt 600 ] || fail "long_run did not start"
  done
  sleep 0.5
  # kill the whole server, sessions included
  kill_server
  wait "$app"
  rc=$?
  [ "$rc" = 3 ] || fail "long_run exited $rc, expected 3 (a CUDA error)"
  expect_in long_run.out "CUDA error cudaErrorDevicesUnavailable"
  expect_in long_run.out "next call: cudaErrorDevicesUnavailable"
  expect_in long_run.err "lost connection"
  ;;
token)
  printf 'ferry-e2e-token-0123456789abcdef\n' >"$work/token"
  chmod 644 "$work/token"
  if "$bin/ferry-server" --listen tcp://127.0.0.1:0 --backend sim --token-file "$work/token" \
      2>"$work/refused.log"; then
    fail "ferry-server accepted a token file others can read"
  fi
  expect_in refused.log "chmod 600"
  chmod 600 "$work/token"
  # a NUL byte ends a C string: only the bytes before it would count (a
  # leading one made the empty token authenticate), so such files are refused
  # (timeout: a server that accepts one would serve for ever)
  for t in '\000ferry-e2e-token-0123456789abcdef' 'ferry-e2e-token-0123456789abcdef\000tail'; do
    printf "$t\\n" >"$work/nul"
    chmod 600 "$work/nul"
    timeout 10 "$bin/ferry-server" --listen tcp://127.0.0.1:0 --backend sim --token-file "$work/nul" \
      2>"$work/nul.log"
    rc=$?
    [ "$rc" = 2 ] || fail "ferry-server exited $rc with a token file holding a NUL byte, expected 2"
    expect_in nul.log "^ferry-server: --token-file $work/nul: the token has a NUL byte at offset "
    [ "$(wc -l <"$work/nul.log")" = 1 ] || fail "more than one line about the NUL byte"
  done
  start_sim_server --token-file "$work/token"
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  # refused WHAT PATTERN [FILE]: vecadd with FILE as its token file (none
  # without FILE) fails, and its stderr says PATTERN
  refused() {
    rc=$(if [ -n "${3:-}" ]; then export FERRY_TOKEN_FILE="$3"; fi; run vecadd vecadd 1000 1)
    [ "$rc" != 0 ] || fail "vecadd ran $1"
    expect_in vecadd.err "$2"
  }
  refused "without the token" "authentication failed: no token"
  printf 'wrong-token-wrong-token-wrong\n' >"$work/bad"
  refused "with a wrong token" "authentication failed: wrong token" "$work/bad"
  # a prefix of the secret is not the secret
  printf 'ferry-e2e-token-0123456789abcde\n' >"$work/prefix"
  refused "with a prefix of the token" "authentication failed: wrong token" "$work/prefix"
  # the client refuses a token file with a NUL byte too, rather than send
  # what comes before it (here, the whole right token)
  printf 'ferry-e2e-token-0123456789abcdef\000junk\n' >"$work/nul"
  refused "with a token file holding a NUL byte" \
    "^ferry: FERRY_TOKEN_FILE $work/nul: the token has a NUL byte at offset 32;" "$work/nul"
  rc=$(FERRY_TOKEN_FILE=$work/token run vecadd vecadd 1000 1)
  [ "$rc" = 0 ] || fail "vecadd with the token exited $rc"
  expect_in vecadd.out "PASSED"
  ;;
arrays)
  # CUDA arrays, 2D/3D copies, texture and surface objects (no kernels)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(run arrays arrays)
  [ "$rc" = 0 ] || fail "arrays exited $rc"
  expect_in arrays.out "arrays: 0 failed"
  expect_in arrays.out "PASSED"
  ! grep -q "not supported" "$work/arrays.err" || fail "a call of arrays was refused"
  ;;
busy)
  # --max-sessions 1: a second program is told why it is refused, the
  # first goes on undisturbed
  start_sim_server --max-sessions 1
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  app timeout 120 "$bin/ferry" run -- "$apps/long_run" 40 30 >"$work/long_run.out" 2>"$work/long_run.err" &
  bg_pid=$!
  wait_for "long_run to run" grep -q running "$work/long_run.out"
  rc=$(run vecadd vecadd 1000 1)
  [ "$rc" != 0 ] || fail "vecadd ran beyond --max-sessions 1"
  [ "$rc" != 124 ] || fail "vecadd hung"
  expect_in vecadd.err "server busy: 1 session (--max-sessions)"
  expect_in server.log "refused 127.0.0.1:.*server busy: 1 session (--max-sessions)"
  wait "$bg_pid"
  rc=$?
  bg_pid=
  [ "$rc" = 0 ] || fail "long_run exited $rc beside a refused program"
  expect_in long_run.out "PASSED"
  ;;
metrics)
  # --metrics: Prometheus text on a free port; a running program shows as a
  # session with bytes, calls and mapped memory, and is gone once it ends;
  # bad requests get 400/404, and a silent client does not block the server
  start_sim_server --metrics 127.0.0.1:0
  mport=$(sed -n 's/.*metrics on http:\/\/127\.0\.0\.1:\([0-9]*\)\/metrics.*/\1/p' "$work/server.log" | tail -n 1)
  [ -n "$mport" ] || fail "ferry-server did not say where its metrics are"
  # scrape FILE [PATH]: GET into $work/FILE; prints the HTTP status
  scrape() { curl -s -m 10 -o "$work/$1" -w '%{http_code}' "http://127.0.0.1:$mport${2:-/metrics}"; }
  has() { scrape m.txt >/dev/null && grep -Eq -- "$1" "$work/m.txt"; }
  expect_re() { grep -Eq -- "$2" "$work/$1" || fail "/$2/ not found in $1"; }
  [ "$(scrape m.txt)" = 200 ] || fail "GET /metrics did not answer 200"
  expect_in m.txt '^ferry_sessions_active 0$'
  expect_in m.txt '^# TYPE ferry_session_bytes_in_total counter$'
  # a client that connects and says nothing holds no one up
  (sleep 30 | curl -s -m 30 "telnet://127.0.0.1:$mport") >/dev/null 2>&1 &
  silent=$!
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  app timeout 120 "$bin/ferry" run -- "$apps/long_run" 300 20 >"$work/long_run.out" 2>"$work/long_run.err" &
  bg_pid=$!
  session='\{pid="[0-9]+",client="127\.0\.0\.1:[0-9]+"\}'
  wait_for "an active session" has '^ferry_sessions_active 1$'
  wait_for "calls of the session" has "^ferry_session_calls_total$session [1-9][0-9]*$"
  wait_for "mapped memory of the session" has "^ferry_session_mapped_bytes$session [1-9][0-9]*$"
  expect_re m.txt "^ferry_session_bytes_in_total$session [1-9][0-9]*$"
  expect_re m.txt "^ferry_session_bytes_out_total$session [1-9][0-9]*$"
  expect_re m.txt "^ferry_session_errors_total$session 0$"
  expect_in m.txt '^ferry_sessions_total 1$'
  expect_in m.txt '^ferry_mapped_bytes [1-9][0-9]*$'
  spid=$(sed -n 's/^ferry_session_calls_total{pid="\([0-9]*\)".*/\1/p' "$work/m.txt")
  grep -q "(pid $spid)\|ferry-server\[$spid\]" "$work/server.log" || fail "pid label $spid is not the session's"
  [ "$(scrape nf.txt /nope)" = 404 ] || fail "GET /nope did not answer 404"
  printf 'NOT HTTP AT ALL\r\n\r\n' | curl -s -m 5 "telnet://127.0.0.1:$mport" >"$work/bad.txt" 2>&1
  expect_in bad.txt '^HTTP/1.0 400 Bad Request'
  head -c 10000 /dev/zero | tr '\0' a | curl -s -m 5 "telnet://127.0.0.1:$mport" >"$work/big.txt" 2>&1
  expect_in big.txt '^HTTP/1.0 400 Bad Request'
  # a NUL byte (which hid the end of the headers from the server) is a bad
  # request at once, not a silence until the 5 s deadline
  t0=$(date +%s%N)
  printf 'GET /metrics\000 HTTP/1.1\r\n\r\n' | curl -s -m 10 "telnet://127.0.0.1:$mport" >"$work/nul.txt" 2>&1
  dt=$((($(date +%s%N) - t0) / 1000000))
  expect_in nul.txt '^HTTP/1.0 400 Bad Request'
  [ "$dt" -lt 2500 ] || fail "the request with a NUL byte was answered after $dt ms"
  [ "$(scrape m.txt)" = 200 ] || fail "GET /metrics failed after bad requests"
  wait "$bg_pid"
  rc=$?
  bg_pid=
  [ "$rc" = 0 ] || fail "long_run exited $rc"
  expect_in long_run.out "iterations PASSED"
  wait_for "the session to end" has '^ferry_sessions_active 0$'
  expect_not_in m.txt '^ferry_session_calls_total{'
  expect_in m.txt '^ferry_sessions_total 1$'
  expect_in m.txt '^ferry_calls_total [1-9][0-9]*$'
  expect_in m.txt '^ferry_bytes_in_total [1-9][0-9]*$'
  expect_in m.txt '^ferry_mapped_bytes 0$'
  kill "$silent" 2>/dev/null
  # a port in use is refused at start
  "$bin/ferry-server" --listen tcp://127.0.0.1:0 --backend sim --metrics "127.0.0.1:$mport" \
    2>"$work/inuse.err" && fail "a second server took a metrics port in use"
  expect_in inuse.err "--metrics 127.0.0.1:$mport: Address already in use"
  ;;
session_mem_quota)
  # --max-session-mem: an allocation beyond it is cudaErrorMemoryAllocation
  # in the program (allocations come in 2 MiB mappings; the first also maps
  # the arena's floor, 2 MiB more), logged once
  start_sim_server --max-session-mem 1M
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(run vecadd vecadd 1000 1)
  [ "$rc" = 1 ] || fail "vecadd exited $rc beyond --max-session-mem 1M, expected 1 (a CUDA error)"
  # cudaErrorMemoryAllocation, in cudaGetErrorString's words
  expect_in vecadd.err "cudaMalloc(&da, bytes): out of memory"
  expect_in server.log "device memory quota reached: 4 MiB more would exceed 1 MiB (--max-session-mem)"
  start_sim_server --max-session-mem 64M
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(run vecadd vecadd 100000 2)
  [ "$rc" = 0 ] || fail "vecadd exited $rc within --max-session-mem 64M"
  expect_in vecadd.out "PASSED"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "e2e $case_name: ok"
