#!/bin/bash
# Session 2026-11-28c, GPU run 21 (two H200s): DDP two ranks with a move asked mid-training: it waits for NCCL's IPC, runs after
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0 url1=tcp://127.0.0.1:$port/1
export NCCL_NVLS_ENABLE=0
timeout 90 python3 bench/frameworks/ddp_train.py mlp 40 >/tmp/d5_n.txt 2>&1; echo "ddp mlp native rc=$?"
FERRY_DEVICES=$url0,$url1 FERRY_MIGRATE_AT=0:0:launch=700 timeout 150 $G/bin/ferry run -- python3 bench/frameworks/ddp_train.py mlp 40 >/tmp/d5_m.txt 2>&1; echo "ddp mlp move asked rc=$?"
grep -h "^ferry:" /tmp/d5_m.txt | grep -v "nvml\|host memory (loc" | head -8
diff <(grep -o "rank [01] step [0-9]* loss [0-9.]*" /tmp/d5_n.txt | sort) <(grep -o "rank [01] step [0-9]* loss [0-9.]*" /tmp/d5_m.txt | sort) >/dev/null && echo "losses identical" || echo "losses differ"
grep -o "rank [01] result loss [0-9.]* ms [0-9.]*" /tmp/d5_n.txt /tmp/d5_m.txt
kill $server
cd /tmp && tar cJf $O/run21.tar.xz d5_*.txt server.log
