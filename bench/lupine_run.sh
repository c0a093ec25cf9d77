#!/usr/bin/env bash
# Run one program through Lupine, the CUDA driver-API forwarder we compare
# against (build: bench/lupine.md). Usage: lupine_run.sh PROG ARGS...
# Starts server/lupine_driver_server on the first free port from 14833 up,
# runs PROG with the client shim preloaded, stops the server, and exits with
# PROG's status. The Lupine folder (client/ and server/) is $LUPINE_DIR, else
# this script's folder if it has client/, else ../.gpu/lupine from here.
# The first port tried can be changed with LUPINE_PORT.
set -u

me=lupine_run
if [ $# -lt 1 ]; then
  echo "usage: $0 PROG ARGS..." >&2
  exit 2
fi

here=$(cd "$(dirname "$0")" && pwd) || exit 1
if [ -n "${LUPINE_DIR:-}" ]; then
  dir=$LUPINE_DIR
elif [ -d "$here/client" ]; then
  dir=$here
else
  dir=$here/../.gpu/lupine
fi
if ! dir=$(cd "$dir" 2>/dev/null && pwd); then
  echo "$me: Lupine folder not found (set LUPINE_DIR; see bench/lupine.md)" >&2
  exit 1
fi
shim=$dir/client/libcuda.so.1
server=$dir/server/lupine_driver_server
for f in "$shim" "$server"; do
  if [ ! -e "$f" ]; then
    echo "$me: missing $f (build it as bench/lupine.md says)" >&2
    exit 1
  fi
done

log=$(mktemp "${TMPDIR:-/tmp}/lupine_server.XXXXXX") || exit 1
spid=

stop_server() {
  [ -n "$spid" ] || return 0
  if kill -0 "$spid" 2>/dev/null; then
    kill -TERM "$spid" 2>/dev/null
    for _ in $(seq 100); do
      kill -0 "$spid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$spid" 2>/dev/null; then
      echo "$me: server did not stop on SIGTERM; killing it" >&2
      kill -KILL "$spid" 2>/dev/null
    fi
  fi
  wait "$spid" 2>/dev/null
  spid=
}
trap stop_server EXIT
trap 'echo "$me: interrupted; server log: $log" >&2; exit 130' INT
trap 'echo "$me: terminated; server log: $log" >&2; exit 143' TERM

fail() {
  echo "$me: $*" >&2
  echo "$me: server log: $log" >&2
  tail -n 20 "$log" | sed 's/^/  | /' >&2
  exit 1
}

# Start the server: the real driver for the GPU, never the shim (LD_PRELOAD
# unset). It binds 0.0.0.0 and exits with "Socket bind failed." when the port
# is taken; then try the next one. Ready when it prints the listening line.
port=${LUPINE_PORT:-14833}
deadline=$((SECONDS + 20))
while :; do
  : >"$log"
  env -u LD_PRELOAD -u LUPINE_LOG_LEVEL \
    CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" LUPINE_PORT="$port" \
    "$server" >>"$log" 2>&1 </dev/null &
  spid=$!
  state=starting
  while [ "$state" = starting ]; do
    if grep -qF "Server listening on port $port..." "$log"; then
      state=ready
    elif ! kill -0 "$spid" 2>/dev/null; then
      wait "$spid"
      rc=$?
      spid=
      if grep -qF "Socket bind failed" "$log"; then
        state=busy
      else
        fail "server exited with status $rc before listening"
      fi
    elif [ "$SECONDS" -ge "$deadline" ]; then
      stop_server
      fail "server not listening on port $port after 20 s; giving up"
    else
      sleep 0.1
    fi
  done
  [ "$state" = ready ] && break
  port=$((port + 1))
  if [ "$port" -gt 65535 ] || [ "$SECONDS" -ge "$deadline" ]; then
    fail "no free port found for the server after 20 s; giving up"
  fi
done

LD_PRELOAD=$shim \
  LD_LIBRARY_PATH=$dir/client:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  LUPINE_SERVER=127.0.0.1:$port LUPINE_DISABLE_LOCAL=1 "$@"
status=$?

stop_server
if [ "$status" -ne 0 ]; then
  echo "$me: $1 exited with status $status; server log: $log" >&2
else
  rm -f "$log"
fi
exit "$status"
