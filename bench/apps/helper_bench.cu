// The mrCUDA paper's Figs. 11-12 for ferry-mhelper (bench/run_helper_gpu.sh):
// what a call and a copy cost on a local GPU served in the program's own
// process against one served by a helper process over shared memory. The
// first launch is the migration point: run it with
// FERRY_MIGRATE_AT=0:0:launch=1 and FERRY_MHELPER=never (in-process) or
// always (helper), and natively for the baseline.
// usage: helper_bench calls REPS     null-kernel launches (rate), launch +
//                                    synchronize, cudaStreamQuery, 4-byte copy back
//        helper_bench copies REPS    REPS host-to-device (and device-to-host)
//                                    synchronous copies of each size, 4 B to
//                                    64 MiB, from pinned and pageable memory
//                                    (fewer reps where REPS x size > 2 GiB)
// Prints one line per figure: "<name> <value> <unit>", and "helper_bench: OK"
// once the data copied back checks.
// CPU twins of its kernel: bench/twins/bench_twins.c.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "../../tests/apps/cuda_check.h"

__global__ void hb_null(int) {}

static double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

static int calls(int reps) {
  hb_null<<<1, 1>>>(0); // launch 1: the migration point
  CHECK(cudaDeviceSynchronize());
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  unsigned *dev, host = 0;
  CHECK(cudaMalloc(&dev, sizeof *dev));
  for (int i = 0; i < 1000; i++) hb_null<<<1, 1, 0, s>>>(0); // warm
  CHECK(cudaStreamSynchronize(s));
  double t0 = now_us();
  for (int i = 0; i < reps; i++) hb_null<<<1, 1, 0, s>>>(0);
  CHECK(cudaStreamSynchronize(s));
  double t1 = now_us();
  for (int i = 0; i < reps / 10; i++) {
    hb_null<<<1, 1, 0, s>>>(0);
    CHECK(cudaStreamSynchronize(s));
  }
  double t2 = now_us();
  for (int i = 0; i < reps; i++) CHECK(cudaStreamQuery(s));
  double t3 = now_us();
  for (int i = 0; i < reps / 10; i++)
    CHECK(cudaMemcpy(&host, dev, sizeof host, cudaMemcpyDeviceToHost));
  double t4 = now_us();
  printf("launch_us %.4f us\n", (t1 - t0) / reps);
  printf("launch_sync_us %.4f us\n", (t2 - t1) / (reps / 10));
  printf("query_us %.4f us\n", (t3 - t2) / reps);
  printf("d2h_4B_us %.4f us\n", (t4 - t3) / (reps / 10));
  CHECK(cudaFree(dev));
  CHECK(cudaStreamDestroy(s));
  return 0;
}

static int copies(int reps) {
  hb_null<<<1, 1>>>(0); // launch 1: the migration point
  CHECK(cudaDeviceSynchronize());
  const size_t max = 64u << 20;
  unsigned char *pinned, *pageable, *dev;
  CHECK(cudaMallocHost(&pinned, max));
  pageable = (unsigned char *)malloc(max);
  CHECK(cudaMalloc(&dev, max));
  for (size_t i = 0; i < max; i++) pinned[i] = pageable[i] = (unsigned char)(i * 131u + 7u);
  int bad = 0;
  for (size_t size = 4; size <= max; size *= 4) {
    size_t n = (size_t)reps;
    if (n * size > (2ull << 30)) n = (2ull << 30) / size;
    for (int kind = 0; kind < 2; kind++) {
      unsigned char *host = kind ? pageable : pinned;
      const char *name = kind ? "pageable" : "pinned";
      CHECK(cudaMemcpy(dev, host, size, cudaMemcpyHostToDevice)); // warm
      double t0 = now_us();
      for (size_t i = 0; i < n; i++) CHECK(cudaMemcpy(dev, host, size, cudaMemcpyHostToDevice));
      CHECK(cudaDeviceSynchronize());
      double t1 = now_us();
      for (size_t i = 0; i < n; i++) CHECK(cudaMemcpy(host, dev, size, cudaMemcpyDeviceToHost));
      double t2 = now_us();
      printf("h2d_%s_%zu %.4f us\n", name, size, (t1 - t0) / n);
      printf("d2h_%s_%zu %.4f us\n", name, size, (t2 - t1) / n);
      for (size_t i = 0; i < size; i++) bad += host[i] != (unsigned char)(i * 131u + 7u);
    }
  }
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(pinned));
  free(pageable);
  return bad ? (printf("FAIL: %d bytes came back wrong\n", bad), 1) : 0;
}

int main(int argc, char **argv) {
  int reps = argc == 3 ? atoi(argv[2]) : 0;
  int rc;
  if (argc == 3 && !strcmp(argv[1], "calls") && reps >= 10) rc = calls(reps);
  else if (argc == 3 && !strcmp(argv[1], "copies") && reps >= 1) rc = copies(reps);
  else {
    fprintf(stderr, "usage: %s calls REPS | copies REPS\n", argv[0]);
    return 2;
  }
  if (!rc) printf("helper_bench: OK\n");
  return rc;
}
