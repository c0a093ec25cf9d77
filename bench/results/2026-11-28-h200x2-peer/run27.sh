#!/bin/bash
# Session 2026-11-28d, GPU run 27 (two H200s): memory pool IPC across the two GPUs (tests/apps/pool_ipc), the IPC
# samples' other builds; miniFE static remotely with FERRY_STATS. (Runs 25-26 ran out of time on this script's own
# bug: a bare `wait` that waited for the server.) Output lands in $OUT as it comes.
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
. bench/server_start.sh
server_start $G/bin $O/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0 url1=tcp://127.0.0.1:$port/1
F="$GA/bin/ferry run --"
R=/tmp/r27; mkdir -p $R/h $R/hn; tar xJf .gpu/ipc.tar.xz -C $R
(FERRY_DEVICES=$url0 timeout -k 2 25 $F $GA/apps/pool_ipc export $R/h > $O/pool_exp_f.txt 2>&1; echo "pool_ipc export ferry rc=$?" >> $O/log.txt) &
bg=$!
FERRY_DEVICES=$url1 timeout -k 2 25 $F $GA/apps/pool_ipc import $R/h > $O/pool_imp_f.txt 2>&1; echo "pool_ipc import (other GPU) ferry rc=$?" >> $O/log.txt
wait $bg
for s in streamOrderedAllocationIPC simpleIPC memMapIPCDrv; do for b in static shared; do
  [ $s$b = streamOrderedAllocationIPCstatic ] && continue
  [ $s$b = simpleIPCstatic ] && continue
  (cd $R/$s && FERRY_DEVICES=$url0,$url1 timeout -k 2 25 $F ./$s.$b > $O/s_${s}_${b}_f.txt 2>&1; echo "$s $b ferry rc=$?" >> $O/log.txt)
done; done
M=.gpu/miniapps
APPS="minife_static" MODE=remote RUNNER="env FERRY_DEVICES=$url0 FERRY_STATS=1 $GA/bin/ferry run --" timeout -k 2 60 bash $M/run.sh > $O/mf_stats.txt 2>&1
cp .gpu/miniapps/minife/minife_static.out $O/mf_stats_program.txt 2>/dev/null
kill $server
cat $O/log.txt
