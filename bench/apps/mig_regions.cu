// The mem-sync and replay benchmark of a migration (bench/run_migrate_gpu.sh):
// R regions of S bytes, each filled by the first kernel launch with a
// pattern made from its index, then checked word by word by the second.
// Run with FERRY_MIGRATE_AT=0:0:launch=2 the vGPU migrates between the two,
// so the check reads what mem-sync copied. K extra streams and events (kept
// alive) lengthen the replay log, for the replay model. A gap allocated
// after each region and freed before the migration keeps regions apart, so
// mem-sync cannot merge them into one range.
// usage: mig_regions R S [--streams K] [--events K] [--gap BYTES]
//        mig_regions --h2d SIZE TOTAL   (pinned copy bandwidth, for native runs)
//        mig_regions --calls REPS       (per-call cost: run natively, remotely, and
//                                        local after FERRY_MIGRATE_AT=0:0:launch=1)
// Prints "mig_regions: R=.. S=.. ... OK" (or FAIL) and "window_ms" (the
// second launch and its check, migration included).
// CPU twins of its kernels: bench/twins/bench_twins.c.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "../../tests/apps/cuda_check.h"

static const int MAX_REGIONS = 4096;
static const int BLOCK = 256;

// the regions, read by both kernels (blockIdx.y picks one)
__device__ unsigned *mr_regions[MAX_REGIONS];
__device__ unsigned long long mr_seen, mr_bad, mr_sum;

__host__ __device__ static inline unsigned pattern(unsigned r, unsigned long long i) {
  return (unsigned)(i * 2654435761ull) ^ (r * 0x9e3779b9u + 0x7f4a7c15u);
}

__global__ void mr_fill(unsigned long long words) {
  unsigned r = blockIdx.y;
  unsigned *p = mr_regions[r];
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < words;
       i += (unsigned long long)gridDim.x * blockDim.x)
    p[i] = pattern(r, i);
}

// counts the words it read, the ones that differ from the pattern, and sums them
__global__ void mr_check(unsigned long long words) {
  unsigned r = blockIdx.y;
  const unsigned *p = mr_regions[r];
  unsigned long long seen = 0, bad = 0, sum = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < words;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned v = p[i];
    seen++;
    bad += v != pattern(r, i);
    sum += v;
  }
  for (int off = 16; off; off >>= 1) {
    seen += __shfl_down_sync(0xffffffffu, seen, off);
    bad += __shfl_down_sync(0xffffffffu, bad, off);
    sum += __shfl_down_sync(0xffffffffu, sum, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&mr_seen, seen);
    if (bad) atomicAdd(&mr_bad, bad);
    atomicAdd(&mr_sum, sum);
  }
}

static double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// pinned host-to-device and device-to-host copies of SIZE bytes, TOTAL in all:
// one synchronous copy at a time, and back-to-back asynchronous ones
static int bandwidth(size_t size, size_t total) {
  void *host, *dev;
  CHECK(cudaMallocHost(&host, size));
  CHECK(cudaMalloc(&dev, size));
  memset(host, 1, size);
  size_t reps = total / size ? total / size : 1;
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  for (int dir = 0; dir < 2; dir++) {
    const char *name = dir ? "d2h" : "h2d";
    cudaMemcpyKind kind = dir ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    void *dst = dir ? host : dev, *src = dir ? dev : host;
    for (int warm = 0; warm < 2; warm++) CHECK(cudaMemcpy(dst, src, size, kind));
    double t0 = now_ms();
    for (size_t i = 0; i < reps; i++) CHECK(cudaMemcpy(dst, src, size, kind));
    double t1 = now_ms();
    for (size_t i = 0; i < reps; i++) CHECK(cudaMemcpyAsync(dst, src, size, kind, s));
    CHECK(cudaStreamSynchronize(s));
    double t2 = now_ms();
    printf("%s_pinned_sync_%zu %.3f GB/s\n", name, size, size * reps / (t1 - t0) / 1e6);
    printf("%s_pinned_async_%zu %.3f GB/s\n", name, size, size * reps / (t2 - t1) / 1e6);
  }
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(host));
  return 0;
}

// what one call costs: a stream query (no GPU work), a 4-byte copy back,
// an empty launch (launch rate), each REPS times, after a first launch
// where FERRY_MIGRATE_AT=0:0:launch=1 moves the program onto the local GPU
static int calls(int reps) {
  mr_fill<<<1, 32>>>(0); // launch 1
  CHECK(cudaDeviceSynchronize());
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  unsigned *dev, host = 0;
  CHECK(cudaMalloc(&dev, sizeof *dev));
  for (int i = 0; i < 100; i++) CHECK(cudaStreamQuery(s));
  double t0 = now_ms();
  for (int i = 0; i < reps; i++) CHECK(cudaStreamQuery(s));
  double t1 = now_ms();
  for (int i = 0; i < reps; i++) CHECK(cudaMemcpy(&host, dev, sizeof host, cudaMemcpyDeviceToHost));
  double t2 = now_ms();
  for (int i = 0; i < reps; i++) mr_fill<<<1, 32, 0, s>>>(0);
  CHECK(cudaStreamSynchronize(s));
  double t3 = now_ms();
  CHECK(cudaFree(dev));
  CHECK(cudaStreamDestroy(s));
  printf("calls_query_us %.4f us\n", (t1 - t0) * 1e3 / reps);
  printf("calls_d2h_4B_us %.4f us\n", (t2 - t1) * 1e3 / reps);
  printf("calls_launch_us %.4f us\n", (t3 - t2) * 1e3 / reps);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--calls")) return calls(atoi(argv[2]));
  if (argc == 4 && !strcmp(argv[1], "--h2d"))
    return bandwidth(strtoull(argv[2], NULL, 0), strtoull(argv[3], NULL, 0));
  if (argc < 3) {
    fprintf(stderr, "usage: %s R S [--streams K] [--events K] [--gap BYTES] | --h2d SIZE TOTAL | --calls REPS\n",
            argv[0]);
    return 2;
  }
  int nreg = atoi(argv[1]);
  unsigned long long size = strtoull(argv[2], NULL, 0);
  int nstreams = 0, nevents = 0;
  unsigned long long gap = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--streams")) nstreams = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--events")) nevents = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--gap")) gap = strtoull(argv[i + 1], NULL, 0);
    else {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (nreg < 1 || nreg > MAX_REGIONS || size < 4 || size % 4) {
    fprintf(stderr, "R must be 1..%d and S a multiple of 4\n", MAX_REGIONS);
    return 2;
  }
  unsigned long long words = size / 4;

  double t0 = now_ms();
  std::vector<unsigned *> regions(nreg), gaps;
  for (int r = 0; r < nreg; r++) {
    CHECK(cudaMalloc(&regions[r], size));
    if (gap) {
      unsigned *g;
      CHECK(cudaMalloc(&g, gap));
      gaps.push_back(g);
    }
  }
  for (unsigned *g : gaps) CHECK(cudaFree(g));
  std::vector<cudaStream_t> streams(nstreams);
  std::vector<cudaEvent_t> events(nevents);
  for (auto &s : streams) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (auto &e : events) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CHECK(cudaMemcpyToSymbol(mr_regions, regions.data(), nreg * sizeof(unsigned *)));
  unsigned long long zero = 0;
  CHECK(cudaMemcpyToSymbol(mr_seen, &zero, sizeof zero));
  CHECK(cudaMemcpyToSymbol(mr_bad, &zero, sizeof zero));
  CHECK(cudaMemcpyToSymbol(mr_sum, &zero, sizeof zero));
  // enough blocks per region to fill the GPU, at most one per 256 words
  unsigned long long bx = (words + BLOCK - 1) / BLOCK;
  unsigned long long want = (2048 + nreg - 1) / nreg;
  dim3 grid((unsigned)(bx < want ? bx : want), nreg);

  mr_fill<<<grid, BLOCK>>>(words); // launch 1
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  double t1 = now_ms();
  mr_check<<<grid, BLOCK>>>(words); // launch 2: a migration at launch=2 happens first
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  double t2 = now_ms();

  unsigned long long seen, bad, sum;
  CHECK(cudaMemcpyFromSymbol(&seen, mr_seen, sizeof seen));
  CHECK(cudaMemcpyFromSymbol(&bad, mr_bad, sizeof bad));
  CHECK(cudaMemcpyFromSymbol(&sum, mr_sum, sizeof sum));
  for (auto &s : streams) CHECK(cudaStreamDestroy(s));
  for (auto &e : events) CHECK(cudaEventDestroy(e));
  for (unsigned *p : regions) CHECK(cudaFree(p));

  unsigned long long want_words = words * nreg;
  int ok = seen == want_words && bad == 0;
  printf("setup_ms %.3f ms\n", t1 - t0);
  printf("window_ms %.3f ms\n", t2 - t1);
  printf("mig_regions: R=%d S=%llu streams=%d events=%d gap=%llu words=%llu/%llu bad=%llu "
         "sum=%016llx %s\n", nreg, size, nstreams, nevents, gap, seen, want_words, bad, sum,
         ok ? "OK" : "FAIL");
  return ok ? 0 : 1;
}
