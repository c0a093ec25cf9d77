#!/bin/bash
# /init of the soft-RoCE test VM (tests/ib/run.sh): mounts the basics, puts an
# rxe device on a dummy interface (the VM has no network card, and rdma_cm
# cannot resolve routes on lo), finds the IPv4 GID, runs /payload/tests.sh
# and powers off. Lines starting with "### " are read by the host.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
echo 1 >/proc/sys/kernel/sysrq
ulimit -l unlimited # verbs pin memory
ip link set lo up
say() { echo "### $*"; }
finish() {
  say "DONE"
  sync
  echo o >/proc/sysrq-trigger
  sleep 30
}

echo # the console's escape sequences stay off the first "### " line
say "kernel $(uname -r) up after $(cut -d' ' -f1 /proc/uptime)s"
addr=192.0.2.1 # TEST-NET-1: nothing outside the VM anyway
setup_log=/tmp/rxe-setup.log
{
  modprobe dummy numdummies=0 &&
    ip link add dummy0 type dummy &&
    ip addr add $addr/24 dev dummy0 &&
    ip link set dummy0 mtu 9000 up &&
    modprobe crc32_generic &&
    { modprobe crc32_pclmul || true; } &&
    modprobe rdma_rxe &&
    modprobe rdma_ucm &&
    modprobe ib_uverbs &&
    rdma link add rxe0 type rxe netdev dummy0
} >$setup_log 2>&1
rc=$?
# (a 9000-byte MTU gives rxe 4096-byte packets: fewer packets for the
# emulated CPU; crc32_pclmul, when the CPU model has it, a faster ICRC)
# the GID table holds the IPv4-mapped address of dummy0 once rxe sees it
want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' $(echo $addr | tr . ' '))
gidx=
for try in 1 2 3 4 5 6 7 8 9 10; do
  # shell builtins only: the table has many entries and forks are slow under TCG
  for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
    read -r v <"$g" 2>/dev/null || continue
    [ "$v" = "$want" ] && { gidx=${g##*/}; break; }
  done
  [ -n "$gidx" ] && break
  sleep 1
done
if [ $rc = 0 ] && [ -n "$gidx" ]; then
  say "PASS rxe0 on dummy0 ($addr, GID index $gidx)"
else
  say "FAIL rxe0 on dummy0 (setup rc=$rc, GID index '${gidx}')"
  sed 's/^/### | /' $setup_log
  dmesg | grep -iE 'rxe|rdma|crc32' | tail -n 20 | sed 's/^/### | /'
  finish
fi
# benchmark rounds, from the kernel command line (tests/ib/run.sh)
for a in $(cat /proc/cmdline); do
  case $a in ferry.bench_rounds=*) export FERRY_BENCH_ROUNDS=${a#*=} ;; esac
done
export RXE_DEV=rxe0 RXE_GID_INDEX=$gidx RXE_ADDR=$addr
cd /payload && timeout 1200 ./tests.sh
rc=$?
[ $rc = 0 ] || say "FAIL in-VM test script exited $rc"
finish
