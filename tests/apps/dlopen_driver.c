/*
 * Opens NVIDIA's libcudart.so.13 (by its path, as a DT_RPATH entry makes a
 * framework's libraries do), then libcuda.so.1 by name, as NVIDIA's runtime
 * does: with ferry's library directory first on the library path, that must
 * be ferry's driver front end, and it must load beside NVIDIA's runtime.
 * Prints what it found and exits 0 only when the driver answers.
 * usage: dlopen_driver NVIDIA_LIBCUDART
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s NVIDIA_LIBCUDART\n", argv[0]);
    return 2;
  }
  if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
    printf("NVIDIA's runtime: %s\n", dlerror());
    return 1;
  }
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!drv) {
    printf("libcuda.so.1: %s\n", dlerror());
    return 1;
  }
  printf("libcuda.so.1 loaded beside NVIDIA's runtime\n");
  printf("ferry's driver front end: %s\n", dlsym(drv, "ferry_driver_front_end") ? "yes" : "no");
  CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(drv, "cuInit");
  CUresult (*count)(int *) = (CUresult(*)(int *))dlsym(drv, "cuDeviceGetCount");
  if (!init || !count) {
    printf("libcuda.so.1 lacks cuInit or cuDeviceGetCount\n");
    return 1;
  }
  int n = -1;
  CUresult r = init(0);
  if (r == CUDA_SUCCESS) r = count(&n);
  printf("cuInit, cuDeviceGetCount: %d, %d devices\n", (int)r, n);
  return r == CUDA_SUCCESS ? 0 : 1;
}
