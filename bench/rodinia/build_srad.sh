#!/bin/bash
# Build Rodinia's srad_v2 (CUDA) the two ways users build CUDA programs, for
# running it natively and through ferry:
#   srad.shared      nvcc -O2 -arch=sm_$ARCH -lineinfo -cudart shared ...  (reaches ferry's libcudart.so.13)
#   srad.static      nvcc -O2 -arch=sm_$ARCH -lineinfo ...                 (nvcc's default static runtime;
#                                                                           reaches ferry's libcuda.so.1)
#   srad_out.shared  the same with -DOUTPUT: the program prints the final
#   srad_out.static  image, so that native and ferry runs can be compared
#
#   bench/rodinia/build_srad.sh CHECKOUT OUTDIR
#
# CHECKOUT is a Rodinia 3.1 tree (e.g. github.com/yuhc/gpu-rodinia; the
# script fetches nothing) or its cuda/srad/srad_v2 directory. Its sources
# are compiled as they are: CUDA 13 removed cudaThreadSynchronize, which
# srad.cu calls once, so it is mapped to cudaDeviceSynchronize on the
# command line. OUTDIR also gets srad.args, the arguments of the tree's
# run script (./srad 2048 2048 0 127 0 127 0.5 2), and build.log.
#
# Environment: NVCC (default /usr/local/cuda/bin/nvcc), ARCH (default 90).
set -u
usage="usage: build_srad.sh CHECKOUT OUTDIR"
CHECKOUT=${1:?$usage}
OUTDIR=${2:?$usage}
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
ARCH=${ARCH:-90}

src=
for d in "$CHECKOUT/cuda/srad/srad_v2" "$CHECKOUT"; do
  if [ -f "$d/srad.cu" ] && [ -f "$d/srad_kernel.cu" ] && [ -f "$d/srad.h" ]; then
    src=$(cd "$d" && pwd)
    break
  fi
done
[ -n "$src" ] || { echo "build_srad.sh: no srad_v2 sources (srad.cu, srad_kernel.cu, srad.h) in $CHECKOUT" >&2; exit 2; }
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd) || exit 2
log=$OUTDIR/build.log
: >"$log"

# the run script's arguments; the benchmark's defaults when it has none
args=$(sed -n 's|^[[:space:]]*\./srad[[:space:]]\{1,\}||p' "$src/run" 2>/dev/null | head -n 1)
echo "${args:-2048 2048 0 127 0 127 0.5 2}" >"$OUTDIR/srad.args"

flags=(-O2 "-arch=sm_$ARCH" -lineinfo -DcudaThreadSynchronize=cudaDeviceSynchronize)
failed=0
build() { # NAME EXTRA-FLAGS...
  local name=$1
  shift
  echo "== $name: $NVCC ${flags[*]} $* srad.cu" >>"$log"
  # srad.cu includes srad_kernel.cu and srad.h from its own directory
  if (cd "$src" && "$NVCC" "${flags[@]}" "$@" srad.cu -o "$OUTDIR/$name") >>"$log" 2>&1; then
    echo "built $OUTDIR/$name"
  else
    echo "build_srad.sh: $name failed (see $log)" >&2
    failed=1
  fi
}
build srad.shared -cudart shared
build srad.static
build srad_out.shared -DOUTPUT -cudart shared
build srad_out.static -DOUTPUT
exit $failed
