#!/bin/bash
# Session 2026-11-28c, GPU run 22 (one H200): frees at exit after a move into the process (exit_free, miniFE static moved)
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0
timeout 60 $G/apps/exit_free > /tmp/ef_n.txt 2>&1; echo "exit_free native rc=$?"; grep "at exit" /tmp/ef_n.txt
FERRY_DEVICES=$url0 timeout 60 $G/bin/ferry run -- $G/apps/exit_free > /tmp/ef_r.txt 2>&1; echo "exit_free remote rc=$?"; grep "at exit" /tmp/ef_r.txt
FERRY_DEVICES=$url0 FERRY_MIGRATE_AT=0:0:launch=5 timeout 60 $G/bin/ferry run -- $G/apps/exit_free > /tmp/ef_m.txt 2>&1; echo "exit_free moved rc=$?"; grep "at exit\|now runs" /tmp/ef_m.txt
M=.gpu/miniapps
APPS=minife_static MODE=moved RUNNER="env FERRY_DEVICES=$url0 FERRY_MIGRATE_AT=0:0:launch=1012 $GA/bin/ferry run --" timeout 150 bash $M/run.sh > /tmp/mf_moved.txt 2>&1
grep -E "wall|Final Resid|rror|now runs" /tmp/mf_moved.txt | head -5
kill $server
cd /tmp && tar cJf $O/run22.tar.xz ef_*.txt mf_moved.txt
