// A kernel whose thread 3 fails an assert, after every thread printed a
// line: CUDA prints the printf output on stdout and the assert's message
// on stderr at the next synchronization, which returns cudaErrorAssert,
// and the context stays unusable (a later call returns the same error).
// ferry must deliver both streams and the error, remotely as natively.
// Prints "sync: <error name>", "after: <error name>"; exits 0 when both
// are cudaErrorAssert.
#include <cassert>
#include <cstdio>

#include "cuda_check.h"

__global__ void checked(int *out, int bad) {
  int i = threadIdx.x;
  printf("thread %d checks\n", i);
  assert(i != bad);
  out[i] = i;
}

int main() {
  int *d;
  CHECK(cudaMalloc(&d, 32 * sizeof(int)));
  checked<<<1, 8>>>(d, 3);
  cudaError_t sync = cudaDeviceSynchronize();
  printf("sync: %s\n", cudaGetErrorName(sync));
  cudaError_t after = cudaMemset(d, 0, 4);
  if (after == cudaSuccess) after = cudaDeviceSynchronize();
  printf("after: %s\n", cudaGetErrorName(after));
  fflush(stdout);
  return sync == cudaErrorAssert && after == cudaErrorAssert ? 0 : 1;
}
