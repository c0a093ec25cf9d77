#!/bin/bash
# Session 2026-11-28c, GPU run 10 (one H200): NCCL with two ranks on one GPU, native and through ferry; mapped app
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
t0=$(date +%s); say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi -L
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0
export NCCL_NVLS_ENABLE=0
say mapped
FERRY_DEVICES=$url0 timeout 60 $G/bin/ferry run -- $G/apps/mapped > /tmp/mapped_f.txt 2>&1; echo "mapped ferry rc=$?"; tail -3 /tmp/mapped_f.txt
timeout 60 $G/apps/mapped > /tmp/mapped_n.txt 2>&1; echo "mapped native rc=$?"; tail -3 /tmp/mapped_n.txt
say nccl native
NCCL_PROBE_ONE_GPU=1 NCCL_PROBE_NATIVE_GPUS=0,0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P timeout 90 python3 bench/frameworks/nccl_probe.py 268435456 >/tmp/nccl_n.txt 2>&1; echo "nccl native rc=$?"
grep -E "step|WARN|Channel 00|via" /tmp/nccl_n.txt | head -12
say nccl ferry
FERRY_DEVICES=$url0,$url0 NCCL_PROBE_ONE_GPU=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,ALLOC FERRY_MAPPED_WAIT_S=20 FERRY_STATS=1 timeout 120 $G/bin/ferry run -- python3 bench/frameworks/nccl_probe.py 268435456 >/tmp/nccl_f.txt 2>&1; echo "nccl ferry rc=$?"
grep -E "step|WARN|^ferry:|via" /tmp/nccl_f.txt | grep -v stats | sort | uniq -c | sort -rn | head -30
if grep -q "rank 0 step allreduce: ok" /tmp/nccl_f.txt; then
  say ddp
  for m in mlp cnn; do
    NCCL_PROBE_NATIVE_GPUS=0,0 timeout 90 python3 bench/frameworks/ddp_train.py $m 30 >/tmp/ddp_${m}_n.txt 2>&1; echo "ddp $m native rc=$?"
    FERRY_DEVICES=$url0,$url0 timeout 120 $G/bin/ferry run -- python3 bench/frameworks/ddp_train.py $m 30 >/tmp/ddp_${m}_f.txt 2>&1; echo "ddp $m ferry rc=$?"
    grep result /tmp/ddp_${m}_n.txt /tmp/ddp_${m}_f.txt
    diff <(grep "loss" /tmp/ddp_${m}_n.txt | sed 's/ ms .*//' | sort) <(grep "loss" /tmp/ddp_${m}_f.txt | sed 's/ ms .*//' | sort) >/dev/null && echo "ddp $m losses identical" || echo "ddp $m losses differ"
  done
fi
kill $server
say done
cd /tmp && tar cJf $O/run10.tar.xz mapped_*.txt nccl_*.txt ddp_*.txt server.log 2>/dev/null
