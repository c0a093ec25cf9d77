#!/bin/sh
# ferry under a real single-node Slurm (Debian's slurmctld, slurmd, munge,
# configured here, in a temporary directory): the SPANK plugin
# (slurm/ferry_spank.c) gives jobs FERRY_DEVICES from a ferry.conf, and its
# job epilog runs slurm/ferry-slurm-hook, which moves a running program onto
# the local GPU a job just gave back. ferry-server and the "local GPU" are
# ferry's CPU simulation (FERRY_LOCAL_BACKEND=sim), the local GPU a GRES
# (gpu:1, File=/dev/null).
#   migrate  a job holds local GPU 0, a second runs on one ferry GPU; when
#            the first ends, the hook moves the second onto GPU 0 while it
#            runs; it finishes with the results of a run without migration
#   full     the same with a local GPU too small: the migration fails, the
#            job goes on remotely and finishes; the Slurm log says why
#   cancel   scancel while the job migrates: no process, control socket,
#            server session or allocation record is left
# usage: run.sh BUILD_DIR
# Needs root (slurmd); installs the packages with apt-get if missing. Exit
# status 77 (skipped) where Slurm can be neither found nor installed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
. "$here/slurm_lib.sh"

if [ "$(id -u)" != 0 ]; then
  echo "slurm: SKIP: needs root (slurmd runs the jobs; CI runs as root)"
  exit 77
fi
t_start=$(date +%s)
if ! slurm_have; then
  command -v apt-get >/dev/null 2>&1 || { echo "slurm: SKIP: no Slurm and no apt-get"; exit 77; }
  echo "slurm: installing $SLURM_PACKAGES"
  slurm_install /tmp/ferry-slurm-apt.log || {
    echo "slurm: FAIL: cannot install $SLURM_PACKAGES:"
    tail -n 20 /tmp/ferry-slurm-apt.log
    exit 1
  }
  echo "slurm: installed in $(($(date +%s) - t_start)) s"
fi
command -v python3 >/dev/null 2>&1 || { echo "slurm: FAIL: no python3 (ferry-slurm-hook needs it)"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-slurm.XXXXXX")
chmod 755 "$work"
e2e_name=slurm
case_name=setup
. "$src/tests/e2e/lib.sh"
# lib.sh's cleanup, after every job is gone and the daemons are stopped
slurm_cleanup() {
  if [ -n "$slurm_ctld_pid" ]; then
    scancel --full $(squeue -h -o %i 2>/dev/null) 2>/dev/null
    i=0
    while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $i -lt 150 ]; do sleep 0.2; i=$((i + 1)); done
  fi
  [ -z "${stopped_pid:-}" ] || kill -CONT "$stopped_pid" 2>/dev/null
  slurm_stop
  cleanup
}
trap slurm_cleanup EXIT
trap 'exit 1' INT TERM
fail() {
  echo "slurm $case_name: FAIL: $*"
  for f in "$work"/*.log "$work"/*.out "$work"/*.err "$work"/slurm/log/slurmd.log; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }
  done
  exit 1
}

# the plugin, from its source, as a site would build it
cc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -o "$work/ferry_spank.so" "$src/slurm/ferry_spank.c" \
  2>"$work/cc.log" || fail "the SPANK plugin does not build"

start_sim_server
cat >"$work/ferry.conf" <<EOF
# written by tests/slurm/run.sh
server tcp://127.0.0.1:$port gpus=0 slots=4
state_dir $work/state
control_dir $work/ctl
max_gpus 2
policy oldest
ferry $bin/ferry
migrate_timeout 120
log $work/hook.log
EOF
echo "required $work/ferry_spank.so conf=$work/ferry.conf hook=$src/slurm/ferry-slurm-hook" >"$work/plugstack.conf"

t0=$(date +%s)
slurm_start "$work/slurm" "PlugStackConfig=$work/plugstack.conf" "MailProg=/bin/true" ||
  fail "Slurm did not start"
echo "slurm: Slurm up in $(($(date +%s) - t0)) s"
slog=$work/slurm/log/slurmd.log

# jobs see the simulation as their local GPU (sbatch passes the environment on)
export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so"
unset FERRY_DEVICES FERRY_CONTROL_DIR FERRY_MIGRATE_AT FERRY_FAULT FERRY_SIM_TOTAL_MEM FERRY_MHELPER

# a job that holds the local GPU until $work/stop.LABEL exists
gpu_job() {
  label=$1
  cat >"$work/$label.sh" <<EOF
#!/bin/sh
echo "gpus \$SLURM_JOB_GPUS"
while [ ! -e "$work/stop.$label" ]; do sleep 0.1; done
EOF
  sbatch --parsable -J "$label" --gres=gpu:1 -o "$work/$label.out" -e "$work/$label.err" \
    "$work/$label.sh" || fail "sbatch of $label failed"
}

# a job on one ferry GPU: migrate_iter until $work/stop.LABEL exists
ferry_job() {
  label=$1
  shift
  cat >"$work/$label.sh" <<EOF
#!/bin/sh
echo "FERRY_DEVICES=\$FERRY_DEVICES"
echo "FERRY_CONTROL_DIR=\$FERRY_CONTROL_DIR"
LD_PRELOAD="${FERRY_PRELOAD:-}" exec "$bin/ferry" run -- "$apps/migrate_iter" 1000000 2000 "$work/stop.$label"
EOF
  sbatch --parsable -J "$label" --ferry-gpus=1 "$@" -o "$work/$label.out" -e "$work/$label.err" \
    "$work/$label.sh" || fail "sbatch of $label failed"
}

job_state() { squeue -h -j "$1" -o %T 2>/dev/null; }
job_gone() { [ -z "$(job_state "$1")" ]; }
wait_job_gone() { wait_for "job $1 ($2) to end" job_gone "$1"; }
running_remotely() { grep -q "running pid" "$work/$1.out"; }

# starts gpu job $1 and ferry job $2 (extra sbatch args after), waits until
# the second runs remotely: $gjob, $fjob, $pid, $sock
start_pair() {
  gjob=$(gpu_job "$1")
  [ -n "$gjob" ] || fail "sbatch of $1 failed"
  wait_for "$1 to hold the GPU" grep -q "^gpus 0" "$work/$1.out"
  g=$2
  shift 2
  fjob=$(ferry_job "$g" "$@")
  [ -n "$fjob" ] || fail "sbatch of $g failed"
  wait_for "$g to run" running_remotely "$g"
  pid=$(sed -n 's/.* running pid \([0-9]*\).*/\1/p' "$work/$g.out")
  sock=$work/ctl/0/ferry-$pid.sock
  wait_for "the control socket of $g" test -S "$sock"
  grep -qx "FERRY_DEVICES=tcp://127.0.0.1:$port/0" "$work/$g.out" || fail "$g got $(grep FERRY_DEVICES "$work/$g.out")"
  grep -qx "tcp://127.0.0.1:$port/0" "$work/state/job.$fjob" || fail "no allocation record for job $fjob"
  FERRY_CONTROL_DIR=$work/ctl/0 "$bin/ferry" ls --json >"$work/ls.json" 2>&1
  grep -q "\"pid\": *$pid" "$work/ls.json" || fail "ferry ls --json does not list pid $pid"
  grep -q '"backend": *"remote"' "$work/ls.json" || fail "pid $pid does not run remotely"
}

# the checksum of migrate_iter N without migration, outside Slurm
reference() {
  FERRY_CONTROL=off FERRY_DEVICES=tcp://127.0.0.1:$port/0 app timeout 120 "$bin/ferry" run -- \
    "$apps/migrate_iter" "$1" >"$work/ref.out" 2>"$work/ref.err" || fail "reference run failed"
  sed -n 's/^checksum: //p' "$work/ref.out"
}

# finish_job LABEL JOB: stops the program, waits for the job's end; checks
# its own result and the checksum against a run without migration
finish_job() {
  touch "$work/stop.$1"
  wait_job_gone "$2" "$1"
  grep -q "^PASSED" "$work/$1.out" || fail "$1 did not pass"
  n=$(sed -n 's/^iterations: //p' "$work/$1.out")
  got=$(sed -n 's/^checksum: //p' "$work/$1.out")
  want=$(reference "$n")
  [ -n "$got" ] && [ "$got" = "$want" ] || fail "$1: checksum $got after $n iterations, $want without migration"
  wait_for "job $2's allocation record to go" test ! -e "$work/state/job.$2"
}

# ---- migrate ----
case_name=migrate
start_pair gpuA ferryB
touch "$work/stop.gpuA"
wait_job_gone "$gjob" gpuA
wait_for "the hook to move ferryB" grep -q "now runs on local GPU 0" "$work/ferryB.err"
grep -q "ferry: job $gjob: ferry-slurm-hook: job $gjob ended: local GPU 0 free; policy oldest picks pid $pid vgpu 0" "$slog" ||
  fail "the Slurm log lacks the hook's decision"
grep -q "ferry: job $gjob: ferry-slurm-hook: migrated pid $pid vgpu 0 onto local GPU 0" "$slog" ||
  fail "the Slurm log lacks the migration's result"
running "$pid" || fail "ferryB ended with the migration"
FERRY_CONTROL_DIR=$work/ctl/0 "$bin/ferry" status --pid "$pid" --json >"$work/status.log" 2>&1
grep -q '"backend": *"local"' "$work/status.log" || fail "ferryB does not run locally after the migration"
sleep 0.5 # it goes on locally for a while
finish_job ferryB "$fjob"
[ "$(grep -c "now runs on local GPU" "$work/ferryB.err")" = 1 ] || fail "not exactly one migration"
grep -q "^device memory in use at exit: 0$" "$work/ferryB.out" || fail "ferryB left device memory"
echo "slurm migrate: ok ($(($(date +%s) - t0)) s)"

# ---- full: the local GPU is too small ----
case_name=full
start_pair gpuC ferryD --export=ALL,FERRY_SIM_TOTAL_MEM=$((6 << 20))
touch "$work/stop.gpuC"
wait_job_gone "$gjob" gpuC
wait_for "the hook's verdict" grep -q "ferry: job $gjob: ferry-slurm-hook: migration of pid $pid vgpu 0 onto local GPU 0 failed, it goes on remotely: " "$slog"
line=$(grep "ferry: job $gjob: ferry-slurm-hook: migration of pid $pid vgpu 0 onto local GPU 0 failed" "$slog")
echo "$line" | grep -Eqi "memory|full" || fail "the Slurm log does not say the GPU is full: $line"
grep -q "migration of device 0 to local GPU 0 failed" "$work/ferryD.err" || fail "ferryD does not report the failed migration"
running "$pid" || fail "ferryD ended with the failed migration"
sleep 0.3
finish_job ferryD "$fjob"
! grep -q "now runs on local GPU" "$work/ferryD.err" || fail "ferryD moved after all"
echo "slurm full: ok ($(($(date +%s) - t0)) s)"

# ---- cancel: scancel while the job migrates ----
case_name=cancel
sessions_before=$(pgrep -P "$server_pid" | wc -l)
start_pair gpuE ferryF
session=$(pgrep -P "$server_pid" | sort -n | tail -n 1)
[ -n "$session" ] || fail "no session process of ferry-server for ferryF"
# the session stops answering: the migration, once begun, waits for it
stopped_pid=$session
kill -STOP "$session"
touch "$work/stop.gpuE"
migrating() {
  FERRY_CONTROL_DIR=$work/ctl/0 "$bin/ferry" status --pid "$pid" --json 2>/dev/null |
    tr -d '\n' | grep -q '"state": *"running"'
}
wait_for "ferryF's migration to begin" migrating
scancel "$fjob"
kill -CONT "$session"
stopped_pid=
wait_job_gone "$fjob" ferryF
wait_job_gone "$gjob" gpuE
! kill -0 "$pid" 2>/dev/null || fail "ferryF's program (pid $pid) is still there"
wait_for "ferryF's server session to end" sh -c "! kill -0 $session 2>/dev/null"
[ "$(pgrep -P "$server_pid" | wc -l)" = "$sessions_before" ] || fail "ferry-server has sessions left: $(pgrep -P "$server_pid" | tr '\n' ' ')"
wait_for "the control socket $sock to go" test ! -e "$sock"
wait_for "job $fjob's allocation record to go" test ! -e "$work/state/job.$fjob"
grep -q "ferry: job $gjob: ferry-slurm-hook: migration of pid $pid vgpu 0 onto local GPU 0 failed" "$slog" ||
  fail "the Slurm log lacks the cancelled migration"
! pgrep -f "ferry migrate --pid $pid " >/dev/null || fail "a ferry migrate is left"
echo "slurm cancel: ok ($(($(date +%s) - t0)) s)"

case_name=teardown
echo "slurm: what the plugin and the hook wrote to the Slurm log:"
grep "ferry: " "$slog" | sed 's/^/  /'
echo "slurm: PASSED in $(($(date +%s) - t_start)) s"
exit 0
