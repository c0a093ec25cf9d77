#!/bin/bash
# Build NVIDIA cuda-samples the two ways users build them, for
# bench/samples/run_gpu.sh:
#   <name>.shared  nvcc -O2 -arch=sm_90 -cudart shared ...
#   <name>.static  nvcc -O2 -arch=sm_90 ...            (nvcc's default static runtime)
#
#   bench/samples/build.sh CHECKOUT OUTDIR [SAMPLE...]
#
# CHECKOUT is a cuda-samples work tree (commit c94ff366, CUDA 13.0), OUTDIR
# gets one run directory per sample: OUTDIR/<name>/ with both binaries
# (stripped), the driver samples' kernel fatbin, and the data files the
# sample reads (its data/ directory as data/, and the files its
# CMakeLists.txt copies next to the binary). OUTDIR/samples.txt is the
# manifest run_gpu.sh reads; OUTDIR/build.log says what built and why not.
#
# Per sample the flags follow its CMakeLists.txt: the sources of its
# add_executable() (all .cu/.cpp/.c of the directory when none is found),
# -rdc=true where CUDA_SEPARABLE_COMPILATION is ON, --extended-lambda,
# -std=c++17, its include directories, its CUDA:: libraries (-lcublas,
# -lcufft, ...; the math libraries are linked dynamically), OpenMP.
#
# Environment: JOBS (parallel nvcc jobs, default 2), NVCC (default
# /usr/local/cuda/bin/nvcc), ARCH (default 90), BUILDS ("shared static"),
# PACK=FILE.tar.xz (pack OUTDIR into FILE after building), FORCE=1
# (rebuild binaries that are already there; by default they are kept),
# PACK_ONLY=1 (build nothing: write build.log and samples.txt from what is
# there, and pack).
# shellcheck disable=SC2317,SC2016 # functions run through xargs; literal ${...} in patterns
set -u

CHECKOUT=${1:?usage: build.sh CHECKOUT OUTDIR [SAMPLE...]}
OUTDIR=${2:?usage: build.sh CHECKOUT OUTDIR [SAMPLE...]}
shift 2
JOBS=${JOBS:-2}
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
ARCH=${ARCH:-90}
BUILDS=${BUILDS:-"shared static"}
CHECKOUT=$(cd "$CHECKOUT" && pwd) || exit 2
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd) || exit 2
mkdir -p "$OUTDIR/.logs"

# name|kind|args|pass regex   (kind: runtime, driver, library)
# args: what makes the sample run non-interactively; the compatibility
# table used the defaults, so most have none. Pass regex: the sample's
# own pass message (ERE, the rest of the line: it may hold '|'), empty
# where it prints none (exit code only).
MANIFEST='
vectorAddDrv|driver||Result = PASS
matrixMulDrv|driver||Result = PASS
simpleDrvRuntime|driver||Result = PASS
deviceQueryDrv|driver||Result = PASS
simpleTextureDrv|driver||
simpleCUBLAS|library||simpleCUBLAS test passed
batchCUBLAS|library||gemm test OK
matrixMulCUBLAS|library||with CPU results: PASS
simpleCUBLAS_LU|library||TEST SUCCESSFUL
simpleCUFFT|library||
convolutionFFT2D|library||Test passed
conjugateGradient|library||
conjugateGradientPrecond|library||Convergence Test: OK
MersenneTwisterGP11213|library||
MC_EstimatePiP|library||
cuSolverDn_LinearSolver|library||
cuSolverSp_LinearSolver|library||
simpleCUBLASXT|library||simpleCUBLASXT test passed
vectorAdd|runtime||Test PASSED
matrixMul|runtime||Result = PASS
asyncAPI|runtime||
simpleStreams|runtime||
simpleOccupancy|runtime||Test PASSED
convolutionSeparable|runtime||Test passed
binomialOptions|runtime||Test passed
deviceQuery|runtime||Result = PASS
simplePrintf|runtime||
LargeKernelParameter|runtime||Test passed!
radixSortThrust|runtime||Test passed
simpleMultiCopy|runtime||
BlackScholes|runtime||Test passed
transpose|runtime||Test passed
mergeSort|runtime||
alignedTypes|runtime||Test passed
bf16TensorCoreGemm|runtime||
binaryPartitionCG|runtime||
clock|runtime||
convolutionTexture|runtime||Test passed
cudaGraphsPerfScaling|runtime||Test passed
cudaTensorCoreGemm|runtime||
dct8x8|runtime||Test passed
dmmaTensorCoreGemm|runtime||
dxtc|runtime||Test passed
eigenvalues|runtime||Test Succeeded!
fastWalshTransform|runtime||Test passed
FDTD3d|runtime||
fp16ScalarProduct|runtime||PASSED
globalToShmemAsyncCopy|runtime||Result = PASS
graphConditionalNodes|runtime||
graphMemoryFootprint|runtime||
graphMemoryNodes|runtime||Validation PASSED
histogram|runtime||Test passed
HSOpticalFlow|runtime||
immaTensorCoreGemm|runtime||
inlinePTX|runtime||Successful
interval|runtime||
jacobiCudaGraphs|runtime||PASSED
MC_EstimatePiInlineP|runtime||
MC_SingleAsianOptionP|runtime||
newdelete|runtime||Test Summary: 3/3 succesfully run
quasirandomGenerator|runtime||
reduction|runtime||Test passed
reductionMultiBlockCG|runtime||
scalarProd|runtime||Test passed
scan|runtime||
segmentationTreeThrust|runtime||
shfl_scan|runtime||
simpleAssert|runtime||completed, returned OK
simpleAtomicIntrinsics|runtime||completed, returned OK
simpleAttributes|runtime||
simpleAWBarrier|runtime||PASSED
simpleCallback|runtime||
simpleCooperativeGroups|runtime||
simpleCubemapTexture|runtime||
simpleCudaGraphs|runtime||
simpleHyperQ|runtime||
simpleLayeredTexture|runtime||
simplePitchLinearTexture|runtime||completed, returned OK
simpleSurfaceWrite|runtime||completed, returned OK
simpleTemplates|runtime||Compare OK
simpleTexture|runtime||completed, returned OK
simpleVoteIntrinsics|runtime||
simpleZeroCopy|runtime||
SobolQRNG|runtime||
sortingNetworks|runtime||
stereoDisparity|runtime||
streamOrderedAllocation|runtime||streamOrderedAllocationPostSync PASSED
StreamPriorities|runtime||
systemWideAtomics|runtime||completed, returned OK
template|runtime||
tf32TensorCoreGemm|runtime||
threadFenceReduction|runtime||
topologyQuery|runtime||
UnifiedMemoryPerf|runtime||
warpAggregatedAtomicsCG|runtime||PASSED
UnifiedMemoryStreams|library||All Done!
conjugateGradientUM|library||conjugateGradientUM PASSED
conjugateGradientMultiBlockCG|runtime||conjugateGradientMultiBlockCG PASSED
ptxjit|driver||
matrixMulDynlinkJIT|driver||
cudaCompressibleMemory|driver||
simpleIPC|runtime||
streamOrderedAllocationIPC|runtime||
memMapIPCDrv|driver||
simpleP2P|runtime||Test passed
p2pBandwidthLatencyTest|runtime||
streamOrderedAllocationP2P|runtime||PASSED
'

manifest_names() { printf '%s\n' "$MANIFEST" | awk -F'|' 'NF>1 {print $1}'; }

if [ $# -gt 0 ]; then NAMES="$*"; else NAMES=$(manifest_names); fi

sample_dir() {  # Samples/*/<name>
  local d
  for d in "$CHECKOUT"/Samples/*/"$1"; do
    [ -d "$d" ] && { printf '%s\n' "$d"; return 0; }
  done
  return 1
}

# The flags for one sample (printed one per line), from its CMakeLists.txt.
sample_flags() {
  local d=$1 name=$2 cm=$1/CMakeLists.txt lib
  grep -q 'CUDA_SEPARABLE_COMPILATION ON' "$cm" && echo "-rdc=true"
  grep -q 'extended-lambda' "$cm" && echo "--extended-lambda"
  echo "-std=c++17"
  echo "-Wno-deprecated-gpu-targets"
  echo "-I$CHECKOUT/Common"
  echo "-I$d"
  [ -d "$d/inc" ] && echo "-I$d/inc"
  grep -qi 'OpenMP' "$cm" && { echo "-Xcompiler"; echo "-fopenmp"; }
  # CUDA::cudart / cudart_static are -cudart's business.
  # The other CUDA:: targets carry their dependencies, as CMake's
  # FindCUDAToolkit declares them (cusolver needs cublas and cusparse, ...).
  for lib in $(grep -o 'CUDA::[A-Za-z_]*' "$cm" | sort -u); do
    case $lib in
      CUDA::cudart|CUDA::cudart_static) ;;
      CUDA::cuda_driver) echo "-lcuda" ;;
      CUDA::cublas) printf '%s\n' -lcublas -lcublasLt ;;
      CUDA::cusparse) printf '%s\n' -lcusparse -lnvJitLink ;;
      CUDA::cusolver) printf '%s\n' -lcusolver -lcublas -lcublasLt -lcusparse -lnvJitLink ;;
      *) echo "-l${lib#CUDA::}" ;;
    esac
  done | awk '!seen[$0]++'
  return 0
}

# Sources of add_executable(<name> ...), relative to the sample directory.
sample_sources() {
  local d=$1 name=$2 srcs
  srcs=$(tr '\n' ' ' < "$d/CMakeLists.txt" |
         grep -o "add_executable( *$name [^)]*)" | head -n 1 |
         sed "s/add_executable( *$name //; s/)//")
  if [ -z "$srcs" ]; then
    srcs=$(cd "$d" && find . -maxdepth 2 \( -name '*.cu' -o -name '*.cpp' -o -name '*.c' \) | sed 's|^\./||' | sort)
  fi
  printf '%s\n' $srcs
}

# One job: build <name>.<build> into OUTDIR/<name>/.
build_one() {
  local name=$1 build=$2 d rd log flags srcs s out rc
  rd=$OUTDIR/$name
  log=$OUTDIR/.logs/$name.$build.log
  d=$(sample_dir "$name") || { echo "$name $build FAIL no such sample in $CHECKOUT/Samples" > "$log.res"; return 0; }
  mkdir -p "$rd"
  mapfile -t flags < <(sample_flags "$d" "$name")
  mapfile -t srcs < <(sample_sources "$d" "$name")
  for s in "${!srcs[@]}"; do srcs[$s]=$d/${srcs[$s]}; done
  out=$rd/$name.$build
  if [ -z "${FORCE:-}" ] && [ -s "$out" ]; then
    echo "$name $build OK $(stat -c %s "$out") (kept)" > "$log.res"; return 0
  fi
  local cudart=()
  [ "$build" = shared ] && cudart=(-cudart shared)
  local tmp
  tmp=$(mktemp -d) || return 0
  {
    echo "+ cd $tmp && $NVCC -O2 -arch=sm_$ARCH ${cudart[*]} ${flags[*]} -o $out ${srcs[*]}"
    (cd "$tmp" && "$NVCC" -O2 -arch=sm_"$ARCH" "${cudart[@]}" "${flags[@]}" -o "$out.tmp" "${srcs[@]}")
  } > "$log" 2>&1
  rc=$?
  rm -rf "$tmp"
  if [ $rc -eq 0 ] && strip "$out.tmp" >> "$log" 2>&1 && mv "$out.tmp" "$out"; then
    echo "$name $build OK $(stat -c %s "$out")" > "$log.res"
  else
    rm -f "$out.tmp"
    local why
    why=$(grep -m1 -E 'undefined reference' "$log" || grep -m1 -E 'error:|fatal|Error ' "$log")
    why=$(printf '%s' "$why" | sed 's|/tmp/tmpxft_[^ ]*||' | cut -c1-200)
    echo "$name $build FAIL nvcc rc=$rc: ${why:-see .logs/$name.$build.log}" > "$log.res"
  fi
  return 0
}

# Fatbin of a driver sample, as its CMakeLists.txt builds it, into the run directory.
build_fatbin() {
  local name=$1 d rd cm fb ks log rc
  d=$(sample_dir "$name") || return 0
  rd=$OUTDIR/$name; cm=$d/CMakeLists.txt
  # a fat binary, or PTX for the driver to compile (ptxjit)
  local mode=-fatbin
  fb=$(grep -o 'set(CUDA_FATBIN_FILE "[^"]*"' "$cm" | head -n1 | sed 's|.*/||; s|"||')
  if [ -z "$fb" ]; then
    fb=$(grep -o 'set(CUDA_PTX_FILE "[^"]*"' "$cm" | head -n1 | sed 's|.*/||; s|"||')
    mode=-ptx
  fi
  ks=$(grep -o 'set(CUDA_KERNEL_SOURCE "[^"]*"' "$cm" | head -n1 | sed 's|.*/||; s|"||')
  [ -n "$fb" ] && [ -n "$ks" ] || return 0
  mkdir -p "$rd"
  [ -z "${FORCE:-}" ] && [ -s "$rd/$fb" ] && [ -s "$OUTDIR/.logs/$name.fatbin.log.res" ] && return 0
  log=$OUTDIR/.logs/$name.fatbin.log
  local arch=(-gencode=arch=compute_"$ARCH",code=sm_"$ARCH")
  [ $mode = -ptx ] && arch=(-arch=compute_"$ARCH")
  echo "+ $NVCC -I$CHECKOUT/Common -Wno-deprecated-gpu-targets ${arch[*]} -o $rd/$fb $mode $d/$ks" > "$log"
  (cd "$d" && "$NVCC" -I"$CHECKOUT/Common" -Wno-deprecated-gpu-targets \
      "${arch[@]}" -o "$rd/$fb" $mode "$d/$ks") >> "$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then echo "$name fatbin OK $fb" > "$log.res"
  else echo "$name fatbin FAIL nvcc rc=$rc: $(grep -m1 -i error "$log" | cut -c1-200)" > "$log.res"; fi
  return 0
}

# Data files: the sample's data/ directory as data/ (sdkFindFilePath looks
# in ./ and ./data/), and the files its CMakeLists.txt copies next to the
# binary (copy_if_different of a file) or data-like files at its top level.
copy_data() {
  local name=$1 d rd f
  d=$(sample_dir "$name") || return 0
  rd=$OUTDIR/$name
  mkdir -p "$rd"
  [ -d "$d/data" ] && { rm -rf "$rd/data"; cp -r "$d/data" "$rd/data"; }
  for f in "$d"/*; do
    [ -f "$f" ] || continue
    case $f in
      */CMakeLists.txt) ;;
      *.ppm|*.pgm|*.bmp|*.dat|*.mtx|*.flo|*.raw|*.bin|*.txt) cp "$f" "$rd/" ;;
    esac
  done
  # copy_if_different ${CMAKE_CURRENT_SOURCE_DIR}/data/<file> next to the binary.
  tr '\n' ' ' < "$d/CMakeLists.txt" | grep -o 'copy_if_different *\${CMAKE_CURRENT_SOURCE_DIR}/data/[A-Za-z0-9_.]*' |
    sed 's|.*/data/||' | while read -r f; do
      [ -f "$rd/data/$f" ] && ln -f "$rd/data/$f" "$rd/$f"   # a hard link: stored once in the tarball
    done
  # copy_directory data -> binary dir itself (simpleSurfaceWrite)
  if tr '\n' ' ' < "$d/CMakeLists.txt" | grep -q 'copy_directory *\${CMAKE_CURRENT_SOURCE_DIR}/data *\${CMAKE_CURRENT_BINARY_DIR} *)'; then
    cp -alf "$rd/data/." "$rd/"
  fi
  return 0
}

export -f build_one build_fatbin sample_dir sample_flags sample_sources
export CHECKOUT OUTDIR NVCC ARCH FORCE

echo "build.sh: $(echo "$NAMES" | wc -w) samples x ($BUILDS), $JOBS jobs, into $OUTDIR"
"$NVCC" --version | tail -n 2
start=$(date +%s)

if [ -z "${PACK_ONLY:-}" ]; then
for n in $NAMES; do copy_data "$n"; done
# Fatbins first (small), then the binaries; list order = build order.
for n in $NAMES; do
  d=$(sample_dir "$n") || continue
  grep -qE 'CUDA_(FATBIN|PTX)_FILE' "$d/CMakeLists.txt" && echo "$n"
done | xargs -r -P "$JOBS" -I{} bash -c 'build_fatbin "$1"' _ {}
for n in $NAMES; do for b in $BUILDS; do echo "$n $b"; done; done |
  xargs -r -P "$JOBS" -L 1 bash -c 'build_one "$1" "$2"; cat "$OUTDIR/.logs/$1.$2.log.res"' _
fi

# build.log: every result; samples.txt: the manifest, for the samples
# that have at least one binary.
{
  echo "# build.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) checkout=$CHECKOUT nvcc=$("$NVCC" --version | grep -o 'release [0-9.]*')"
  for n in $NAMES; do
    cat "$OUTDIR/.logs/$n.fatbin.log.res" 2>/dev/null
    for b in $BUILDS; do
      if [ -s "$OUTDIR/$n/$n.$b" ] || [ -s "$OUTDIR/.logs/$n.$b.log.res" ]; then
        cat "$OUTDIR/.logs/$n.$b.log.res" 2>/dev/null || echo "$n $b OK $(stat -c %s "$OUTDIR/$n/$n.$b")"
      else
        echo "$n $b FAIL not built (yet)"
      fi
    done
  done
} > "$OUTDIR/build.log"
{
  echo "# name|kind|rundir|args|pass regex (ERE; empty: exit code only)"
  printf '%s\n' "$MANIFEST" | awk -F'|' 'NF>1' | while IFS='|' read -r name kind args regex; do
    ls "$OUTDIR/$name/$name".* >/dev/null 2>&1 || continue
    printf '%s|%s|%s|%s|%s\n' "$name" "$kind" "$name" "$args" "$regex"
  done
} > "$OUTDIR/samples.txt"

for b in $BUILDS; do
  echo "build.sh: $b: $(grep -c " $b OK" "$OUTDIR/build.log") built, $(grep -c " $b FAIL" "$OUTDIR/build.log") failed"
done
grep ' FAIL' "$OUTDIR/build.log" | sed 's/^/  /'
echo "build.sh: $(( $(date +%s) - start )) s"

if [ -n "${PACK:-}" ]; then
  mkdir -p "$(dirname "$PACK")"
  mapfile -t dirs < <(awk -F'|' '!/^#/ && NF > 1 {print $3}' "$OUTDIR/samples.txt" | sort -u)
  (cd "$OUTDIR" && tar --exclude=.logs --exclude='*.tmp' -cf - samples.txt build.log "${dirs[@]}") |
    xz -9e -T"$JOBS" > "$PACK.tmp" && mv "$PACK.tmp" "$PACK"
  echo "build.sh: packed $PACK ($(stat -c %s "$PACK") bytes)"
fi
exit 0
