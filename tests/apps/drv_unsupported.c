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

  /* managed memory is served (docs/mapped-memory.md): allocated, known as
     managed, freed */
  CUdeviceptr m = 0;
  CUresult r = cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL);
  printf("cuMemAllocManaged=%s\n", cu_name(r));
  EXPECT(r == CUDA_SUCCESS);
  int is_managed = 0;
  if (r == CUDA_SUCCESS) {
    EXPECT(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m) == CUDA_SUCCESS);
    EXPECT(is_managed == 1);
    EXPECT(cuMemFree(m) == CUDA_SUCCESS);
  }

  /* graph memory allocation nodes, twice: not served, and the second
     refusal says nothing new */
  CUgraphNode node = NULL;
  r = cuGraphAddMemAllocNode(&node, NULL, NULL, 0, NULL);
  printf("cuGraphAddMemAllocNode=%s\n", cu_name(r));
  EXPECT(r == CUDA_ERROR_NOT_SUPPORTED);
  r = cuGraphAddMemAllocNode(&node, NULL, NULL, 0, NULL);
  EXPECT(r == CUDA_ERROR_NOT_SUPPORTED);

  /* a JIT option that carries the program's addresses */
  CUjit_option opt[2] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_GLOBAL_SYMBOL_ADDRESSES};
  void *addrs[1] = {NULL}, *val[2] = {(void *)3, addrs};
  CUlinkState link = NULL;
  r = cuLinkCreate(2, opt, val, &link);
  printf("cuLinkCreate GLOBAL_SYMBOL_ADDRESSES=%s\n", cu_name(r));
  EXPECT(r == CUDA_ERROR_NOT_SUPPORTED);

  /* a link whose table of inputs (their names) exceeds one message */
  CU(cuLinkCreate(0, NULL, NULL, &link));
  static char name[4001];
  memset(name, 'n', 4000);
  static const char ptx[] = ".version 9.0\n.target sm_90\n.address_size 64\n";
  for (int i = 0; i < 300; i++)
    CU(cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)ptx, sizeof ptx, name, 0, NULL, NULL));
  void *cubin;
  size_t size;
  r = cuLinkComplete(link, &cubin, &size);
  printf("cuLinkComplete 300 long names=%s\n", cu_name(r));
  EXPECT(r == CUDA_ERROR_NOT_SUPPORTED);
  CU(cuLinkDestroy(link));

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
