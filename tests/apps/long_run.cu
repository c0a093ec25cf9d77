// Runs kernels and copies in a loop for a while. The robustness tests kill
// the server under it: the program must then get CUDA errors, not hang or
// crash. It exits 0 when all iterations ran, 3 when a CUDA call failed.
// usage: long_run [ITERATIONS=200 [PAUSE_MS=20 [KERNEL_MS=0]]]
//   KERNEL_MS > 0: each iteration's kernel runs that long (a call that
//   waits for it outlasts a short FERRY_CALL_TIMEOUT, and must not fail)
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <cuda_runtime.h>

__global__ void spin(int *counter) { *counter += 1; }

__global__ void slow(int *counter, int ms) {
  for (int i = 0; i < ms; i++) __nanosleep(1000000);
  *counter += 1;
}

int main(int argc, char **argv) {
  int iterations = argc > 1 ? atoi(argv[1]) : 200;
  int pause_ms = argc > 2 ? atoi(argv[2]) : 20;
  int kernel_ms = argc > 3 ? atoi(argv[3]) : 0;
  int *d = nullptr, h = 0;
  cudaError_t e = cudaMalloc(&d, sizeof(int));
  if (e == cudaSuccess) e = cudaMemset(d, 0, sizeof(int));
  for (int i = 0; e == cudaSuccess && i < iterations; i++) {
    if (kernel_ms > 0)
      slow<<<1, 1>>>(d, kernel_ms);
    else
      spin<<<1, 1>>>(d);
    e = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && h != i + 1) {
      fprintf(stderr, "long_run: wrong counter %d at iteration %d\n", h, i);
      return 1;
    }
    if (i == 0) {
      printf("long_run: running\n");
      fflush(stdout);
    }
    usleep(pause_ms * 1000);
  }
  if (e != cudaSuccess) {
    printf("long_run: CUDA error %s (%s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
    // every later call fails too, quickly
    cudaError_t again = cudaDeviceSynchronize();
    printf("long_run: next call: %s\n", cudaGetErrorName(again));
    return 3;
  }
  printf("long_run: %d iterations PASSED\n", iterations);
  return 0;
}
