#!/bin/bash
# Session 2026-11-28c, GPU run 15 (two H200s): a short `extra` buffer natively and through ferry; NCCL two ranks after the fix; DDP two ranks
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
t0=$(date +%s); say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi -L
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0 url1=tcp://127.0.0.1:$port/1
say drv_graphs
timeout 60 $G/apps/drv_graphs $G/apps/drv_kernels.fatbin 20 > /tmp/dg_n.txt 2>&1; echo "drv_graphs native rc=$?"; tail -2 /tmp/dg_n.txt
FERRY_DEVICES=$url0 timeout 60 $G/bin/ferry run -- $G/apps/drv_graphs $G/apps/drv_kernels.fatbin 20 > /tmp/dg_f.txt 2>&1; echo "drv_graphs ferry rc=$?"; tail -2 /tmp/dg_f.txt
export NCCL_NVLS_ENABLE=0 NCCL_PROBE_ONE_GPU=1
say nccl native
timeout 90 python3 bench/frameworks/nccl_probe.py 1073741824 >/tmp/n2_n.txt 2>&1; echo "nccl native rc=$?"; grep step /tmp/n2_n.txt
say nccl ferry SYS
NCCL_P2P_LEVEL=SYS FERRY_DEVICES=$url0,$url1 NCCL_DEBUG=WARN FERRY_MAPPED_WAIT_S=20 FERRY_STATS=1 timeout 150 $G/bin/ferry run -- python3 bench/frameworks/nccl_probe.py 1073741824 >/tmp/n2_f.txt 2>&1; echo "nccl ferry rc=$?"
grep -E "step|WARN|^ferry:" /tmp/n2_f.txt | grep -v "stats\|nvml\|host memory" | head -12
if grep -q "rank 0 step allreduce: ok" /tmp/n2_f.txt; then
  say ddp
  for m in mlp cnn; do
    timeout 90 python3 bench/frameworks/ddp_train.py $m 40 >/tmp/d2_${m}_n.txt 2>&1; echo "ddp $m native rc=$?"
    NCCL_P2P_LEVEL=SYS FERRY_DEVICES=$url0,$url1 FERRY_STATS=1 timeout 150 $G/bin/ferry run -- python3 bench/frameworks/ddp_train.py $m 40 >/tmp/d2_${m}_f.txt 2>&1; echo "ddp $m ferry rc=$?"
    grep -h result /tmp/d2_${m}_n.txt /tmp/d2_${m}_f.txt
    diff <(grep "^rank.*loss" /tmp/d2_${m}_n.txt | sed 's/ ms .*//' | sort) <(grep "^rank.*loss" /tmp/d2_${m}_f.txt | sed 's/ ms .*//' | sort) >/dev/null && echo "ddp $m losses identical" || echo "ddp $m losses differ"
  done
  n=$(sed -n 's/.*device=0 launches=\([0-9]*\).*/\1/p' /tmp/d2_mlp_f.txt | sort -n | tail -n1)
  say "ddp mlp, a move asked at launch $((n / 2))"
  NCCL_P2P_LEVEL=SYS FERRY_DEVICES=$url0,$url1 FERRY_MIGRATE_AT=0:0:launch=$((n / 2)) timeout 150 $G/bin/ferry run -- python3 bench/frameworks/ddp_train.py mlp 40 >/tmp/d2_mlp_m.txt 2>&1; echo "ddp mlp move rc=$?"
  grep -h "^ferry:" /tmp/d2_mlp_m.txt | grep -v "nvml\|host memory" | sort | uniq -c | head -5
  diff <(grep "^rank.*loss" /tmp/d2_mlp_n.txt | sed 's/ ms .*//' | sort) <(grep "^rank.*loss" /tmp/d2_mlp_m.txt | sed 's/ ms .*//' | sort) >/dev/null && echo "ddp mlp (move asked) losses identical" || echo "ddp mlp (move asked) losses differ"
fi
kill $server
say done
cd /tmp && tar cJf $O/run15.tar.xz dg_*.txt n2_*.txt d2_*.txt server.log 2>/dev/null
