// Calls CUDA runtime functions ferry does not forward. The program must
// still load and run, get cudaErrorNotSupported, and see one warning per
// call name.
#include <cstdio>
#include <cuda_runtime.h>

int main() {
  void *p = nullptr;
  cudaError_t a = cudaMallocManaged(&p, 1024);
  cudaError_t b = cudaMallocManaged(&p, 2048);
  cudaGraph_t g;
  cudaError_t c = cudaGraphCreate(&g, 0);
  // mapped host memory is fine for copies, but no device pointer exists for it
  void *mapped = nullptr, *dmapped = nullptr;
  cudaError_t m = cudaHostAlloc(&mapped, 4096, cudaHostAllocMapped);
  cudaError_t d = m == cudaSuccess ? cudaHostGetDevicePointer(&dmapped, mapped, 0) : m;
  // the program keeps working afterwards
  int *dev = nullptr;
  cudaError_t e = cudaMalloc(&dev, 64);
  cudaError_t f = cudaFree(dev);
  printf("managed=%s managed_again=%s graph=%s mapped_device_pointer=%s malloc=%s free=%s\n", cudaGetErrorName(a),
         cudaGetErrorName(b), cudaGetErrorName(c), cudaGetErrorName(d), cudaGetErrorName(e),
         cudaGetErrorName(f));
  int ok = a == cudaErrorNotSupported && b == cudaErrorNotSupported &&
           c == cudaErrorNotSupported && d == cudaErrorNotSupported && e == cudaSuccess &&
           f == cudaSuccess;
  printf("unsupported: %s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
