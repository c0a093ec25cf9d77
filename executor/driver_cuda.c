/*
 * The real driver: libcuda.so.1 loaded at run time, so that ferry builds
 * and its tests run on machines without a GPU driver, and so that the
 * versioned symbols (the _v2 names in driver.h) are the ones we bind.
 */
#include "executor/driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static struct ferry_driver cuda_driver;
static int cuda_loaded;

const struct ferry_driver *ferry_driver_cuda(char *err, size_t errlen) {
  if (cuda_loaded)
    return &cuda_driver;
  void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    snprintf(err, errlen, "cannot load the CUDA driver libcuda.so.1: %s", dlerror());
    return NULL;
  }
  struct ferry_driver d = {.name = "cuda"};
  void *sym;
#define FERRY_RESOLVE(member, symbol, params)                                                 \
  sym = dlsym(dl, symbol);                                                                    \
  if (!sym) {                                                                                 \
    snprintf(err, errlen, "libcuda.so.1 lacks %s (driver too old for CUDA 13?)", symbol);     \
    dlclose(dl);                                                                              \
    return NULL;                                                                              \
  }                                                                                           \
  memcpy(&d.member, &sym, sizeof sym);
  FERRY_DRIVER_FUNCS(FERRY_RESOLVE)
#undef FERRY_RESOLVE
  cuda_driver = d;
  cuda_loaded = 1;
  return &cuda_driver;
}
