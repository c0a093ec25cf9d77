#!/bin/sh
# CUDA graphs end to end (issue 21): tests/apps/graphs (runtime API) and
# tests/apps/drv_graphs (driver API) capture streams and build graphs on
# the client, which sends each graph once, at instantiation, and each
# cudaGraphLaunch as ONE graph_launch call (FERRY_STATS counts them); the
# same programs moved at random launches, into the process and onto a
# ferry-mhelper, replay their graphs to the checksum of a run that did not
# move; and graphs_rpath, built with an RPATH to NVIDIA's libcudart.so.13,
# captures through ferry's libcuda.so.1 alone. The host_* cases run
# graph_host, graph_host_rpath and drv_graph_host, whose graphs hold host
# copies and host nodes: ferry plays those on the client, node by node
# (one call per node, no graph_launch), remotely and moved at random
# launches.
# usage: graphs.sh BUILD_DIR CASE [NVIDIA_LIB_DIR]
#   FERRY_MIGRATE_KS="k1 k2 ..." replaces the random launch counts
set -u
build=$(cd "$1" && pwd)
case_name=$2
nvidia=${3:-/usr/local/cuda/lib64}
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-graphs.XXXXXX")
e2e_name="e2e graphs"
. "$(dirname "$0")/lib.sh"
export FERRY_LOCAL_BACKEND=sim FERRY_SIM_KERNELS="$apps/app_twins.so" FERRY_CONTROL_DIR="$work"
unset FERRY_MIGRATE_AT FERRY_FAULT FERRY_MHELPER

# the program and its arguments for a case's app name
args() {
  case $1 in
  drv_graphs | drv_graph_host) echo "$1 $apps/drv_kernels.fatbin" ;;
  *) echo "$1" ;;
  esac
}

# graphed LABEL RC: passed; one graph_launch call per cudaGraphLaunch of a
# graph without host work ("device graph launches", else every one), and
# no kernel launch call for the kernels such graphs hold; a graph with host
# work makes one launch call per kernel node it plays ("played kernels")
graphed() {
  passed "$1" "$2"
  expect_not_in "$1.out" "^FAIL"
  g=$(value "$1" "graph launches") l=$(value "$1" launches)
  dg=$(value "$1" "device graph launches") pk=$(value "$1" "played kernels")
  [ "$(calls "$1" graph_launch)" = "${dg:-$g}" ] ||
    fail "$1: ferry made $(calls "$1" graph_launch) graph_launch calls for ${dg:-$g} cudaGraphLaunch"
  [ "$(calls "$1" launch)" = "$((l - g + ${pk:-0}))" ] ||
    fail "$1: ferry made $(calls "$1" launch) launch calls; the program launched $((l - g)) kernels itself, its graphs played ${pk:-0}"
}

# refused LABEL TEXT: TEXT is said in exactly one line
refused() {
  n=$(grep -c -- "$2" "$work/$1.err")
  [ "$n" = 1 ] || fail "$1: '$2' said $n times, want once"
}

start_sim_server
export FERRY_DEVICES="tcp://127.0.0.1:$port/0"
case $case_name in
runtime | migrate | migrate_helper) app=graphs ;;
driver | driver_migrate) app=drv_graphs ;;
rpath | rpath_migrate) app=graphs_rpath ;;
host | host_migrate | host_migrate_helper) app=graph_host ;;
host_driver | host_driver_migrate) app=drv_graph_host ;;
host_rpath | host_rpath_migrate) app=graph_host_rpath ;;
esac
case $case_name in
host | host_driver | host_rpath)
  # shellcheck disable=SC2046
  rc=$(FERRY_STATS=1 FERRY_CONTROL=off run ref $(args $app))
  graphed ref "$rc"
  [ "$(value ref "graph launches")" -ge 200 ] || fail "fewer than 200 graph launches"
  # nothing refused; only the graph without host work (graph_host's) reached the server
  expect_not_in ref.err "is not supported by ferry; returning"
  inst=1
  [ "$app" = drv_graph_host ] && inst=0
  [ "$(calls ref graph_instantiate)" = "$inst" ] ||
    fail "ref: $(calls ref graph_instantiate) graphs instantiated on the server, want $inst"
  [ "$case_name" != host ] ||
    refused ref "cudaStreamAddCallback / cuStreamAddCallback (as in CUDA; cudaLaunchHostFunc is captured) during stream capture"
  ;;
runtime | driver | rpath)
  # shellcheck disable=SC2046
  rc=$(FERRY_STATS=1 FERRY_CONTROL=off run ref $(args $app))
  graphed ref "$rc"
  [ "$(value ref "graph launches")" -ge 100 ] || fail "fewer than 100 graph launches"
  if [ "$case_name" = runtime ]; then
    # a changed exec is sent once, with its next launch, however many
    # changes came before
    sent=$(($(calls ref graph_instantiate) + $(calls ref graph_update)))
    [ "$sent" = "$(value ref "graphs sent")" ] || fail "ref: $sent graphs sent, want $(value ref "graphs sent")"
  fi
  if [ "$case_name" = driver ]; then
    refused ref "cuGraphAddNode with edge data (from port 0, to port 1, type 0) is not supported by ferry"
  fi
  if [ "$case_name" = rpath ]; then
    # NVIDIA's runtime, ferry's driver, never ferry's runtime
    rc=$(export LD_DEBUG=libs; FERRY_CONTROL=off run libs graphs_rpath 5)
    passed libs "$rc"
    expect_in libs.err "calling init: $nvidia/libcudart.so.13\$"
    expect_in libs.err "calling init: $build/lib/libcuda.so.1\$"
    expect_not_in libs.err "calling init: $build/lib/libcudart.so.13"
    expect_not_in libs.err "is not supported by ferry; returning"
  fi
  ;;
migrate | migrate_helper | driver_migrate | rpath_migrate | host_migrate | host_migrate_helper | \
  host_driver_migrate | host_rpath_migrate)
  case $case_name in *migrate_helper) export FERRY_MHELPER=always ;; esac
  # shellcheck disable=SC2046
  rc=$(FERRY_STATS=1 FERRY_CONTROL=off run ref $(args $app))
  graphed ref "$rc"
  want=$(value ref checksum) launches=$(value ref launches)
  if [ -n "${FERRY_MIGRATE_KS:-}" ]; then ks=$FERRY_MIGRATE_KS; else
    # launch 1 comes while a capture is under way (graphs.cu): the capture
    # lives in the process and goes on after the move (graph_host: the
    # first launch of a graph the client plays)
    r=$(shuf -i 2-"$launches" -n 2 | tr '\n' ' ')
    ks="1 $((launches / 2)) ${r% }"
    # drv_graphs: a move at the launch given a module variable's address
    [ "$app" = drv_graphs ] && ks="$ks $(value ref "variable launch")"
  fi
  echo "$case_name: $launches launches; migrating at launch $ks (FERRY_MIGRATE_KS=\"$ks\" repeats this)"
  for k in $ks; do
    # shellcheck disable=SC2046
    rc=$(FERRY_STATS=1 FERRY_MIGRATE_AT=0:0:launch=$k run "at$k" $(args $app))
    graphed "at$k" "$rc"
    same_checksum "at$k"
    migrated "at$k"
    case $case_name in *migrate_helper) expect_in "at$k.err" "in ferry-mhelper pid" ;; esac
  done
  ;;
*) fail "unknown case" ;;
esac
echo "$e2e_name $case_name: ok"
