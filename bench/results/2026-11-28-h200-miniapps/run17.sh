#!/bin/bash
# Session 2026-11-28c, GPU run 17 (one H200): miniFE shared remotely, diagnosed (server FERRY_SYNC_LAUNCHES=1, client FERRY_DEBUG=1)
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
. bench/server_start.sh
export FERRY_SYNC_LAUNCHES=1; server_start $G/bin /tmp/server.log --backend cuda; unset FERRY_SYNC_LAUNCHES
url0=tcp://127.0.0.1:$port/0
M=.gpu/miniapps
APPS=minife_shared MODE=remote RUNNER="env FERRY_DEVICES=$url0 FERRY_DEBUG=1 $GA/bin/ferry run --" timeout 150 bash $M/run.sh > /tmp/mf_dbg.txt 2>&1
grep -E "wall|Final Resid|rror|shadow|pinned|alias|registered" /tmp/mf_dbg.txt | grep -v "Iteration" | head -20
grep -E "failed|launch of" /tmp/server.log | head -5
APPS=minife_shared MODE=remote RUNNER="env FERRY_DEVICES=$url0 $GA/bin/ferry run --" timeout 150 bash $M/run.sh > /tmp/mf_plain.txt 2>&1
grep -E "wall|Final Resid|rror" /tmp/mf_plain.txt | head -5
kill $server
cd /tmp && grep -v "Iteration" mf_dbg.txt | head -400 > mf_dbg_head.txt; tar cJf $O/run17.tar.xz mf_dbg_head.txt mf_plain.txt server.log
