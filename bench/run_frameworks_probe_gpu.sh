#!/bin/bash
# Runs on a GPU machine: how far PyTorch, JAX and CuPy get through ferry,
# each probe native and through ferry, with PyTorch's allocator backends.
# usage: bench/run_frameworks_probe_gpu.sh NEW OUTDIR   (NEW: bin/ and lib/)
set -u
new=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/server_start.sh"
machine_info "$out"
server_start "$new/bin" "$out/server.log" --backend cuda
trap 'kill $server 2>/dev/null' EXIT
url=tcp://127.0.0.1:$port/0
probe() { # name, env..., then -- script
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  if [ -z "${FERRY_ONLY:-}" ]; then
    env "${envs[@]}" timeout "${PROBE_TIMEOUT:-200}" python3 "$@" >"$out/${name}_native.txt" 2>"$out/${name}_native.err"
    echo "rc=$?" >>"$out/${name}_native.txt"
  fi
  env "${envs[@]}" FERRY_DEVICES=$url FERRY_STATS=1 timeout "${PROBE_TIMEOUT:-200}" "$new/bin/ferry" run -- python3 "$@" \
    >"$out/${name}_ferry.txt" 2>"$out/${name}_ferry.err"
  echo "rc=$?" >>"$out/${name}_ferry.txt"
}
f=$here/frameworks
for p in ${PROBES:-torch torch_async torch_expand jax jax_nocb cupy}; do
  case $p in
  torch) probe torch A=1 -- "$f/torch_probe.py" ;;
  torch_async) probe torch_async PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- "$f/torch_probe.py" ;;
  torch_expand) probe torch_expand PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- "$f/torch_probe.py" ;;
  jax) probe jax JAX_PLATFORMS=cuda -- "$f/jax_probe.py" ;;
  jax_nocb) probe jax_nocb JAX_PLATFORMS=cuda XLA_FLAGS=--xla_gpu_enable_command_buffer= -- "$f/jax_probe.py" ;;
  cupy) probe cupy A=1 -- "$f/cupy_probe.py" ;;
  esac
done
echo done >>"$out/machine.txt"
