#!/bin/sh
# Mapped (zero-copy) host memory end to end: tests/apps/mapped through
# ferry over TCP to a ferry-server on the CPU simulation, where its kernels
# reach shadows of the program's pinned buffers; FERRY_STATS shows that
# pages nobody changed never travel; and the program moved mid-loop into
# the process, onto a ferry-mhelper (both reach the host memory itself),
# to another server, and from the process back to a server, each with the
# checksum of a run that did not move.
# usage: mapped.sh BUILD_DIR CASE
#   FERRY_MIGRATE_KS="k1 k2 ..." replaces the random launch counts.
set -u
build=$(cd "$1" && pwd)
case_name=$2
helper_policy=
case $case_name in
*_helper) case_name=${case_name%_helper} helper_policy=always ;;
esac
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-mapped.XXXXXX")
e2e_name="e2e mapped"
. "$(dirname "$0")/lib.sh"
local_sim

stat_of() { sed -n "s/.*stats: device=0 mapped_host_blocks=.* $2=\([0-9]*\).*/\1/p" "$work/$1.err" | head -n 1; }

launch_counts() {
  if [ -n "${FERRY_MIGRATE_KS:-}" ]; then
    echo "$FERRY_MIGRATE_KS"
    return
  fi
  r=$(shuf -i 2-"$1" -n 3 | tr '\n' ' ')
  echo "1 $(($1 / 2)) $1 ${r% }"
}

reference() {
  rc=$(FERRY_CONTROL=off run ref mapped "$1")
  passed ref "$rc"
  want=$(value ref checksum)
  launches=$(value ref launches)
  [ -n "$want" ] && [ "${launches:-0}" -gt 20 ] || fail "ref: no checksum or too few launches"
}

case $case_name in
remote)
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
  for iters in 6 12; do
    rc=$(FERRY_STATS=1 run "r$iters" mapped "$iters")
    passed "r$iters" "$rc"
    expect_not_in "r$iters.err" "not supported"
    # the host writes the big buffer while a kernel on it runs: a kernel
    # polling such memory would never see it remotely, said once
    n=$(grep -c "the host changed pinned memory at 0x[0-9a-f]* while kernels that may read it run" "$work/r$iters.err")
    [ "$n" = 1 ] || fail "r$iters: the unseen host change said $n times, want once"
  done
  # the 8 MiB buffer has 32 of its 2048 pages poked per iteration (plus
  # the page the host writes beside a poke): what travels grows with the
  # changed pages, never with the buffer
  in6=$(stat_of r6 mapped_in) in12=$(stat_of r12 mapped_in)
  out6=$(stat_of r6 mapped_out) out12=$(stat_of r12 mapped_out)
  [ -n "$in6" ] && [ -n "$in12" ] && [ -n "$out6" ] && [ -n "$out12" ] || fail "FERRY_STATS has no mapped_in/mapped_out line"
  per_iter_in=$(((in12 - in6) / 6)) per_iter_out=$(((out12 - out6) / 6))
  echo "per iteration: $per_iter_in bytes came back, $per_iter_out went out"
  # came back: b and a (16 KiB each, every word changes), 32 poked pages
  # of big: 160 KiB; went out: a twice and the page beside a poke
  [ "$per_iter_in" -le $((200 * 1024)) ] || fail "$per_iter_in bytes came back per iteration: unchanged pages travel"
  [ "$per_iter_out" -le $((64 * 1024)) ] || fail "$per_iter_out bytes went out per iteration: unchanged pages travel"
  [ "$per_iter_in" -ge $((32 * 4096)) ] || fail "only $per_iter_in bytes came back per iteration: the pokes cannot all have"
  # synchronizations after the mapped memory's last work is done check
  # nothing: 40 more of them, with no work on mapped memory, add no check
  rc=$(FERRY_STATS=1 run idle0 mapped 4 0)
  passed idle0 "$rc"
  rc=$(FERRY_STATS=1 run idle40 mapped 4 40)
  passed idle40 "$rc"
  c0=$(stat_of idle0 mapped_checks) c40=$(stat_of idle40 mapped_checks)
  [ -n "$c0" ] && [ -n "$c40" ] || fail "FERRY_STATS has no mapped_checks"
  [ "$c40" -le $((c0 + 1)) ] || fail "40 idle synchronizations made $((c40 - c0)) more checks of mapped memory"
  ;;
migrate)
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
  reference 8
  ks=$(launch_counts "$launches")
  echo "$launches launches; migrating at launch $ks (FERRY_MIGRATE_KS=\"$ks\" repeats this)"
  for k in $ks; do
    rc=$(FERRY_MIGRATE_AT=0:0:launch=$k run "at$k" mapped 8)
    passed "at$k" "$rc"
    same_checksum "at$k"
    migrated "at$k"
  done
  ;;
managed)
  # managed memory: remote, then moved in every direction mid-loop
  start_sim_server
  a="tcp://127.0.0.1:$port/0"
  export FERRY_DEVICES="$a"
  start_sim_server
  b="tcp://127.0.0.1:$port/0"
  rc=$(FERRY_CONTROL=off FERRY_STATS=1 run mref managed 10)
  passed mref "$rc"
  expect_in mref.out "^managedMemory: 1 concurrentManagedAccess: 0$"
  expect_not_in mref.err "not supported"
  want=$(value mref checksum)
  launches=$(value mref launches)
  k1=$((launches / 4)) k2=$((launches / 2)) k3=$((launches * 3 / 4))
  for k in 1 $k2 $launches; do
    rc=$(FERRY_MIGRATE_AT=0:0:launch=$k run "m$k" managed 10)
    passed "m$k" "$rc"
    same_checksum "m$k"
    migrated "m$k"
  done
  rc=$(FERRY_MHELPER=always FERRY_MIGRATE_AT=0:0:launch=$k2 run mh managed 10)
  passed mh "$rc"
  same_checksum mh
  # a prefetch to the device moves the pages at once: no work follows it
  rc=$(FERRY_STATS=1 run pf managed prefetch)
  [ "$rc" = 0 ] || fail "pf exited $rc"
  [ "$(stat_of pf mapped_out)" = "$(value pf prefetched)" ] ||
    fail "pf: $(stat_of pf mapped_out) bytes went out for a prefetch of $(value pf prefetched)"
  rc=$(FERRY_MIGRATE_AT="0:$b:launch=$k1,0:0:launch=$k2,0:$a:launch=$k3" run mchain managed 10)
  passed mchain "$rc"
  same_checksum mchain
  [ "$(grep -c "now runs on" "$work/mchain.err")" = 3 ] || fail "mchain: expected three moves"
  ;;
poll_bound)
  # a wait that a kernel polling pinned memory would hold for ever is
  # bounded: with the work never done (FERRY_FAULT=mapped_wait), the wait
  # fails after FERRY_MAPPED_WAIT_S with cudaErrorLaunchTimeout and a line
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
  rc=$(FERRY_FAULT=mapped_wait FERRY_MAPPED_WAIT_S=0.2 run bound mapped 6)
  [ "$rc" = 3 ] || fail "bound: exited $rc, expected 3 (a CUDA error)"
  expect_in bound.out "^FAIL .* -> cudaErrorLaunchTimeout$"
  expect_in bound.err "waited 0.2 s for kernels that may be polling pinned memory at 0x[0-9a-f]*, which the host changed while they ran"
  # no limit: the wait blocks as CUDA's does (and here ends)
  rc=$(FERRY_FAULT=mapped_wait FERRY_MAPPED_WAIT_S=0 run unbounded mapped 6)
  passed unbounded "$rc"
  # a limit that is no number is refused in one line; the default holds
  rc=$(FERRY_MAPPED_WAIT_S=soon run badlimit mapped 6)
  passed badlimit "$rc"
  expect_in badlimit.err "FERRY_MAPPED_WAIT_S=soon ignored"
  ;;
managed_racy)
  # the host writes a page a running kernel writes: with
  # concurrentManagedAccess = 0 CUDA forbids it; ferry says so at the
  # synchronization instead of merging the bytes silently
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
  rc=$(run racy managed racy)
  [ "$rc" = 0 ] || fail "managed racy exited $rc"
  expect_in racy.out "^racy: cudaErrorIllegalState$"
  expect_in racy.err "the host wrote managed memory at 0x[0-9a-f]* while a kernel that may use it was running"
  ;;
managed_lost)
  # the server dies while pages of managed memory come and go: the program
  # gets an error at its next call and ends, it never hangs nor reads
  # stale pages as if nothing happened
  start_sim_server
  export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
  app timeout 120 "$bin/ferry" run -- "$apps/managed" 1000000 >"$work/lost.out" 2>"$work/lost.err" &
  app=$!
  wait_for "managed to run" grep -q running "$work/lost.out"
  kill_server
  wait "$app"
  rc=$?
  [ "$rc" = 3 ] || fail "managed exited $rc, expected 3 (a CUDA error)"
  expect_in lost.out "^FAIL .* -> cudaErrorDevicesUnavailable"
  expect_not_in lost.out "^PASSED"
  expect_in lost.err "lost connection"
  ;;
servers)
  # to another server and back, and from the process back to a server
  start_sim_server
  a="tcp://127.0.0.1:$port/0"
  export FERRY_DEVICES="$a"
  start_sim_server
  b="tcp://127.0.0.1:$port/0"
  reference 8
  k1=$((launches / 4)) k2=$((launches / 2)) k3=$((launches * 3 / 4))
  rc=$(FERRY_MIGRATE_AT="0:$b:launch=$k1,0:$a:launch=$k2" run rr mapped 8)
  passed rr "$rc"
  same_checksum rr
  [ "$(grep -c "now runs on tcp://" "$work/rr.err")" = 2 ] || fail "rr: expected two moves between servers"
  rc=$(FERRY_MIGRATE_AT="0:0:launch=$k1,0:$b:launch=$k2,0:0:launch=$k3" run lrl mapped 8)
  passed lrl "$rc"
  same_checksum lrl
  [ "$(grep -c "now runs on tcp://" "$work/lrl.err")" = 1 ] || fail "lrl: expected one move back to a server"
  expect_not_in lrl.err "migration of device .* failed"
  ;;
*)
  echo "unknown case $case_name"
  exit 2
  ;;
esac
echo "$e2e_name $case_name${helper_policy:+_helper}: PASS"
