/*
 * Simulated __device__ variables. A twins shared object may export a table
 * `ferry_twin_vars` (terminated by a NULL name) next to `ferry_twins`; the
 * simulation gives every loaded module its own zeroed host allocation per
 * entry, which cuModuleGetGlobal returns. This lets tests exercise symbol
 * copies and kernels that read variables through pointers.
 */
#ifndef FERRY_TWIN_VARS_H
#define FERRY_TWIN_VARS_H

#include <stddef.h>

struct ferry_twin_var {
  const char *name; /* mangled name, as nvcc registers it */
  size_t size;
};

#endif
