/*
 * CPU twins of the benchmarks' kernels (bench/apps/mig_*.cu, helper_bench.cu,
 * managed_stencil.cu), so the GPU run scripts can be tried end to end on the
 * CPU simulation (FERRY_BENCH_SIM=1) before they run on a GPU. Kept apart from
 * tests/twins/app_twins.c: the benchmarks are not tests. All twins run a
 * whole block per call.
 */
#include <stdint.h>

#include "sim/twin.h"
#include "sim/twin_vars.h"

#define ARG(type, off) FERRY_TWIN_ARG(type, params, off)

static unsigned pattern(unsigned r, unsigned long long i) {
  return (unsigned)(i * 2654435761ull) ^ (r * 0x9e3779b9u + 0x7f4a7c15u);
}

/* the threads of a 1D block, each with its grid-stride loop over [0, words) */
#define FOR_GRID_STRIDE(t, words, i)                                                        \
  for (unsigned long long tx_ = 0; tx_ < (t)->block_dim.x; tx_++)                           \
    for (unsigned long long i = (t)->block_idx.x * (unsigned long long)(t)->block_dim.x + tx_; \
         i < (words); i += (unsigned long long)(t)->grid_dim.x * (t)->block_dim.x)

/* mr_fill(unsigned long long words): region blockIdx.y of mr_regions */
static void mr_fill(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned long long words = ARG(unsigned long long, 0);
  unsigned **regions = t->global(t, "mr_regions");
  if (!regions) return;
  unsigned r = t->block_idx.y, *p = regions[r];
  FOR_GRID_STRIDE(t, words, i) p[i] = pattern(r, i);
}

/* mr_check(unsigned long long words): counts into mr_seen, mr_bad, mr_sum */
static void mr_check(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned long long words = ARG(unsigned long long, 0);
  unsigned **regions = t->global(t, "mr_regions");
  unsigned long long *seen = t->global(t, "mr_seen"), *bad = t->global(t, "mr_bad"),
                     *sum = t->global(t, "mr_sum");
  if (!regions || !seen || !bad || !sum) return;
  unsigned r = t->block_idx.y;
  const unsigned *p = regions[r];
  unsigned long long s = 0, b = 0, total = 0;
  FOR_GRID_STRIDE(t, words, i) {
    s++;
    b += p[i] != pattern(r, i);
    total += p[i];
  }
  __atomic_fetch_add(seen, s, __ATOMIC_RELAXED);
  __atomic_fetch_add(bad, b, __ATOMIC_RELAXED);
  __atomic_fetch_add(sum, total, __ATOMIC_RELAXED);
}

/* the points of a 2D block */
#define FOR_BLOCK_2D(t, x, y)                                                               \
  for (int y = (int)((t)->block_idx.y * (t)->block_dim.y),                                  \
           ye_ = y + (int)(t)->block_dim.y; y < ye_; y++)                                   \
    for (int x = (int)((t)->block_idx.x * (t)->block_dim.x),                                \
             xe_ = x + (int)(t)->block_dim.x; x < xe_; x++)

/* it_init(float *u, float *v, int n) */
static void it_init(const struct ferry_twin_thread *t, const unsigned char *params) {
  float *u = ARG(float *, 0), *v = ARG(float *, 8);
  int n = ARG(int, 16);
  FOR_BLOCK_2D(t, x, y) {
    if (x >= n || y >= n) continue;
    float f;
    if (y == 0) f = 100.0f;
    else if (x == 0) f = 50.0f;
    else if (x == n - 1 || y == n - 1) f = 0.0f;
    else f = (float)((x * 7 + y * 13) % 97);
    u[(size_t)y * n + x] = f;
    v[(size_t)y * n + x] = f;
  }
}

/* it_jacobi(const float *u, float *v, int n); managed_stencil's stencil_jacobi too */
static void it_jacobi(const struct ferry_twin_thread *t, const unsigned char *params) {
  const float *u = ARG(const float *, 0);
  float *v = ARG(float *, 8);
  int n = ARG(int, 16);
  FOR_BLOCK_2D(t, x, y) {
    if (x < 1 || y < 1 || x >= n - 1 || y >= n - 1) continue;
    size_t i = (size_t)y * n + x;
    v[i] = 0.25f * (u[i - 1] + u[i + 1] + u[i - n] + u[i + n]);
  }
}

/* it_residual(const float *u, const float *v, int n, unsigned *out): max |v - u| as bits */
static void it_residual(const struct ferry_twin_thread *t, const unsigned char *params) {
  const float *u = ARG(const float *, 0), *v = ARG(const float *, 8);
  int n = ARG(int, 16);
  unsigned *out = ARG(unsigned *, 24);
  FOR_BLOCK_2D(t, x, y) {
    if (x >= n || y >= n) continue;
    size_t i = (size_t)y * n + x;
    float d = v[i] - u[i];
    if (d < 0) d = -d;
    if (!(d > 0.0f)) continue;
    unsigned bits;
    memcpy(&bits, &d, sizeof bits);
    unsigned old = __atomic_load_n(out, __ATOMIC_RELAXED);
    while (old < bits &&
           !__atomic_compare_exchange_n(out, &old, bits, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
  }
}

/* hb_null(int): helper_bench's empty kernel */
static void hb_null(const struct ferry_twin_thread *t, const unsigned char *params) {
  (void)t, (void)params;
}

const struct ferry_twin ferry_twins[] = {
    {"_Z7hb_nulli", hb_null, 1, 1, {{0, 4}}},
    {"_Z7mr_filly", mr_fill, 1, 1, {{0, 8}}},
    {"_Z8mr_checky", mr_check, 1, 1, {{0, 8}}},
    {"_Z7it_initPfS_i", it_init, 1, 3, {{0, 8}, {8, 8}, {16, 4}}},
    {"_Z9it_jacobiPKfPfi", it_jacobi, 1, 3, {{0, 8}, {8, 8}, {16, 4}}},
    {"_Z14stencil_jacobiPKfPfi", it_jacobi, 1, 3, {{0, 8}, {8, 8}, {16, 4}}},
    {"_Z11it_residualPKfS0_iPj", it_residual, 1, 4, {{0, 8}, {8, 8}, {16, 4}, {24, 8}}},
    {NULL, NULL, 0, 0, {{0, 0}}},
};

/* mig_regions' variables (MAX_REGIONS pointers, three counters) */
const struct ferry_twin_var ferry_twin_vars[] = {
    {"mr_regions", 4096 * sizeof(void *)},
    {"mr_seen", sizeof(unsigned long long)},
    {"mr_bad", sizeof(unsigned long long)},
    {"mr_sum", sizeof(unsigned long long)},
    {NULL, 0},
};
