#!/bin/bash
# Session 2026-11-28c, GPU run 13 (two H200s): NCCL with two ranks, one GPU each, native and through ferry; DDP two ranks; VMM handles across two GPUs
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
t0=$(date +%s); say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi -L; nvidia-smi topo -m
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0 url1=tcp://127.0.0.1:$port/1
export NCCL_NVLS_ENABLE=0 NCCL_PROBE_ONE_GPU=1
say vmm_ipc
FERRY_DEVICES=$url0 DRV_VMM_IPC_CHILD_DEVICES=$url1 timeout 60 $G/bin/ferry run -- $G/apps/drv_vmm_ipc > /tmp/vmm2.txt 2>&1; echo "drv_vmm_ipc two GPUs rc=$?"; grep -E "on |PASSED|FAIL" /tmp/vmm2.txt | head
say nccl native
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P timeout 90 python3 bench/frameworks/nccl_probe.py 1073741824 >/tmp/nccl2_n.txt 2>&1; echo "nccl native rc=$?"
grep -E "step|via" /tmp/nccl2_n.txt | head -8
for lvl in "" SYS; do
  say "nccl ferry P2P_LEVEL=$lvl"
  env ${lvl:+NCCL_P2P_LEVEL=$lvl} FERRY_DEVICES=$url0,$url1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,ALLOC FERRY_MAPPED_WAIT_S=20 FERRY_STATS=1 timeout 120 $G/bin/ferry run -- python3 bench/frameworks/nccl_probe.py 1073741824 >/tmp/nccl2_f$lvl.txt 2>&1; echo "nccl ferry rc=$?"
  grep -E "step|WARN|^ferry:|via" /tmp/nccl2_f$lvl.txt | grep -v stats | sort | uniq -c | sort -rn | head -16
  grep -q "rank 0 step busbw: ok" /tmp/nccl2_f$lvl.txt && { good=$lvl; break; }
done
if [ -n "${good+x}" ]; then
  say ddp
  for m in mlp cnn; do
    timeout 90 python3 bench/frameworks/ddp_train.py $m 40 >/tmp/ddp2_${m}_n.txt 2>&1; echo "ddp $m native rc=$?"
    env ${good:+NCCL_P2P_LEVEL=$good} FERRY_DEVICES=$url0,$url1 timeout 120 $G/bin/ferry run -- python3 bench/frameworks/ddp_train.py $m 40 >/tmp/ddp2_${m}_f.txt 2>&1; echo "ddp $m ferry rc=$?"
    grep -h result /tmp/ddp2_${m}_n.txt /tmp/ddp2_${m}_f.txt
    diff <(grep "^rank.*loss" /tmp/ddp2_${m}_n.txt | sed 's/ ms .*//' | sort) <(grep "^rank.*loss" /tmp/ddp2_${m}_f.txt | sed 's/ ms .*//' | sort) >/dev/null && echo "ddp $m losses identical" || echo "ddp $m losses differ"
  done
fi
kill $server
say done
cd /tmp && tar cJf $O/run13.tar.xz vmm2.txt nccl2_*.txt ddp2_*.txt server.log 2>/dev/null
