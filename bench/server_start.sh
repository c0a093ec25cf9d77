# Sourced by the GPU run scripts (run_gpu.sh, run_migrate_gpu.sh, ...,
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

# helper_bench_runs BUILD OUT URL GPU: the helper benchmarks (the mrCUDA
# paper's Figs. 11-12) on one GPU, three rounds of calls and one of
# copies: native (CUDA_VISIBLE_DEVICES=GPU), the vGPU at URL moved onto
# local GPU GPU in the program's process and in a ferry-mhelper, and
# remote; then the raw shared-memory channel. OUT/hb_*.txt and
# OUT/shm_raw.txt are what bench/multigpu_report.py reads.
helper_bench_runs() {
  local build=$1 out=$2 url=$3 gpu=$4 mode
  local hb=$1/bench/helper_bench ferry=$1/bin/ferry
  local lib=${CUDA_RUNTIME_DIR:-/usr/local/cuda/lib64}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  for _ in 1 2 3; do
    CUDA_VISIBLE_DEVICES=$gpu LD_LIBRARY_PATH=$lib timeout 120 "$hb" calls 200000 \
      >>"$out/hb_calls_native.txt" 2>&1
    for mode in never:inproc always:helper; do
      FERRY_DEVICES=$url FERRY_MIGRATE_AT=0:$gpu:launch=1 FERRY_MHELPER=${mode%%:*} \
        timeout 120 "$ferry" run -- "$hb" calls 200000 >>"$out/hb_calls_${mode#*:}.txt" 2>>"$out/hb.err"
    done
    FERRY_DEVICES=$url timeout 120 "$ferry" run -- "$hb" calls 20000 >>"$out/hb_calls_remote.txt" 2>>"$out/hb.err"
  done
  CUDA_VISIBLE_DEVICES=$gpu LD_LIBRARY_PATH=$lib timeout 200 "$hb" copies 1000 \
    >"$out/hb_copies_native.txt" 2>&1
  for mode in never:inproc always:helper; do
    FERRY_DEVICES=$url FERRY_MIGRATE_AT=0:$gpu:launch=1 FERRY_MHELPER=${mode%%:*} \
      timeout 200 "$ferry" run -- "$hb" copies 1000 >"$out/hb_copies_${mode#*:}.txt" 2>>"$out/hb.err"
  done
  timeout 120 "$build/bin/ferry-bench-shm" >"$out/shm_raw.txt" 2>&1
}

# bench_out DIR: a run's output folder, made, with its machine.txt; sets
# $out (its absolute path) and $native_lib (NVIDIA's runtime for native runs)
bench_out() {
  mkdir -p "$1" && out=$(cd "$1" && pwd) || exit 2
  machine_info "$out"
  native_lib=${CUDA_RUNTIME_DIR:-/usr/local/cuda/lib64}
}
