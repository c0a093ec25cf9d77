#!/bin/sh
# End-to-end cases of ferry's NVML (libnvidia-ml.so.1, docs/nvml.md):
# tests/apps/nvml_query, which opens NVML as PyTorch does, through `ferry
# run` with two vGPUs.
#   count_offline     the count is that of FERRY_DEVICES with no server to
#                     reach: nothing is connected, nothing is said
#   count_no_session  the same with a server that would answer: it sees no
#                     session
#   rcuda             the count from RCUDA_DEVICE_COUNT / RCUDA_DEVICE_<i>
#   answers           with a server (2 simulated GPUs): name, UUID, memory,
#                     PCI address, compute capability and CUDA version as
#                     ferry's libcuda.so.1 gives them; an index out of range
#                     refused; an unserved call said once, NOT_SUPPORTED
# usage: nvml.sh BUILD_DIR CASE
set -u
build=$(cd "$1" && pwd)
case_name=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-nvml.XXXXXX")
e2e_name="e2e nvml"
. "$(dirname "$0")/lib.sh"
local_sim
unset RCUDA_DEVICE_COUNT FERRY_DEVICES

# counted LABEL N: the program exited 0, NVML's init worked, and it counted
# N devices with ferry's libnvidia-ml.so.1
counted() {
  [ "$rc" = 0 ] || fail "$1 exited $rc"
  expect_in "$1.out" "^nvml library: $build/lib/libnvidia-ml.so.1$"
  expect_in "$1.out" "^nvmlInit_v2: 0$"
  expect_in "$1.out" "^nvmlDeviceGetCount_v2: 0 count $2$"
}

case $case_name in
count_offline)
  # port 1 on loopback: nothing listens there, a connection would fail loudly
  rc=$(FERRY_DEVICES=tcp://127.0.0.1:1/0,tcp://127.0.0.1:1/1 run count nvml_query count)
  counted count 2
  expect_not_in count.err "ferry"
  # and a wrong list is no device (PyTorch then asks CUDA, which says why)
  rc=$(FERRY_DEVICES=tcp://127.0.0.1:1/0,local:x run wrong nvml_query count)
  expect_in wrong.out "^nvmlInit_v2: 9$"
  ;;
count_no_session)
  FERRY_SIM_GPUS=2 start_sim_server
  rc=$(FERRY_DEVICES=tcp://127.0.0.1:$port/0,tcp://127.0.0.1:$port/1 run count nvml_query count)
  counted count 2
  sleep 0.5 # a session would have been logged by now
  expect_not_in server.log "session from"
  ;;
rcuda)
  rc=$(RCUDA_DEVICE_COUNT=3 RCUDA_DEVICE_0=127.0.0.1@1:0 RCUDA_DEVICE_1=127.0.0.1@1:1 \
    RCUDA_DEVICE_2=127.0.0.1@1:0 run count nvml_query count)
  counted count 3
  ;;
answers)
  FERRY_SIM_GPUS=2 start_sim_server
  rc=$(FERRY_DEVICES=tcp://127.0.0.1:$port/0,tcp://127.0.0.1:$port/1 run all nvml_query all)
  counted all 2
  passed all "$rc"
  expect_in all.out "^cuDeviceGetCount: 2$"
  expect_in all.out "^out of range index 2: 2$"
  # NCCL's start-up asks every pair: a device reaches itself, two vGPUs
  # each other as cuDeviceCanAccessPeer says (two GPUs of one server: yes)
  expect_in all.out "^p2p 1 1 caps 1: 0 status 0 cuda 1$"
  expect_in all.out "^p2p 0 1 caps 0: 0 status 0 cuda 1$"
  # no NVLink on this simulation: every link NOT_SUPPORTED
  expect_in all.out "^device 0 nvlinks: 0$"
  expect_in all.out "^nvmlDeviceGetPowerUsage: 3 3 (Not Supported)$"
  line="ferry: nvmlDeviceGetPowerUsage is not supported by ferry; returning NVML_ERROR_NOT_SUPPORTED"
  [ "$(grep -c "^$line$" "$work/all.err")" = 1 ] || fail "the unserved call was not said exactly once"
  # the two vGPUs are two GPUs of the server: two UUIDs
  [ "$(sed -n 's/^device [01] uuid: nvml \([^ ]*\) .*/\1/p' "$work/all.out" | sort -u | wc -l)" = 2 ] ||
    fail "the two vGPUs have one UUID"
  expect_in server.log "session from"
  ;;
nvlinks)
  # the server's NVML reports two NVLinks from each GPU to the other
  # (FERRY_SIM_NVLINKS): ferry's NVML gives them as NCCL asks
  FERRY_SIM_GPUS=2 FERRY_SIM_NVLINKS=2 start_sim_server
  rc=$(FERRY_DEVICES=tcp://127.0.0.1:$port/0,tcp://127.0.0.1:$port/1 run links nvml_query all)
  passed links "$rc"
  expect_in links.out "^device 0 nvlinks: 2$"
  expect_in links.out "^device 1 nvlinks: 2$"
  expect_in links.out "^device 0 link 1: state 1 p2p 1 remote 00000000:3b:00.0 field 0/1$"
  expect_in links.out "^device 1 link 0: state 1 p2p 1 remote 00000000:19:00.0 field 0/1$"
  ;;
*)
  echo "nvml.sh: unknown case $case_name" >&2
  exit 2
  ;;
esac
echo "$e2e_name $case_name: ok"
