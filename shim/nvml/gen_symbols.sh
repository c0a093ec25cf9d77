#!/bin/sh
# Developer tool, run when NVML's header changes (not at build time): writes
# nvml_symbols.txt, every function nvml.h declares (each is an export of
# NVIDIA's libnvidia-ml.so.1, the unversioned names of versioned functions
# included), so that ferry's libnvidia-ml.so.1 exports the same names: those
# ferry serves (nvml.c) and a stub for each other one. nvml.h ships with the
# CUDA toolkit's NVML component (cuda-nvml-dev), which a toolkit may lack;
# the list is checked in so that the build never needs it.
# usage: gen_symbols.sh [NVML_H]   (default /usr/local/cuda/include/nvml.h;
#        writes next to this script)
set -eu
export LC_ALL=C
header=${1:-/usr/local/cuda/include/nvml.h}
here=$(cd "$(dirname "$0")" && pwd)
[ -r "$header" ] || { echo "gen_symbols.sh: no $header" >&2; exit 1; }
api=$(sed -n 's/^#define NVML_API_VERSION[[:space:]]\{1,\}\([0-9]\{1,\}\).*/\1/p' "$header")
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# "nvmlReturn_t DECLDIR nvmlX(", "const DECLDIR char* nvmlErrorString(", ...
grep -o 'DECLDIR[^(;]*[^A-Za-z0-9_]nvml[A-Za-z0-9_]*[[:space:]]*(' "$header" |
  sed 's/.*[^A-Za-z0-9_]\(nvml[A-Za-z0-9_]*\)[[:space:]]*($/\1/' | sort -u >"$tmp"
grep -qx nvmlInit_v2 "$tmp" && grep -qx nvmlErrorString "$tmp" ||
  { echo "gen_symbols.sh: $header declares no nvmlInit_v2 or nvmlErrorString" >&2; exit 1; }
{
  echo "# every function of libnvidia-ml.so.1 (nvml.h, NVML API $api; made by gen_symbols.sh)"
  cat "$tmp"
} >"$here/nvml_symbols.txt"
echo "gen_symbols.sh: $(wc -l <"$tmp") functions"
