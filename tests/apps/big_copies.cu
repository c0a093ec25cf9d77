// Large copies both ways, byte for byte, for FERRY_STREAMS (striped copies
// over several data connections): cudaMemcpy from and to pageable memory,
// cudaMemcpyAsync from and to pinned memory (the deferred path), sizes
// around the striping threshold and ones no piece size divides, with a
// device-to-device copy and a memset in between so that the bytes really
// went through device memory. No kernels, so no CPU twin.
// usage: big_copies [MIB=40]   prints "checksum: <hex>" and "PASSED"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "cuda_check.h"

static void fill(unsigned char *p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    p[i] = (unsigned char)x;
  }
}

static uint64_t fnv(const unsigned char *p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static int failures;
static void expect_same(const char *what, const unsigned char *a, const unsigned char *b, size_t n) {
  if (memcmp(a, b, n) == 0) return;
  size_t i = 0;
  while (a[i] == b[i]) i++;
  printf("FAIL %s: %zu bytes differ first at byte %zu\n", what, n, i);
  failures++;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 40;
  size_t big = (mib << 20) + 4321; // no piece size divides it
  size_t sizes[] = {1000, (4u << 20) - 1, 4u << 20, (5u << 20) + 17, big};
  unsigned char *src = (unsigned char *)malloc(big), *back = (unsigned char *)malloc(big);
  unsigned char *want = (unsigned char *)malloc(big);
  unsigned char *pin_src, *pin_back;
  CHECK(cudaMallocHost((void **)&pin_src, big));
  CHECK(cudaMallocHost((void **)&pin_back, big));
  unsigned char *d_a, *d_b;
  CHECK(cudaMalloc((void **)&d_a, big));
  CHECK(cudaMalloc((void **)&d_b, big));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  uint64_t sum = 0xcbf29ce484222325ull;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    // pageable: host -> a -> b (device to device) -> host, a memset inside
    fill(src, n, (uint32_t)k);
    CHECK(cudaMemcpy(d_a, src, n, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_b, d_a, n, cudaMemcpyDeviceToDevice));
    size_t off = n / 3, len = n / 5;
    CHECK(cudaMemset(d_b + off, 0x5a, len));
    memset(back, 0, n);
    CHECK(cudaMemcpy(back, d_b, n, cudaMemcpyDeviceToHost));
    memcpy(want, src, n);
    memset(want + off, 0x5a, len);
    expect_same("pageable round trip", back, want, n);
    sum = fnv(back, n, sum);
    // pinned, asynchronous both ways on a stream
    fill(pin_src, n, (uint32_t)k + 100);
    CHECK(cudaMemcpyAsync(d_a, pin_src, n, cudaMemcpyHostToDevice, s));
    memset(pin_back, 0, n);
    CHECK(cudaMemcpyAsync(pin_back, d_a, n, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    expect_same("pinned round trip", pin_back, pin_src, n);
    sum = fnv(pin_back, n, sum);
    // asynchronous into pageable memory (done when it returns)
    memset(back, 0, n);
    CHECK(cudaMemcpyAsync(back, d_a, n, cudaMemcpyDeviceToHost, s));
    expect_same("async into pageable", back, pin_src, n);
  }
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(d_a));
  CHECK(cudaFree(d_b));
  CHECK(cudaFreeHost(pin_src));
  CHECK(cudaFreeHost(pin_back));
  printf("checksum: %016llx\n", (unsigned long long)sum);
  if (failures) {
    printf("FAILED: %d\n", failures);
    return 1;
  }
  printf("PASSED\n");
  return 0;
}
