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
bg_pid=
cleanup() {
  [ -n "$bg_pid" ] && kill "$bg_pid" 2>/dev/null && wait "$bg_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
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
  "$bin/ferry-server" --listen tcp://127.0.0.1:0 --backend sim \
    --sim-kernels "$apps/app_twins.so" "$@" 2>"$work/server.log" &
  server_pid=$!
  i=0
  while [ $i -lt 100 ]; do
    port=$(sed -n 's/.*listening on tcp:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/server.log" | head -n 1)
    [ -n "$port" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "ferry-server did not start"
    sleep 0.1
    i=$((i + 1))
  done
  fail "ferry-server did not report its port"
}
