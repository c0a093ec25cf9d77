/*
 * What the dynamic loader put in this process beside ferry. ferry serves a
 * program through its own libcuda.so.1 and libcudart.so.13, which `ferry
 * run` puts first on the library path. A program that brings NVIDIA's
 * driver library anyway (opened by path, or preloaded) would run whatever
 * calls that library directly on this machine's GPU, not on its vGPUs:
 * ferry says so once, in one line, rather than let work move silently.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "shim/core/loader.h"

#define MAX_DRIVERS 4

struct found {
  char path[MAX_DRIVERS][512];
  int n;
};

/* each loaded object named like the driver (libcuda.so, libcuda.so.1, ...) */
static int collect(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct found *f = data;
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, "libcuda.so", 10) == 0 && f->n < MAX_DRIVERS)
    snprintf(f->path[f->n++], sizeof f->path[0], "%s", name);
  return 0;
}

void ferry_loader_check(void) {
  struct found f = {.n = 0};
  dl_iterate_phdr(collect, &f); /* the loader's lock is held there: open them after */
  for (int i = 0; i < f.n; i++) {
    void *h = dlopen(f.path[i], RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    /* ferry's libcuda.so.1 finds the marker in the core it depends on */
    int ours = dlsym(h, "ferry_driver_front_end") != NULL;
    dlclose(h);
    if (!ours)
      ferry_log("warning: %s is loaded in this process: what calls it directly runs on this "
                "machine's GPU, not through ferry (start the program with `ferry run`, or put "
                "ferry's library directory first on LD_LIBRARY_PATH)",
                f.path[i]);
  }
}
