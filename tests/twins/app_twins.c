/*
 * CPU twins of the kernels in tests/apps, so the CPU simulation can run
 * those programs in CI. Each entry gives the mangled name nvcc registers
 * and the parameter layout the real cubin has (what cuFuncGetParamInfo
 * reports on a GPU); the real-GPU runs check the same programs natively.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sim/twin.h"
#include "sim/twin_tex.h"
#include "sim/twin_vars.h"

#define ARG(type, off) FERRY_TWIN_ARG(type, params, off)

static unsigned global_x(const struct ferry_twin_thread *t) {
  return t->block_idx.x * t->block_dim.x + t->thread_idx.x;
}

/* vecAdd(const float *a, const float *b, float *c, int n) */
static void vec_add(const struct ferry_twin_thread *t, const unsigned char *params) {
  const float *a = ARG(const float *, 0), *b = ARG(const float *, 8);
  float *c = ARG(float *, 16);
  int n = ARG(int, 24);
  unsigned i = global_x(t);
  if ((int)i < n) c[i] = a[i] + b[i];
}

/* fill_index(int *out, int n, int base) */
static void fill_index(const struct ferry_twin_thread *t, const unsigned char *params) {
  int *out = ARG(int *, 0);
  int n = ARG(int, 8), base = ARG(int, 12);
  unsigned i = global_x(t);
  if ((int)i < n) out[i] = base + (int)i;
}

/* scale(float *x, float s, int n) */
static void scale(const struct ferry_twin_thread *t, const unsigned char *params) {
  float *x = ARG(float *, 0);
  float s = ARG(float, 8);
  int n = ARG(int, 12);
  unsigned i = global_x(t);
  if ((int)i < n) x[i] *= s;
}

/* sum_into(const int *a, int n, unsigned long long *counter) (async_loop.cu): a
   grid-stride sum per thread, added to the counter (threads run one at a
   time, so the atomicAdd is a plain add) */
static void sum_into(const struct ferry_twin_thread *t, const unsigned char *params) {
  const int *a = ARG(const int *, 0);
  int n = ARG(int, 8);
  unsigned long long *counter = ARG(unsigned long long *, 16), local = 0;
  unsigned stride = t->grid_dim.x * t->block_dim.x;
  for (unsigned i = global_x(t); (int)i < n; i += stride) local += (unsigned long long)a[i];
  *counter += local;
}

/* checked(int *out, int bad) (device_assert.cu): per block, as a warp runs
   it: every thread prints, then the one that fails the assert traps */
static void checked(const struct ferry_twin_thread *t, const unsigned char *params) {
  int *out = ARG(int *, 0);
  int bad = ARG(int, 8);
  for (unsigned i = 0; i < t->block_dim.x; i++) printf("thread %u checks\n", i);
  for (unsigned i = 0; i < t->block_dim.x; i++) {
    struct ferry_twin_thread at = *t;
    at.thread_idx.x = i;
    if ((int)i == bad)
      t->assert_fail(&at, "i != bad", "device_assert.cu", 16, "void checked(int *, int)");
    out[i] = (int)i;
  }
}

struct mixed {
  char a;
  double b;
  int c;
};

/* mixed_params(double *out, float f, Mixed m, char c, double d) */
static void mixed_params(const struct ferry_twin_thread *t, const unsigned char *params) {
  (void)t;
  double *out = ARG(double *, 0);
  struct mixed m;
  memcpy(&m, params + 16, sizeof m);
  out[0] = ARG(float, 8);
  out[1] = m.a;
  out[2] = m.b;
  out[3] = m.c;
  out[4] = ARG(char, 40);
  out[5] = ARG(double, 48);
}

/* big_param(const __grid_constant__ BigParam p, int *out), p is 32000 bytes */
static void big_param(const struct ferry_twin_thread *t, const unsigned char *params) {
  int *out = ARG(int *, 32000);
  unsigned i = global_x(t);
  if (i < 8000) out[i] = ARG(int, 4 * i);
}

/* read_symbols(float *out): reads __constant__ coeffs and __device__ dev_value */
static void read_symbols(const struct ferry_twin_thread *t, const unsigned char *params) {
  float *out = ARG(float *, 0);
  const float *coeffs = t->global ? t->global(t, "coeffs") : NULL;
  int *dev_value = t->global ? t->global(t, "dev_value") : NULL;
  if (!coeffs || !dev_value) return;
  unsigned i = t->thread_idx.x;
  if (i < 4) out[i] = coeffs[i] * (float)*dev_value;
}

/* the increment of read_symbols happens after all reads, like one warp on a GPU */
static void read_symbols_block(const struct ferry_twin_thread *t, const unsigned char *params) {
  struct ferry_twin_thread each = *t;
  for (unsigned x = 0; x < t->block_dim.x; x++) {
    each.thread_idx.x = x;
    read_symbols(&each, params);
  }
  int *dev_value = t->global ? t->global(t, "dev_value") : NULL;
  if (dev_value) *dev_value += 1;
}

/* say_hello(int tag) */
static void say_hello(const struct ferry_twin_thread *t, const unsigned char *params) {
  (void)t;
  printf("hello from the GPU, tag %d\n", ARG(int, 0));
}

/* add_one<int>(int *x, int n) */
static void add_one_int(const struct ferry_twin_thread *t, const unsigned char *params) {
  int *x = ARG(int *, 0);
  int n = ARG(int, 8);
  unsigned i = global_x(t);
  if ((int)i < n) x[i] += 1;
}

/* spin(int *flag, long iterations): the long-running kernel of tests/apps/long_run.cu */
static void spin(const struct ferry_twin_thread *t, const unsigned char *params) {
  (void)t;
  int *counter = ARG(int *, 0);
  *counter += 1;
}

/* slow(int *counter, int ms): a kernel that runs ms milliseconds */
static void slow(const struct ferry_twin_thread *t, const unsigned char *params) {
  (void)t;
  int *counter = ARG(int *, 0);
  int ms = ARG(int, 8);
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  *counter += 1;
}

/* tex_fetch(cudaTextureObject_t t, float *out, int w, int h): point sampling at texel centers */
static void tex_fetch(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned long long tex = ARG(unsigned long long, 0);
  float *out = ARG(float *, 8);
  int w = ARG(int, 16), h = ARG(int, 20);
  int x = (int)global_x(t), y = (int)t->block_idx.y;
  if (x < w && y < h) memcpy(&out[y * w + x], ferry_twin_texel(tex, x, y), sizeof(float));
}

/* surf_fill(cudaSurfaceObject_t s, int w, int h) */
static void surf_fill(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned long long surf = ARG(unsigned long long, 0);
  int w = ARG(int, 8), h = ARG(int, 12);
  int x = (int)global_x(t), y = (int)t->block_idx.y;
  if (x >= w || y >= h) return;
  float v = (float)(y * 1000 + x) * 0.25f;
  void *p = ferry_twin_surface(surf, x * (long)sizeof(float), y);
  if (p) memcpy(p, &v, sizeof v);
}

/* ---- tests/apps/migrate_iter.cu and migrate_threads.cu ----
   Per-block twins: one call runs a whole block, so a module global is
   looked up once per block rather than once per thread. */

/* runs body for each thread index i of the block (1D grids) */
#define FOR_BLOCK_THREADS(t, i)                                                 \
  for (unsigned i##_x = 0, i = (t)->block_idx.x * (t)->block_dim.x;             \
       i##_x < (t)->block_dim.x; i##_x++, i++)

/* mi_stir(unsigned *a, int n): a[i] = a[i] * 1664525 + mi_coef[i & 15] + mi_round */
static void mi_stir(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *a = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  const unsigned *coef = t->global(t, "mi_coef");
  const unsigned *round = t->global(t, "mi_round");
  if (!coef || !round) return;
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) a[i] = a[i] * 1664525u + coef[i & 15] + *round;
}

/* mi_fold(unsigned *b, int nb, const unsigned *a, int na) */
static void mi_fold(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *b = ARG(unsigned *, 0);
  int nb = ARG(int, 8);
  const unsigned *a = ARG(const unsigned *, 16);
  int na = ARG(int, 24);
  FOR_BLOCK_THREADS(t, i) if ((int)i < nb) b[i] += a[(int)i % na] ^ i;
}

/* mi_accum(unsigned *s, int n, const unsigned char *scratch): atomicAdd into mi_acc */
static void mi_accum(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *s = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  const unsigned char *scratch = ARG(const unsigned char *, 16);
  const unsigned *round = t->global(t, "mi_round");
  unsigned long long *acc = t->global(t, "mi_acc");
  if (!round || !acc) return;
  FOR_BLOCK_THREADS(t, i) {
    if ((int)i >= n) continue;
    unsigned v = s[i] ^ (scratch[i] * 16777619u);
    v = ((v << 3) | (v >> 29)) + *round;
    s[i] = v;
    __atomic_fetch_add(acc, (unsigned long long)v, __ATOMIC_RELAXED);
  }
}

/* mi_bump(unsigned *t, int n, unsigned k) */
static void mi_bump(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *x = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  unsigned k = ARG(unsigned, 12);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) x[i] += i * 7u + k;
}

/* mi_image(float *img, const unsigned *a, int n) */
static void mi_image(const struct ferry_twin_thread *t, const unsigned char *params) {
  float *img = ARG(float *, 0);
  const unsigned *a = ARG(const unsigned *, 8);
  int n = ARG(int, 16);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) img[i] = (float)(a[i] & 0xffffu);
}

/* mi_sample(cudaTextureObject_t tex, unsigned *out, int w, int h): 2D grid, texel centers */
static void mi_sample(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned long long tex = ARG(unsigned long long, 0);
  unsigned *out = ARG(unsigned *, 8);
  int w = ARG(int, 16), h = ARG(int, 20);
  int y = (int)t->block_idx.y;
  FOR_BLOCK_THREADS(t, x) {
    if ((int)x >= w || y >= h) continue;
    float v;
    memcpy(&v, ferry_twin_texel(tex, (long)x, y), sizeof v);
    out[y * w + (int)x] += (unsigned)v * 3u + x;
  }
}

/* mi_gather(const float *img, unsigned *out, int w, int h): 2D grid */
static void mi_gather(const struct ferry_twin_thread *t, const unsigned char *params) {
  const float *img = ARG(const float *, 0);
  unsigned *out = ARG(unsigned *, 8);
  int w = ARG(int, 16), h = ARG(int, 20);
  int y = (int)t->block_idx.y;
  FOR_BLOCK_THREADS(t, x) {
    if ((int)x < w && y < h) out[y * w + (int)x] += (unsigned)img[y * w + (int)x] * 3u + x;
  }
}

/* mt_step(unsigned *x, int n, unsigned salt) */
static void mt_step(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *x = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  unsigned salt = ARG(unsigned, 12);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) x[i] = x[i] * 747796405u + salt + i;
}

/* ---- tests/apps/multi_gpu.cu ----
   Per-block twins too; every vGPU loads the module itself, so mg_coef,
   mg_round and mg_acc are per device, as in CUDA. */

/* mg_stir(unsigned *big, int n): big[i] = (big[i] ^ mg_coef[i & 15]) * 2654435761 + mg_round + i */
static void mg_stir(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *big = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  const unsigned *coef = t->global(t, "mg_coef");
  const unsigned *round = t->global(t, "mg_round");
  if (!coef || !round) return;
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) big[i] = (big[i] ^ coef[i & 15]) * 2654435761u + *round + i;
}

/* mg_mix(unsigned *small, int ns, const unsigned *big, int nb): atomicAdd into mg_acc */
static void mg_mix(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *small = ARG(unsigned *, 0);
  int ns = ARG(int, 8);
  const unsigned *big = ARG(const unsigned *, 16);
  int nb = ARG(int, 24);
  const unsigned *coef = t->global(t, "mg_coef");
  unsigned long long *acc = t->global(t, "mg_acc");
  if (!coef || !acc) return;
  FOR_BLOCK_THREADS(t, i) {
    if ((int)i >= ns) continue;
    unsigned v = small[i] * 747796405u + big[i * 1031u % (unsigned)nb] + coef[(i >> 4) & 15];
    v ^= v >> 13;
    small[i] = v;
    __atomic_fetch_add(acc, (unsigned long long)v, __ATOMIC_RELAXED);
  }
}

/* mg_spread(unsigned *big, int nb, const unsigned *small, int ns, unsigned k) */
static void mg_spread(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *big = ARG(unsigned *, 0);
  int nb = ARG(int, 8);
  const unsigned *small = ARG(const unsigned *, 16);
  int ns = ARG(int, 24);
  unsigned k = ARG(unsigned, 28);
  FOR_BLOCK_THREADS(t, i) if ((int)i < nb) big[i] += (small[(int)i % ns] ^ i) * 3u + k;
}

/* mg_fold(unsigned *big, int nb, const unsigned *halo, int nh): the halo onto big's last nh words */
static void mg_fold(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *big = ARG(unsigned *, 0);
  int nb = ARG(int, 8);
  const unsigned *halo = ARG(const unsigned *, 16);
  int nh = ARG(int, 24);
  const unsigned *round = t->global(t, "mg_round");
  if (!round) return;
  FOR_BLOCK_THREADS(t, i) {
    if ((int)i >= nh) continue;
    int j = nb - nh + (int)i;
    big[j] = (big[j] ^ halo[i]) * 9u + *round;
  }
}

/* ---- tests/apps/drv_kernels.cu (the driver-API programs) ----
   extern "C" kernels under their plain names, drv_fold mangled */

/* drv_vadd(float *c, const float *a, const float *b, int n) */
static void drv_vadd(const struct ferry_twin_thread *t, const unsigned char *params) {
  float *c = ARG(float *, 0);
  const float *a = ARG(const float *, 8), *b = ARG(const float *, 16);
  int n = ARG(int, 24);
  unsigned i = global_x(t);
  if ((int)i < n) c[i] = a[i] + b[i];
}

/* drv_scale(float *x, int n): x[i] *= drv_factor (a __device__ float) */
static void drv_scale(const struct ferry_twin_thread *t, const unsigned char *params) {
  float *x = ARG(float *, 0);
  int n = ARG(int, 8);
  const float *factor = t->global(t, "drv_factor");
  if (!factor) return;
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) x[i] *= *factor;
}

struct drv_pair {
  char tag;
  double val;
  int count;
};

/* drv_params(double *out, char c, double d, int i, const int *p, DrvPair s, short h) */
static void drv_params(const struct ferry_twin_thread *t, const unsigned char *params) {
  if (global_x(t)) return;
  double *out = ARG(double *, 0);
  struct drv_pair s;
  memcpy(&s, params + 40, sizeof s);
  out[0] = ARG(char, 8);
  out[1] = ARG(double, 16);
  out[2] = ARG(int, 24);
  out[3] = *ARG(const int *, 32);
  out[4] = s.tag;
  out[5] = s.val;
  out[6] = s.count;
  out[7] = ARG(short, 64);
}

/* drv_reverse(int *x, int n): each block's chunk reversed through dynamic shared memory */
static void drv_reverse(const struct ferry_twin_thread *t, const unsigned char *params) {
  int *x = ARG(int *, 0);
  int n = ARG(int, 8);
  int *buf = t->dynamic_shared;
  int base = (int)(t->block_idx.x * t->block_dim.x);
  int len = n - base < (int)t->block_dim.x ? n - base : (int)t->block_dim.x;
  if (!buf) return;
  for (int k = 0; k < len; k++) buf[k] = x[base + k];
  for (int k = 0; k < len; k++) x[base + k] = buf[len - 1 - k];
}

/* drv_fill2d(float *p, size_t pitch, int w, int h, float base): 2D grid of 2D blocks */
static void drv_fill2d(const struct ferry_twin_thread *t, const unsigned char *params) {
  char *p = ARG(char *, 0);
  size_t pitch = ARG(size_t, 8);
  int w = ARG(int, 16), h = ARG(int, 20);
  float base = ARG(float, 24);
  int x = (int)global_x(t), y = (int)(t->block_idx.y * t->block_dim.y + t->thread_idx.y);
  if (x < w && y < h) ((float *)(void *)(p + (size_t)y * pitch))[x] = base + (float)(y * 1000 + x);
}

/* drv_mix(unsigned *x, int n, unsigned k): x[i] = x[i] * 1664525 + drv_salt + k + i */
static void drv_mix(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *x = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  unsigned k = ARG(unsigned, 12);
  const unsigned *salt = t->global(t, "drv_salt");
  if (!salt) return;
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) x[i] = x[i] * 1664525u + *salt + k + i;
}

/* drv_fold_struct({unsigned *y; const unsigned *x; int n;}): drv_fold's work */
static void drv_fold_struct(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *y = ARG(unsigned *, 0);
  const unsigned *x = ARG(const unsigned *, 8);
  int n = ARG(int, 16);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) y[i] += x[i] ^ i;
}

/* drv_fold(unsigned *y, const unsigned *x, int n): y[i] += x[i] ^ i */
static void drv_fold(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *y = ARG(unsigned *, 0);
  const unsigned *x = ARG(const unsigned *, 8);
  int n = ARG(int, 16);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) y[i] += x[i] ^ i;
}

/* jit_step(unsigned *x, int n, unsigned k) of tests/apps/drv_jit_step.cu, with
   drv_jit_mix.cu's jit_mix linked in at run time: x[i] = jit_mix(x[i], k + i) */
static void jit_step(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *x = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  unsigned k = ARG(unsigned, 12), i = global_x(t);
  if ((int)i < n) x[i] = (x[i] ^ (x[i] >> 7)) * 2654435761u + k + i;
}

/* mx_add(unsigned *x, int n, unsigned k) of tests/apps/drv_mixed.cu: x[i] = (x[i] ^ k) + 3i */
static void mx_add(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *x = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  unsigned k = ARG(unsigned, 12);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) x[i] = (x[i] ^ k) + i * 3u;
}

/* g_axpb(unsigned *x, int n, unsigned a, unsigned b) of tests/apps/graphs.cu: x[i] = x[i] * a + b */
static void g_axpb(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *x = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  unsigned a = ARG(unsigned, 12), b = ARG(unsigned, 16);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) x[i] = x[i] * a + b;
}

/* g_add(unsigned *dst, const unsigned *src, int n) of tests/apps/graphs.cu: dst[i] += src[i] */
static void g_add(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *dst = ARG(unsigned *, 0);
  const unsigned *src = ARG(const unsigned *, 8);
  int n = ARG(int, 16);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) dst[i] += src[i];
}

/* qc_add, qc_triple of tests/apps/query_cache.cu */
static void qc_add(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *p = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) p[i] += 1u;
}
static void qc_triple(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *p = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) p[i] *= 3u;
}

/* mp_fill, mp_accum (tests/apps/fill_kernels.h: mapped.cu, managed.cu, mempool.cu), mp_poke
   of tests/apps/mapped.cu */
static void mp_fill(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *out = ARG(unsigned *, 0);
  int n = ARG(int, 8);
  unsigned seed = ARG(unsigned, 12);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) out[i] = seed * 2654435761u + i * 40503u;
}
static void mp_accum(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *acc = ARG(unsigned *, 0);
  const unsigned *in = ARG(const unsigned *, 8);
  int n = ARG(int, 16);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) acc[i] = acc[i] * 31u + in[i];
}
static void mp_poke(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *p = ARG(unsigned *, 0);
  int stride = ARG(int, 8), count = ARG(int, 12);
  unsigned v = ARG(unsigned, 16);
  FOR_BLOCK_THREADS(t, k) if ((int)k < count) p[(size_t)k * (size_t)stride] = v + k;
}

/* mp_count(unsigned *out, Padded c) of tests/apps/mapped.cu: out[0] = c.n, the int at 8 of c */
static void mp_count(const struct ferry_twin_thread *t, const unsigned char *params) {
  unsigned *out = ARG(unsigned *, 0);
  int n = ARG(int, 16);
  if (global_x(t) == 0) out[0] = (unsigned)n;
}

/* mm_follow(const Holder *h, int n) of tests/apps/managed.cu: h->data[i] = h->data[i] * 3 + h->k,
   data found through the structure */
static void mm_follow(const struct ferry_twin_thread *t, const unsigned char *params) {
  const unsigned char *h = ARG(const unsigned char *, 0);
  int n = ARG(int, 8);
  unsigned *data;
  unsigned k;
  memcpy(&data, h, sizeof data);
  memcpy(&k, h + 8, sizeof k);
  FOR_BLOCK_THREADS(t, i) if ((int)i < n) data[i] = data[i] * 3u + k;
}

const struct ferry_twin ferry_twins[] = {
    {"_Z6vecAddPKfS0_Pfi", vec_add, 0, 4, {{0, 8}, {8, 8}, {16, 8}, {24, 4}}},
    {"_Z8sum_intoPKiiPy", sum_into, 0, 3, {{0, 8}, {8, 4}, {16, 8}}},
    {"_Z7checkedPii", checked, 1, 2, {{0, 8}, {8, 4}}},
    {"fill_index", fill_index, 0, 3, {{0, 8}, {8, 4}, {12, 4}}},
    {"_Z5scalePffi", scale, 0, 3, {{0, 8}, {8, 4}, {12, 4}}},
    {"_Z12mixed_paramsPdf5Mixedcd", mixed_params, 0, 5, {{0, 8}, {8, 4}, {16, 24}, {40, 1}, {48, 8}}},
    {"_Z9big_param8BigParamPi", big_param, 0, 2, {{0, 32000}, {32000, 8}}},
    {"_Z12read_symbolsPf", read_symbols_block, 1, 1, {{0, 8}}},
    {"_Z9say_helloi", say_hello, 0, 1, {{0, 4}}},
    {"_Z7add_oneIiEvPT_i", add_one_int, 0, 2, {{0, 8}, {8, 4}}},
    {"_Z4spinPi", spin, 0, 1, {{0, 8}}},
    {"_Z4slowPii", slow, 0, 2, {{0, 8}, {8, 4}}},
    {"_Z9tex_fetchyPfii", tex_fetch, 0, 4, {{0, 8}, {8, 8}, {16, 4}, {20, 4}}},
    {"_Z9surf_fillyii", surf_fill, 0, 3, {{0, 8}, {8, 4}, {12, 4}}},
    {"_Z7mi_stirPji", mi_stir, 1, 2, {{0, 8}, {8, 4}}},
    {"_Z7mi_foldPjiPKji", mi_fold, 1, 4, {{0, 8}, {8, 4}, {16, 8}, {24, 4}}},
    {"_Z8mi_accumPjiPKh", mi_accum, 1, 3, {{0, 8}, {8, 4}, {16, 8}}},
    {"_Z7mi_bumpPjij", mi_bump, 1, 3, {{0, 8}, {8, 4}, {12, 4}}},
    {"_Z8mi_imagePfPKji", mi_image, 1, 3, {{0, 8}, {8, 8}, {16, 4}}},
    {"_Z9mi_sampleyPjii", mi_sample, 1, 4, {{0, 8}, {8, 8}, {16, 4}, {20, 4}}},
    {"_Z9mi_gatherPKfPjii", mi_gather, 1, 4, {{0, 8}, {8, 8}, {16, 4}, {20, 4}}},
    {"_Z7mt_stepPjij", mt_step, 1, 3, {{0, 8}, {8, 4}, {12, 4}}},
    {"_Z7mg_stirPji", mg_stir, 1, 2, {{0, 8}, {8, 4}}},
    {"_Z6mg_mixPjiPKji", mg_mix, 1, 4, {{0, 8}, {8, 4}, {16, 8}, {24, 4}}},
    {"_Z9mg_spreadPjiPKjij", mg_spread, 1, 5, {{0, 8}, {8, 4}, {16, 8}, {24, 4}, {28, 4}}},
    {"_Z7mg_foldPjiPKji", mg_fold, 1, 4, {{0, 8}, {8, 4}, {16, 8}, {24, 4}}},
    {"drv_vadd", drv_vadd, 0, 4, {{0, 8}, {8, 8}, {16, 8}, {24, 4}}},
    {"drv_scale", drv_scale, 1, 2, {{0, 8}, {8, 4}}},
    {"drv_params", drv_params, 0, 7, {{0, 8}, {8, 1}, {16, 8}, {24, 4}, {32, 8}, {40, 24}, {64, 2}}},
    {"drv_reverse", drv_reverse, 1, 2, {{0, 8}, {8, 4}}},
    {"drv_fill2d", drv_fill2d, 0, 5, {{0, 8}, {8, 8}, {16, 4}, {20, 4}, {24, 4}}},
    {"drv_mix", drv_mix, 1, 3, {{0, 8}, {8, 4}, {12, 4}}},
    {"_Z8drv_foldPjPKji", drv_fold, 1, 3, {{0, 8}, {8, 8}, {16, 4}}},
    {"drv_fold_struct", drv_fold_struct, 1, 1, {{0, 24}}},
    {"_Z6mx_addPjij", mx_add, 1, 3, {{0, 8}, {8, 4}, {12, 4}}},
    {"jit_step", jit_step, 0, 3, {{0, 8}, {8, 4}, {12, 4}}},
    {"_Z6g_axpbPjijj", g_axpb, 1, 4, {{0, 8}, {8, 4}, {12, 4}, {16, 4}}},
    {"_Z5g_addPjPKji", g_add, 1, 3, {{0, 8}, {8, 8}, {16, 4}}},
    {"_Z6qc_addPji", qc_add, 1, 2, {{0, 8}, {8, 4}}},
    {"_Z9qc_triplePji", qc_triple, 1, 2, {{0, 8}, {8, 4}}},
    {"_Z7mp_fillPjij", mp_fill, 1, 3, {{0, 8}, {8, 4}, {12, 4}}},
    {"_Z8mp_accumPjPKji", mp_accum, 1, 3, {{0, 8}, {8, 8}, {16, 4}}},
    {"_Z7mp_pokePjiij", mp_poke, 1, 4, {{0, 8}, {8, 4}, {12, 4}, {16, 4}}},
    {"_Z8mp_countPj6Padded", mp_count, 1, 2, {{0, 8}, {8, 16}}},
    {"_Z9mm_followPK6Holderi", mm_follow, 1, 2, {{0, 8}, {8, 4}}},
    {NULL, NULL, 0, 0, {{0, 0}}},
};

const struct ferry_twin_var ferry_twin_vars[] = {
    {"dev_value", sizeof(int)},
    {"coeffs", 4 * sizeof(float)},
    {"mi_coef", 16 * sizeof(unsigned)},
    {"mi_round", sizeof(unsigned)},
    {"mi_acc", sizeof(unsigned long long)},
    {"mg_coef", 16 * sizeof(unsigned)},
    {"mg_round", sizeof(unsigned)},
    {"mg_acc", sizeof(unsigned long long)},
    {"drv_factor", sizeof(float)},
    {"drv_salt", sizeof(unsigned)},
    {NULL, 0},
};
