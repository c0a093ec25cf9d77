#!/bin/bash
# Session 2026-11-28d, GPU run 24b (two H200s): NCCL with both vGPUs visible to each rank (peer access answered);
# PyTorch two GPUs in one process with asynchronous peer copies; miniFE remotely after the alias fix (aliases keep the low half of the address)
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0 url1=tcp://127.0.0.1:$port/1
F="$GA/bin/ferry run --"
R=/tmp/r24b; mkdir -p $R
export NCCL_NVLS_ENABLE=0
timeout 100 python3 bench/frameworks/nccl_probe.py 1073741824 > $R/nb_n.txt 2>&1; echo "nccl both visible native rc=$?"
t0=$(date +%s)
FERRY_DEVICES=$url0,$url1 timeout 150 $F python3 bench/frameworks/nccl_probe.py 1073741824 > $R/nb_f.txt 2>&1; echo "nccl both visible ferry rc=$? in $(( $(date +%s) - t0 )) s"
grep -h -E "step|^ferry:" $R/nb_n.txt $R/nb_f.txt | grep -v "stats\|nvml\|host memory (loc" | sort | uniq -c | sort -rn | head -16
timeout 120 python3 bench/frameworks/torch_peer.py 20 > $R/tp_n.txt 2>&1; echo "torch_peer native rc=$?"
FERRY_DEVICES=$url0,$url1 timeout 200 $F python3 bench/frameworks/torch_peer.py 20 > $R/tp_f.txt 2>&1; echo "torch_peer ferry rc=$?"
grep -h -E "^can|^copy|^result|^ferry:|Error" $R/tp_n.txt $R/tp_f.txt | head -20
diff <(grep "^step" $R/tp_n.txt) <(grep "^step" $R/tp_f.txt) > /dev/null && echo "split model: losses identical" || echo "split model: losses differ"
M=.gpu/miniapps
APPS="minife_static minife_shared" MODE=native timeout 100 bash $M/run.sh > $R/mf_n.txt 2>&1
for i in 1 2; do
  APPS="minife_static minife_shared" MODE=remote RUNNER="env FERRY_DEVICES=$url0 $GA/bin/ferry run --" timeout 200 bash $M/run.sh > $R/mf_r$i.txt 2>&1
done
grep -h -E "^===|^wall|Final Resid Norm|rror" $R/mf_n.txt $R/mf_r1.txt $R/mf_r2.txt | grep -v "Iteration" | head -30
kill $server
cp /tmp/server.log $R/
cd /tmp && tar cJf $O/run24b.tar.xz r24b/*.txt r24b/server.log
