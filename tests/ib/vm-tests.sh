#!/bin/bash
# Runs inside the soft-RoCE VM (tests/ib/vm-init.sh starts it in /payload,
# with RXE_DEV, RXE_GID_INDEX and RXE_ADDR set): the verbs transport's unit
# tests, end-to-end runs of nvcc-built programs through ferry over ib:// (and
# tcp:// as the control), then benchmarks against perftest. Prints
# "### PASS|FAIL|SKIP name" per test and "### BENCH name value unit" per figure.
set -u
root=$PWD
bin=$root/bin
apps=$root/tests/apps
w=/tmp/t
mkdir -p $w
say() { echo "### $*"; }
# progress with the VM's clock, for the console log only
step() { echo "[$(cut -d' ' -f1 /proc/uptime)s] $*"; }
pass() { say "PASS $*"; }
skip() { say "SKIP $*"; }
bench() { say "BENCH $*"; }
# fail NAME WHY [FILES...]: a failure, with the tails of the given logs
fail() {
  say "FAIL $1: $2"
  shift 2
  for f in "$@"; do
    [ -f "$f" ] && { say "| --- $f"; tail -n 25 "$f" | sed 's/^/### | /'; }
  done
}
# ib parts run when the build has the verbs transport (test_transport_ib is
# built exactly when rdma-core headers were found)
have_ib=0
[ -x $bin/test_transport_ib ] && have_ib=1
no_ib="ferry was built without the verbs transport (no rdma-core headers at build time)"

# ---- the transport's unit tests, on a real (soft) RDMA device
if [ $have_ib = 1 ]; then
  step "test_transport_ib"
  timeout 300 $bin/test_transport_ib >$w/unit.log 2>&1
  rc=$?
  if [ $rc = 0 ]; then pass "test_transport_ib"; else fail "test_transport_ib" "exit $rc" $w/unit.log; fi
else
  skip "test_transport_ib: $no_ib"
fi

# ---- ferry-server on the CPU simulation
server_pid=
# start_server URL: starts ferry-server listening on URL (port 0); sets $port
start_server() {
  stop_server
  $bin/ferry-server --listen "$1" --backend sim --sim-kernels $apps/app_twins.so \
    2>$w/server.log &
  server_pid=$!
  port=
  for i in $(seq 100); do
    port=$(sed -n 's/.*listening on [a-z]*:\/\/[^ ]*:\([0-9][0-9]*\).*/\1/p' $w/server.log | head -n 1)
    [ -n "$port" ] && return 0
    kill -0 $server_pid 2>/dev/null || break
    sleep 0.2
  done
  return 1
}
stop_server() {
  [ -n "$server_pid" ] && { kill $server_pid 2>/dev/null; wait $server_pid 2>/dev/null; }
  server_pid=
}

# e2e LABEL: vecadd and api_tour through the devices configured in the environment
e2e() {
  step "e2e over $1"
  timeout 300 $bin/ferry run -- $apps/vecadd 100000 5 >$w/vecadd.out 2>$w/vecadd.err
  rc=$?
  if [ $rc = 0 ] && grep -q PASSED $w/vecadd.out; then
    pass "vecadd over $1"
  else
    fail "vecadd over $1" "exit $rc" $w/vecadd.out $w/vecadd.err $w/server.log
  fi
  timeout 600 $bin/ferry run -- $apps/api_tour >$w/api_tour.out 2>$w/api_tour.err
  rc=$?
  if [ $rc = 0 ] && grep -q ' 0 failed' $w/api_tour.out; then
    pass "api_tour over $1"
  else
    fail "api_tour over $1" "exit $rc" $w/api_tour.out $w/api_tour.err $w/server.log
  fi
}

# bench_ferry WHAT: bench_calls latency|bandwidth through ib:// (when built) and
# tcp://, each on a fresh server; figures are reported, never judged
bench_ferry() {
  local t url out=$w/bench.out
  for t in ib tcp; do
    [ $t = ib ] && { [ $have_ib = 1 ] || continue; url=ib://$RXE_ADDR:0; }
    [ $t = tcp ] && url=tcp://127.0.0.1:0
    step "bench_calls $1 over $t"
    start_server $url || { fail "ferry-server on $url for benchmarks" "did not start" $w/server.log; continue; }
    if [ $1 = latency ]; then
      FERRY_DEVICES=${url%:0}:$port/0 timeout 600 $bin/ferry run -- $root/bench/bench_calls latency >$out 2>&1
    else
      FERRY_DEVICES=${url%:0}:$port/0 timeout 600 $bin/ferry run -- $root/bench/bench_calls bandwidth 4194304 >$out 2>&1
    fi
    rc=$?
    awk -v t=$t '$1 ~ /^(stream_query_latency|d2h_4B_latency|(h2d|d2h)_pinned_(65536|1048576|4194304))$/ {
      print "### BENCH ferry_" t "_" $1, $2, $3 }' $out
    [ $rc = 0 ] || { say "bench_calls $1 over $t exited $rc:"; tail -n 10 $out | sed 's/^/### | /'; }
  done
  stop_server
}

# ---- the control: the same programs over tcp:// inside the VM
if start_server tcp://127.0.0.1:0; then
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  e2e tcp://
  tcp_port=$port
else
  fail "ferry-server on tcp://127.0.0.1:0" "did not start" $w/server.log
fi

# ---- the real thing: ib://
if [ $have_ib = 1 ]; then
  stop_server
  if start_server ib://$RXE_ADDR:0; then
    pass "ferry-server listens on ib://$RXE_ADDR:$port"
    export FERRY_DEVICES=ib://$RXE_ADDR:$port/0
    e2e ib://
    unset FERRY_DEVICES
    export FERRY_TRANSPORT=ib RCUDA_DEVICE_COUNT=1 RCUDA_DEVICE_0=$RXE_ADDR@$port:0
    timeout 300 $bin/ferry run -- $apps/vecadd 20000 3 >$w/vecadd.out 2>$w/vecadd.err
    rc=$?
    if [ $rc = 0 ] && grep -q PASSED $w/vecadd.out; then
      pass "vecadd over FERRY_TRANSPORT=ib RCUDA_DEVICE_0"
    else
      fail "vecadd over FERRY_TRANSPORT=ib RCUDA_DEVICE_0" "exit $rc" $w/vecadd.out $w/vecadd.err $w/server.log
    fi
    unset FERRY_TRANSPORT RCUDA_DEVICE_COUNT RCUDA_DEVICE_0
  else
    fail "ferry-server on ib://$RXE_ADDR:0" "did not start" $w/server.log
  fi
else
  skip "e2e over ib://: $no_ib"
fi

# ---- benchmarks (emulated machine: only ratios within a round mean anything)
# pair NAME SERVER_CMD CLIENT_CMD: a perftest server and its client; client output in $w/NAME.cli
pair() {
  step "perftest $1"
  timeout 120 $2 >$w/$1.srv 2>&1 &
  local sp=$! i
  # the client gives up at once if the server is not listening yet (its
  # out-of-band TCP port 18515 = 0x4853)
  for i in $(seq 100); do
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q ':4853 [0-9A-F]*:0000 0A' && break
    sleep 0.2
  done
  timeout 120 $3 >$w/$1.cli 2>&1
  local cr=$?
  wait $sp
  local sr=$?
  [ $cr = 0 ] && [ $sr = 0 ] && return 0
  fail "perftest $1" "client exit $cr, server exit $sr" $w/$1.srv $w/$1.cli
  return 1
}
perf="-d $RXE_DEV -x $RXE_GID_INDEX -F"
unset FERRY_DEVICES
rounds=${FERRY_BENCH_ROUNDS:-1}
for r in $(seq $rounds); do
  say "BENCH round $r"
  # perftest prints half the round trip (mean and median): doubled here to
  # compare with ferry's whole round trip
  if pair send_lat "ib_send_lat $perf -n 2000" "ib_send_lat $perf -n 2000 $RXE_ADDR"; then
    awk '$1 ~ /^[0-9]+$/ && NF >= 7 { print "### BENCH ib_send_lat_rtt", $6 * 2, "us";
      print "### BENCH ib_send_lat_rtt_median", $5 * 2, "us"; exit }' $w/send_lat.cli
  fi
  # with completion events instead of busy polling: what a waiting peer pays
  if pair send_lat_event "ib_send_lat $perf -e -n 2000" "ib_send_lat $perf -e -n 2000 $RXE_ADDR"; then
    awk '$1 ~ /^[0-9]+$/ && NF >= 7 { print "### BENCH ib_send_lat_event_rtt", $6 * 2, "us"; exit }' \
      $w/send_lat_event.cli
  fi
  bench_ferry latency
  for size in 65536 1048576 4194304; do
    n=$((size >= 4194304 ? 20 : size >= 1048576 ? 60 : 800))
    if pair write_bw_$size "ib_write_bw $perf -s $size -n $n" "ib_write_bw $perf -s $size -n $n $RXE_ADDR"; then
      # perftest's MB/sec is MiB/s
      awk -v s=$size '$1 == s && NF >= 4 { printf "### BENCH ib_write_bw_%d %.4f GB/s\n", s, $4 * 1048576 / 1e9; exit }' \
        $w/write_bw_$size.cli
    fi
  done
  bench_ferry bandwidth
done
stop_server
step "done"
exit 0
