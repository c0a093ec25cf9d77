#!/bin/bash
# Session 2026-11-28d, GPU run 26 (two H200s): why run 25 ran out of time (IPC samples across two vGPUs), bounded;
# memory pool IPC (tests/apps/pool_ipc); miniFE static remotely with FERRY_STATS. Output lands in $OUT as it comes.
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
. bench/server_start.sh
server_start $G/bin $O/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0 url1=tcp://127.0.0.1:$port/1
F="$GA/bin/ferry run --"
R=/tmp/r26; mkdir -p $R/h $R/hn; tar xJf .gpu/ipc.tar.xz -C $R
NVRT=$(pwd)/.gpu/miniapps/lib
s=streamOrderedAllocationIPC
(cd $R/$s && timeout -k 2 20 ./$s.static > $O/soa_n.txt 2>&1; echo "soa static native rc=$?" >> $O/log.txt)
(cd $R/$s && FERRY_DEVICES=$url0,$url1 timeout -k 2 25 $F ./$s.static > $O/soa_f.txt 2>&1; echo "soa static ferry rc=$?" >> $O/log.txt)
ps aux | grep -c "$s" >> $O/log.txt; pkill -9 -f "$s" ; sleep 1
(cd $R/simpleIPC && FERRY_DEVICES=$url0,$url1 timeout -k 2 25 $F ./simpleIPC.static > $O/sipc_f.txt 2>&1; echo "simpleIPC static ferry rc=$?" >> $O/log.txt)
pkill -9 -f simpleIPC; sleep 1
(timeout -k 2 20 $G/apps/pool_ipc export $R/hn > $O/pool_exp_n.txt 2>&1; echo "pool_ipc export native rc=$?" >> $O/log.txt) &
timeout -k 2 20 $G/apps/pool_ipc import $R/hn > $O/pool_imp_n.txt 2>&1; echo "pool_ipc import native rc=$?" >> $O/log.txt; wait
(FERRY_DEVICES=$url0 timeout -k 2 25 $F $GA/apps/pool_ipc export $R/h > $O/pool_exp_f.txt 2>&1; echo "pool_ipc export ferry rc=$?" >> $O/log.txt) &
FERRY_DEVICES=$url1 timeout -k 2 25 $F $GA/apps/pool_ipc import $R/h > $O/pool_imp_f.txt 2>&1; echo "pool_ipc import (other GPU) ferry rc=$?" >> $O/log.txt; wait
M=.gpu/miniapps
APPS="minife_static" MODE=remote RUNNER="env FERRY_DEVICES=$url0 FERRY_STATS=1 $GA/bin/ferry run --" timeout -k 2 60 bash $M/run.sh > $O/mf_stats.txt 2>&1
cp .gpu/miniapps/minife/minife_static.out $O/mf_stats_program.txt 2>/dev/null
kill $server
cat $O/log.txt
