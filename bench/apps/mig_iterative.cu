// The end-to-end migration benchmark (the paper's Fig. 13): a Jacobi
// solver of Laplace's equation on an N x N grid (two float grids, 8 N^2
// bytes of state), one kernel launch per iteration, and every CHECK
// iterations a convergence test (residual kernel, then a 4-byte copy back
// to the host: the synchronous call a real solver makes). Run natively,
// through ferry remotely, and migrated at a chosen launch
// (FERRY_MIGRATE_AT): the result must be the same bits everywhere.
// usage: mig_iterative N ITERATIONS [CHECK=50 [READONLY_MIB=0]]
// READONLY_MIB: that much more device memory, written once at the start
// (each 64 MiB block its own byte) and only checked at the end: data a
// migration that copies ahead finds unchanged (issue 13's 4 GiB variant).
// Prints "setup_s" (allocation and the first kernel: a migration at launch 1
// happens there), "loop_s" (the iterations, a later migration included),
// "per_iteration_ms", "launches", "residual" and "checksum".
// CPU twins of its kernels: bench/twins/bench_twins.c.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "../../tests/apps/cuda_check.h"

static const int BX = 32, BY = 8;

// the boundary is held: a hot top edge, a warm left one, cold elsewhere;
// the interior starts from a pattern so that every point changes
__global__ void it_init(float *u, float *v, int n) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= n || y >= n) return;
  float f;
  if (y == 0) f = 100.0f;
  else if (x == 0) f = 50.0f;
  else if (x == n - 1 || y == n - 1) f = 0.0f;
  else f = (float)((x * 7 + y * 13) % 97);
  u[(size_t)y * n + x] = f;
  v[(size_t)y * n + x] = f;
}

__global__ void it_jacobi(const float *u, float *v, int n) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < 1 || y < 1 || x >= n - 1 || y >= n - 1) return;
  size_t i = (size_t)y * n + x;
  v[i] = 0.25f * (u[i - 1] + u[i + 1] + u[i - n] + u[i + n]);
}

// the largest change of the last iteration; non-negative floats order like
// their bits, so an integer atomicMax finds it in any order
__global__ void it_residual(const float *u, const float *v, int n, unsigned *out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= n || y >= n) return;
  size_t i = (size_t)y * n + x;
  float d = fabsf(v[i] - u[i]);
  if (d > 0.0f) atomicMax(out, __float_as_uint(d));
}

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s N ITERATIONS [CHECK=50 [READONLY_MIB=0]]\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]), iterations = atoi(argv[2]);
  int check = argc > 3 ? atoi(argv[3]) : 50;
  long readonly_mib = argc > 4 ? atol(argv[4]) : 0;
  if (n < 3 || iterations < 1 || check < 1 || readonly_mib < 0) {
    fprintf(stderr, "N >= 3, ITERATIONS >= 1, CHECK >= 1, READONLY_MIB >= 0\n");
    return 2;
  }
  size_t cells = (size_t)n * n, bytes = cells * sizeof(float);
  double t0 = now_s();
  float *u, *v;
  unsigned *res;
  CHECK(cudaMalloc(&u, bytes));
  CHECK(cudaMalloc(&v, bytes));
  CHECK(cudaMalloc(&res, sizeof *res));
  const size_t ro_block = 64u << 20, ro_bytes = (size_t)readonly_mib << 20;
  unsigned char *ro = NULL;
  if (ro_bytes) {
    CHECK(cudaMalloc(&ro, ro_bytes));
    for (size_t off = 0; off < ro_bytes; off += ro_block)
      CHECK(cudaMemset(ro + off, (int)(0x5a + off / ro_block) & 0xff,
                       ro_bytes - off < ro_block ? ro_bytes - off : ro_block));
  }
  dim3 block(BX, BY), grid((n + BX - 1) / BX, (n + BY - 1) / BY);
  it_init<<<grid, block>>>(u, v, n); // launch 1
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  long long launches = 1;
  double t1 = now_s();

  unsigned residual = 0;
  for (int it = 1; it <= iterations; it++) {
    it_jacobi<<<grid, block>>>(u, v, n);
    launches++;
    if (it % check == 0 || it == iterations) {
      CHECK(cudaMemsetAsync(res, 0, sizeof *res));
      it_residual<<<grid, block>>>(u, v, n, res);
      launches++;
      CHECK(cudaMemcpy(&residual, res, sizeof residual, cudaMemcpyDeviceToHost));
    }
    float *t = u;
    u = v;
    v = t;
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  double t2 = now_s();

  std::vector<float> grid_host(cells);
  CHECK(cudaMemcpy(grid_host.data(), u, bytes, cudaMemcpyDeviceToHost));
  unsigned long long h = 14695981039346656037ull;
  for (size_t i = 0; i + 1 < cells; i += 2) { // FNV-1a over 8-byte words
    unsigned long long w;
    memcpy(&w, &grid_host[i], sizeof w);
    h = (h ^ w) * 1099511628211ull;
  }
  double sum = 0;
  for (size_t i = 0; i < cells; i++) sum += grid_host[i];
  CHECK(cudaFree(u));
  CHECK(cudaFree(v));
  CHECK(cudaFree(res));
  size_t ro_bad = 0;
  if (ro_bytes) {
    std::vector<unsigned char> back(ro_block);
    for (size_t off = 0; off < ro_bytes; off += ro_block) {
      size_t len = ro_bytes - off < ro_block ? ro_bytes - off : ro_block;
      CHECK(cudaMemcpy(back.data(), ro + off, len, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < len; i++) ro_bad += back[i] != ((0x5a + off / ro_block) & 0xff);
    }
    CHECK(cudaFree(ro));
  }
  float r;
  memcpy(&r, &residual, sizeof r);

  printf("n %d\n", n);
  printf("iterations %d\n", iterations);
  printf("launches %lld\n", launches);
  printf("state_bytes %zu\n", 2 * bytes);
  printf("setup_s %.6f s\n", t1 - t0);
  printf("loop_s %.6f s\n", t2 - t1);
  printf("per_iteration_ms %.6f ms\n", (t2 - t1) * 1e3 / iterations);
  printf("residual %g\n", r);
  printf("mean %.9g\n", sum / cells);
  printf("checksum %016llx\n", h);
  if (ro_bytes) printf("readonly_bytes %zu (%zu differ)\n", ro_bytes, ro_bad);
  return ro_bad ? 1 : 0;
}
