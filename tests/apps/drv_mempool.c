/* Stream-ordered allocation through the driver API (cuda.h only): the
 * default pool's release threshold at UINT64_MAX, a loop of
 * cuMemAllocAsync / launches / cuMemFreeAsync on two streams, then a pool of
 * its own (cuMemPoolCreate, cuMemAllocFromPoolAsync, cuDeviceSetMemPool),
 * pointer queries of pool memory, attributes, cuMemPoolTrimTo.
 *
 * usage: drv_mempool FATBIN [ITERATIONS=30 [N=65536]]
 *        drv_mempool FATBIN refusals   pool IPC refused (only under ferry)
 *   FATBIN: tests/apps/drv_kernels.cu as a fat binary (drv_mix, drv_fold).
 * All arithmetic is on integers and checked against the host's; prints
 * "launches: L", "checksum: <hex>", then "PASSED" or "FAILED: n".
 * CPU twins of the kernels: tests/twins/app_twins.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "drv_check.h"

#define BLOCK 256
#define SALT 5u
static int n, launches;
static CUfunction f_mix, f_fold;

static void launch(CUfunction f, CUstream s, void **params) {
  MUST(cuLaunchKernel(f, (unsigned)((n + BLOCK - 1) / BLOCK), 1, 1, BLOCK, 1, 1, 0, s, params, NULL));
  launches++;
}
/* x = seed everywhere, drv_mix(x, seed), drv_fold(acc, x); the host's twin */
static void step(CUdeviceptr acc, CUdeviceptr x, unsigned seed, CUstream s) {
  MUST(cuMemsetD32Async(x, seed, (size_t)n, s));
  void *mix[] = {&x, &n, &seed};
  launch(f_mix, s, mix);
  void *fold[] = {&acc, &x, &n};
  launch(f_fold, s, fold);
}
static void host_step(unsigned *acc, unsigned seed) {
  for (int i = 0; i < n; i++) acc[i] += (seed * 1664525u + SALT + seed + (unsigned)i) ^ (unsigned)i;
}
static unsigned long long attr(CUmemoryPool pool, CUmemPool_attribute a) {
  cuuint64_t v = 0;
  MUST(cuMemPoolGetAttribute(pool, a, &v));
  return (unsigned long long)v;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FATBIN [ITERATIONS [N]]\n", argv[0]);
    return 2;
  }
  int iters = argc > 2 ? atoi(argv[2]) : 30;
  n = argc > 3 ? atoi(argv[3]) : 65536;
  size_t bytes = (size_t)n * sizeof(unsigned);
  CUdevice dev;
  CUmodule mod;
  drv_primary(&dev);
  MUST(cuModuleLoad(&mod, argv[1]));
  MUST(cuModuleGetFunction(&f_mix, mod, "drv_mix"));
  MUST(cuModuleGetFunction(&f_fold, mod, "_Z8drv_foldPjPKji"));
  drv_set_salt(mod, SALT);

  CUmemoryPool pool, current;
  CU(cuDeviceGetDefaultMemPool(&pool, dev));
  if (argc > 2 && !strcmp(argv[2], "refusals")) {
    CUdeviceptr p;
    CUmemPoolPtrExportData data;
    CU(cuMemAllocAsync(&p, 4096, NULL));
    /* the default pool is not shareable */
    CU_IS(cuMemPoolExportPointer(&data, p), CUDA_ERROR_INVALID_VALUE);
    int fd;
    CU_IS(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          CUDA_ERROR_INVALID_VALUE);
    CU(cuMemFreeAsync(p, NULL));
    CU_IS(cuMemFreeAsync(p, NULL), CUDA_ERROR_INVALID_VALUE);
    CU(cuCtxSynchronize());
    return drv_summary();
  }
  CU(cuDeviceGetMemPool(&current, dev));
  EXPECT(pool == current);
  cuuint64_t keep = UINT64_MAX;
  CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
  EXPECT(attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == UINT64_MAX);

  CUstream s[2];
  CUdeviceptr acc[2];
  unsigned *want[2];
  for (int k = 0; k < 2; k++) {
    MUST(cuStreamCreate(&s[k], CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&acc[k], bytes));
    MUST(cuMemsetD32(acc[k], 0, (size_t)n));
    want[k] = calloc((size_t)n, sizeof(unsigned));
  }
  for (int i = 0; i < iters; i++) {
    for (int k = 0; k < 2; k++) {
      CUdeviceptr tmp;
      MUST(cuMemAllocAsync(&tmp, bytes, s[k]));
      unsigned seed = (unsigned)(i * 2 + k);
      step(acc[k], tmp, seed, s[k]);
      host_step(want[k], seed);
      MUST(cuMemFreeAsync(tmp, s[k]));
    }
    if (i % 5 == 4) MUST(cuStreamSynchronize(s[i % 2]));
  }

  /* a pool of its own, current for a while */
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = (int)dev;
  CUmemoryPool mine;
  CU(cuMemPoolCreate(&mine, &props));
  CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, (int)dev};
  CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  CU(cuMemPoolGetAccess(&flags, mine, &loc));
  EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CUdeviceptr q;
  CU(cuMemAllocFromPoolAsync(&q, bytes, mine, s[0]));
  CUmemoryPool owner = NULL;
  CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, q));
  EXPECT(owner == mine);
  owner = pool;
  CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, acc[0]));
  EXPECT(owner == NULL); /* cuMemAlloc's memory is no pool's */
  EXPECT(attr(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= bytes);
  step(acc[0], q, 777u, s[0]);
  host_step(want[0], 777u);
  CU(cuMemFreeAsync(q, s[0]));
  CU(cuDeviceSetMemPool(dev, mine));
  CU(cuDeviceGetMemPool(&current, dev));
  EXPECT(current == mine);
  CU(cuMemAllocAsync(&q, bytes, s[1]));
  step(acc[1], q, 888u, s[1]);
  host_step(want[1], 888u);
  CU(cuMemFreeAsync(q, s[1]));
  CU(cuDeviceSetMemPool(dev, pool));
  CU(cuCtxSynchronize());
  EXPECT(attr(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
  CU(cuMemPoolDestroy(mine));

  /* the default pool kept its blocks until trimmed */
  EXPECT(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
  EXPECT(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= bytes);
  EXPECT(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= bytes);
  CU(cuMemPoolTrimTo(pool, 0));
  printf("pool reserved after trim: %llu\n", attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));

  unsigned long long hash = 1469598103934665603ull;
  unsigned *got = malloc(bytes);
  for (int k = 0; k < 2; k++) {
    MUST(cuMemcpyDtoH(got, acc[k], bytes));
    EXPECT(memcmp(got, want[k], bytes) == 0);
    hash = drv_fnv(hash, got, bytes);
    MUST(cuMemFree(acc[k]));
    MUST(cuStreamDestroy(s[k]));
    free(want[k]);
  }
  free(got);
  printf("iterations: %d\nlaunches: %d\nchecksum: %016llx\n", iters, launches, hash);
  return drv_summary();
}
