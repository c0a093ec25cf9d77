#!/bin/bash
# Session 2026-11-28d, GPU run 24a (two H200s): peer access between two vGPUs of one server
# (tests/apps/peer_access, cuda-samples simpleP2P / streamOrderedAllocationP2P / p2pBandwidthLatencyTest, PyTorch two GPUs in one process)
set -u
G=.gpu/new O=$OUT GA=$(pwd)/.gpu/new
. bench/server_start.sh
server_start $G/bin /tmp/server.log --backend cuda
url0=tcp://127.0.0.1:$port/0 url1=tcp://127.0.0.1:$port/1
F="$GA/bin/ferry run --"
R=/tmp/r24; mkdir -p $R; tar xJf .gpu/p2p.tar.xz -C $R
NVRT=$(pwd)/.gpu/miniapps/lib
nvidia-smi topo -m > $R/topo.txt 2>&1
timeout 60 $G/apps/peer_access > $R/pa_n.txt 2>&1; echo "peer_access native rc=$?"
FERRY_DEVICES=$url0,$url1 FERRY_STATS=1 timeout 60 $F $GA/apps/peer_access > $R/pa_f.txt 2>&1; echo "peer_access ferry rc=$?"
grep -v "stats:" $R/pa_f.txt | head -8; grep "stats: device=0 calls" $R/pa_f.txt
for s in simpleP2P streamOrderedAllocationP2P p2pBandwidthLatencyTest; do for b in static shared; do
  (cd $R/$s && LD_LIBRARY_PATH=$NVRT timeout 120 ./$s.$b > $R/s_${s}_${b}_n.txt 2>&1; echo "$s $b native rc=$?")
  (cd $R/$s && FERRY_DEVICES=$url0,$url1 timeout 120 $F ./$s.$b > $R/s_${s}_${b}_f.txt 2>&1; echo "$s $b ferry rc=$?")
  grep -h -E "passed|PASSED|Waiv|^ferry:|rror" $R/s_${s}_${b}_f.txt | head -4
done; done
timeout 120 python3 bench/frameworks/torch_peer.py 20 > $R/tp_n.txt 2>&1; echo "torch_peer native rc=$?"
FERRY_DEVICES=$url0,$url1 timeout 200 $F python3 bench/frameworks/torch_peer.py 20 > $R/tp_f.txt 2>&1; echo "torch_peer ferry rc=$?"
grep -h -E "^can|^copy|^result|^ferry:|Error" $R/tp_n.txt $R/tp_f.txt | head -20
diff <(grep "^step" $R/tp_n.txt) <(grep "^step" $R/tp_f.txt) > /dev/null && echo "split model: losses identical" || echo "split model: losses differ"
kill $server
cp /tmp/server.log $R/
cd /tmp && tar cJf $O/run24a.tar.xz r24/*.txt r24/server.log
