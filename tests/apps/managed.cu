// Managed memory (cudaMallocManaged) the way programs use it on devices
// without concurrent managed access (conjugateGradientUM,
// UnifiedMemoryStreams): the host writes, kernels read and write, the host
// reads after a synchronization, in a loop; a kernel that finds managed
// memory through a structure in managed memory (not among its
// parameters); prefetches both ways, advice, a stream attachment; the
// attributes, range attributes and pointer queries. All arithmetic is on
// integers: results are checked against the host's, and a migrated run
// must print the checksum of one that did not move.
// usage: managed [ITERATIONS=10]
//        managed racy: the host writes a page a running kernel writes,
//        which CUDA forbids without concurrent managed access; prints the
//        synchronization's answer ("racy: cudaErrorIllegalState" through
//        ferry, which reports concurrentManagedAccess = 0)
//        managed prefetch: a prefetch to the device with no work after it
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cuda_check.h"
#include "host_mem_check.h"

#define N 8192
// threads at once, each with its own managed buffers and stream: the host
// writes, a kernel accumulates, the host checks after its stream's sync
static void worker(int id, int rounds, uint64_t *sum, int *wrong) {
  CHECK(cudaSetDevice(0));
  cudaStream_t st;
  unsigned *in, *acc;
  const int n = 2048;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CHECK(cudaMallocManaged((void **)&in, n * sizeof(unsigned)));
  CHECK(cudaMallocManaged((void **)&acc, n * sizeof(unsigned)));
  std::vector<unsigned> want(n, 0);
  for (int i = 0; i < n; i++) acc[i] = 0;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < n; i++) in[i] = (unsigned)(id * 100003 + r * 7 + i);
    mp_accum<<<(n + 255) / 256, 256, 0, st>>>(acc, in, n);
    CHECK(cudaStreamSynchronize(st));
    for (int i = 0; i < n; i++) want[i] = want[i] * 31u + (unsigned)(id * 100003 + r * 7 + i);
    if (memcmp(acc, want.data(), n * sizeof(unsigned))) (*wrong)++;
  }
  uint64_t h = 0;
  for (int i = 0; i < n; i++) h = h * 1099511628211ull + acc[i];
  *sum = h;
  CHECK(cudaFree(in));
  CHECK(cudaFree(acc));
  CHECK(cudaStreamDestroy(st));
}

static int racy(void) {
  unsigned *x;
  CHECK(cudaMallocManaged((void **)&x, N * sizeof(unsigned)));
  for (int i = 0; i < N; i++) x[i] = 0;
  mp_fill<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(x, N, 1u);
  x[0] = 12345u; /* while the kernel may run */
  cudaError_t e = cudaDeviceSynchronize();
  printf("racy: %s\n", cudaGetErrorName(e));
  CHECK(cudaDeviceSynchronize()); /* the error is said once, not kept */
  CHECK(cudaFree(x));
  return 0;
}

// a prefetch to the device is a transfer of its own, not deferred to the
// next work: here no work follows it
static int prefetch_only(void) {
  unsigned *x;
  const size_t bytes = N * sizeof(unsigned);
  CHECK(cudaMallocManaged((void **)&x, bytes));
  for (int i = 0; i < N; i++) x[i] = (unsigned)i * 7u;
  cudaMemLocation dev = {cudaMemLocationTypeDevice, 0};
  CHECK(cudaMemPrefetchAsync(x, bytes, dev, 0, 0));
  CHECK(cudaStreamSynchronize(0));
  printf("prefetched: %zu\n", bytes);
  CHECK(cudaFree(x));
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "racy")) return racy();
  if (argc > 1 && !strcmp(argv[1], "prefetch")) return prefetch_only();
  int iters = argc > 1 ? atoi(argv[1]) : 10;
  int managed = 0, concurrent = 1;
  CHECK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, 0));
  CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, 0));
  printf("managedMemory: %d concurrentManagedAccess: %d\n", managed, concurrent);
  expect(managed == 1, "managedMemory is not 1", 0);

  unsigned *in, *acc, *data;
  Holder *h;
  CHECK(cudaMallocManaged((void **)&in, N * sizeof(unsigned)));
  CHECK(cudaMallocManaged((void **)&acc, N * sizeof(unsigned)));
  CHECK(cudaMallocManaged((void **)&data, N * sizeof(unsigned), cudaMemAttachGlobal));
  CHECK(cudaMallocManaged((void **)&h, sizeof *h));
  cudaPointerAttributes pa;
  CHECK(cudaPointerGetAttributes(&pa, acc));
  expect(pa.type == cudaMemoryTypeManaged && pa.devicePointer == acc && pa.hostPointer == acc,
         "cudaPointerGetAttributes of managed memory", 0);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaStreamAttachMemAsync(s, data, 0, cudaMemAttachGlobal));
  cudaMemLocation dev = {cudaMemLocationTypeDevice, 0}, host = {cudaMemLocationTypeHost, 0};
  CHECK(cudaMemAdvise(in, N * sizeof(unsigned), cudaMemAdviseSetReadMostly, dev));

  std::vector<unsigned> want_acc(N, 0), want_data(N);
  for (int i = 0; i < N; i++) acc[i] = 0, data[i] = (unsigned)i, want_data[i] = (unsigned)i;
  h->data = data;
  // the same structure in device memory: a kernel given it is given no
  // managed pointer at all, and still reads and writes managed memory
  Holder *dh;
  CHECK(cudaMalloc((void **)&dh, sizeof *dh));
  unsigned grid = (N + BLOCK - 1) / BLOCK;
  for (int it = 0; it < iters; it++) {
    // the host writes in, data and the holders' k; kernels read them
    for (int i = 0; i < N; i++) in[i] = (unsigned)(it * 7919 + i * 31), data[i] += 1u;
    Holder hv = {data, (unsigned)it * 5u + 1u};
    h->k = hv.k;
    CHECK(cudaMemcpyAsync(dh, &hv, sizeof hv, cudaMemcpyHostToDevice, s));
    mm_follow<<<grid, BLOCK, 0, s>>>(dh, N);
    CHECK(cudaMemPrefetchAsync(in, N * sizeof(unsigned), dev, 0, s));
    mp_accum<<<grid, BLOCK, 0, s>>>(acc, in, N);
    mm_follow<<<grid, BLOCK, 0, s>>>(h, N);
    launches += 3;
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++) {
      unsigned k = (unsigned)it * 5u + 1u;
      want_acc[i] = want_acc[i] * 31u + (unsigned)(it * 7919 + i * 31);
      want_data[i] = ((want_data[i] + 1u) * 3u + k) * 3u + k;
    }
    expect(memcmp(acc, want_acc.data(), N * sizeof(unsigned)) == 0, "acc (kernels on managed memory)", it);
    expect(memcmp(data, want_data.data(), N * sizeof(unsigned)) == 0,
           "data (reached through a managed structure)", it);
    // a kernel overwrites in; a prefetch to the host brings it back
    mp_fill<<<grid, BLOCK, 0, s>>>(in, N, (unsigned)it);
    launches++;
    CHECK(cudaMemPrefetchAsync(in, N * sizeof(unsigned), host, 0, s));
    CHECK(cudaStreamSynchronize(s));
    bool ok = true;
    for (int i = 0; i < N; i++) ok = ok && in[i] == fill_value((unsigned)it, i);
    expect(ok, "in after a kernel and a prefetch to the host", it);
    fold(in, N);
    if (it == 0) {
      printf("running\n"); /* for a test that kills the server now */
      fflush(stdout);
    }
  }
  CHECK(cudaDeviceSynchronize());
  fold(acc, N);
  fold(data, N);
  {
    // what the program said, as CUDA answers it: `in` is read-mostly and
    // was last prefetched to the host; acc got no advice
    const size_t bytes = N * sizeof(unsigned);
    int v = -9;
    CHECK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, in, bytes));
    expect(v == 1, "read-mostly range attribute of in", iters);
    CHECK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, acc, bytes));
    expect(v == 0, "read-mostly range attribute of acc", iters);
    CHECK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeLastPrefetchLocation, in + 100, 64));
    expect(v == cudaCpuDeviceId, "last prefetch location of in", iters);
    CHECK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributePreferredLocation, acc, bytes));
    expect(v == cudaInvalidDeviceId, "preferred location of acc (none)", iters);
    // half of acc preferred on the device: the whole range has none in common
    CHECK(cudaMemAdvise(acc, bytes / 2, cudaMemAdviseSetPreferredLocation, dev));
    CHECK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributePreferredLocation, acc, bytes / 2));
    expect(v == 0, "preferred location of acc's first half", iters);
    CHECK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributePreferredLocation, acc, bytes));
    expect(v == cudaInvalidDeviceId, "preferred location of all of acc", iters);
    int who[3] = {-9, -9, -9};
    CHECK(cudaMemAdvise(acc, bytes, cudaMemAdviseSetAccessedBy, dev));
    CHECK(cudaMemRangeGetAttribute(who, sizeof who, cudaMemRangeAttributeAccessedBy, acc, bytes));
    expect(who[0] == 0 && who[1] == cudaInvalidDeviceId && who[2] == cudaInvalidDeviceId,
           "accessed-by range attribute of acc", iters);
    int dummy;
    expect(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, &dummy, 4) == cudaErrorInvalidValue,
           "a range attribute of memory that is not managed", iters);
    cudaGetLastError();
  }
  {
    const int nthreads = 4, rounds = 6;
    uint64_t sums[nthreads] = {0};
    int wrong[nthreads] = {0};
    std::vector<std::thread> ts;
    for (int t = 0; t < nthreads; t++) ts.emplace_back(worker, t, rounds, &sums[t], &wrong[t]);
    for (auto &t : ts) t.join();
    launches += nthreads * rounds;
    for (int t = 0; t < nthreads; t++) {
      expect(wrong[t] == 0, "a thread's managed buffers differ from its host's", t);
      hash = (hash ^ sums[t]) * 1099511628211ull;
    }
  }
  // refusals CUDA makes too
  expect(cudaMemAdvise(&bad, 4, cudaMemAdviseSetReadMostly, dev) == cudaErrorInvalidValue,
         "advice on memory that is not managed", iters);
  cudaGetLastError();
  CHECK(cudaFree(in));
  CHECK(cudaFree(acc));
  CHECK(cudaFree(data));
  CHECK(cudaFree(h));
  CHECK(cudaFree(dh));
  CHECK(cudaStreamDestroy(s));
  return report();
}
