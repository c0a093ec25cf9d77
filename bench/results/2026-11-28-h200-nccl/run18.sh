#!/bin/bash
# Session 2026-11-28c, GPU run 18 (two H200s): NCCL with both vGPUs visible to each rank (torchrun's default layout)
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0 url1=tcp://127.0.0.1:$port/1
export NCCL_NVLS_ENABLE=0
t0=$(date +%s)
FERRY_DEVICES=$url0,$url1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,SHM FERRY_MAPPED_WAIT_S=10 timeout 100 $G/bin/ferry run -- python3 bench/frameworks/nccl_probe.py 268435456 >/tmp/n4_f.txt 2>&1; echo "nccl ferry (both visible) rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "step|WARN|^ferry:|via" /tmp/n4_f.txt | grep -v "stats\|nvml\|host memory (loc" | sort | uniq -c | sort -rn | head -14
kill $server
cd /tmp && tar cJf $O/run18.tar.xz n4_f.txt server.log
