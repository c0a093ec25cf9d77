// GPU work through ferry against native: each kernel timed with CUDA events
// inside the program (the network is not counted), and a loop of
// asynchronous work timed end to end on the host (a memset and a launch per
// iteration, one synchronize at the end), for a memory-bound, an
// atomic-bound and a compute-bound kernel, each sized to run ~50 us or more.
// Prints "event_ms NAME MEDIAN" and "loop_us NAME PER_ITERATION" lines.
// usage: kernel_time [REPS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../tests/apps/cuda_check.h"

__global__ void copy_scale(const float *x, float *y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = 2.0f * x[i];
}

__global__ void atomic_sum(const int *a, size_t n, unsigned long long *counter) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    local += a[i];
  atomicAdd(counter, local);
}

__global__ void fma_chain(float *out, int iters) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.999f;
  for (int i = 0; i < iters; i++) {
    a = fmaf(a, b, c);
    b = fmaf(b, c, a * 1e-9f);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 200;
  const size_t n = 64ull << 20; // 256 MiB of floats or ints
  float *x, *y, *out;
  int *a;
  unsigned long long *counter;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  CHECK(cudaMalloc(&a, n * sizeof(int)));
  CHECK(cudaMalloc(&out, 1024 * 1024 * sizeof(float)));
  CHECK(cudaMalloc(&counter, sizeof *counter));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  CHECK(cudaMemset(a, 1, n * sizeof(int)));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  struct kernel {
    const char *name;
    void (*launch)(float *, float *, float *, int *, unsigned long long *, size_t);
  };
  static const kernel kernels[] = {
      {"memory", [](float *x, float *y, float *, int *, unsigned long long *, size_t n) {
         copy_scale<<<2048, 512>>>(x, y, n);
       }},
      {"atomic", [](float *, float *, float *, int *a, unsigned long long *c, size_t n) {
         atomic_sum<<<2048, 256>>>(a, n, c);
       }},
      {"compute", [](float *, float *, float *out, int *, unsigned long long *, size_t) {
         fma_chain<<<1024, 1024>>>(out, 4096);
       }},
  };
  for (const kernel &k : kernels) {
    k.launch(x, y, out, a, counter, n); // warm up
    CHECK(cudaDeviceSynchronize());
    std::vector<double> ms;
    for (int r = 0; r < reps; r++) {
      CHECK(cudaEventRecord(start));
      k.launch(x, y, out, a, counter, n);
      CHECK(cudaEventRecord(stop));
      CHECK(cudaEventSynchronize(stop));
      float t;
      CHECK(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t);
    }
    printf("event_ms %s %.4f\n", k.name, median(ms));
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; r++) {
      CHECK(cudaMemset(counter, 0, sizeof *counter));
      k.launch(x, y, out, a, counter, n);
    }
    CHECK(cudaDeviceSynchronize());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("loop_us %s %.2f\n", k.name, s / reps * 1e6);
  }
  CHECK(cudaGetLastError());
  printf("kernel_time: OK\n");
  return 0;
}
