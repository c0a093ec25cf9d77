#!/bin/bash
# Session 2026-11-28c, GPU run 11 (one H200): NCCL with one rank through ferry; DDP (one rank) native / remote / moved
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
t0=$(date +%s); say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi -L
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
srv1=$server url0=tcp://127.0.0.1:$port/0
server_start $G/bin /tmp/server2.log --backend cuda
srv2=$server url2=tcp://127.0.0.1:$port/0
export NCCL_NVLS_ENABLE=0 NCCL_PROBE_RANKS=1 NCCL_PROBE_NATIVE_GPUS=0
say nccl
NCCL_DEBUG=INFO timeout 90 python3 bench/frameworks/nccl_probe.py 268435456 >/tmp/nccl1_n.txt 2>&1; echo "nccl native rc=$?"
grep -E "step" /tmp/nccl1_n.txt
FERRY_DEVICES=$url0 NCCL_DEBUG=INFO FERRY_MAPPED_WAIT_S=20 FERRY_STATS=1 timeout 120 $G/bin/ferry run -- python3 bench/frameworks/nccl_probe.py 268435456 >/tmp/nccl1_f.txt 2>&1; echo "nccl ferry rc=$?"
grep -E "step|WARN|^ferry:" /tmp/nccl1_f.txt | grep -v stats | sort | uniq -c | sort -rn | head -20
say ddp
for m in mlp cnn; do
  timeout 90 python3 bench/frameworks/ddp_train.py $m 40 >/tmp/ddp_${m}_n.txt 2>&1; echo "ddp $m native rc=$?"
  FERRY_DEVICES=$url0 FERRY_STATS=1 timeout 120 $G/bin/ferry run -- python3 bench/frameworks/ddp_train.py $m 40 >/tmp/ddp_${m}_f.txt 2>&1; echo "ddp $m remote rc=$?"
  launches=$(sed -n 's/.*device=0 launches=\([0-9]*\).*/\1/p' /tmp/ddp_${m}_f.txt | sort -n | tail -n1)
  echo "launches $launches"
  for to in 0 $url2; do
    tag=$([ "$to" = 0 ] && echo local || echo server2)
    FERRY_DEVICES=$url0 FERRY_MIGRATE_AT=0:$to:launch=$((launches / 2)) timeout 120 $G/bin/ferry run -- python3 bench/frameworks/ddp_train.py $m 40 >/tmp/ddp_${m}_m$tag.txt 2>&1; echo "ddp $m moved to $tag rc=$? moves=$(grep -c 'now runs on' /tmp/ddp_${m}_m$tag.txt)"
  done
  grep -h "result" /tmp/ddp_${m}_*.txt
  for f in /tmp/ddp_${m}_f.txt /tmp/ddp_${m}_m*.txt; do
    diff <(grep "loss" /tmp/ddp_${m}_n.txt | sed 's/ ms .*//') <(grep "^rank.*loss" $f | sed 's/ ms .*//') >/dev/null && echo "$f: losses identical" || echo "$f: losses differ"
  done
  grep -h "^ferry:" /tmp/ddp_${m}_*.txt | grep -v stats | sort | uniq -c | head
done
kill $srv1 $srv2
say done
cd /tmp && tar cJf $O/run11.tar.xz nccl1_*.txt ddp_*.txt server.log server2.log 2>/dev/null
