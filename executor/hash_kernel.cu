/*
 * ferry's own kernel behind the mem_hash call (executor/exec_hash.c): one
 * block of FERRY_HASH_THREADS threads per piece computes ferry_chunk_hash
 * (common/chunk_hash.h) of that piece. The build embeds the committed PTX,
 * so it needs no nvcc; after editing this file or chunk_hash.h regenerate it
 * from the repository root (ctest test_mem_hash_ptx checks it):
 *
 *   nvcc -ptx -arch=compute_75 -I. -o executor/hash_kernel.ptx executor/hash_kernel.cu
 *   sed -i 's/^\.version [0-9.]*$/.version 6.3/' executor/hash_kernel.ptx
 *   ptxas -arch=sm_75 -o /dev/null executor/hash_kernel.ptx
 *
 * PTX ISA 6.3 is the lowest with sm_75 (CUDA 10.0), so older drivers can
 * JIT it. The simulation runs sim/sim_builtin.c's twin instead; its
 * parameter layout must stay this one: two pointers at offsets 0 and 8.
 */
#include "common/chunk_hash.h"

/* pieces: {addr, len} per block; hashes: one per block. Both are pinned
   host memory mapped for the device; addr is 8-aligned. */
extern "C" __global__ void __launch_bounds__(FERRY_HASH_THREADS)
    ferry_hash_pieces(const uint64_t *pieces, uint64_t *hashes) {
  __shared__ uint64_t part[FERRY_HASH_THREADS];
  const uint64_t b = blockIdx.x;
  const uint64_t addr = pieces[2 * b], len = pieces[2 * b + 1];
  const uint64_t *w = (const uint64_t *)addr;
  const uint64_t nfull = len / 8;
  uint64_t sum = 0;
  for (uint64_t i = threadIdx.x; i < nfull; i += FERRY_HASH_THREADS)
    sum += ferry_hash_term(w[i], i);
  if (threadIdx.x == 0 && len % 8) /* the tail, read byte by byte */
    sum += ferry_hash_term(ferry_hash_tail((const unsigned char *)(w + nfull), len % 8), nfull);
  part[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned s = FERRY_HASH_THREADS / 2; s > 0; s /= 2) {
    if (threadIdx.x < s)
      part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    hashes[b] = ferry_hash_final(part[0], len);
}
