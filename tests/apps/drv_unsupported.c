/* Driver calls ferry does not forward: each must return
 * CUDA_ERROR_NOT_SUPPORTED (ferry says so once on stderr, naming the call)
 * and leave the context usable. ferry-only: on a real GPU these succeed.
 * Built as C with -lcuda (tests/e2e/driver.cmake).
 * Prints "<call>=<CUresult name>" for each, then "PASSED" or "FAILED: n".
 */
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "drv_check.h"

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  CUdevice dev;
  drv_primary(&dev);

  /* managed memory, twice: the second refusal says nothing new */
  CUdeviceptr m = 0;
  CUresult r = cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL);
  printf("cuMemAllocManaged=%s\n", cu_name(r));
  EXPECT(r == CUDA_ERROR_NOT_SUPPORTED);
  r = cuMemAllocManaged(&m, 8192, CU_MEM_ATTACH_GLOBAL);
  EXPECT(r == CUDA_ERROR_NOT_SUPPORTED);

  /* graph host nodes: ferry's graph nodes run on the server */
  CUgraphNode node = NULL;
  r = cuGraphAddHostNode(&node, NULL, NULL, 0, NULL);
  printf("cuGraphAddHostNode=%s\n", cu_name(r));
  EXPECT(r == CUDA_ERROR_NOT_SUPPORTED);

  /* a JIT option that carries the program's addresses */
  CUjit_option opt[2] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_GLOBAL_SYMBOL_ADDRESSES};
  void *addrs[1] = {NULL}, *val[2] = {(void *)3, addrs};
  CUlinkState link = NULL;
  r = cuLinkCreate(2, opt, val, &link);
  printf("cuLinkCreate GLOBAL_SYMBOL_ADDRESSES=%s\n", cu_name(r));
  EXPECT(r == CUDA_ERROR_NOT_SUPPORTED);

  /* no refusal is sticky */
  CUdeviceptr p;
  unsigned v = 0;
  CU(cuMemAlloc(&p, 64));
  CU(cuMemsetD32(p, 31u, 16));
  CU(cuMemcpyDtoH(&v, p + 60, 4));
  EXPECT(v == 31u);
  CU(cuMemFree(p));
  CU(cuCtxSynchronize());
  CU(cuDevicePrimaryCtxRelease(dev));
  return drv_summary();
}
