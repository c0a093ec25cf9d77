// The math libraries through ferry (issue 10): a cuBLAS SGEMM loop, a cuFFT
// loop, and a program that mixes cuBLAS with its own kernels on the same
// buffers (migrated in the middle by FERRY_MIGRATE_AT). Each prints its time
// and a checksum of its result, so runs native, through ferry and migrated
// can be compared (bench/run_libs_gpu.sh).
//
//   bench_libs sgemm N CALLS     C = A B, CALLS times, n x n
//   bench_libs fft N CALLS       in-place C2C forward+inverse of N points, CALLS times
//   bench_libs mixed N ROUNDS    per round: own kernel on A, SGEMM, own kernel on C
#include <cublas_v2.h>
#include <cufft.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../tests/apps/cuda_check.h"

#define BLAS(x)                                                                                 \
  do {                                                                                          \
    cublasStatus_t s_ = (x);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                          \
      fprintf(stderr, "FAIL %s:%d: %s -> cuBLAS status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)
#define FFT(x)                                                                                  \
  do {                                                                                          \
    cufftResult r_ = (x);                                                                       \
    if (r_ != CUFFT_SUCCESS) {                                                                  \
      fprintf(stderr, "FAIL %s:%d: %s -> cuFFT result %d\n", __FILE__, __LINE__, #x, (int)r_);  \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// values with few significant bits, so that sums are exact in any order
static void fill(float *h, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) h[i] = (float)((i * 7 + seed * 13) % 17) / 16.0f - 0.5f;
}

// a checksum of a device array: its bytes, FNV-1a (bit-exact comparison)
static unsigned long long checksum(const float *d, size_t n) {
  float *h = (float *)malloc(n * sizeof *h);
  CHECK(cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost));
  const unsigned char *b = (const unsigned char *)h;
  unsigned long long x = 1469598103934665603ull;
  for (size_t i = 0; i < n * sizeof *h; i++) x = (x ^ b[i]) * 1099511628211ull;
  free(h);
  return x;
}

__global__ void shift(float *a, size_t n, float by) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * 0.5f + by;
}

__global__ void clamp(float *c, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) c[i] = fminf(fmaxf(c[i], -4.0f), 4.0f) / 8.0f;
}

static float *device_matrix(size_t n, unsigned seed) {
  float *h = (float *)malloc(n * sizeof *h), *d;
  fill(h, n, seed);
  CHECK(cudaMalloc(&d, n * sizeof *d));
  CHECK(cudaMemcpy(d, h, n * sizeof *d, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

static int sgemm(int n, int calls) {
  size_t nn = (size_t)n * n;
  float *a = device_matrix(nn, 1), *b = device_matrix(nn, 2), *c = device_matrix(nn, 3);
  cublasHandle_t h;
  BLAS(cublasCreate(&h));
  const float one = 1.0f, zero = 0.0f;
  BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));  // warm-up
  CHECK(cudaDeviceSynchronize());
  double t0 = now();
  for (int i = 0; i < calls; i++)
    BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
  CHECK(cudaDeviceSynchronize());
  double s = now() - t0;
  printf("sgemm n=%d calls=%d seconds=%.6f tflops=%.2f\n", n, calls, s,
         2.0 * n * (double)n * n * calls / s / 1e12);
  printf("checksum %016llx\n", checksum(c, nn));
  BLAS(cublasDestroy(h));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  return 0;
}

static int fft(int n, int calls) {
  cufftComplex *d;
  size_t bytes = (size_t)n * sizeof *d;
  float *h = (float *)malloc(bytes);
  fill(h, 2 * (size_t)n, 4);
  CHECK(cudaMalloc(&d, bytes));
  CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  cufftHandle plan;
  FFT(cufftPlan1d(&plan, n, CUFFT_C2C, 1));
  FFT(cufftExecC2C(plan, d, d, CUFFT_FORWARD));  // warm-up
  FFT(cufftExecC2C(plan, d, d, CUFFT_INVERSE));
  CHECK(cudaDeviceSynchronize());
  double t0 = now();
  for (int i = 0; i < calls; i++) {
    FFT(cufftExecC2C(plan, d, d, CUFFT_FORWARD));
    FFT(cufftExecC2C(plan, d, d, CUFFT_INVERSE));
  }
  CHECK(cudaDeviceSynchronize());
  double s = now() - t0;
  printf("fft n=%d calls=%d seconds=%.6f gbps=%.2f\n", n, calls, s,
         2.0 * calls * 2 * (double)bytes / s / 1e9);
  printf("checksum %016llx\n", checksum((const float *)d, 2 * (size_t)n));
  FFT(cufftDestroy(plan));
  CHECK(cudaFree(d));
  free(h);
  return 0;
}

static int mixed(int n, int rounds) {
  size_t nn = (size_t)n * n;
  float *a = device_matrix(nn, 5), *b = device_matrix(nn, 6), *c = device_matrix(nn, 7);
  cublasHandle_t h;
  cudaStream_t s;
  BLAS(cublasCreate(&h));
  CHECK(cudaStreamCreate(&s));
  BLAS(cublasSetStream(h, s));  // a ferry stream handed to cuBLAS
  const float one = 1.0f, zero = 0.0f;
  unsigned blocks = (unsigned)((nn + 255) / 256);
  // warm-up: the libraries load their kernels at first use (C is
  // overwritten by the first round)
  BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
  clamp<<<blocks, 256, 0, s>>>(c, nn);
  CHECK(cudaStreamSynchronize(s));
  double t0 = now();
  for (int r = 0; r < rounds; r++) {
    shift<<<blocks, 256, 0, s>>>(a, nn, (float)(r % 3) / 4.0f);
    CHECK(cudaGetLastError());
    BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
    clamp<<<blocks, 256, 0, s>>>(c, nn);
    CHECK(cudaGetLastError());
    // C feeds the next round: B = C
    CHECK(cudaMemcpyAsync(b, c, nn * sizeof *c, cudaMemcpyDeviceToDevice, s));
  }
  CHECK(cudaStreamSynchronize(s));
  printf("mixed n=%d rounds=%d seconds=%.6f\n", n, rounds, now() - t0);
  printf("launches %d\n", 2 * rounds + 1);
  printf("checksum %016llx\n", checksum(c, nn));
  BLAS(cublasDestroy(h));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s sgemm|fft|mixed N CALLS\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[2]), calls = atoi(argv[3]);
  if (n <= 0 || calls <= 0) {
    fprintf(stderr, "N and CALLS must be positive\n");
    return 2;
  }
  if (!strcmp(argv[1], "sgemm")) return sgemm(n, calls);
  if (!strcmp(argv[1], "fft")) return fft(n, calls);
  if (!strcmp(argv[1], "mixed")) return mixed(n, calls);
  fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
