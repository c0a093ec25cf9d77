#!/bin/bash
# copies with the default data connections (served through the server's own port) against iperf3 -P 4, and one stream against -P 1
set -u
dir=$(pwd)/.gpu/new out=/tmp/copies
mkdir -p $out
. bench/server_start.sh
ip="env LD_LIBRARY_PATH=$dir/iperf/lib $dir/iperf/bin/iperf3"
iperf() { $ip -s -1 -p 5299 >/dev/null 2>&1 & sleep 0.5; $ip -c 127.0.0.1 -p 5299 -P "$1" -t 3 2>&1 | grep -E "SUM.*receiver|^\[ *[0-9]+\].*receiver" | tail -n 1 | sed "s/^/$2 P=$1 /" >>$out/iperf3.txt; wait; }
for label in s1 s4_4194304; do  # s4_4194304: no FERRY_STREAMS set, the defaults
  iperf $([ $label = s1 ] && echo 1 || echo 4) $label
  server_start $dir/bin $out/server_$label.log --backend cuda
  env $([ $label = s1 ] && echo FERRY_STREAMS=1) FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_STATS=1 timeout 200 $dir/bin/ferry run -- $dir/bench/bench_calls bandwidth 268435456 >$out/$label.txt 2>$out/$label.err
  echo "$label rc=$? $(grep -o 'striped_out=[0-9]* striped_in=[0-9]*' $out/$label.err | tail -n 1)"
  kill $server; wait $server 2>/dev/null
done
cat $out/iperf3.txt
python3 bench/copy_tuning_report.py $out 2>&1 | tail -30
