# Sourced by the GPU run scripts (run_gpu.sh, run_migrate_gpu.sh,
# run_multigpu_gpu.sh): ferry-server on loopback, on a port the kernel picks.
# server_start BIN_DIR LOG [SERVER_ARGS...]: sets $server (its pid) and
# $port, or prints the server's log and exits.
server_start() {
  local dir=$1 log=$2 i
  shift 2
  "$dir/ferry-server" --listen tcp://127.0.0.1:0 "$@" 2>"$log" &
  server=$!
  port=
  for i in $(seq 100); do
    port=$(sed -n 's/.*listening on tcp:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n 1)
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  echo "ferry-server did not start"
  cat "$log"
  exit 1
}

# machine_info OUT [EXTRA_GPU_FIELDS]: the machine a run's numbers come
# from, in OUT/machine.txt (the GPU run scripts' first lines)
machine_info() {
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm)"
    nvidia-smi --query-gpu=name,driver_version,memory.total${2:+,$2} --format=csv,noheader
    echo "cpus: $(nproc)"
  } >"$1/machine.txt" 2>&1
}
