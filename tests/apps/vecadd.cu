// The demo program: a vector addition that checks its own result. It knows
// nothing of ferry; run natively it uses the local GPU.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                               \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                \
              cudaGetErrorString(e_));                                            \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

__global__ void vecAdd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
  int iterations = argc > 2 ? atoi(argv[2]) : 10;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("device 0: %s, compute capability %d.%d\n", prop.name, prop.major, prop.minor);
  size_t bytes = (size_t)n * sizeof(float);
  float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
  for (int i = 0; i < n; i++) {
    a[i] = (float)i;
    b[i] = 2.0f * i;
  }
  float *da, *db, *dc;
  CHECK(cudaMalloc(&da, bytes));
  CHECK(cudaMalloc(&db, bytes));
  CHECK(cudaMalloc(&dc, bytes));
  CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
  int threads = 256, blocks = (n + threads - 1) / threads;
  for (int it = 0; it < iterations; it++) {
    vecAdd<<<blocks, threads>>>(da, db, dc, n);
    CHECK(cudaGetLastError());
    // feed the result back in, so every iteration depends on the last
    CHECK(cudaMemcpy(da, dc, bytes, cudaMemcpyDeviceToDevice));
  }
  CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
  int errors = 0;
  for (int i = 0; i < n; i++) {
    float expect = a[i]; // the same float additions, in the same order
    for (int it = 0; it < iterations; it++) expect += b[i];
    if (c[i] != expect && ++errors < 5) printf("mismatch at %d: %f != %f\n", i, c[i], expect);
  }
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dc));
  free(a), free(b), free(c);
  printf("vecadd: n=%d iterations=%d %s\n", n, iterations, errors ? "FAILED" : "PASSED");
  return errors ? 1 : 0;
}
