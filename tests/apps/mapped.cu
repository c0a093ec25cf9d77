// Mapped (zero-copy) host memory, as XLA's autotuner, cuda-samples'
// simpleZeroCopy and many HPC codes use it: kernels given pinned host
// pointers (from cudaHostGetDevicePointer, or the host address itself under
// unified addressing) read what the host wrote and write what the host
// reads after a synchronization; memsets and device-to-host copies name it
// as device memory; a large buffer of which kernels change a few pages; a
// page both sides write parts of while a kernel runs. All arithmetic is on
// integers: every result is checked against the host's, and a migrated run
// must print the checksum of one that did not move.
// usage: mapped [ITERATIONS=12] [IDLE_SYNCS=0]
//   IDLE_SYNCS: synchronizations at the end, after a kernel on mapped
//   memory that only an event waited for, with no work on mapped memory
//   (FERRY_STATS must not count a check of the pages for each)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <vector>

#include "cuda_check.h"
#include "host_mem_check.h"

// p[k * stride] = v + k for k < count: a few words of a large buffer
__global__ void mp_poke(unsigned *p, int stride, int count, unsigned v) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < count) p[(size_t)k * stride] = v + (unsigned)k;
}

// miniFE's pattern: a structure parameter whose int count shares a word
// with padding the program never set. Stale padding can make that word read
// as an address inside a registered block: the count must reach the kernel
// unchanged all the same.
struct Padded {
  const unsigned *unused;
  int n; // then 4 bytes of padding
};
__global__ void mp_count(unsigned *out, Padded c) {
  if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = (unsigned)c.n;
}

#define N 4096                 // words of the small buffers (16 KiB)
#define BIG (2u << 20)         // words of the large one (8 MiB)
#define STRIDE 65536           // words between the pokes: one page in 64

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 12;
  int idle_syncs = argc > 2 ? atoi(argv[2]) : 0;
  int attr = 0;
  CHECK(cudaDeviceGetAttribute(&attr, cudaDevAttrCanMapHostMemory, 0));
  expect(attr == 1, "cudaDevAttrCanMapHostMemory is not 1", 0);

  // a: mapped, through its device pointer; b: cudaMallocHost, its host
  // address given straight to kernels; big: mapped, a few pages change
  unsigned *a, *a_dev, *b, *big, *big_dev, *result;
  CHECK(cudaHostAlloc((void **)&a, N * sizeof(unsigned), cudaHostAllocMapped));
  CHECK(cudaHostGetDevicePointer((void **)&a_dev, a, 0));
  expect(a_dev == a, "the device pointer of mapped memory is not its host address", 0);
  CHECK(cudaMallocHost((void **)&b, N * sizeof(unsigned)));
  CHECK(cudaHostAlloc((void **)&big, BIG * sizeof(unsigned), cudaHostAllocMapped));
  CHECK(cudaHostGetDevicePointer((void **)&big_dev, big, 0));
  CHECK(cudaMallocHost((void **)&result, N * sizeof(unsigned)));
  unsigned *acc;
  CHECK(cudaMalloc((void **)&acc, N * sizeof(unsigned)));
  CHECK(cudaMemset(acc, 0, N * sizeof(unsigned)));
  memset(big, 0, BIG * sizeof(unsigned));
  std::vector<unsigned> host_acc(N, 0), host_big(BIG, 0);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned grid = (N + BLOCK - 1) / BLOCK;

  for (int it = 0; it < iters; it++) {
    // the host writes a; a kernel reads it through the device pointer
    for (int i = 0; i < N; i++) a[i] = (unsigned)(it * 7919 + i * 31);
    mp_accum<<<grid, BLOCK, 0, s>>>(acc, a_dev, N);
    launches++;
    for (int i = 0; i < N; i++) host_acc[i] = host_acc[i] * 31u + (unsigned)(it * 7919 + i * 31);

    // a kernel writes b (its host address), the host reads it after the sync
    mp_fill<<<grid, BLOCK, 0, s>>>(b, N, (unsigned)it);
    launches++;
    CHECK(cudaStreamSynchronize(s));
    bool ok = true;
    for (int i = 0; i < N; i++) ok = ok && b[i] == fill_value((unsigned)it, i);
    expect(ok, "a kernel's writes to pinned memory (cudaMallocHost) are not seen by the host", it);
    fold(b, N);

    // XLA's pattern: a memset of pinned memory, a kernel writes part of it,
    // a device-to-host copy reads it back in stream order
    CHECK(cudaMemsetAsync(a, 0xff, N * sizeof(unsigned), s));
    mp_fill<<<1, 16, 0, s>>>(a_dev, 16, (unsigned)it + 100u);
    launches++;
    CHECK(cudaMemcpyAsync(result, a, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    ok = true;
    for (int i = 0; i < N; i++) ok = ok && result[i] == (i < 16 ? fill_value((unsigned)it + 100u, i) : 0xffffffffu);
    expect(ok, "memset + kernel + copy of pinned memory gives wrong bytes", it);
    fold(result, N);

    // a large mapped buffer: a kernel changes one word in 64 pages' worth;
    // meanwhile the host writes a word of one of those pages the kernel
    // does not touch: after the sync, both are there
    unsigned base = (unsigned)it * 1000u;
    int count = (int)(BIG / STRIDE);
    mp_poke<<<1, 64, 0, s>>>(big_dev, STRIDE, count, base);
    launches++;
    big[STRIDE + 1] = base ^ 0x5a5a5a5au;  // next to word STRIDE, which the kernel writes
    CHECK(cudaStreamSynchronize(s));
    for (int k = 0; k < count; k++) host_big[(size_t)k * STRIDE] = base + (unsigned)k;
    host_big[STRIDE + 1] = base ^ 0x5a5a5a5au;
    expect(memcmp(big, host_big.data(), BIG * sizeof(unsigned)) == 0,
           "the large mapped buffer differs from the host's (pokes, or a host write next to them)", it);
  }
  CHECK(cudaDeviceSynchronize());
  std::vector<unsigned> got(N);
  CHECK(cudaMemcpy(got.data(), acc, N * sizeof(unsigned), cudaMemcpyDeviceToHost));
  expect(got == host_acc, "the accumulator (kernels reading mapped memory) differs from the host's", iters);
  fold(got.data(), N);
  fold(big, BIG);

  // a freed block's address may come back in a new one: its shadow is new
  CHECK(cudaFreeHost(b));
  unsigned *c;
  CHECK(cudaHostAlloc((void **)&c, N * sizeof(unsigned), cudaHostAllocMapped));
  for (int i = 0; i < N; i++) c[i] = (unsigned)i;
  mp_accum<<<grid, BLOCK, 0, s>>>(c, c, N);  // c[i] = c[i] * 31 + c[i]
  launches++;
  CHECK(cudaStreamSynchronize(s));
  bool ok = true;
  for (int i = 0; i < N; i++) ok = ok && c[i] == (unsigned)i * 32u;
  expect(ok, "a new mapped block at a freed one's address", iters);
  fold(c, N);

  // memory the program registered (cudaHostRegister with the mapped flag,
  // as simpleHostRegister does), starting 400 bytes into a page: a kernel
  // fills it through its device pointer while the host writes the words
  // before and after it in the same pages, which must keep the host's values
  {
    // from mmap, where the kernel puts it, as programs get theirs: a
    // server's driver need not grant that address (the H200's did not), so
    // ferry shadows it at an alias
    const int before = 100, after = 50;
    const size_t raw_bytes = (size_t)(N + 2048) * sizeof(unsigned);
    void *raw_p = mmap(nullptr, raw_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw_p == MAP_FAILED) return 2;
    unsigned *raw = (unsigned *)raw_p, *reg = raw + before, *dreg = nullptr;
    memset(raw, 0, (size_t)(N + 2048) * sizeof(unsigned));
    CHECK(cudaHostRegister(reg, N * sizeof(unsigned), cudaHostRegisterMapped));
    CHECK(cudaHostGetDevicePointer((void **)&dreg, reg, 0));
    for (int r = 0; r < 3; r++) {
      mp_fill<<<grid, BLOCK, 0, s>>>(dreg, N, 200u + (unsigned)r);
      launches++;
      for (int i = 0; i < before; i++) raw[i] = 0xabc000u + (unsigned)(r * 1000 + i);
      for (int i = 0; i < after; i++) reg[N + i] = 0xdef000u + (unsigned)(r * 1000 + i);
      CHECK(cudaStreamSynchronize(s));
      ok = true;
      for (int i = 0; i < N; i++) ok = ok && reg[i] == fill_value(200u + (unsigned)r, i);
      for (int i = 0; i < before; i++) ok = ok && raw[i] == 0xabc000u + (unsigned)(r * 1000 + i);
      for (int i = 0; i < after; i++) ok = ok && reg[N + i] == 0xdef000u + (unsigned)(r * 1000 + i);
      expect(ok, "registered memory a kernel filled, or the host's words around it", r);
      fold(reg, N);
    }
    // a memset and a device-to-device copy named by the device pointer
    CHECK(cudaMemsetAsync(dreg, 0x5a, 64 * sizeof(unsigned), s));
    CHECK(cudaMemcpyAsync(dreg + 128, dreg + 256, 64 * sizeof(unsigned), cudaMemcpyDeviceToDevice, s));
    CHECK(cudaStreamSynchronize(s));
    ok = true;
    for (int i = 0; i < 64; i++) ok = ok && reg[i] == 0x5a5a5a5au && reg[128 + i] == fill_value(202u, 256 + i);
    expect(ok, "a memset and a copy on registered memory through its device pointer", 0);
    fold(reg, N);
    {
      uint64_t word = (uint64_t)(uintptr_t)(reg + 2);
      uint32_t high = (uint32_t)(word >> 32);
      Padded c;
      memset(&c, 0, sizeof c);
      c.n = (int)(uint32_t)word;
      memcpy((char *)&c + offsetof(Padded, n) + sizeof c.n, &high, sizeof high);
      mp_count<<<1, 1, 0, s>>>(acc, c);
      launches++;
      unsigned count = 0;
      CHECK(cudaMemcpyAsync(&count, acc, sizeof count, cudaMemcpyDeviceToHost, s));
      CHECK(cudaStreamSynchronize(s));
      expect(count == (unsigned)c.n, "a count sharing a word with padding that reads as registered memory", 0);
    }
    CHECK(cudaHostUnregister(reg));
    munmap(raw_p, raw_bytes);
  }

  // a kernel on mapped memory in a stream only an event waits for, then
  // synchronizations of another stream whose work uses no mapped memory
  cudaStream_t s2;
  cudaEvent_t done;
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  mp_fill<<<grid, BLOCK, 0, s2>>>(c, N, 77u);
  launches++;
  CHECK(cudaEventRecord(done, s2));
  CHECK(cudaEventSynchronize(done));
  ok = true;
  for (int i = 0; i < N; i++) ok = ok && c[i] == fill_value(77u, i);
  expect(ok, "a kernel's writes seen through an event", iters);
  fold(c, N);
  for (int i = 0; i < idle_syncs; i++) {
    mp_fill<<<grid, BLOCK, 0, s>>>(acc, N, (unsigned)i);
    launches++;
    CHECK(cudaStreamSynchronize(s));
  }
  CHECK(cudaEventDestroy(done));
  CHECK(cudaStreamDestroy(s2));

  // a mapped block no parameter names: a kernel finds it through a
  // structure in device memory, reads what the host wrote before the
  // launch and writes what the host reads after the sync
  {
    unsigned *d;
    Holder *dh;
    CHECK(cudaHostAlloc((void **)&d, N * sizeof(unsigned), cudaHostAllocMapped));
    for (int i = 0; i < N; i++) d[i] = (unsigned)i ^ 0x1234u;
    CHECK(cudaMalloc((void **)&dh, sizeof(Holder)));
    Holder hv = {d, 11u};
    CHECK(cudaMemcpy(dh, &hv, sizeof hv, cudaMemcpyHostToDevice));
    mm_follow<<<grid, BLOCK, 0, s>>>(dh, N);
    launches++;
    CHECK(cudaStreamSynchronize(s));
    ok = true;
    for (int i = 0; i < N; i++) ok = ok && d[i] == ((unsigned)i ^ 0x1234u) * 3u + 11u;
    expect(ok, "a mapped block a kernel reached through a structure", iters);
    fold(d, N);
    CHECK(cudaFree(dh));
    CHECK(cudaFreeHost(d));
  }

  CHECK(cudaFreeHost(a));
  CHECK(cudaFreeHost(c));
  CHECK(cudaFreeHost(big));
  CHECK(cudaFreeHost(result));
  CHECK(cudaFree(acc));
  CHECK(cudaStreamDestroy(s));
  return report();
}
