#!/bin/bash
# Session 2026-11-28c, GPU run 16 (two H200s): NVLinks through ferry's NVML; NCCL two ranks without NCCL_P2P_LEVEL; DDP two ranks
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
t0=$(date +%s); say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi -L
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0 url1=tcp://127.0.0.1:$port/1
say nvml_query
FERRY_DEVICES=$url0,$url1 timeout 60 $G/bin/ferry run -- $G/apps/nvml_query all > /tmp/nq.txt 2>&1; echo "nvml_query rc=$?"; grep -E "nvlinks|link 0:|link 17:|p2p 0 1|FAIL|PASSED" /tmp/nq.txt | head -12
export NCCL_NVLS_ENABLE=0 NCCL_PROBE_ONE_GPU=1
say nccl native
timeout 90 python3 bench/frameworks/nccl_probe.py 1073741824 >/tmp/n3_n.txt 2>&1; echo "nccl native rc=$?"; grep busbw /tmp/n3_n.txt
say nccl ferry
FERRY_DEVICES=$url0,$url1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH FERRY_MAPPED_WAIT_S=20 FERRY_STATS=1 timeout 150 $G/bin/ferry run -- python3 bench/frameworks/nccl_probe.py 1073741824 >/tmp/n3_f.txt 2>&1; echo "nccl ferry rc=$?"
grep -E "step|WARN|via|nChannels|Pattern" /tmp/n3_f.txt | grep -v "stats" | head -16
for sz in 16777216 268435456; do
  timeout 90 python3 bench/frameworks/nccl_probe.py $sz >/tmp/n3_n_$sz.txt 2>&1
  FERRY_DEVICES=$url0,$url1 timeout 150 $G/bin/ferry run -- python3 bench/frameworks/nccl_probe.py $sz >/tmp/n3_f_$sz.txt 2>&1
  echo "size $sz native: $(grep 'rank 0 step busbw' /tmp/n3_n_$sz.txt)"; echo "size $sz ferry: $(grep 'rank 0 step busbw' /tmp/n3_f_$sz.txt)"
done
if grep -q "rank 0 step allreduce: ok" /tmp/n3_f.txt; then
  say ddp
  for m in mlp cnn; do
    timeout 90 python3 bench/frameworks/ddp_train.py $m 40 >/tmp/d3_${m}_n.txt 2>&1; echo "ddp $m native rc=$?"
    FERRY_DEVICES=$url0,$url1 timeout 150 $G/bin/ferry run -- python3 bench/frameworks/ddp_train.py $m 40 >/tmp/d3_${m}_f.txt 2>&1; echo "ddp $m ferry rc=$?"
    grep -oh "rank [01] result loss [0-9.]* ms [0-9.]*" /tmp/d3_${m}_n.txt /tmp/d3_${m}_f.txt
    diff <(grep -o "rank [01] step [0-9]* loss [0-9.]*" /tmp/d3_${m}_n.txt | sort) <(grep -o "rank [01] step [0-9]* loss [0-9.]*" /tmp/d3_${m}_f.txt | sort) >/dev/null && echo "ddp $m losses identical" || echo "ddp $m losses differ"
  done
fi
kill $server
say done
cd /tmp && tar cJf $O/run16.tar.xz nq.txt n3_*.txt d3_*.txt server.log 2>/dev/null
