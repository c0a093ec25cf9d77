#!/bin/bash
# Session 2026-11-28c, GPU run 12 (one H200): mini-apps (CoMD-CUDA, miniFE) native / remote / moved; copies with the default streams
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
t0=$(date +%s); say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi -L
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0
M=.gpu/miniapps
for a in comd_static comd_shared minife_static minife_shared; do
  say $a
  APPS=$a MODE=native timeout 100 bash $M/run.sh > /tmp/ma_native_$a.txt 2>&1
  APPS=$a MODE=remote RUNNER="env FERRY_DEVICES=$url0 FERRY_STATS=1 $GA/bin/ferry run --" timeout 150 bash $M/run.sh > /tmp/ma_remote_$a.txt 2>&1
  n=$(sed -n 's/.*device=0 launches=\([0-9]*\).*/\1/p' /tmp/ma_remote_$a.txt | tail -n1)
  APPS=$a MODE=moved RUNNER="env FERRY_DEVICES=$url0 FERRY_MIGRATE_AT=0:0:launch=$(( ${n:-2} / 2 )) $GA/bin/ferry run --" timeout 150 bash $M/run.sh > /tmp/ma_moved_$a.txt 2>&1
  for m in native remote moved; do echo "$a $m: $(grep '^wall' /tmp/ma_${m}_$a.txt) launches=$n moves=$(grep -c 'now runs on' /tmp/ma_${m}_$a.txt)"; done
  for m in remote moved; do
    diff <(sed -n '/^--- result/,$p' /tmp/ma_native_$a.txt) <(sed -n '/^--- result/,$p' /tmp/ma_${m}_$a.txt) > /tmp/ma_diff_${m}_$a.txt && echo "$a $m: results identical" || echo "$a $m: results differ in $(grep -c '^<' /tmp/ma_diff_${m}_$a.txt) lines"
  done
  grep -h "^ferry:" /tmp/ma_remote_$a.txt | grep -v stats | sort | uniq -c | head -5
done
[ -f .gpu/run12_copies.sh ] && { say copies; bash .gpu/run12_copies.sh; }
kill $server
say done
cd /tmp && tar cJf $O/run12.tar.xz ma_*.txt copies 2>/dev/null server.log
