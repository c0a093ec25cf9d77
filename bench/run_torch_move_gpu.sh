#!/bin/bash
# Runs on a GPU machine: issue 21's move of a PyTorch training process
# (frameworks/big_train.py, several GiB live) remote → local GPU 0 →
# back to the server, each after `ferry migrate --prepare`, while it runs;
# the per-step times around each move (for the plot) and each migration's
# stats (pause_ms). bench/torch_move_report.py OUTDIR makes the table and plot.
# usage: bench/run_torch_move_gpu.sh NEW OUTDIR [SECONDS]
set -u
new=$(cd "$1" && pwd)
out=$2
secs=${3:-14}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/server_start.sh"
machine_info "$out"
server_start "$new/bin" "$out/server.log" --backend cuda
trap 'kill $server 2>/dev/null' EXIT
url=tcp://127.0.0.1:$port/0
ferry=$new/bin/ferry
export FERRY_CONTROL_DIR=$out/sockets FERRY_STATS=1
mkdir -p "$FERRY_CONTROL_DIR"
timeout 120 python3 "$here/frameworks/big_train.py" "$secs" >"$out/native.txt" 2>&1
# (no timeout(1) in front: $! must be the program, whose pid names its socket)
FERRY_DEVICES=$url "$ferry" run -- python3 "$here/frameworks/big_train.py" "$secs" \
  >"$out/moved.txt" 2>"$out/moved.err" &
app=$!
wait_step() { # until the program has printed step N
  for _ in $(seq 600); do
    [ "$(grep -c '^step' "$out/moved.txt")" -ge "$1" ] && return 0
    sleep 0.1
  done
}
wait_step 100
{ echo "prepare r2l $(date +%s.%N)"; timeout 120 "$ferry" migrate --prepare --pid "$app" 0 0; echo "migrate r2l $(date +%s.%N)"
  timeout 120 "$ferry" migrate --pid "$app" 0 0; echo "done r2l $(date +%s.%N)"; } >>"$out/moves.txt" 2>&1
n=$(grep -c '^step' "$out/moved.txt")
wait_step $((n + 150))
{ echo "prepare l2r $(date +%s.%N)"; timeout 120 "$ferry" migrate --prepare --pid "$app" 0 "$url"; echo "migrate l2r $(date +%s.%N)"
  timeout 120 "$ferry" migrate --pid "$app" 0 "$url"; echo "done l2r $(date +%s.%N)"; } >>"$out/moves.txt" 2>&1
wait "$app"
echo "rc $?" >>"$out/moved.txt"
FERRY_DEVICES=$url timeout 120 "$ferry" run -- python3 "$here/frameworks/big_train.py" "$secs" >"$out/remote.txt" 2>"$out/remote.err"
echo done >>"$out/machine.txt"
