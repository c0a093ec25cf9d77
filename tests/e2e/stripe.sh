#!/bin/sh
# FERRY_STREAMS end to end: large copies striped over several data
# connections per session give the same bytes as one connection (pageable
# and pinned, both ways, FERRY_STREAMS=1, 4 and 16), and the stripes are
# really used (FERRY_STATS counts the bytes that went over them, the server
# says so); the data connections need no port but the server's own (a
# program that can reach only that one stripes); a migration with
# FERRY_STREAMS=4 gives the same checksum; a data connection killed
# mid-copy fails that copy cleanly, without a hang; a connection with a
# wrong key is refused and the session goes on; a silent session fails the
# copy after FERRY_CALL_TIMEOUT; an unreachable data port, or a server
# that hands the data connections to nobody, costs one line and the
# program goes on with one connection; --once, --max-sessions and
# --max-per-peer leave a session its data connections; bad FERRY_STREAMS
# values are refused in one line; a URL's ?streams=N overrides
# FERRY_STREAMS.
# usage: stripe.sh BUILD_DIR CASE
set -u
build=$(cd "$1" && pwd)
case_name=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-stripe.XXXXXX")
e2e_name="e2e stripe"
. "$(dirname "$0")/lib.sh"
export FERRY_CONTROL=off FERRY_STATS=1
unset FERRY_MIGRATE_AT FERRY_MHELPER FERRY_FAULT FERRY_STREAMS

# striped LABEL out|in: bytes FERRY_STATS says went over data connections
striped() { sed -n "s/.*stats: device=0 .*striped_$2=\([0-9]*\).*/\1/p" "$work/$1.err" | head -n 1; }
passed() {
  [ "$2" = 0 ] || fail "$1 exited $2"
  expect_in "$1.out" "^PASSED"
}

case $case_name in
streams)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  want=
  for n in 1 4 16; do
    rc=$(FERRY_STREAMS=$n run "s$n" big_copies 40)
    passed "s$n" "$rc"
    sum=$(value "s$n" checksum)
    [ -n "$sum" ] || fail "s$n printed no checksum"
    [ -z "$want" ] || [ "$sum" = "$want" ] || fail "FERRY_STREAMS=$n: checksum $sum, want $want"
    want=$sum
    if [ "$n" = 1 ]; then
      [ "$(striped s1 out)" = 0 ] && [ "$(striped s1 in)" = 0 ] || fail "FERRY_STREAMS=1 striped"
    else
      # 2 x (4 MiB + 5 MiB + 17 + 40 MiB + 4321) went out, three times that came back
      [ "$(striped "s$n" out)" = 102769124 ] || fail "FERRY_STREAMS=$n: striped_out $(striped "s$n" out)"
      [ "$(striped "s$n" in)" = 154153686 ] || fail "FERRY_STREAMS=$n: striped_in $(striped "s$n" in)"
      expect_in server.log "large copies striped over $n data connections"
    fi
    expect_not_in "s$n.err" "data connections"
  done
  # without FERRY_STREAMS: four data connections
  before=$(grep -c "large copies striped over 4 data connections" "$work/server.log")
  rc=$(run default big_copies 40)
  passed default "$rc"
  [ "$(value default checksum)" = "$want" ] || fail "the default: checksum differs"
  [ "$(striped default out)" = 102769124 ] || fail "the default: striped_out $(striped default out)"
  [ "$(grep -c "large copies striped over 4 data connections" "$work/server.log")" = $((before + 1)) ] ||
    fail "the default is not four data connections"
  # the URL's ?streams=N wins over FERRY_STREAMS
  rc=$(FERRY_STREAMS=1 FERRY_DEVICES="$FERRY_DEVICES?streams=4" run url4 big_copies 8)
  passed url4 "$rc"
  [ "$(striped url4 out)" != 0 ] || fail "?streams=4 striped nothing"
  rc=$(FERRY_STREAMS=4 FERRY_DEVICES="$FERRY_DEVICES?streams=1" run url1 big_copies 8)
  passed url1 "$rc"
  [ "$(striped url1 out)" = 0 ] || fail "?streams=1 striped"
  ;;
one_port)
  # a firewall lets the program reach the server's port and no other: the
  # data connections come through that one, and the copies stripe
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_STREAMS=4
  firewall="${FERRY_PRELOAD:+$FERRY_PRELOAD }$build/tests/e2e/libferry_one_port.so"
  rc=$(FERRY_TEST_ONE_PORT=$port FERRY_PRELOAD=$firewall run one big_copies 8)
  passed one "$rc"
  [ "$(striped one out)" != 0 ] && [ "$(striped one in)" != 0 ] || fail "striped nothing through the server's port"
  expect_not_in one.err "data connections"
  expect_in server.log "large copies striped over 4 data connections"
  # the firewall is up: with another port open, the server cannot be reached
  rc=$(FERRY_TEST_ONE_PORT=1 FERRY_PRELOAD=$firewall run shut big_copies 8)
  [ "$rc" != 0 ] || fail "the firewall let the program through"
  expect_in shut.err "Connection refused"
  ;;
kill)
  # the last data connection dies half-way through the 1st striped copy (host
  # to device), the 2nd (device to host) and the 4th (a deferred copy into
  # pinned memory): that copy (or the synchronize that collects it) fails as
  # on a lost connection, and the session ends; the server serves on
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_STREAMS=4
  for at in 1 2 4; do
    rc=$(FERRY_FAULT=stripe_kill@$at run "kill$at" big_copies 40)
    [ "$rc" = 3 ] || fail "stripe_kill@$at: exited $rc, expected 3 (a CUDA error)"
    expect_in "kill$at.out" "cudaErrorDevicesUnavailable"
    expect_in "kill$at.err" "lost connection to .* over a data connection\|lost connection to .* asynchronous copy data"
    n=$(grep -c "lost connection" "$work/kill$at.err")
    [ "$n" = 1 ] || fail "stripe_kill@$at: $n lost-connection lines, expected 1"
  done
  i=0
  until [ "$(grep -c "ended: \(a data connection failed\|client disconnected\)" "$work/server.log")" -ge 3 ]; do
    sleep 0.1
    i=$((i + 1))
    [ $i -lt 300 ] || fail "the sessions of the killed copies did not end"
  done
  expect_in server.log "ended: a data connection failed"
  rc=$(run after big_copies 8)
  passed after "$rc"
  [ "$(striped after out)" != 0 ] || fail "the run after the faults striped nothing"
  ;;
stranger)
  # a connection with a wrong key comes before the client's own: refused,
  # and the session stripes over its own four
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_STREAMS=4
  rc=$(FERRY_FAULT=stripe_stranger run stranger big_copies 8)
  passed stranger "$rc"
  expect_in server.log "refused a data connection from .*: no valid key"
  expect_in server.log "large copies striped over 4 data connections"
  [ "$(striped stranger out)" != 0 ] || fail "striped nothing"
  ;;
unreachable)
  # the session names a port nobody listens on (as a firewall would keep it)
  FERRY_FAULT=stripe_port start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_STREAMS=4
  rc=$(run unreach big_copies 8)
  passed unreach "$rc"
  n=$(grep -c "cannot open data connections" "$work/unreach.err")
  [ "$n" = 1 ] || fail "$n lines about the data connections, expected 1"
  expect_in unreach.err "large copies use the one connection"
  [ "$(striped unreach out)" = 0 ] || fail "striped without data connections"
  expect_in server.log "no data connections"
  ;;
handoff)
  # the server's parent hands the data connections to nobody (as if the
  # session's key were lost): each is refused, the session gives up after
  # its deadline, and the program says so once and goes on with one
  FERRY_FAULT=stripe_handoff start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_STREAMS=4
  rc=$(run lost big_copies 8)
  passed lost "$rc"
  n=$(grep -c "data connections" "$work/lost.err")
  [ "$n" = 1 ] || fail "$n lines about the data connections, expected 1"
  expect_in lost.err "cannot open data connections to 127.0.0.1 port $port (the server took 0 of 4); large copies use the one connection"
  [ "$(striped lost out)" = 0 ] || fail "striped without data connections"
  expect_in server.log "refused a data connection from 127.0.0.1:[0-9]*: no valid key"
  expect_in server.log "no data connections (0 of 4 came within 3000 ms)"
  ;;
bounds)
  # the bounds on sessions are not the data connections' (one session
  # with its four is more than --max-per-peer 1 counts), and --once keeps
  # its port open for them
  start_sim_server --max-sessions 1 --max-per-peer 1
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_STREAMS=4
  rc=$(run bounded big_copies 8)
  passed bounded "$rc"
  [ "$(striped bounded out)" != 0 ] || fail "striped nothing within --max-sessions 1 --max-per-peer 1"
  expect_not_in bounded.err "data connections"
  start_sim_server --once
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  rc=$(run once big_copies 8)
  passed once "$rc"
  [ "$(striped once out)" != 0 ] || fail "striped nothing with --once"
  expect_not_in once.err "data connections"
  wait "$server_pid" || fail "ferry-server --once exited $?"
  ;;
migrate)
  # mem-sync over data connections: migrate_iter copies back its large
  # buffers only at its end, after the move, so whatever came striped in a
  # moved run came from mem-sync's gathers; copied ahead and in the pause,
  # to the local GPU and to a second server (whose session stripes too),
  # and back; the checksum is the one without a move
  export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so" FERRY_STREAMS=4
  start_sim_server
  a=tcp://127.0.0.1:$port/0
  start_sim_server
  b=tcp://127.0.0.1:$port/0
  export FERRY_DEVICES=$a
  rc=$(run ref migrate_iter --readonly 40)
  passed ref "$rc"
  want=$(value ref checksum)
  for precopy in 1 0; do
    rc=$(FERRY_PRECOPY=$precopy FERRY_MIGRATE_AT=0:0:launch=60 run "local$precopy" migrate_iter --readonly 40)
    passed "local$precopy" "$rc"
    [ "$(value "local$precopy" checksum)" = "$want" ] || fail "checksum after the move (FERRY_PRECOPY=$precopy) differs"
    expect_in "local$precopy.err" "stats: device=0 launches=[0-9]* backend=local"
    [ "$(striped "local$precopy" in)" -gt 0 ] || fail "FERRY_PRECOPY=$precopy: mem-sync striped nothing"
  done
  rc=$(FERRY_MIGRATE_AT="0:$b:launch=40,0:$a:launch=100" run chain migrate_iter --readonly 40)
  passed chain "$rc"
  [ "$(value chain checksum)" = "$want" ] || fail "checksum after $a -> $b -> $a differs"
  [ "$(grep -c "now runs on tcp://" "$work/chain.err")" = 2 ] || fail "expected two moves between servers"
  [ "$(grep -c "large copies striped over 4 data connections" "$work/server.log")" -ge 6 ] ||
    fail "the sessions of the moves did not stripe"
  expect_not_in chain.err "data connections"
  ;;
silent)
  # the session stops sending half-way through a striped copy to the host:
  # after FERRY_CALL_TIMEOUT the copy fails with one line, as on the
  # session's own connection
  FERRY_FAULT=stripe_stall start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0 FERRY_STREAMS=4
  rc=$(FERRY_CALL_TIMEOUT=1 run silent big_copies 8)
  [ "$rc" = 3 ] || fail "exited $rc, expected 3 (a CUDA error)"
  expect_in silent.out "cudaMemcpy(back, d_b, n, cudaMemcpyDeviceToHost) -> cudaErrorDevicesUnavailable"
  expect_in silent.err "lost connection to .* while receiving copy data over a data connection: nothing came from it for 1 s"
  ;;
bad_values)
  start_sim_server
  export FERRY_DEVICES=tcp://127.0.0.1:$port/0
  # each refused in one line; the default, four, is used
  for v in 0 17 4x; do
    rc=$(FERRY_STREAMS=$v run "bad$v" big_copies 5)
    passed "bad$v" "$rc"
    expect_in "bad$v.err" "FERRY_STREAMS=$v ignored: expected a count from 1 to 16; using 4"
    [ "$(grep -c "FERRY_STREAMS" "$work/bad$v.err")" = 1 ] || fail "FERRY_STREAMS=$v: not one line"
    [ "$(striped "bad$v" out)" != 0 ] || fail "FERRY_STREAMS=$v: the default striped nothing"
  done
  expect_in server.log "large copies striped over 4 data connections"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "$e2e_name $case_name: PASS"
