// Peer access between two devices, as multi-GPU codes and PyTorch use it:
// device 0 enables access to device 1, its kernels read device 1's memory
// (allocated before and after the enable, freed and allocated again), and
// copies between them (cudaMemcpyPeer, cudaMemcpyPeerAsync, cudaMemcpy with
// cudaMemcpyDefault) run both ways; disabled, enabled again, disabled; a
// pool of device 1 made usable by device 0 (cudaMemPoolSetAccess) and
// taken back; and a last kernel on device 0. Every value is checked against the host's.
// usage: peer_access
// Prints "peer 0->1: can=N", "peer 1->0: can=N", then PASSED. Exit: 0
// PASSED, 1 mismatch, 3 CUDA error, 4 no peer access between devices 0 and 1.
// CPU twins of its kernels: tests/twins/app_twins.c.
#include <cstdio>
#include <vector>

#include "cuda_check.h"
#include "fill_kernels.h"

#define N 4096            // words read across
#define BIG (768u * 1024) // words of an allocation of its own mappings (3 MiB)
#define BLOCK 256

static int fails;
static void expect_words(const char *what, const unsigned *dev, int n,
                         unsigned (*want)(int i, unsigned a, unsigned b), unsigned a, unsigned b) {
  std::vector<unsigned> got(n);
  CHECK(cudaMemcpy(got.data(), dev, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++)
    if (got[i] != want(i, a, b)) {
      printf("FAIL: %s: word %d is %u, not %u\n", what, i, got[i], want(i, a, b));
      fails++;
      return;
    }
}
static unsigned filled(int i, unsigned seed, unsigned off) { return fill_value(seed, i + (int)off); }
static unsigned accumulated(int i, unsigned first, unsigned second) {
  return fill_value(first, i) * 31u + fill_value(second, i);
}

int main() {
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    printf("FAIL: %d device(s); two are needed\n", count);
    return 4;
  }
  int can01 = 0, can10 = 0;
  CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
  CHECK(cudaDeviceCanAccessPeer(&can10, 1, 0));
  printf("peer 0->1: can=%d\npeer 1->0: can=%d\n", can01, can10);
  if (!can01) return 4;
  unsigned grid = (N + BLOCK - 1) / BLOCK;

  // device 1's memory from before the enable
  unsigned *b1, *c1, *acc0;
  CHECK(cudaSetDevice(1));
  CHECK(cudaMalloc((void **)&b1, N * sizeof(unsigned)));
  mp_fill<<<grid, BLOCK>>>(b1, N, 7u);
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaSetDevice(0));
  CHECK(cudaDeviceEnablePeerAccess(1, 0));
  if (cudaDeviceEnablePeerAccess(1, 0) != cudaErrorPeerAccessAlreadyEnabled) {
    printf("FAIL: enabling peer access twice did not say cudaErrorPeerAccessAlreadyEnabled\n");
    fails++;
  }
  (void)cudaGetLastError();
  CHECK(cudaMalloc((void **)&acc0, N * sizeof(unsigned)));
  CHECK(cudaMemset(acc0, 0, N * sizeof(unsigned)));
  mp_accum<<<grid, BLOCK>>>(acc0, b1, N); // acc0 = 0 * 31 + b1
  CHECK(cudaDeviceSynchronize());
  expect_words("a kernel of device 0 reading device 1's memory", acc0, N, filled, 7u, 0u);

  // device 1's memory from after the enable
  CHECK(cudaSetDevice(1));
  CHECK(cudaMalloc((void **)&c1, BIG * sizeof(unsigned)));
  mp_fill<<<(BIG + BLOCK - 1) / BLOCK, BLOCK>>>(c1, BIG, 9u);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaSetDevice(0));
  mp_accum<<<grid, BLOCK>>>(acc0, c1, N); // acc0 = fill(7) * 31 + fill(9)
  CHECK(cudaDeviceSynchronize());
  expect_words("a kernel of device 0 reading memory device 1 allocated later", acc0, N, accumulated,
               7u, 9u);

  // copies both ways
  CHECK(cudaMemcpyPeer(acc0, 0, c1 + 5, 1, N * sizeof(unsigned)));
  expect_words("cudaMemcpyPeer from device 1 to device 0", acc0, N, filled, 9u, 5u);
  mp_fill<<<grid, BLOCK>>>(acc0, N, 11u);
  CHECK(cudaMemcpy(c1 + 64, acc0, N * sizeof(unsigned), cudaMemcpyDefault));
  expect_words("cudaMemcpy from device 0 to device 1", c1 + 64, N, filled, 11u, 0u);
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMemcpyPeerAsync(acc0, 0, b1, 1, N * sizeof(unsigned), s));
  CHECK(cudaStreamSynchronize(s));
  expect_words("cudaMemcpyPeerAsync from device 1 to device 0", acc0, N, filled, 7u, 0u);

  // freed and allocated again on device 1
  CHECK(cudaSetDevice(1));
  CHECK(cudaFree(c1));
  CHECK(cudaMalloc((void **)&c1, BIG * sizeof(unsigned)));
  mp_fill<<<(BIG + BLOCK - 1) / BLOCK, BLOCK>>>(c1, BIG, 13u);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaSetDevice(0));
  mp_accum<<<grid, BLOCK>>>(acc0, c1, N);
  CHECK(cudaDeviceSynchronize());
  expect_words("a kernel of device 0 reading a new allocation at a freed one's place", acc0, N,
               accumulated, 7u, 13u);

  // off, on again (what device 1 has now is mapped again), off
  CHECK(cudaDeviceDisablePeerAccess(1));
  if (cudaDeviceDisablePeerAccess(1) != cudaErrorPeerAccessNotEnabled) {
    printf("FAIL: disabling peer access twice did not say cudaErrorPeerAccessNotEnabled\n");
    fails++;
  }
  (void)cudaGetLastError();
  CHECK(cudaDeviceEnablePeerAccess(1, 0));
  CHECK(cudaMemset(acc0, 0, N * sizeof(unsigned)));
  mp_accum<<<grid, BLOCK>>>(acc0, c1, N);
  CHECK(cudaDeviceSynchronize());
  expect_words("a kernel of device 0 reading device 1's memory after peer access came back", acc0,
               N, filled, 13u, 0u);
  CHECK(cudaDeviceDisablePeerAccess(1));

  // a pool of device 1 that device 0 may use (streamOrderedAllocationP2P)
  cudaMemPool_t pool1;
  CHECK(cudaDeviceGetDefaultMemPool(&pool1, 1));
  cudaMemAccessDesc desc = {{cudaMemLocationTypeDevice, 0}, cudaMemAccessFlagsProtReadWrite};
  CHECK(cudaMemPoolSetAccess(pool1, &desc, 1));
  cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
  cudaMemLocation where = {cudaMemLocationTypeDevice, 0};
  CHECK(cudaMemPoolGetAccess(&flags, pool1, &where));
  if (flags != cudaMemAccessFlagsProtReadWrite) {
    printf("FAIL: cudaMemPoolGetAccess does not say device 0 may use device 1's pool\n");
    fails++;
  }
  unsigned *d1;
  CHECK(cudaSetDevice(1));
  CHECK(cudaMallocAsync((void **)&d1, N * sizeof(unsigned), 0));
  mp_fill<<<grid, BLOCK>>>(d1, N, 19u);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaSetDevice(0));
  CHECK(cudaMemset(acc0, 0, N * sizeof(unsigned)));
  mp_accum<<<grid, BLOCK>>>(acc0, d1, N);
  CHECK(cudaDeviceSynchronize());
  expect_words("a kernel of device 0 reading memory of device 1's pool", acc0, N, filled, 19u, 0u);
  CHECK(cudaSetDevice(1));
  CHECK(cudaFreeAsync(d1, 0));
  CHECK(cudaDeviceSynchronize());
  desc.flags = cudaMemAccessFlagsProtNone;
  CHECK(cudaMemPoolSetAccess(pool1, &desc, 1));
  CHECK(cudaSetDevice(0));

  // device 0 alone again
  mp_fill<<<grid, BLOCK>>>(acc0, N, 17u);
  CHECK(cudaDeviceSynchronize());
  expect_words("device 0 after peer access", acc0, N, filled, 17u, 0u);
  CHECK(cudaMemcpyPeer(c1, 1, acc0, 0, N * sizeof(unsigned)));
  expect_words("cudaMemcpyPeer without peer access", c1, N, filled, 17u, 0u);

  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(acc0));
  CHECK(cudaSetDevice(1));
  CHECK(cudaFree(b1));
  CHECK(cudaFree(c1));
  if (fails) return 1;
  printf("PASSED\n");
  return 0;
}
