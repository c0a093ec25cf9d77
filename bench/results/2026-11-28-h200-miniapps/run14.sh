#!/bin/bash
# Session 2026-11-28c, GPU run 14 (one H200): miniFE after the batched hashes/gathers of large shadows; native twice (is it deterministic?)
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
t0=$(date +%s); say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0
M=.gpu/miniapps
for a in minife_static minife_shared; do
  say $a
  APPS=$a MODE=native timeout 100 bash $M/run.sh > /tmp/mb_native_$a.txt 2>&1
  APPS=$a MODE=native2 timeout 100 bash $M/run.sh > /tmp/mb_native2_$a.txt 2>&1
  APPS=$a MODE=remote RUNNER="env FERRY_DEVICES=$url0 FERRY_STATS=1 $GA/bin/ferry run --" timeout 150 bash $M/run.sh > /tmp/mb_remote_$a.txt 2>&1
  n=$(sed -n 's/.*device=0 launches=\([0-9]*\).*/\1/p' /tmp/mb_remote_$a.txt | tail -n1)
  APPS=$a MODE=moved RUNNER="env FERRY_DEVICES=$url0 FERRY_MIGRATE_AT=0:0:launch=$(( ${n:-2} / 2 )) $GA/bin/ferry run --" timeout 150 bash $M/run.sh > /tmp/mb_moved_$a.txt 2>&1
  for m in native native2 remote moved; do echo "$a $m: $(grep '^wall' /tmp/mb_${m}_$a.txt) launches=$n moves=$(grep -c 'now runs on' /tmp/mb_${m}_$a.txt)"; grep "Final Resid" /tmp/mb_${m}_$a.txt | head -1; done
  grep -h "^ferry:" /tmp/mb_remote_$a.txt | cut -c1-400 | head -8
done
kill $server
say done
cd /tmp && tar cJf $O/run14.tar.xz mb_*.txt server.log 2>/dev/null
