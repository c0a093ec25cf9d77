#!/bin/bash
# Session 2026-11-28c, GPU run 23 (one H200): miniFE remote with FERRY_STREAMS=1 against the default 4 (is its fault the striping?)
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0
M=.gpu/miniapps
for b in static shared; do for s in 1 4; do
  APPS=minife_$b MODE=s$s RUNNER="env FERRY_DEVICES=$url0 FERRY_STREAMS=$s FERRY_STATS=1 $GA/bin/ferry run --" timeout 100 bash $M/run.sh > /tmp/mf_${b}_s$s.txt 2>&1
  echo "$b streams=$s: $(grep -E '^wall' /tmp/mf_${b}_s$s.txt) $(grep -c IllegalAddress /tmp/mf_${b}_s$s.txt) $(grep -o 'Final Resid Norm: [0-9.e-]*' /tmp/mf_${b}_s$s.txt | head -1) $(grep -o 'mapped_out=[0-9]*' /tmp/mf_${b}_s$s.txt)"
done; done
kill $server
cd /tmp && tar cJf $O/run23.tar.xz mf_static_s*.txt mf_shared_s*.txt
