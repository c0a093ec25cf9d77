// The kernels and the check of graphs.cu and graph_host.cu (one CPU twin
// each in the simulation's kernels), shared so that they stay one. The
// including program defines `int failures`.
#ifndef FERRY_TESTS_GRAPH_KERNELS_H
#define FERRY_TESTS_GRAPH_KERNELS_H

#include <cstdio>

// x[i] = x[i] * a + b
__global__ void g_axpb(unsigned *x, int n, unsigned a, unsigned b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}
// dst[i] += src[i]
__global__ void g_add(unsigned *dst, const unsigned *src, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] += src[i];
}

#define EXPECT(cond, ...)                                                                     \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      printf("FAIL line %d: ", __LINE__);                                                   \
      printf(__VA_ARGS__);                                                                  \
      printf("\n");                                                                         \
      failures++;                                                                           \
    }                                                                                       \
  } while (0)

#endif
