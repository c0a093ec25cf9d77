// Stream-ordered allocation as PyTorch's cudaMallocAsync backend uses it:
// the default pool's release threshold raised to UINT64_MAX, then a loop of
// cudaMallocAsync / launches / cudaFreeAsync on two streams (and a block
// allocated on one stream and freed on the other, ordered by an event),
// two threads doing the same on streams of their own, the pool's
// attributes read, reset and trimmed, a pool of the program's own
// (cudaMemPoolCreate, cudaDeviceSetMemPool, cudaMallocFromPoolAsync), and
// cudaFreeAsync of memory from cudaMalloc. All arithmetic is on integers:
// the results are checked against the host's, and a run that migrated must
// print the checksum of one that did not.
// It prints how many stream and device synchronizes and cudaFrees it made,
// so that a test compares them with FERRY_STATS (cudaFreeAsync must add no
// synchronization, and a warm pool no mapping).
// usage: mempool [ITERATIONS=40] [N=16384]
//        mempool refusals   what ferry refuses or catches, one "name=error"
//                           line each (only meaningful under ferry)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cuda_check.h"
#include "fill_kernels.h"


#define BLOCK 256
static int n, launches, stream_syncs, device_syncs, frees, bad;
static unsigned grid() { return (unsigned)((n + BLOCK - 1) / BLOCK); }

// the host's twin of one fill + accumulate
static void host_step(std::vector<unsigned> &acc, unsigned seed) {
  for (int i = 0; i < n; i++) acc[i] = acc[i] * 31u + fill_value(seed, i);
}
static void expect(bool ok, const char *what) {
  if (!ok) {
    printf("FAIL: %s\n", what);
    bad++;
  }
}
static uint64_t attr(cudaMemPool_t pool, cudaMemPoolAttr a) {
  uint64_t v = 0;
  CHECK(cudaMemPoolGetAttribute(pool, a, &v));
  return v;
}
// fold device memory into the checksum (FNV-1a) and compare it with the host's
static uint64_t hash = 1469598103934665603ull;
static void settle(const char *what, unsigned *dev, const std::vector<unsigned> &want) {
  std::vector<unsigned> got(n);
  CHECK(cudaMemcpy(got.data(), dev, (size_t)n * sizeof(unsigned), cudaMemcpyDeviceToHost));
  if (memcmp(got.data(), want.data(), (size_t)n * sizeof(unsigned))) {
    printf("FAIL: %s differs from the host's\n", what);
    bad++;
  }
  for (unsigned v : got) hash = (hash ^ v) * 1099511628211ull;
}

// a thread of its own: a stream, a loop of allocations freed in its order
static void worker(int id, int iters, unsigned *acc, int *syncs) {
  CHECK(cudaSetDevice(0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < iters; i++) {
    unsigned *tmp;
    CHECK(cudaMallocAsync(&tmp, (size_t)n * sizeof(unsigned), s));
    mp_fill<<<grid(), BLOCK, 0, s>>>(tmp, n, 1000u * (unsigned)id + (unsigned)i);
    mp_accum<<<grid(), BLOCK, 0, s>>>(acc, tmp, n);
    CHECK(cudaFreeAsync(tmp, s));
  }
  CHECK(cudaStreamSynchronize(s));
  (*syncs)++;
  CHECK(cudaStreamDestroy(s));
}

static void say(const char *name, cudaError_t e) { printf("%s=%s\n", name, cudaGetErrorName(e)); }

// under ferry: pools shared other than as POSIX file descriptors are
// refused, as are exports of pools made without them, another device's
// access to a pool is refused as peer access is, and frees of memory a pool
// keeps are caught
static int refusals() {
  cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeWin32;
  props.location.type = cudaMemLocationTypeDevice;
  cudaMemPool_t pool, def;
  say("win32_pool", cudaMemPoolCreate(&pool, &props));
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeHost;
  say("host_pool", cudaMemPoolCreate(&pool, &props));
  props.location.type = cudaMemLocationTypeDevice;
  CHECK(cudaMemPoolCreate(&pool, &props));
  CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
  void *p;
  CHECK(cudaMallocFromPoolAsync(&p, 4096, pool, 0));
  cudaMemPoolPtrExportData data;
  say("export_pointer", cudaMemPoolExportPointer(&data, p));
  int fd = -1;
  say("export_pool", cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0));
  cudaMemAccessDesc desc = {{cudaMemLocationTypeDevice, 1}, cudaMemAccessFlagsProtReadWrite};
  say("access_other_device", cudaMemPoolSetAccess(pool, &desc, 1));
  int devices = 0;
  CHECK(cudaGetDeviceCount(&devices));
  if (devices > 1) {
    // a pool of device 1 with a stream of device 0; device 1's memory freed
    // in device 0's stream order (complete once device 1 synchronizes)
    cudaMemPoolProps other = props;
    other.handleTypes = cudaMemHandleTypeNone;
    other.location.id = 1;
    cudaMemPool_t pool1;
    CHECK(cudaMemPoolCreate(&pool1, &other));
    void *q;
    say("pool_of_other_device", cudaMallocFromPoolAsync(&q, 4096, pool1, 0));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMallocAsync(&q, 4096, 0));
    CHECK(cudaSetDevice(0));
    say("free_in_other_device_order", cudaFreeAsync(q, 0));
    CHECK(cudaSetDevice(1));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemPoolDestroy(pool1));
    CHECK(cudaSetDevice(0));
  }
  CHECK(cudaFreeAsync(p, 0));
  say("free_async_twice", cudaFreeAsync(p, 0));
  say("free_pooled", cudaFree(p));
  say("free_async_host", cudaFreeAsync(&props, 0));
  say("destroy_default", cudaMemPoolDestroy(def));
  CHECK(cudaMemPoolDestroy(pool));
  uint64_t v;
  say("destroyed_pool", cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &v));
  say("bad_attribute", cudaMemPoolGetAttribute(def, (cudaMemPoolAttr)99, &v));
  // cudaDeviceReset destroys the device's pools; a fresh default pool follows
  CHECK(cudaMemPoolCreate(&pool, &props));
  uint64_t keep = 12345;
  CHECK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &keep));
  CHECK(cudaDeviceReset());
  say("pool_after_reset", cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &v));
  CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
  CHECK(cudaMemPoolGetAttribute(def, cudaMemPoolAttrReleaseThreshold, &keep));
  printf("threshold_after_reset=%llu\n", (unsigned long long)keep);
  CHECK(cudaMallocAsync(&p, 4096, 0));
  CHECK(cudaFreeAsync(p, 0));
  CHECK(cudaDeviceSynchronize());
  printf("PASSED\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "refusals")) return refusals();
  int iters = argc > 1 ? atoi(argv[1]) : 40;
  n = argc > 2 ? atoi(argv[2]) : 16384;
  size_t bytes = (size_t)n * sizeof(unsigned);
  CHECK(cudaSetDevice(0));

  // PyTorch's setup: the default pool keeps everything it was given back
  cudaMemPool_t pool, current;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  CHECK(cudaDeviceGetMemPool(&current, 0));
  expect(pool == current, "the default pool is the current one");
  uint64_t keep = UINT64_MAX;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  expect(attr(pool, cudaMemPoolAttrReleaseThreshold) == UINT64_MAX, "the release threshold reads back");

  cudaStream_t s[2];
  for (auto &x : s) CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  cudaEvent_t ev;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  unsigned *acc[2];
  std::vector<unsigned> want[2];
  for (int k = 0; k < 2; k++) {
    CHECK(cudaMalloc(&acc[k], bytes));
    CHECK(cudaMemset(acc[k], 0, bytes));
    want[k].assign(n, 0);
  }

  for (int i = 0; i < iters; i++) {
    for (int k = 0; k < 2; k++) {
      unsigned *tmp;
      // two sizes, as a framework's tensors have
      CHECK(cudaMallocAsync(&tmp, bytes + (size_t)(i & 1) * 1024, s[k]));
      unsigned seed = (unsigned)(i * 2 + k);
      mp_fill<<<grid(), BLOCK, 0, s[k]>>>(tmp, n, seed);
      mp_accum<<<grid(), BLOCK, 0, s[k]>>>(acc[k], tmp, n);
      launches += 2;
      host_step(want[k], seed);
      CHECK(cudaFreeAsync(tmp, s[k]));
    }
    if (i % 4 == 3) { // made on stream 0, used and freed on stream 1
      unsigned *x;
      CHECK(cudaMallocAsync(&x, bytes, s[0]));
      mp_fill<<<grid(), BLOCK, 0, s[0]>>>(x, n, 7777u + (unsigned)i);
      CHECK(cudaEventRecord(ev, s[0]));
      CHECK(cudaStreamWaitEvent(s[1], ev, 0));
      mp_accum<<<grid(), BLOCK, 0, s[1]>>>(acc[1], x, n);
      launches += 2;
      host_step(want[1], 7777u + (unsigned)i);
      CHECK(cudaFreeAsync(x, s[1]));
    }
    // now and then the host waits for a stream (a loss read back, say):
    // what was freed there may then serve the other stream too
    if (i % 10 == 4 || i % 10 == 9) {
      CHECK(cudaStreamSynchronize(s[i % 10 == 4]));
      stream_syncs++;
    }
  }
  CHECK(cudaDeviceSynchronize());
  device_syncs++;
  settle("stream 0's sums", acc[0], want[0]);
  settle("stream 1's sums", acc[1], want[1]);

  // two threads, two streams of their own, one pool
  unsigned *tacc[2];
  std::vector<unsigned> twant[2];
  int tsyncs[2] = {0, 0};
  for (int t = 0; t < 2; t++) {
    CHECK(cudaMalloc(&tacc[t], bytes));
    CHECK(cudaMemset(tacc[t], 0, bytes));
    twant[t].assign(n, 0);
    for (int i = 0; i < iters / 2; i++) host_step(twant[t], 1000u * (unsigned)t + (unsigned)i);
  }
  std::thread th[2];
  for (int t = 0; t < 2; t++) th[t] = std::thread(worker, t, iters / 2, tacc[t], &tsyncs[t]);
  for (auto &t : th) t.join();
  launches += 2 * 2 * (iters / 2);
  stream_syncs += tsyncs[0] + tsyncs[1];
  settle("thread 0's sums", tacc[0], twant[0]);
  settle("thread 1's sums", tacc[1], twant[1]);

  // what the pool holds: everything was given back, nothing is in use
  uint64_t reserved = attr(pool, cudaMemPoolAttrReservedMemCurrent);
  uint64_t used = attr(pool, cudaMemPoolAttrUsedMemCurrent);
  uint64_t used_high = attr(pool, cudaMemPoolAttrUsedMemHigh);
  printf("pool reserved: %llu, used: %llu, used high: %llu\n", (unsigned long long)reserved,
         (unsigned long long)used, (unsigned long long)used_high);
  expect(used == 0, "nothing of the pool is in use");
  expect(reserved >= bytes, "the pool kept its blocks (threshold UINT64_MAX)");
  expect(used_high >= bytes && attr(pool, cudaMemPoolAttrReservedMemHigh) >= reserved,
         "the high-water marks cover the loop");
  uint64_t zero = 0;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
  expect(attr(pool, cudaMemPoolAttrUsedMemHigh) == 0, "the used high-water mark resets to the current use");
  CHECK(cudaMemPoolTrimTo(pool, 0));
  printf("pool reserved after trim: %llu\n", (unsigned long long)attr(pool, cudaMemPoolAttrReservedMemCurrent));
  expect(attr(pool, cudaMemPoolAttrReservedMemCurrent) < reserved, "TrimTo(0) gave memory back");
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
  expect(attr(pool, cudaMemPoolAttrReservedMemHigh) == attr(pool, cudaMemPoolAttrReservedMemCurrent),
         "the reserved high-water mark resets to the current reservation");

  // a pool of the program's own (threshold 0, CUDA's default)
  cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t mine;
  CHECK(cudaMemPoolCreate(&mine, &props));
  cudaMemAccessDesc desc = {{cudaMemLocationTypeDevice, 0}, cudaMemAccessFlagsProtReadWrite};
  CHECK(cudaMemPoolSetAccess(mine, &desc, 1));
  cudaMemAccessFlags flags;
  cudaMemLocation loc = {cudaMemLocationTypeDevice, 0};
  CHECK(cudaMemPoolGetAccess(&flags, mine, &loc));
  expect(flags == cudaMemAccessFlagsProtReadWrite, "the pool's device reads and writes it");
  unsigned *q;
  CHECK(cudaMallocFromPoolAsync(&q, bytes, mine, s[0]));
  cudaPointerAttributes pa;
  CHECK(cudaPointerGetAttributes(&pa, q));
  expect(pa.type == cudaMemoryTypeDevice && pa.device == 0, "pool memory is device 0's");
  expect(attr(mine, cudaMemPoolAttrUsedMemCurrent) >= bytes, "the own pool counts its block");
  mp_fill<<<grid(), BLOCK, 0, s[0]>>>(q, n, 4242u);
  mp_accum<<<grid(), BLOCK, 0, s[0]>>>(acc[0], q, n);
  launches += 2;
  host_step(want[0], 4242u);
  CHECK(cudaFreeAsync(q, s[0]));
  CHECK(cudaStreamSynchronize(s[0]));
  stream_syncs++;
  printf("own pool reserved after sync: %llu\n", (unsigned long long)attr(mine, cudaMemPoolAttrReservedMemCurrent));
  // the current pool serves cudaMallocAsync
  CHECK(cudaDeviceSetMemPool(0, mine));
  CHECK(cudaDeviceGetMemPool(&current, 0));
  expect(current == mine, "cudaDeviceSetMemPool made the own pool current");
  CHECK(cudaMallocAsync(&q, bytes, s[1]));
  expect(attr(mine, cudaMemPoolAttrUsedMemCurrent) >= bytes, "cudaMallocAsync took the current pool");
  mp_fill<<<grid(), BLOCK, 0, s[1]>>>(q, n, 5151u);
  mp_accum<<<grid(), BLOCK, 0, s[1]>>>(acc[1], q, n);
  launches += 2;
  host_step(want[1], 5151u);
  CHECK(cudaFreeAsync(q, s[1]));
  CHECK(cudaDeviceSetMemPool(0, pool));
  CHECK(cudaMemPoolDestroy(mine));

  // memory from cudaMalloc, freed in stream order
  unsigned *m;
  CHECK(cudaMalloc(&m, bytes));
  mp_fill<<<grid(), BLOCK, 0, s[1]>>>(m, n, 6060u);
  mp_accum<<<grid(), BLOCK, 0, s[1]>>>(acc[1], m, n);
  launches += 2;
  host_step(want[1], 6060u);
  CHECK(cudaFreeAsync(m, s[1]));
  CHECK(cudaDeviceSynchronize());
  device_syncs++;
  settle("stream 0's sums at the end", acc[0], want[0]);
  settle("stream 1's sums at the end", acc[1], want[1]);

  for (int k = 0; k < 2; k++) CHECK(cudaFree(acc[k]));
  for (int t = 0; t < 2; t++) CHECK(cudaFree(tacc[t]));
  frees += 4;
  CHECK(cudaEventDestroy(ev));
  for (auto &x : s) CHECK(cudaStreamDestroy(x));
  printf("iterations: %d\nlaunches: %d\n", iters, launches);
  printf("stream synchronizes: %d\ndevice synchronizes: %d\nfrees: %d\n", stream_syncs, device_syncs, frees);
  printf("checksum: %016llx\n", (unsigned long long)hash);
  printf(bad ? "FAILED\n" : "PASSED\n");
  return bad ? 1 : 0;
}
