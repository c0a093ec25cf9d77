// CHECK(call): a CUDA call that must succeed; otherwise the program says
// where and why ("FAIL file:line: call -> cudaErrorName") and exits 3.
// Shared by the test programs (tests/apps) and the benchmarks (bench/apps).
#ifndef FERRY_CUDA_CHECK_H
#define FERRY_CUDA_CHECK_H

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      printf("FAIL %s:%d: %s -> %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
      exit(3);                                                                            \
    }                                                                                     \
  } while (0)

#endif
