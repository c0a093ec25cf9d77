/*
 * CPU twins: how a test supplies the CPU version of a CUDA kernel so that
 * the simulation can "run" it. A twins shared object exports a table
 * `ferry_twins`, terminated by an entry whose name is NULL. The simulation
 * finds a kernel by its mangled name and calls the twin once per thread
 * (or once per block when per_block is set, for kernels that use
 * __syncthreads: the twin then loops over threads itself).
 */
#ifndef FERRY_TWIN_H
#define FERRY_TWIN_H

#include <stdint.h>
#include <string.h>

struct ferry_twin_dim {
  unsigned x, y, z;
};

struct ferry_twin_thread {
  struct ferry_twin_dim grid_dim, block_dim, block_idx, thread_idx;
  void *dynamic_shared; /* this block's dynamic shared memory */
  /* the address of a __device__/__constant__ variable (ferry_twin_vars) of
     the launching module, or NULL: twins reach module globals through it */
  void *(*global)(const struct ferry_twin_thread *t, const char *name);
  /* a failed assert(expr) in the kernel: CUDA's message on stderr, and the
     kernel ends with the sticky cudaErrorAssert, as on a GPU */
  void (*assert_fail)(const struct ferry_twin_thread *t, const char *expr, const char *file,
                      unsigned line, const char *function) __attribute__((noreturn));
  const void *module; /* private to the simulation */
};

typedef void (*ferry_twin_fn)(const struct ferry_twin_thread *t, const unsigned char *params);

#define FERRY_TWIN_MAX_PARAMS 32

struct ferry_twin {
  const char *name; /* mangled name, as nvcc registers it */
  ferry_twin_fn fn;
  int per_block;
  unsigned nparams;
  /* the parameter layout the real cubin has (cuFuncGetParamInfo) */
  struct {
    unsigned offset, size;
  } params[FERRY_TWIN_MAX_PARAMS];
};

/* read parameter i of a twin's packed parameter buffer */
#define FERRY_TWIN_ARG(type, params, offset) \
  (*(type const *)(const void *)((params) + (offset)))

#endif
