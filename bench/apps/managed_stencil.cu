// Managed memory as a halo-exchanging stencil uses it (issue 22): two
// cudaMallocManaged grids; each iteration the host writes the halo rows of
// the input grid (what a neighbour would send), a kernel computes the
// interior of the output grid (Jacobi), the host synchronizes and reads the
// output's boundary rows (what it would send back). Variant "prefetch"
// moves both grids whole with cudaMemPrefetchAsync, to the device before
// the kernel and to the host after it.
// Prints "iter_ms MEDIAN", "changed_bytes PER_ITERATION" (pages the host's
// writes and the kernel's writes change, counted from the program's own
// pattern: the pages of two halo rows and of the interior rows),
// "first_bytes N" (both grids, which the first launch finds new) and
// "checksum X" (of both grids at the end: equal in every placement).
// usage: managed_stencil N ITERS demand|prefetch
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../tests/apps/cuda_check.h"

__global__ void stencil_jacobi(const float *in, float *out, int n) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < 1 || y < 1 || x >= n - 1 || y >= n - 1) return;
  size_t i = (size_t)y * n + x;
  out[i] = 0.25f * (in[i - 1] + in[i + 1] + in[i - n] + in[i + n]);
}

static size_t pages_of(size_t bytes_from, size_t bytes_to) { // [from, to) of a page-aligned block
  const size_t page = 4096;
  return (bytes_to + page - 1) / page - bytes_from / page;
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[3], "demand") && strcmp(argv[3], "prefetch"))) {
    fprintf(stderr, "usage: managed_stencil N ITERS demand|prefetch\n");
    return 2;
  }
  int n = atoi(argv[1]), iters = atoi(argv[2]);
  bool prefetch = !strcmp(argv[3], "prefetch");
  if (n < 16 || iters < 1) return 2;
  size_t bytes = (size_t)n * n * sizeof(float), row = (size_t)n * sizeof(float);
  float *grid[2];
  for (auto &g : grid) {
    CHECK(cudaMallocManaged(&g, bytes, cudaMemAttachGlobal));
    for (size_t i = 0; i < (size_t)n * n; i++) g[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
  }
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  cudaMemLocation on_gpu = {cudaMemLocationTypeDevice, dev}, on_host = {cudaMemLocationTypeHost, 0};
  dim3 block(32, 8), blocks((n + 31) / 32, (n + 7) / 8);
  std::vector<double> ms;
  double boundary = 0;
  for (int it = 0; it < iters; it++) {
    float *in = grid[it & 1], *out = grid[!(it & 1)];
    auto t0 = std::chrono::steady_clock::now();
    for (int x = 0; x < n; x++) { // the halo a neighbour sends
      in[x] = (float)(it + x % 7);
      in[(size_t)(n - 1) * n + x] = (float)(it - x % 5);
    }
    if (prefetch) {
      CHECK(cudaMemPrefetchAsync(in, bytes, on_gpu, 0, 0));
      CHECK(cudaMemPrefetchAsync(out, bytes, on_gpu, 0, 0));
    }
    stencil_jacobi<<<blocks, block>>>(in, out, n);
    CHECK(cudaGetLastError());
    if (prefetch) {
      CHECK(cudaMemPrefetchAsync(in, bytes, on_host, 0, 0));
      CHECK(cudaMemPrefetchAsync(out, bytes, on_host, 0, 0));
    }
    CHECK(cudaDeviceSynchronize());
    for (int x = 0; x < n; x++) // what goes back to the neighbours
      boundary += out[(size_t)n + x] + out[(size_t)(n - 2) * n + x];
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  double sum = 0;
  for (auto &g : grid)
    for (size_t i = 0; i < (size_t)n * n; i++) sum += g[i] * (double)((i % 13) + 1);
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  size_t changed = (2 * pages_of(0, row) + pages_of(row, bytes - row)) * 4096;
  printf("iter_ms %.4f\n", sorted[sorted.size() / 2]);
  printf("changed_bytes %zu\n", changed);
  printf("first_bytes %zu\n", 2 * bytes);
  printf("checksum %.9e %.9e\n", sum, boundary);
  for (auto &g : grid) CHECK(cudaFree(g));
  return 0;
}
