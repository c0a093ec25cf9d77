// The loop CUDA pipelines: {cudaMemset of a counter; a launch that reads an
// array and atomicAdds its sum into the counter} repeated, then one
// synchronize per block size (and one 2D device-to-device copy, which CUDA
// does not wait for either). A program of this shape ran at 0.55-0.75x of
// native through ferry because each memset waited for its stream. It prints
// how many of each call it made, so that a test compares them with
// FERRY_STATS (ferry must add no synchronization), the time the loop took
// and the bandwidth the kernels reached, and checks the sum.
// usage: async_loop [N_INTS] [REPEATS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.h"

__global__ void sum_into(const int *a, int n, unsigned long long *counter) {
  unsigned long long local = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) local += a[i];
  atomicAdd(counter, local);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1 << 16;
  int reps = argc > 2 ? atoi(argv[2]) : 20;
  std::vector<int> host(n);
  for (int i = 0; i < n; i++) host[i] = i % 1000;
  unsigned long long want = 0;
  for (int i = 0; i < n; i++) want += host[i];
  int *a;
  unsigned long long *counter, *sums; // sums: the counter after each block size
  CHECK(cudaMalloc(&a, (size_t)n * sizeof(int)));
  CHECK(cudaMalloc(&counter, sizeof *counter));
  CHECK(cudaMalloc(&sums, 4 * sizeof *sums));
  CHECK(cudaMemcpy(a, host.data(), (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
  // one launch before the timed loop: a migration a test or a benchmark
  // makes at the first launch (FERRY_MIGRATE_AT=0:0:launch=1) is not timed
  CHECK(cudaMemset(counter, 0, sizeof *counter));
  sum_into<<<2048, 128>>>(a, n, counter);
  int memsets = 1, launches = 1, syncs = 0, copies2d = 0, bad = 0;
  double bytes = 0, seconds = 0;
  for (int block = 128; block <= 1024; block *= 2) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; r++) {
      CHECK(cudaMemset(counter, 0, sizeof *counter));
      memsets++;
      sum_into<<<2048, block>>>(a, n, counter);
      launches++;
    }
    // the counter's last value into its slot, by a one-row 2D copy
    CHECK(cudaMemcpy2D(sums + copies2d, sizeof *sums, counter, sizeof *counter, sizeof *counter, 1,
                       cudaMemcpyDeviceToDevice));
    copies2d++;
    CHECK(cudaDeviceSynchronize());
    syncs++;
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    bytes += (double)reps * n * sizeof(int);
  }
  unsigned long long got[4];
  CHECK(cudaMemcpy(got, sums, sizeof got, cudaMemcpyDeviceToHost));
  for (int i = 0; i < copies2d; i++)
    if (got[i] != want) {
      printf("round %d: sum %llu, want %llu\n", i, got[i], want);
      bad++;
    }
  printf("memsets: %d\nlaunches: %d\nsynchronizes: %d\ncopies2d: %d\n", memsets, launches, syncs,
         copies2d);
  printf("loop: %.3f s, %.1f GB/s read by the kernels\n", seconds, bytes / seconds / 1e9);
  CHECK(cudaFree(a));
  CHECK(cudaFree(counter));
  CHECK(cudaFree(sums));
  printf("frees: 3\n"); // each waits for the device, as CUDA's cudaFree does
  printf(bad ? "FAILED\n" : "PASSED\n");
  return bad ? 1 : 0;
}
