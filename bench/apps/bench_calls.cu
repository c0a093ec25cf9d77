// Micro-benchmarks of what remote execution costs: a synchronous small
// copy (round-trip latency), empty-kernel launch rate, and copy bandwidth.
// The same binary runs natively and through ferry; bench/run_gpu.sh turns
// the two runs into ratios. Output: one "metric value unit" per line.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) {                                                     \
      fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));         \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

__global__ void empty_kernel() {}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void latency(int reps) {
  int *d, h = 0;
  CHECK(cudaMalloc(&d, 4));
  CHECK(cudaMemset(d, 0, 4));
  for (int i = 0; i < 100; i++) CHECK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
  double t0 = now();
  for (int i = 0; i < reps; i++) CHECK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
  double t = now() - t0;
  printf("d2h_4B_latency %.3f us\n", t / reps * 1e6);
  // a synchronous call with next to no GPU work: the cost of forwarding itself
  for (int i = 0; i < 100; i++) CHECK(cudaStreamQuery(0));
  t0 = now();
  for (int i = 0; i < reps; i++) CHECK(cudaStreamQuery(0));
  t = now() - t0;
  printf("stream_query_latency %.3f us\n", t / reps * 1e6);
  CHECK(cudaFree(d));
}

static void launch_rate(int reps) {
  for (int i = 0; i < 1000; i++) empty_kernel<<<1, 1>>>();
  CHECK(cudaDeviceSynchronize());
  double t0 = now();
  for (int i = 0; i < reps; i++) empty_kernel<<<1, 1>>>();
  CHECK(cudaDeviceSynchronize());
  double t = now() - t0;
  printf("empty_launch_rate %.0f launches/s\n", reps / t);
  // launch + synchronize, one at a time
  t0 = now();
  for (int i = 0; i < reps / 10; i++) {
    empty_kernel<<<1, 1>>>();
    CHECK(cudaDeviceSynchronize());
  }
  t = now() - t0;
  printf("launch_sync_latency %.3f us\n", t / (reps / 10) * 1e6);
}

static void bandwidth(size_t max_bytes) {
  char *d, *pinned, *pageable = (char *)malloc(max_bytes);
  memset(pageable, 1, max_bytes);
  CHECK(cudaMalloc(&d, max_bytes));
  CHECK(cudaMallocHost(&pinned, max_bytes));
  memset(pinned, 1, max_bytes);
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    int reps = bytes < (1 << 20) ? 200 : bytes < (64 << 20) ? 20 : 3;
    for (int pin = 1; pin >= 0; pin--) {
      char *h = pin ? pinned : pageable;
      CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
      double t0 = now();
      for (int i = 0; i < reps; i++) CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
      CHECK(cudaDeviceSynchronize()); // count the copies as done only when they are
      double h2d = bytes * (double)reps / (now() - t0) / 1e9;
      CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
      t0 = now();
      for (int i = 0; i < reps; i++) CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
      double d2h = bytes * (double)reps / (now() - t0) / 1e9;
      printf("h2d_%s_%zu %.3f GB/s\n", pin ? "pinned" : "pageable", bytes, h2d);
      printf("d2h_%s_%zu %.3f GB/s\n", pin ? "pinned" : "pageable", bytes, d2h);
    }
  }
  CHECK(cudaFree(d));
  CHECK(cudaFreeHost(pinned));
  free(pageable);
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "all";
  size_t max_bytes = argc > 2 ? strtoull(argv[2], nullptr, 0) : (1ull << 30);
  CHECK(cudaFree(0));
  if (!strcmp(what, "latency") || !strcmp(what, "all")) latency(20000);
  if (!strcmp(what, "launch") || !strcmp(what, "all")) launch_rate(100000);
  if (!strcmp(what, "bandwidth") || !strcmp(what, "all")) bandwidth(max_bytes);
  return 0;
}
