/*
 * The real driver: libcuda.so.1 loaded at run time, so that ferry builds
 * and its tests run on machines without a GPU driver, and so that the
 * versioned symbols (the _v2 names in driver.h) are the ones we bind.
 */
#include "executor/driver.h"
#include "executor/nvml_links.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct ferry_driver cuda_driver;
static int cuda_loaded;

/* NVIDIA's library, never ferry's own front end of that name (which
   `ferry run` puts first on the library path of the program and so of the
   ferry-mhelpers it starts): that one exports ferry_marker */
static void *open_nvidia(const char *path, const char *ferry_marker) {
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (dl && dlsym(dl, ferry_marker)) {
    dlclose(dl);
    return NULL;
  }
  return dl;
}

void *ferry_open_nvidia_library(const char *name, const char *ferry_marker) {
  void *dl = open_nvidia(name, ferry_marker);
  if (dl)
    return dl;
  /* the name found ferry's library (or nothing): look where drivers live */
  static const char *const dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib",
                                     "/lib/x86_64-linux-gnu", "/lib64", "/usr/local/nvidia/lib64",
                                     "/usr/lib/aarch64-linux-gnu", "/usr/lib/wsl/lib"};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dirs[i], name);
    if (access(path, R_OK) == 0 && (dl = open_nvidia(path, ferry_marker)))
      return dl;
  }
  return NULL;
}

static void *load_driver(char *err, size_t errlen) {
  const char *forced = getenv("FERRY_REAL_LIBCUDA");
  if (forced && *forced) {
    void *dl = open_nvidia(forced, "ferry_driver_front_end");
    if (!dl)
      snprintf(err, errlen, "FERRY_REAL_LIBCUDA=%s is not a CUDA driver: %s", forced,
               dlerror() ? dlerror() : "it is ferry's own libcuda.so.1");
    return dl;
  }
  void *dl = ferry_open_nvidia_library("libcuda.so.1", "ferry_driver_front_end");
  if (!dl)
    snprintf(err, errlen, "cannot load NVIDIA's CUDA driver libcuda.so.1 (only ferry's own was "
                          "found; FERRY_REAL_LIBCUDA names it)");
  return dl;
}

const struct ferry_driver *ferry_driver_cuda(char *err, size_t errlen) {
  if (cuda_loaded)
    return &cuda_driver;
  void *dl = load_driver(err, errlen);
  if (!dl)
    return NULL;
  struct ferry_driver d = {.name = "cuda", .nvlinks = ferry_nvml_nvlinks};
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
