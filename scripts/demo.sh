#!/bin/sh
# The demo: build ferry, start ferry-server, and run an unmodified program
# (tests/apps/vecadd.cu, built with nvcc -cudart shared) on the "remote"
# GPU through ferry, over TCP on loopback. With no GPU on this machine the
# server runs ferry's CPU simulation, and says so.
set -e
cd "$(dirname "$0")/.."
sh scripts/deps.sh
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target ferry-server ferry ferry_client_libs ferry_apps app_twins

set -- --backend cuda
if ! build/bin/ferry-server --probe >/dev/null 2>&1; then
  set -- --backend sim --sim-kernels build/tests/apps/app_twins.so
  echo "demo: no usable GPU here: ferry-server and the local GPU are ferry's CPU simulation (results computed on the CPU)"
  export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS=$PWD/build/tests/apps/app_twins.so
fi
log=$(mktemp)
build/bin/ferry-server --listen tcp://127.0.0.1:0 "$@" 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$log"' EXIT
port=
for i in $(seq 50); do
  port=$(sed -n 's/.*listening on tcp:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n 1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; echo "demo: ferry-server did not start"; exit 1; }
echo "demo: ferry-server listening on tcp://127.0.0.1:$port ($2 backend)"
export FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_CONTROL_DIR=$(mktemp -d)
echo "demo: FERRY_DEVICES=$FERRY_DEVICES ferry run -- build/tests/apps/migrate_iter 400 10000 &"
out=$(mktemp)
build/bin/ferry run -- build/tests/apps/migrate_iter 400 10000 >"$out" 2>&1 &
app=$!
trap 'kill $server $app 2>/dev/null || true; rm -rf "$log" "$out" "$FERRY_CONTROL_DIR"' EXIT
for i in $(seq 100); do [ -S "$FERRY_CONTROL_DIR/ferry-$app.sock" ] && break; sleep 0.1; done
sleep 1
echo "demo: ferry ls"
build/bin/ferry ls
echo "demo: ferry migrate --pid $app 0 0   (vGPU 0 onto local GPU 0, while it runs)"
build/bin/ferry migrate --pid $app 0 0
echo "demo: ferry status --pid $app"
build/bin/ferry status --pid $app
wait $app
rc=$?
cat "$out"
if [ $rc = 0 ] && grep -q PASSED "$out"; then
  echo "demo: the program moved from the remote GPU to the local one and its results are correct"
  exit 0
fi
echo "demo: FAILED (the program exited $rc)"
exit 1
