// A program whose static object holds GPU memory and a stream and frees
// them in its destructor, after main returns, as thrust's caching allocator
// does (miniFE): the object is made after CUDA starts, so natively its
// destructor runs before CUDA's teardown. A vGPU moved into the process
// starts its driver later, whose teardown then comes first; ferry answers
// the frees as the driver would have. Each result of the destructor's calls
// is printed ("at exit: ..."); any error ends the program with status 3.
// usage: exit_free [ITERATIONS=20]
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "cuda_check.h"

extern "C" __global__ void fill_index(int *out, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = base + i;
}

static const int N = 1 << 16;

struct Held {
  int *p = nullptr;
  cudaStream_t s = nullptr;
  ~Held() {
    cudaError_t a = cudaStreamSynchronize(s), b = cudaFree(p), c = cudaStreamDestroy(s),
                d = cudaDeviceSynchronize();
    printf("at exit: %s %s %s %s\n", cudaGetErrorName(a), cudaGetErrorName(b), cudaGetErrorName(c),
           cudaGetErrorName(d));
    fflush(stdout);
    if (a || b || c || d) _exit(3);
  }
};

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20;
  CHECK(cudaFree(0)); // CUDA starts here, before the object is made
  static Held held;
  CHECK(cudaStreamCreate(&held.s));
  CHECK(cudaMalloc(&held.p, N * sizeof(int)));
  int *host = (int *)malloc(N * sizeof(int));
  int launches = 0;
  for (int it = 0; it < iters; it++) {
    fill_index<<<(N + 255) / 256, 256, 0, held.s>>>(held.p, N, it);
    launches++;
    CHECK(cudaMemcpyAsync(host, held.p, N * sizeof(int), cudaMemcpyDeviceToHost, held.s));
    CHECK(cudaStreamSynchronize(held.s));
    for (int i = 0; i < N; i += 997)
      if (host[i] != it + i) {
        printf("FAIL iteration %d: out[%d] = %d\n", it, i, host[i]);
        return 1;
      }
  }
  free(host);
  printf("launches: %d\nPASSED\n", launches);
  return 0;
}
