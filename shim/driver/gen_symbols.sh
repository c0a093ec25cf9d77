#!/bin/sh
# Developer tool, run when the CUDA toolkit changes (not at build time):
# writes cu_symbols.txt, every function NVIDIA's libcuda.so.1 exports (from
# the toolkit's stub), and cu_procs.txt, how cuGetProcAddress maps a name and
# a CUDA version onto one of those exports. The versions come from
# cudaTypedefs.h: PFN_<name>_v<version>[_ptds|_ptsz] is the signature <name>
# has had since <version>; the k-th version of a name (oldest first) is the
# export <name> (k = 0) or <name>_v<k+1>, and a _ptds/_ptsz variant is the
# export of its plain version plus that suffix. Pairs that name no export are
# dropped with a line on stderr. cu_errors.txt: CUresult values and names.
#
# usage: gen_symbols.sh [CUDA_HOME]   (writes next to this script)
set -eu
export LC_ALL=C
cuda=${1:-/usr/local/cuda}
here=$(cd "$(dirname "$0")" && pwd)
stub=$cuda/lib64/stubs/libcuda.so
typedefs=$cuda/include/cudaTypedefs.h
[ -r "$stub" ] && [ -r "$typedefs" ] || { echo "gen_symbols.sh: no $stub or $typedefs" >&2; exit 1; }

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
readelf --dyn-syms -W "$stub" | awk '$4 == "FUNC" && $7 != "UND" { print $8 }' | sort -u >"$tmp"
{
  echo "# every function of libcuda.so.1 ($(basename "$cuda"), made by gen_symbols.sh)"
  cat "$tmp"
} >"$here/cu_symbols.txt"

grep -o 'PFN_cu[A-Za-z0-9_]*_v[0-9][0-9]*\(_ptds\|_ptsz\)\?\b' "$typedefs" | sort -u |
  awk -v exports="$tmp" '
  BEGIN { while ((getline s < exports) > 0) have[s] = 1 }
  {
    t = substr($0, 5)                      # cuName_v1234[_ptsz]
    variant = "plain"
    if (t ~ /_ptds$/ || t ~ /_ptsz$/) { variant = substr(t, length(t) - 3); t = substr(t, 1, length(t) - 5) }
    n = match(t, /_v[0-9]+$/)
    base = substr(t, 1, n - 1); ver = substr(t, n + 2) + 0
    key = base SUBSEP ver SUBSEP variant
    if (key in seen) next
    seen[key] = 1
    rows[++nrows] = base " " ver " " variant
    if (variant == "plain") { nv[base]++; vers[base, nv[base]] = ver }
  }
  END {
    # plain versions oldest first give the export suffix
    for (b in nv) for (i = 1; i <= nv[b]; i++) for (j = i + 1; j <= nv[b]; j++)
      if (vers[b, j] < vers[b, i]) { x = vers[b, i]; vers[b, i] = vers[b, j]; vers[b, j] = x }
    print "# name version variant export (made by gen_symbols.sh from cudaTypedefs.h)"
    for (r = 1; r <= nrows; r++) {
      split(rows[r], f, " ")
      b = f[1]; v = f[2]; var = f[3]; k = 0
      for (i = 1; i <= nv[b]; i++) if (vers[b, i] <= v) k = i
      if (k == 0) { printf "gen_symbols.sh: %s_v%d_%s has no plain version\n", b, v, var > "/dev/stderr"; continue }
      sym = (k == 1) ? b : b "_v" k
      if (var != "plain") sym = sym "_" var
      if (!(sym in have)) { printf "gen_symbols.sh: %s %d %s: no export %s\n", b, v, var, sym > "/dev/stderr"; continue }
      print b, v, var, sym
    }
  }' | sort -k1,1 -k3,3 -k2,2n >"$here/cu_procs.txt"
{
  echo "# CUresult value and name (made by gen_symbols.sh from cuda.h)"
  awk '/^typedef enum cudaError_enum/ { on = 1 }
       on && /^ *CUDA_[A-Z_0-9]+ *= *[0-9]+/ { v = $3; sub(/,/, "", v); print v, $1 }
       on && /} CUresult;/ { exit }' "$cuda/include/cuda.h"
} >"$here/cu_errors.txt"
echo "gen_symbols.sh: $(grep -vc '^#' "$here/cu_symbols.txt") exports, $(grep -vc '^#' "$here/cu_procs.txt") versioned names"
