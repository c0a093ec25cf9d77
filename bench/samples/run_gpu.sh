#!/bin/bash
# NVIDIA cuda-samples natively and through ferry, on one GPU machine, both
# builds (-cudart shared and nvcc's default static runtime, made by
# bench/samples/build.sh), three modes each:
#   native    the program alone (NVIDIA's runtime from $CUDA_RUNTIME_DIR)
#   ferry     ferry run, ferry-server --backend cuda on loopback, FERRY_STATS=1
#   migrated  as ferry, with FERRY_MIGRATE_AT=0:0:launch=K, K = half the
#             launches the ferry run counted (its "stats: device=0
#             launches=N" line on stderr; at least 1; not run for N = 0)
# OUTDIR/<name>.<build>.<mode>.{out,err}, one line per run in
# OUTDIR/runs.txt, libraries ldd cannot find in OUTDIR/ldd.txt, and
# OUTDIR/report.md (bench/samples/report.py).
#
# usage: bench/samples/run_gpu.sh BUILD SAMPLES_TARBALL OUTDIR
#   BUILD: ferry build tree (bin/ferry, bin/ferry-server, lib/)
#   SAMPLES_TARBALL: samples.tar.xz from build.sh (PACK=...)
# environment:
#   PAR=6             sample runs at a time (native runs share the GPU too)
#   DEADLINE_S=420    every run ends by then (seconds after the start):
#                     its timeout is cut to what is left, and runs that
#                     would get less than 5 s are skipped (recorded)
#   RUN_TIMEOUT=120   timeout of one run
#   ONLY="a b"        only these samples; BUILDS="shared static"
#   MIGRATE_TO=server2 the migrated runs move to a second ferry-server on
#                     this machine (remote to remote) instead of local GPU 0
#   START_LOCAL=1     the ferry and migrated runs start on local GPU 0
#                     (FERRY_DEVICES=local:0, in a ferry-mhelper) and the
#                     migrated ones move to the server (local to remote)
#   ROUND_TRIP=1      the migrated runs move into the program's own process
#                     (local GPU 0) at half the point (at least launch 1),
#                     and back to the server at the point (in-process
#                     local to remote)
#   MIGRATE_PCTS="50" where the migrated runs move (per cent of the ferry
#                     run's launches); 50 is mode "migrated", others
#                     "migrated<pct>" (report.py notes them)
#   CUDA_RUNTIME_DIR  NVIDIA's libraries for native runs and for the math
#                     libraries under ferry (default /usr/local/cuda/lib64)
#   FERRY_BACKEND     server backend (default cuda)
#   DRY_RUN=1         print the commands instead of running them (no server)
# Never hangs (timeouts everywhere) and exits 0 whatever the samples do.
# shellcheck disable=SC2317 # functions run through trap and xargs
set -u
t_start=$(date +%s)
build=$(cd "${1:?usage: run_gpu.sh BUILD SAMPLES_TARBALL OUTDIR}" && pwd) || exit 2
tarball=$(cd "$(dirname "${2:?usage: run_gpu.sh BUILD SAMPLES_TARBALL OUTDIR}")" && pwd)/$(basename "$2")
out=${3:?usage: run_gpu.sh BUILD SAMPLES_TARBALL OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
PAR=${PAR:-6}
DEADLINE_S=${DEADLINE_S:-420}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
BUILDS=${BUILDS:-"shared static"}
DRY_RUN=${DRY_RUN:-0}
native_lib=${CUDA_RUNTIME_DIR:-/usr/local/cuda/lib64}
ferry=$build/bin/ferry

say() { printf '[%4ds] %s\n' $(( $(date +%s) - t_start )) "$*"; }

[ -f "$tarball" ] || { echo "run_gpu.sh: no $tarball"; exit 0; }
if [ "$DRY_RUN" != 1 ]; then
  for f in "$ferry" "$build/bin/ferry-server"; do
    [ -x "$f" ] || { echo "run_gpu.sh: no $f"; exit 0; }
  done
fi

# Short path: the programs' control sockets (ferry-<pid>.sock) go here.
work=$(mktemp -d /tmp/fsamples.XXXXXX) || exit 0
server=
cleanup() {
  [ -n "${server2:-}" ] && kill "$server2" 2>/dev/null
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$server" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$server" 2>/dev/null
    wait "$server" 2>/dev/null
  fi
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

say "unpacking $tarball"
timeout 120 tar -xJf "$tarball" -C "$work/" || { echo "run_gpu.sh: cannot unpack $tarball"; exit 0; }
[ -f "$work/samples.txt" ] || { echo "run_gpu.sh: no samples.txt in $tarball"; exit 0; }
mkdir -p "$work/sockets"
cp "$work/samples.txt" "$out/samples.txt"
cp "$work/build.log" "$out/build.log" 2>/dev/null

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm)"
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  echo "cpus: $(nproc)"
  echo "ferry: $build"
  echo "par: $PAR deadline_s: $DEADLINE_S run_timeout: $RUN_TIMEOUT dry_run: $DRY_RUN"
  git -C "$here" rev-parse --short HEAD 2>/dev/null | sed 's/^/commit: /'
} >"$out/machine.txt" 2>&1

# The math libraries are linked dynamically: every binary's missing ones,
# with the library path the runs use, go to ldd.txt (and the run's .err).
: >"$out/ldd.txt"
awk -F'|' '!/^#/ && NF > 1 {print $1 "|" $3}' "$work/samples.txt" | while IFS='|' read -r name dir; do
  for b in $BUILDS; do [ -e "$work/$dir/$name.$b" ] && echo "$work/$dir/$name.$b"; done
done | timeout 120 xargs -r -P 8 -I{} sh -c \
  'm=$(LD_LIBRARY_PATH="$1" timeout 20 ldd "$2" 2>&1 | awk "/not found/ {print \$1}" | tr "\n" " ");
   [ -n "$m" ] && echo "$(basename "$2"): missing: $m"; exit 0' _ "$native_lib" {} | sort >"$out/ldd.txt"
if [ -s "$out/ldd.txt" ]; then
  say "WARNING: libraries not found (in $native_lib or the system's paths):"
  sed 's/^/    /' "$out/ldd.txt"
else
  say "ldd: every binary finds its libraries"
fi

# start_listener LOG: ferry-server on loopback, port 0, as bench/server_start.sh,
# but a server that does not start is data too (the native runs still run,
# the ferry runs fail): $listener is its pid, $listen_port its port or empty
start_listener() {
  "$build/bin/ferry-server" --listen tcp://127.0.0.1:0 --backend "${FERRY_BACKEND:-cuda}" \
    2>"$1" </dev/null &
  listener=$!
  listen_port=
  for _ in $(seq 150); do
    listen_port=$(sed -n 's/.*listening on tcp:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$1" | head -n 1)
    [ -n "$listen_port" ] && break
    sleep 0.1
  done
}

if [ "$DRY_RUN" = 1 ]; then
  port=PORT
else
  start_listener "$out/server.log"
  server=$listener port=$listen_port
  if [ -n "$port" ]; then
    say "ferry-server pid $server on port $port"
  else
    port=1
    say "WARNING: ferry-server did not start (server.log below); the ferry runs will fail"
    sed 's/^/    /' "$out/server.log" | head -n 20
  fi
fi

# where the migrated runs go: local GPU 0, or a second server (MIGRATE_TO=server2),
# or from local GPU 0 to the server (START_LOCAL=1)
target=0
server2=
devices="tcp://127.0.0.1:$port/0"
if [ "${START_LOCAL:-0}" = 1 ]; then
  devices=local:0 target="tcp://127.0.0.1:$port/0"
  say "ferry runs start on local GPU 0; migrated runs move to $target"
fi
if [ "${MIGRATE_TO:-local}" = server2 ] && [ "$DRY_RUN" != 1 ]; then
  start_listener "$out/server2.log"
  server2=$listener
  target=tcp://127.0.0.1:${listen_port:-1}/0
  say "migrated runs move to the second server, $target"
fi

# Slowest first (times of docs/compatibility.md), so that the parallel
# runs end together; then the manifest's order.
SLOW="binomialOptions stereoDisparity simpleStreams FDTD3d UnifiedMemoryPerf simpleAttributes
bf16TensorCoreGemm HSOpticalFlow dmmaTensorCoreGemm tf32TensorCoreGemm graphMemoryNodes
sortingNetworks simpleCUBLASXT conjugateGradientPrecond cuSolverSp_LinearSolver
cuSolverDn_LinearSolver batchCUBLAS convolutionFFT2D fastWalshTransform histogram
cudaTensorCoreGemm immaTensorCoreGemm alignedTypes"
{
  names=$(awk -F'|' '!/^#/ && NF > 1 {print $1}' "$work/samples.txt")
  for n in $SLOW; do printf '%s\n' "$names" | grep -qx "$n" && echo "$n"; done
  printf '%s\n' "$names" | grep -vxF -f <(printf '%s\n' $SLOW)
} | while read -r n; do
  if [ -n "${ONLY:-}" ]; then case " $ONLY " in *" $n "*) ;; *) continue ;; esac; fi
  # one job per sample, its builds one after the other: runs of one sample
  # share its directory, and some write fixed output files there
  # (simpleTextureDrv's teapot512_out.pgm, then compared with a reference)
  line=$n
  for b in $BUILDS; do [ -e "$work/$n/$n.$b" ] && line="$line $b"; done
  [ "$line" = "$n" ] || echo "$line"
done >"$work/jobs.txt"
total=$(awk '{t += NF - 1} END {print t + 0}' "$work/jobs.txt")
say "$total runs of (native, ferry, migrated), $PAR at a time, all ending by ${DEADLINE_S}s"

: >"$out/runs.txt"
export work out ferry native_lib port t_start DEADLINE_S RUN_TIMEOUT DRY_RUN total target devices

# run_one NAME BUILD MODE [VAR=VALUE...]: one run, in the sample's directory.
run_one() {
  local name=$1 b=$2 mode=$3
  shift 3
  local vars=("$@") line dir args regex
  line=$(awk -F'|' -v n="$name" '$1 == n' "$work/samples.txt" | head -n 1)
  IFS='|' read -r _ _ dir args regex <<<"$line"
  local base=$out/$name.$b.$mode left t0 t1 rc limit
  left=$(( t_start + DEADLINE_S - $(date +%s) ))
  limit=$RUN_TIMEOUT
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    echo "skipped: time budget (${DEADLINE_S}s) spent" >"$base.err"
    : >"$base.out"
    echo "$name $b $mode rc=skip wall_s=0 pass=- note=budget" >>"$out/runs.txt"
    return 1
  fi
  local cmd=()
  if [ "$mode" = native ]; then
    cmd=(env LD_LIBRARY_PATH="$native_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
         timeout -k 5 "$limit" "./$name.$b")
  else
    # ferry puts its own lib directory first; the math libraries come after
    cmd=(env LD_LIBRARY_PATH="$native_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
         FERRY_DEVICES="$devices" FERRY_STATS=1
         FERRY_CONTROL_DIR="$work/sockets" ${vars[@]+"${vars[@]}"}
         timeout -k 5 "$limit" "$ferry" run -- "./$name.$b")
  fi
  # shellcheck disable=SC2206 # args are words, as on a command line
  [ -n "$args" ] && cmd+=($args)
  if [ "$DRY_RUN" = 1 ]; then
    echo "(cd $work/$dir && ${cmd[*]} >$base.out 2>$base.err)"
    : >"$base.out"
    : >"$base.err"
    [ "$mode" = ferry ] && echo "ferry: stats: device=0 launches=10 backend=remote" >"$base.err"
    echo "$name $b $mode rc=0 wall_s=0.00 pass=- dry_run" >>"$out/runs.txt"
    return 0
  fi
  t0=$(date +%s.%N)
  (cd "$work/$dir" && "${cmd[@]}" >"$base.out" 2>"$base.err" </dev/null)
  rc=$?
  t1=$(date +%s.%N)
  local pass=-
  if [ -n "$regex" ]; then
    grep -qE -- "$regex" "$base.out" && pass=yes || pass=no
  fi
  local extra=
  [ -n "${vars[*]:-}" ] && extra=" ${vars[*]}"
  if [ "${mode#migrated}" != "$mode" ]; then
    extra="$extra moved=$(grep -cE 'device [0-9]+ now runs on' "$base.err")"
  fi
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && extra="$extra timeout=${limit}s"
  awk -v n="$name" -v b="$b" -v m="$mode" -v rc="$rc" -v a="$t0" -v z="$t1" -v p="$pass" -v e="$extra" \
    'BEGIN { printf "%s %s %s rc=%s wall_s=%.2f pass=%s%s\n", n, b, m, rc, z - a, p, e }' >>"$out/runs.txt"
  return 0
}

# job NAME BUILD: native, then ferry, then migrated at half the launches.
job() {
  local name=$1 b=$2 n k pct mode r=
  run_one "$name" "$b" native
  run_one "$name" "$b" ferry
  n=$(sed -n 's/.*stats: device=0 launches=\([0-9]*\).*/\1/p' "$out/$name.$b.ferry.err" | tail -n 1)
  if grep -q "^$name $b ferry rc=skip" "$out/runs.txt"; then
    echo "$name $b migrated rc=skip wall_s=0 pass=- note=budget" >>"$out/runs.txt"
    : >"$out/$name.$b.migrated.out"
    echo "skipped: time budget (${DEADLINE_S}s) spent" >"$out/$name.$b.migrated.err"
  elif [ -z "$n" ]; then
    echo "$name $b migrated rc=skip wall_s=0 pass=- note=no-launch-count" >>"$out/runs.txt"
    : >"$out/$name.$b.migrated.out"
    echo "skipped: the ferry run printed no launch count" >"$out/$name.$b.migrated.err"
  elif [ "$n" -eq 0 ]; then
    echo "$name $b migrated rc=skip wall_s=0 pass=- note=no-launches" >>"$out/runs.txt"
    : >"$out/$name.$b.migrated.out"
    echo "skipped: the program launches no kernel" >"$out/$name.$b.migrated.err"
  else
    for pct in ${MIGRATE_PCTS:-50}; do
      k=$(( n * pct / 100 ))
      [ "$k" -ge 1 ] || k=1
      mode=migrated
      [ "$pct" = 50 ] || mode=migrated$pct
      if [ "${ROUND_TRIP:-0}" = 1 ]; then # (k = 1: in and out before the first launch)
        run_one "$name" "$b" "$mode" "FERRY_MIGRATE_AT=0:0:launch=$(( k / 2 ? k / 2 : 1 )),0:$devices:launch=$k"
      else
        run_one "$name" "$b" "$mode" "FERRY_MIGRATE_AT=0:$target:launch=$k"
      fi
    done
  fi
  for m in native ferry migrated; do
    r="$r $m:$(awk -v n="$name" -v b="$b" -v m="$m" '$1 == n && $2 == b && $3 == m {print $4; exit}' "$out/runs.txt" | sed 's/rc=//')"
  done
  printf '[%4ds] %-28s %-6s%s\n' $(( $(date +%s) - t_start )) "$name" "$b" "$r"
}
export -f run_one job

# A last guard: xargs itself is stopped a little after the deadline.
timeout -k 10 $(( DEADLINE_S + 30 )) \
  xargs -a "$work/jobs.txt" -r -P "$PAR" -L 1 bash -c 'for b in "${@:2}"; do job "$1" "$b"; done' _
say "runs done: $(wc -l <"$out/runs.txt") lines in $out/runs.txt"

if command -v python3 >/dev/null; then
  timeout 60 python3 "$here/report.py" "$out" >"$out/report.md" 2>"$out/report.err" &&
    say "report: $out/report.md" && grep -E '^(\*\*|summary|- )' "$out/report.md" | head -n 20
fi
say "finished"
exit 0
