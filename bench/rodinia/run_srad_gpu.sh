#!/bin/bash
# srad_v2 (Rodinia) on a GPU: native, through ferry remotely, and migrated
# (onto the local GPU and onto a second server) at its third launch, both
# runtimes; the printed image's md5 must be native's, and no run may leave
# a sticky error. compute-sanitizer, where installed, lists the kernels'
# accesses outside their allocations (bench/rodinia/README.md).
# usage: bench/rodinia/run_srad_gpu.sh DIR SRAD_DIR OUT
#   DIR: bin/{ferry,ferry-server}, lib/; SRAD_DIR: build_srad.sh's output
set -u
dir=$(cd "$1" && pwd) || exit 2
s=$(cd "$2" && pwd) || exit 2
out=$3
mkdir -p "$out" || exit 2
. "$(dirname "$0")/../server_start.sh"
args=$(cat "$s/srad.args")
export FERRY_CONTROL=off
server_start "$dir/bin" "$out/server_a.log" --backend cuda
a="tcp://127.0.0.1:$port/0" server_a=$server
server_start "$dir/bin" "$out/server_b.log" --backend cuda
b="tcp://127.0.0.1:$port/0" server_b=$server
trap 'kill $server_a $server_b 2>/dev/null' EXIT
lib=${CUDA_RUNTIME_DIR:-/usr/local/cuda/lib64}
if command -v compute-sanitizer >/dev/null; then
  LD_LIBRARY_PATH=$lib compute-sanitizer --tool memcheck "$s/srad.shared" $args >"$out/memcheck.txt" 2>&1
fi
for rt in shared static; do
  sum() { md5sum | cut -d' ' -f1; }
  echo "$rt native $(LD_LIBRARY_PATH=$lib "$s/srad_out.$rt" $args 2>"$out/$rt.native.err" | sum)"
  echo "$rt remote $(FERRY_DEVICES=$a "$dir/bin/ferry" run -- "$s/srad_out.$rt" $args 2>"$out/$rt.remote.err" | sum)"
  for target in 0 "$b"; do
    label=$rt.to_$( [ "$target" = 0 ] && echo local || echo server)
    echo "$rt migrated to $target $(FERRY_DEVICES=$a FERRY_STATS=1 FERRY_MIGRATE_AT="0:$target:launch=3" \
      "$dir/bin/ferry" run -- "$s/srad_out.$rt" $args 2>"$out/$label.err" | sum) \
      $(grep -c "now runs on" "$out/$label.err") move(s)"
  done
done
grep -h -i -E "sticky|failed|illegal" "$out"/*.err
exit 0
