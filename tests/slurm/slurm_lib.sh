# A throw-away single-node Slurm (munged, slurmctld, slurmd) in a directory
# of its own; sourced by tests/slurm/run.sh, not run. Needs root (slurmd
# runs jobs as their users) and Debian's packages (slurm_install).
#
# slurm_install: installs the packages if a command is missing (apt-get)
# slurm_start DIR [slurm.conf lines...]: writes DIR/etc/slurm.conf, starts
#   the daemons, waits until the node is idle; exports SLURM_CONF
# slurm_stop: stops what slurm_start started (by pid), waits for it

SLURM_PACKAGES="slurmctld slurmd slurm-client munge libslurm-dev"

slurm_have() {
  for c in slurmctld slurmd sbatch srun scancel squeue munged; do
    command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || return 1
  done
  [ -f /usr/include/slurm/spank.h ]
}

slurm_install() {
  slurm_have && return 0
  [ "$(id -u)" = 0 ] || return 1
  command -v apt-get >/dev/null 2>&1 || return 1
  # (no daemons get started by the packages here: there is no init to ask)
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    $SLURM_PACKAGES >"${1:-/dev/null}" 2>&1 ||
    { apt-get update >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        $SLURM_PACKAGES >>"${1:-/dev/null}" 2>&1; } || return 1
  slurm_have
}

# a free TCP port on loopback (python3: bind port 0)
slurm_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

slurm_munged_pid=
slurm_ctld_pid=
slurm_d_pid=

slurm_start() {
  sdir=$1
  shift
  mkdir -p "$sdir/etc" "$sdir/state" "$sdir/spool" "$sdir/log" "$sdir/munge"
  chmod 700 "$sdir/munge"
  # munge, with a key of its own and its socket in $sdir
  dd if=/dev/urandom of="$sdir/munge/munge.key" bs=1024 count=1 2>/dev/null
  chmod 400 "$sdir/munge/munge.key"
  /usr/sbin/munged --force --socket="$sdir/munge/munge.sock" \
    --key-file="$sdir/munge/munge.key" --pid-file="$sdir/munge/munged.pid" \
    --log-file="$sdir/log/munged.log" --seed-file="$sdir/munge/munged.seed" ||
    return 1
  slurm_munged_pid=$(cat "$sdir/munge/munged.pid")
  node=$(hostname -s)
  ctld_port=$(slurm_free_port)
  d_port=$(slurm_free_port)
  cat >"$sdir/etc/slurm.conf" <<EOF
ClusterName=ferrytest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sdir/munge/munge.sock
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=$sdir/state
SlurmdSpoolDir=$sdir/spool
SlurmctldPidFile=$sdir/slurmctld.pid
SlurmdPidFile=$sdir/slurmd.pid
SlurmctldLogFile=$sdir/log/slurmctld.log
SlurmdLogFile=$sdir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
MinJobAge=30
InactiveLimit=0
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=30
GresTypes=gpu
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 Gres=gpu:1 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  for line in "$@"; do printf '%s\n' "$line" >>"$sdir/etc/slurm.conf"; done
  # one "local GPU": a GRES with a device file every machine has (no cgroups
  # constrain it); jobs that ask for --gres=gpu:1 get SLURM_JOB_GPUS=0
  printf 'AutoDetect=off\nNodeName=%s Name=gpu File=/dev/null\n' "$node" >"$sdir/etc/gres.conf"
  export SLURM_CONF="$sdir/etc/slurm.conf"
  /usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >"$sdir/log/slurmctld.out" 2>&1 &
  slurm_ctld_pid=$!
  /usr/sbin/slurmd -D -f "$SLURM_CONF" >"$sdir/log/slurmd.out" 2>&1 &
  slurm_d_pid=$!
  i=0
  until sinfo -h -N -o '%T' 2>/dev/null | grep -qx idle; do
    i=$((i + 1))
    if [ $i -gt 300 ] || ! kill -0 "$slurm_ctld_pid" 2>/dev/null || ! kill -0 "$slurm_d_pid" 2>/dev/null; then
      echo "slurm did not come up:"
      tail -n 20 "$sdir/log/slurmctld.log" "$sdir/log/slurmd.log" "$sdir/log/"*.out 2>/dev/null
      return 1
    fi
    sleep 0.1
  done
}

# slurm_stop: the daemons, by their pids (slurmd first: it ends the steps it runs)
slurm_stop() {
  for p in $slurm_d_pid $slurm_ctld_pid; do
    kill "$p" 2>/dev/null
    i=0
    while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  slurm_d_pid= slurm_ctld_pid=
  if [ -n "$slurm_munged_pid" ]; then
    kill "$slurm_munged_pid" 2>/dev/null
    i=0
    while kill -0 "$slurm_munged_pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 "$slurm_munged_pid" 2>/dev/null
    slurm_munged_pid=
  fi
}
