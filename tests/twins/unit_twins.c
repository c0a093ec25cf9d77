/*
 * CPU twins for the sim and executor unit tests: a few kernels with the
 * parameter layouts nvcc would give them, one that faults on purpose, one
 * per-block twin using dynamic shared memory, and two __device__ variables.
 */
#include <stdint.h>

#include "sim/twin.h"
#include "sim/twin_vars.h"

/* FERRY_TWIN_ARG adds const to the named type: pointers need a typedef */
typedef int *int_ptr;
typedef const int *cint_ptr;

static unsigned global_x(const struct ferry_twin_thread *t) {
  return t->block_idx.x * t->block_dim.x + t->thread_idx.x;
}

/* __global__ void inc(int *p, int n) { if (i < n) p[i] += 1; } */
static void inc(const struct ferry_twin_thread *t, const unsigned char *params) {
  int *p = FERRY_TWIN_ARG(int_ptr, params, 0);
  int n = FERRY_TWIN_ARG(int, params, 8);
  unsigned i = global_x(t);
  if ((int)i < n)
    p[i] += 1;
}

/* __global__ void mixed(int *out, float f, struct {char c; double d; int i;} s, char c, double d)
   -- the layout measured on a real driver: (0,8) (8,4) (16,24) (40,1) (48,8) */
struct mixed_s {
  char c;
  double d;
  int i;
};
static void mixed(const struct ferry_twin_thread *t, const unsigned char *params) {
  if (global_x(t) != 0)
    return;
  int *out = FERRY_TWIN_ARG(int_ptr, params, 0);
  float f = FERRY_TWIN_ARG(float, params, 8);
  struct mixed_s s = FERRY_TWIN_ARG(struct mixed_s, params, 16);
  char c = FERRY_TWIN_ARG(char, params, 40);
  double d = FERRY_TWIN_ARG(double, params, 48);
  out[0] = (int)f;
  out[1] = s.c;
  out[2] = (int)s.d;
  out[3] = s.i;
  out[4] = c;
  out[5] = (int)d;
}

/* __global__ void poke(int *p) { *p = 1; } -- faults on an unmapped p */
static void poke(const struct ferry_twin_thread *t, const unsigned char *params) {
  (void)t;
  volatile int *p = FERRY_TWIN_ARG(int_ptr, params, 0);
  *p = 1;
}

/* __global__ void block_sum(int *out) with __syncthreads: per block, sums
   threadIdx.x through dynamic shared memory */
static void block_sum(const struct ferry_twin_thread *t, const unsigned char *params) {
  int *out = FERRY_TWIN_ARG(int_ptr, params, 0);
  int *sh = t->dynamic_shared;
  for (unsigned x = 0; x < t->block_dim.x; x++)
    sh[x] = (int)x;
  int sum = 0;
  for (unsigned x = 0; x < t->block_dim.x; x++)
    sum += sh[x];
  out[t->block_idx.x] = sum;
}

/* __global__ void copy_var(int *out, const int *var) { *out = *var; } */
static void copy_var(const struct ferry_twin_thread *t, const unsigned char *params) {
  (void)t;
  int *out = FERRY_TWIN_ARG(int_ptr, params, 0);
  const int *var = FERRY_TWIN_ARG(cint_ptr, params, 8);
  *out = *var;
}

/* __global__ void bump_counter() { g_counter += 1; } -- a module global
   reached by name, as twins of kernels that use __device__ variables do */
static void bump_counter(const struct ferry_twin_thread *t, const unsigned char *params) {
  (void)params;
  int *counter = t->global(t, "g_counter");
  if (counter && !t->global(t, "no_such_var"))
    *counter += 1;
}

/* __global__ void empty() {} */
static void empty(const struct ferry_twin_thread *t, const unsigned char *params) {
  (void)t, (void)params;
}

const struct ferry_twin ferry_twins[] = {
    {"_Z3incPii", inc, 0, 2, {{0, 8}, {8, 4}}},
    {"_Z5mixedPif1Scd", mixed, 0, 5, {{0, 8}, {8, 4}, {16, 24}, {40, 1}, {48, 8}}},
    {"_Z4pokePi", poke, 0, 1, {{0, 8}}},
    {"_Z9block_sumPi", block_sum, 1, 1, {{0, 8}}},
    {"_Z8copy_varPiPKi", copy_var, 0, 2, {{0, 8}, {8, 8}}},
    {"_Z5emptyv", empty, 0, 0, {{0, 0}}},
    {"_Z12bump_counterv", bump_counter, 0, 0, {{0, 0}}},
    {0},
};

const struct ferry_twin_var ferry_twin_vars[] = {
    {"g_counter", 4},
    {"g_table", 1024},
    {0, 0},
};
