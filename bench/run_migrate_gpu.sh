#!/bin/bash
# The migration benchmarks of issue 3, in one run on one machine, so that
# every ratio compares like with like: the recorder's cost per record, the
# raw transport and native pinned copies (the baselines of mem-sync), the
# cost of one call native / remote / local, the mem-sync sweep (region
# counts 2^0..2^10 x sizes, the paper's Fig. 10), the replay sweep (records
# against replay time) and the end-to-end runs of the paper's Fig. 13
# (native, remote, migrated at 25/50/75 % of the launches, and at launch 1:
# local mode's overhead). ferry-server runs on loopback; the "local GPU" of
# a migration is GPU 0, the server's own. Every ferry run has FERRY_STATS=1.
# bench/migrate_report.py OUTDIR turns the logs into bench/results/.
#
# usage: bench/run_migrate_gpu.sh DIR OUTDIR
#   DIR is a build tree: bin/{ferry,ferry-server,ferry-bench-tcp,ferry-bench-record},
#   lib/libcudart.so.13 (the shim), bench/{mig_regions,mig_iterative}
#   (and bench/bench_twins.so for the simulation).
# environment:
#   FERRY_BENCH_SIM=1     all on the CPU simulation (server --backend sim,
#                         FERRY_LOCAL_BACKEND=sim), tiny sizes, no native runs
#   CUDA_RUNTIME_DIR      NVIDIA's libcudart for native runs (/usr/local/cuda/lib64)
#   FERRY_BENCH_BUDGET_S  runs that would start later than this many seconds
#                         after the start are skipped (default 330)
#   FERRY_BENCH_FIG13_S   native run time aimed at for Fig. 13 (default 5)
set -u
dir=$(cd "$1" && pwd) || exit 2
out=$2
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
bin=$dir/bin
apps=$dir/bench
ferry=$bin/ferry
native_lib=${CUDA_RUNTIME_DIR:-/usr/local/cuda/lib64}
sim=${FERRY_BENCH_SIM:-0}
[ "$sim" = 1 ] || sim=0
budget=${FERRY_BENCH_BUDGET_S:-330}
fig13_s=${FERRY_BENCH_FIG13_S:-5}
mkdir -p "$out/memsync" "$out/replay" "$out/fig13" "$out/calls"

# sizes: the simulation copies with the CPU, so it gets small ones
if [ $sim = 1 ]; then
  sizes="4096 65536 1048576"
  cap=$((16 << 20))
  replay_ks="0 64 256 1024 4096"
  big_runs="1:16777216"
  calls_reps=2000
  fig_n=256 fig_check=50
  tcp_total=$((256 << 20))
  export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/bench_twins.so"
else
  sizes="4096 65536 1048576 16777216"
  cap=$((2 << 30))
  replay_ks="0 256 1024 2048 4096"
  big_runs="1:1073741824 2:1073741824 1:2147483648"
  calls_reps=20000
  fig_n=8192 fig_check=50
  tcp_total=$((4 << 30))
fi
# the programs' control sockets go here (removed at the end), not to
# $XDG_RUNTIME_DIR or /tmp
export FERRY_CONTROL_DIR="$out/sockets"
mkdir -p "$FERRY_CONTROL_DIR"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm)"
  echo "mode: $([ $sim = 1 ] && echo "sim (CPU simulation, tiny sizes, no native runs)" || echo gpu)"
  [ $sim = 1 ] || nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current --format=csv,noheader
  echo "cpus: $(nproc)"
  git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null | sed 's/^/commit: /'
} >"$out/machine.txt" 2>&1

. "$(dirname "$0")/server_start.sh"
if [ $sim = 1 ]; then
  server_start "$bin" "$out/server.log" --backend sim --sim-kernels "$apps/bench_twins.so"
else
  server_start "$bin" "$out/server.log" --backend cuda
fi
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$FERRY_CONTROL_DIR"' EXIT
export FERRY_DEVICES=tcp://127.0.0.1:$port/0
unset FERRY_MIGRATE_AT FERRY_FAULT

note() { echo "[$(printf '%4d' $SECONDS)s] $*" | tee -a "$out/progress.txt"; }

# go LOG TIMEOUT native|ferry [VAR=VALUE...] PROGRAM ARGS...: one run, its
# command, output and exit status in LOG; skipped once the budget is spent
go() {
  local log=$1 limit=$2 how=$3
  shift 3
  local vars=()
  while [ $# -gt 0 ] && [[ $1 == *=* ]]; do vars+=("$1"); shift; done
  if [ $SECONDS -ge $budget ]; then
    echo "# skipped: time budget (${budget}s) spent" >"$log"
    note "skipped $(basename "$log")"
    return 1
  fi
  if [ "$how" = native ] && [ $sim = 1 ]; then
    echo "# skipped: no native runs on the simulation" >"$log"
    return 1
  fi
  {
    echo "# how: $how"
    echo "# env: ${vars[*]:-}"
    echo "# cmd: $*"
  } >"$log"
  local t0 t1 rc
  t0=$(date +%s.%N)
  if [ "$how" = native ]; then
    env ${vars[@]+"${vars[@]}"} LD_LIBRARY_PATH="$native_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      timeout "$limit" "$@" >>"$log" 2>&1
  else
    env ${vars[@]+"${vars[@]}"} FERRY_STATS=1 timeout "$limit" "$ferry" run -- "$@" >>"$log" 2>&1
  fi
  rc=$?
  t1=$(date +%s.%N)
  echo "# rc=$rc wall_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" >>"$log"
  [ $rc = 0 ] || note "rc=$rc: $(basename "$log") ($*)"
  return $rc
}

# ---- 1: the recorder (no GPU) ----
note "recorder"
timeout 120 "$bin/ferry-bench-record" $([ $sim = 1 ] && echo quick) >"$out/record_bench.txt" 2>&1

# ---- 2: baselines: raw TCP one-way stream, native pinned copies ----
# mem-sync moves 16 MiB gather replies (its batch size) one way, then
# host-to-device from pinned buffers; three rounds each, medians in the report
note "baselines"
for round in 1 2 3; do
  for chunk in 16777216 4194304; do
    timeout 60 "$bin/ferry-bench-tcp" stream $chunk $tcp_total >>"$out/tcp.txt" 2>&1
  done
  if [ $sim = 1 ]; then
    # no native runtime here: through ferry, only so the report has the line
    go "$out/h2d_$round.log" 60 ferry "$apps/mig_regions" --h2d 1048576 $((64 << 20))
  else
    go "$out/h2d_$round.log" 60 native "$apps/mig_regions" --h2d 16777216 $((2 << 30))
  fi
done

# ---- 3: one call: native, remote, local after a migration at launch 1 ----
note "calls"
for round in 1 2 3; do
  go "$out/calls/native_$round.log" 60 native "$apps/mig_regions" --calls $calls_reps
  go "$out/calls/remote_$round.log" 120 ferry "$apps/mig_regions" --calls $calls_reps
  go "$out/calls/local_$round.log" 60 ferry FERRY_MIGRATE_AT=0:0:launch=1 \
    "$apps/mig_regions" --calls $calls_reps
done

# ---- 4: mem-sync: R regions of S bytes, migrated between fill and check ----
memsync() { # LABEL R S [options]; a case already run is not run again
  local label=$1
  shift
  [ -e "$out/memsync/$label.log" ] && return 0
  go "$out/memsync/$label.log" 60 ferry FERRY_MIGRATE_AT=0:0:launch=2 "$apps/mig_regions" "$@"
}
# first the targets' cases (three times each, for medians) and the large
# regions, so that a run short of time still has them
note "mem-sync: the targets' cases"
for rep in 1 2 3; do
  sfx=$([ $rep = 1 ] || echo "_rep$rep")
  memsync "R1024_S4096$sfx" 1024 4096
  memsync "R1_S4194304$sfx" 1 4194304
done
for rs in $big_runs; do
  memsync "R${rs%%:*}_S${rs##*:}" "${rs%%:*}" "${rs##*:}"
done
# regions kept apart (freed gaps of 128 KiB): one range each, no merging
for r in 1 32 1024; do
  memsync "R${r}_S4096_gap" $r 4096 --gap 131072
done

# ---- 5: replay: K streams and K events more in the log ----
replay() { # REP
  for k in $replay_ks; do
    go "$out/replay/K${k}_rep$1.log" 120 ferry FERRY_MIGRATE_AT=0:0:launch=2 \
      "$apps/mig_regions" 1 4096 --streams $k --events $k
  done
}
note "replay sweep"
replay 1

# ---- 6: Fig. 13: one iterative program ----
note "fig13"
if [ $sim = 1 ]; then
  iters=300
else
  go "$out/fig13/calibrate.log" 120 native "$apps/mig_iterative" $fig_n 200 $fig_check
  per=$(sed -n 's/^per_iteration_ms \([0-9.]*\).*/\1/p' "$out/fig13/calibrate.log")
  iters=$(awk -v p="${per:-0}" -v t="$fig13_s" 'BEGIN {
    n = p > 0 ? int(t * 1000 / p) : 2000; if (n < 1000) n = 1000; if (n > 200000) n = 200000; print n }')
fi
# launches: the first kernel, one per iteration, one per convergence test
checks=$(( iters / fig_check + (iters % fig_check ? 1 : 0) ))
launches=$(( 1 + iters + checks ))
echo "n=$fig_n iterations=$iters check=$fig_check launches=$launches" >"$out/fig13/plan.txt"
fig=("$apps/mig_iterative" $fig_n $iters $fig_check)
limit=$(awk -v t="$fig13_s" 'BEGIN { print int(t * 6 + 60) }')
go "$out/fig13/native_1.log" $limit native "${fig[@]}"
go "$out/fig13/remote.log" $limit ferry "${fig[@]}"
for pct in 25 50 75; do
  go "$out/fig13/at${pct}.log" $limit ferry FERRY_MIGRATE_AT=0:0:launch=$(( launches * pct / 100 )) "${fig[@]}"
done
go "$out/fig13/local_1.log" $limit ferry FERRY_MIGRATE_AT=0:0:launch=1 "${fig[@]}"
go "$out/fig13/native_2.log" $limit native "${fig[@]}"
go "$out/fig13/local_2.log" $limit ferry FERRY_MIGRATE_AT=0:0:launch=1 "${fig[@]}"

# ---- 7: the whole mem-sync sweep (Fig. 10), then replay's second round ----
note "mem-sync sweep"
for s in $sizes; do
  for e in 0 1 2 3 4 5 6 7 8 9 10; do
    r=$((1 << e))
    [ $((r * s)) -le $cap ] || continue
    memsync "R${r}_S${s}" $r $s
  done
done
note "replay sweep, second round"
replay 2

note "done"
echo "done (${SECONDS}s)" >>"$out/machine.txt"
