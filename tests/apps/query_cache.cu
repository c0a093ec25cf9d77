// The answers ferry keeps instead of asking the GPU again (the query
// cache): the stack limit, asked before kernels as cuDNN does, and a
// function's attributes. An answer holds until something may change it: a
// limit set, or the first launch of a kernel since then (CUDA grows the
// stack limit for a kernel that needs more). tests/e2e/e2e.sh counts the
// round trips FERRY_STATS shows; the program checks the values.
// usage: query_cache
#include <cstdio>

#include "cuda_check.h"

__global__ void qc_add(unsigned *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1u;
}
__global__ void qc_triple(unsigned *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= 3u;
}

static size_t stack_limit_asked(int times) {
  size_t first = 0, v = 0;
  for (int i = 0; i < times; i++) {
    CHECK(cudaDeviceGetLimit(&v, cudaLimitStackSize));
    if (i == 0) first = v;
    if (v != first) {
      printf("FAIL the stack limit changed between two questions: %zu, then %zu\n", first, v);
      exit(1);
    }
  }
  return v;
}

int main() {
  const int n = 1000;
  unsigned *d;
  CHECK(cudaMalloc(&d, n * sizeof(unsigned)));
  CHECK(cudaMemset(d, 0, n * sizeof(unsigned)));
  size_t before = stack_limit_asked(5); // one round trip
  cudaFuncAttributes fa;
  for (int i = 0; i < 5; i++) CHECK(cudaFuncGetAttributes(&fa, qc_add)); // one
  qc_add<<<(n + 255) / 256, 256>>>(d, n);
  stack_limit_asked(5); // one: a kernel's first launch
  qc_add<<<(n + 255) / 256, 256>>>(d, n);
  stack_limit_asked(5); // none
  qc_triple<<<(n + 255) / 256, 256>>>(d, n);
  stack_limit_asked(5); // one
  size_t want = before + 1024;
  CHECK(cudaDeviceSetLimit(cudaLimitStackSize, want));
  size_t after = stack_limit_asked(5); // one
  qc_add<<<(n + 255) / 256, 256>>>(d, n);
  stack_limit_asked(5); // one: launched before the limit was set
  unsigned h[n];
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < n; i++) bad += h[i] != 7u;
  printf("stack limit %zu, set %zu, now %zu; %d wrong\n", before, want, after, bad);
  if (bad || after < want || fa.maxThreadsPerBlock <= 0) {
    printf("FAILED\n");
    return 1;
  }
  printf("PASSED\n");
  return 0;
}
