/*
 * Modules and kernels. A loaded image is only checked for its form (fat
 * binary container, cubin or PTX: sim_image.c), and from a cubin or PTX
 * the names of its kernels are kept; kernels are found by mangled name in
 * the twins table
 * and run on the CPU, thread by thread (or block by block for twins that
 * need __syncthreads). A fault inside a twin becomes the sticky
 * CUDA_ERROR_ILLEGAL_ADDRESS a GPU would report, with the same effect on
 * the process (see sim.h: poisoned).
 */
#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void sim_module_free(struct sim_module *m) {
  for (size_t i = 0; i < m->nfuncs; i++) {
    sim_unregister(m->funcs[i]);
    free(m->funcs[i]);
  }
  for (size_t i = 0; i < m->nvars; i++) {
    sim_range_del((uintptr_t)m->vars[i].mem);
    free(m->vars[i].mem);
  }
  sim_image_names_free(m->kernels, m->nkernels);
  free(m->funcs);
  free(m->vars);
  free(m);
}

static int load_vars(struct sim_module *m) {
  size_t n = 0;
  while (sim.twin_vars && sim.twin_vars[n].name)
    n++;
  if (n == 0)
    return 0;
  m->vars = calloc(n, sizeof *m->vars);
  if (!m->vars)
    return -1;
  for (size_t i = 0; i < n; i++) {
    size_t size = sim.twin_vars[i].size;
    size_t alloc = (size + 255) & ~(size_t)255;
    void *mem = aligned_alloc(256, alloc ? alloc : 256);
    if (!mem)
      return -1;
    memset(mem, 0, alloc ? alloc : 256);
    m->vars[m->nvars++] = (struct sim_var){sim.twin_vars[i].name, mem, size};
    if (size && sim_range_add((uintptr_t)mem, (uintptr_t)mem + size, SIM_RANGE_VAR,
                              PROT_READ | PROT_WRITE, NULL))
      return -1;
  }
  return 0;
}

CUresult sim_ModuleLoadData(CUmodule *module, const void *image) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!module || !image)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  char **kernels;
  size_t nkernels;
  int named;
  if ((r = sim_image_kernels(image, &kernels, &nkernels, &named)))
    return sim_leave(r);
  struct sim_module *m = calloc(1, sizeof *m);
  if (!m) {
    sim_image_names_free(kernels, nkernels);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  m->obj.kind = SIM_MODULE;
  m->kernels = kernels;
  m->nkernels = nkernels;
  m->named = named;
  m->twins = sim.twins;
  if (load_vars(m) || sim_register(m)) {
    sim_module_free(m);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  *module = (CUmodule)m;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_ModuleUnload(CUmodule module) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_module *m = sim_lookup(module, SIM_MODULE);
  if (!m)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  sim_unregister(m);
  sim_module_free(m);
  return sim_leave(CUDA_SUCCESS);
}

/* a cubin or PTX module has only the kernels its image names */
static int declares(const struct sim_module *m, const char *name) {
  for (size_t i = 0; m->named && i < m->nkernels; i++)
    if (strcmp(m->kernels[i], name) == 0)
      return 1;
  return !m->named;
}

/* name's twin: the module's table, else (for a module that names its
   kernels) ferry's built-in ones; NULL if neither has it */
static const struct ferry_twin *twin_of(const struct sim_module *m, const char *name) {
  for (const struct ferry_twin *t = m->twins; t && t->name; t++)
    if (strcmp(t->name, name) == 0)
      return t;
  for (const struct ferry_twin *t = sim_builtin_twins; m->named && t->name; t++)
    if (strcmp(t->name, name) == 0)
      return t;
  return NULL;
}

CUresult sim_ModuleGetFunction(CUfunction *fn, CUmodule module, const char *name) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_module *m = sim_lookup(module, SIM_MODULE);
  if (!m)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!fn || !name)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < m->nfuncs; i++) {
    if (strcmp(m->funcs[i]->twin->name, name) == 0) {
      *fn = (CUfunction)m->funcs[i];
      return sim_leave(CUDA_SUCCESS);
    }
  }
  const struct ferry_twin *t = twin_of(m, name);
  if (!t || !declares(m, name))
    return sim_leave(CUDA_ERROR_NOT_FOUND);
  struct sim_func **grown = realloc(m->funcs, (m->nfuncs + 1) * sizeof *grown);
  if (!grown)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  m->funcs = grown;
  struct sim_func *f = calloc(1, sizeof *f);
  if (!f)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  f->obj.kind = SIM_FUNC;
  f->mod = m;
  f->twin = t;
  f->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = SIM_MAX_SHARED_DEFAULT;
  f->attrs[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = -1;
  if (sim_register(f)) {
    free(f);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  m->funcs[m->nfuncs++] = f;
  *fn = (CUfunction)f;
  return sim_leave(CUDA_SUCCESS);
}

/* the kernels a module can give: a cubin's or PTX text's named ones that
   have twins (built-in ones included); every twin of the table for a fat
   binary container (as sim_ModuleGetFunction) */
static int module_kernel(const struct sim_module *m, size_t i, const char **name) {
  const struct ferry_twin *t = m->twins;
  if (!m->named) {
    if (!t)
      return 0;
    for (size_t k = 0; k < i; k++)
      if (!t[k].name)
        return 0;
    *name = t[i].name;
    return *name != NULL;
  }
  size_t seen = 0;
  for (size_t k = 0; k < m->nkernels; k++) {
    const struct ferry_twin *w = twin_of(m, m->kernels[k]);
    if (!w)
      continue;
    if (seen++ == i) {
      *name = w->name;
      return 1;
    }
  }
  return 0;
}

CUresult sim_ModuleGetFunctionCount(unsigned int *count, CUmodule module) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_module *m = sim_lookup(module, SIM_MODULE);
  if (!m)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!count)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  const char *name;
  unsigned n = 0;
  while (module_kernel(m, n, &name))
    n++;
  *count = n;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_ModuleEnumerateFunctions(CUfunction *fns, unsigned int n, CUmodule module) {
  unsigned count;
  CUresult r = sim_ModuleGetFunctionCount(&count, module);
  if (r)
    return r;
  if (!fns || n != count)
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n && !r; i++) {
    const char *name = NULL;
    if ((r = sim_enter()))
      return r;
    struct sim_module *m = sim_lookup(module, SIM_MODULE);
    int ok = m && module_kernel(m, i, &name);
    sim_leave(CUDA_SUCCESS);
    r = ok ? sim_ModuleGetFunction(&fns[i], module, name) : CUDA_ERROR_INVALID_HANDLE;
  }
  return r;
}

CUresult sim_FuncGetName(const char **name, CUfunction fn) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_func *f = sim_lookup(fn, SIM_FUNC);
  if (!f)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!name)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  *name = f->twin->name;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_ModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule module, const char *name) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_module *m = sim_lookup(module, SIM_MODULE);
  if (!m)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!name)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < m->nvars; i++) {
    if (strcmp(m->vars[i].name, name) == 0) {
      if (dptr)
        *dptr = (CUdeviceptr)(uintptr_t)m->vars[i].mem;
      if (bytes)
        *bytes = m->vars[i].size;
      return sim_leave(CUDA_SUCCESS);
    }
  }
  return sim_leave(CUDA_ERROR_NOT_FOUND);
}

CUresult sim_FuncGetParamInfo(CUfunction fn, size_t index, size_t *offset, size_t *size) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_func *f = sim_lookup(fn, SIM_FUNC);
  if (!f)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  /* past the last parameter: how callers learn the count */
  if (index >= f->twin->nparams || index >= FERRY_TWIN_MAX_PARAMS)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if (offset)
    *offset = f->twin->params[index].offset;
  if (size)
    *size = f->twin->params[index].size;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_FuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction fn) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_func *f = sim_lookup(fn, SIM_FUNC);
  if (!f)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!pi || (unsigned)attrib >= CU_FUNC_ATTRIBUTE_MAX)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
  case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
  case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 90; break;
  case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
  default: *pi = f->attrs[attrib]; break;
  }
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_FuncSetAttribute(CUfunction fn, CUfunction_attribute attrib, int value) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_func *f = sim_lookup(fn, SIM_FUNC);
  if (!f)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  int ok;
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    ok = value >= 0 && value <= SIM_MAX_SHARED_OPTIN;
    break;
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: ok = value >= -1 && value <= 100; break;
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: ok = value >= 0 && value <= 16; break;
  case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: ok = value == 0 || value == 1; break;
  case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: ok = value >= 0 && value <= 2; break;
  default: ok = 0; break; /* read-only or unknown */
  }
  if (!ok)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  f->attrs[attrib] = value;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_FuncSetCacheConfig(CUfunction fn, CUfunc_cache config) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_func *f = sim_lookup(fn, SIM_FUNC);
  if (!f)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  f->cache = config;
  return sim_leave(CUDA_SUCCESS);
}

/* ---- launching ---- */

/* t->global: a twin asks for a __device__ variable of its own module */
static void *twin_global(const struct ferry_twin_thread *t, const char *name) {
  const struct sim_module *m = t->module;
  for (size_t i = 0; m && name && i < m->nvars; i++)
    if (strcmp(m->vars[i].name, name) == 0)
      return m->vars[i].mem;
  return NULL;
}

/* t->assert_fail: CUDA's message for a failed device assert, on stderr
   (where the driver writes it), then the kernel ends as a trap */
__attribute__((noreturn)) static void twin_assert_fail(const struct ferry_twin_thread *t, const char *expr, const char *file,
                             unsigned line, const char *function) {
  fprintf(stderr, "%s:%u: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.\n", file,
          line, function, t->block_idx.x, t->block_idx.y, t->block_idx.z, t->thread_idx.x,
          t->thread_idx.y, t->thread_idx.z, expr);
  fflush(stderr);
  sim_trap();
}

struct grid_run {
  const struct sim_module *mod;
  const struct ferry_twin *twin;
  const unsigned char *params;
  struct ferry_twin_dim grid, block;
  void *shared;
  size_t shmem;
};

static void run_grid(void *arg) {
  struct grid_run *g = arg;
  struct ferry_twin_thread t = {.grid_dim = g->grid, .block_dim = g->block,
                                .dynamic_shared = g->shared, .global = twin_global,
                                .assert_fail = twin_assert_fail, .module = g->mod};
  for (unsigned bz = 0; bz < g->grid.z; bz++)
    for (unsigned by = 0; by < g->grid.y; by++)
      for (unsigned bx = 0; bx < g->grid.x; bx++) {
        t.block_idx = (struct ferry_twin_dim){bx, by, bz};
        if (g->shmem)
          memset(g->shared, 0, g->shmem);
        if (g->twin->per_block) {
          t.thread_idx = (struct ferry_twin_dim){0, 0, 0};
          g->twin->fn(&t, g->params);
          continue;
        }
        for (unsigned tz = 0; tz < g->block.z; tz++)
          for (unsigned ty = 0; ty < g->block.y; ty++)
            for (unsigned tx = 0; tx < g->block.x; tx++) {
              t.thread_idx = (struct ferry_twin_dim){tx, ty, tz};
              g->twin->fn(&t, g->params);
            }
      }
}

struct pack {
  const struct ferry_twin *twin;
  unsigned char *buf;
  void **params;
  const void *blob;
  size_t blob_len;
};

static void do_pack(void *arg) {
  struct pack *p = arg;
  if (p->blob) {
    memcpy(p->buf, p->blob, p->blob_len);
    return;
  }
  for (unsigned i = 0; i < p->twin->nparams; i++)
    memcpy(p->buf + p->twin->params[i].offset, p->params[i], p->twin->params[i].size);
}

/* the extra form: {BUFFER_POINTER, p, BUFFER_SIZE, &size, END} */
static int parse_extra(void **extra, const void **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  int have_size = 0;
  for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
      *buf = extra[i + 1];
    else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) {
      *len = *(const size_t *)extra[i + 1];
      have_size = 1;
    } else
      return -1;
  }
  return *buf && have_size ? 0 : -1;
}

/* the checks of every launch (lock held) */
CUresult sim_check_launch(struct sim_func *f, CUstream stream, unsigned gx, unsigned gy,
                             unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem) {
  if (!f || !sim_stream_ok(stream))
    return CUDA_ERROR_INVALID_HANDLE;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || gx > 2147483647u ||
      gy > 65535 || gz > 65535 || bx > 1024 || by > 1024 || bz > 64 ||
      (uint64_t)bx * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (shmem > (unsigned)f->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES])
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

/* runs a checked launch (lock held) */
static CUresult run_launch(struct sim_func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                           unsigned by, unsigned bz, unsigned shmem, void **params, void **extra) {
  const struct ferry_twin *t = f->twin;
  size_t need = 0;
  for (unsigned i = 0; i < t->nparams && i < FERRY_TWIN_MAX_PARAMS; i++)
    if (t->params[i].offset + t->params[i].size > need)
      need = t->params[i].offset + t->params[i].size;
  struct pack pk = {t, NULL, params, NULL, 0};
  if (params && extra)
    return CUDA_ERROR_INVALID_VALUE;
  if (extra) {
    if (parse_extra(extra, &pk.blob, &pk.blob_len) || pk.blob_len < need)
      return CUDA_ERROR_INVALID_VALUE;
  } else if (!params && t->nparams) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  size_t bufsize = pk.blob ? pk.blob_len : need;
  pk.buf = aligned_alloc(64, (bufsize + 64) & ~(size_t)63);
  void *shared = shmem ? aligned_alloc(64, (shmem + 63) & ~(size_t)63) : NULL;
  if (!pk.buf || (shmem && !shared)) {
    free(pk.buf);
    free(shared);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (sim_guarded(do_pack, &pk)) {
    free(pk.buf);
    free(shared);
    return CUDA_ERROR_INVALID_VALUE;
  }
  struct grid_run g = {f->mod, t, pk.buf, {gx, gy, gz}, {bx, by, bz}, shared, shmem};
  /* like a GPU, the launch itself succeeds; every later context call
     reports the fault */
  struct sim_dev *c = sim_cur();
  sim_access_as(c->dev, 1);
  int faulted = sim_guarded(run_grid, &g);
  sim_access_as(c->dev, 0);
  if (faulted) { /* only the device whose context ran the kernel */
    c->sticky = faulted == SIM_TRAPPED ? CUDA_ERROR_ASSERT : CUDA_ERROR_ILLEGAL_ADDRESS;
    c->poisoned = 1;
  }
  fflush(stdout); /* device printf output appears when the kernel is done */
  free(pk.buf);
  free(shared);
  return CUDA_SUCCESS;
}

CUresult sim_LaunchKernel(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz,
                          unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                          CUstream stream, void **params, void **extra) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_func *f = sim_lookup(fn, SIM_FUNC);
  r = sim_check_launch(f, stream, gx, gy, gz, bx, by, bz, shmem);
  if (!r)
    r = run_launch(f, gx, gy, gz, bx, by, bz, shmem, params, extra);
  return sim_leave(r);
}

CUresult sim_OccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *blocks, CUfunction fn,
                                                                int block_size,
                                                                size_t dynamic_smem,
                                                                unsigned int flags) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_func *f = sim_lookup(fn, SIM_FUNC);
  if (!f)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!blocks || block_size <= 0 || block_size > 1024 ||
      (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  int n = 2048 / block_size;
  if (n > 32)
    n = 32;
  if (dynamic_smem > (size_t)f->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES])
    n = 0;
  else if (dynamic_smem && (int)(SIM_SMEM_PER_SM / (dynamic_smem + 1024)) < n)
    n = (int)(SIM_SMEM_PER_SM / (dynamic_smem + 1024));
  *blocks = n;
  return sim_leave(CUDA_SUCCESS);
}

/* every block of a simulated grid runs, one after the other, so a grid
   sync can never be satisfied; twins of cooperative kernels use per_block
   and do their own grid-wide phases. Launch checks are the same. */
CUresult sim_LaunchCooperativeKernel(CUfunction fn, unsigned int gx, unsigned int gy,
                                     unsigned int gz, unsigned int bx, unsigned int by,
                                     unsigned int bz, unsigned int shmem, CUstream stream,
                                     void **params) {
  return sim_LaunchKernel(fn, gx, gy, gz, bx, by, bz, shmem, stream, params, NULL);
}

/* ---- cuLaunchKernelEx ---- */

/* cluster dimensions: each at least one, dividing the grid, and at most 8
   blocks in all (16 where the kernel allows non-portable sizes), as on sm_90 */
static CUresult check_cluster(const struct sim_func *f, const CUlaunchConfig *c, unsigned x,
                              unsigned y, unsigned z) {
  if (!x || !y || !z)
    return CUDA_ERROR_INVALID_VALUE;
  if (c->gridDimX % x || c->gridDimY % y || c->gridDimZ % z)
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  unsigned max = f->attrs[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED] ? 16 : 8;
  if ((uint64_t)x * y * z > max)
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  return CUDA_SUCCESS;
}

/* one attribute of a launch (lock held); the CPU result does not depend on
   any of them, so only their values are checked */
CUresult sim_check_attr(const struct sim_func *f, const CUlaunchConfig *c,
                        const CUlaunchAttribute *at) {
  const CUlaunchAttributeValue *v = &at->value;
  switch (at->id) {
  case CU_LAUNCH_ATTRIBUTE_IGNORE:
  case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: /* blocks run one after the other anyway */
  case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
  case CU_LAUNCH_ATTRIBUTE_PRIORITY: /* clamped by the driver, never refused */
  case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
  case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    return CUDA_SUCCESS;
  case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
    const CUaccessPolicyWindow *w = &v->accessPolicyWindow;
    int ok = w->hitRatio >= 0.0f && w->hitRatio <= 1.0f &&
             (unsigned)w->hitProp <= CU_ACCESS_PROPERTY_PERSISTING &&
             (unsigned)w->missProp <= CU_ACCESS_PROPERTY_STREAMING;
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    return v->syncPolicy >= CU_SYNC_POLICY_AUTO && v->syncPolicy <= CU_SYNC_POLICY_BLOCKING_SYNC
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
  case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    return check_cluster(f, c, v->clusterDim.x, v->clusterDim.y, v->clusterDim.z);
  case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
    return check_cluster(f, c, v->preferredClusterDim.x, v->preferredClusterDim.y,
                         v->preferredClusterDim.z);
  case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    return (unsigned)v->clusterSchedulingPolicyPreference <=
                   CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
  case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    return (unsigned)v->memSyncDomain <= CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
  case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
    return v->nvlinkUtilCentricScheduling <= 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: {
    /* the driver asks for an event without timing */
    const struct sim_event *e = sim_lookup(v->programmaticEvent.event, SIM_EVENT);
    if (!e)
      return CUDA_ERROR_INVALID_HANDLE;
    return e->flags & CU_EVENT_DISABLE_TIMING ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
    return sim_lookup(v->launchCompletionEvent.event, SIM_EVENT) ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_INVALID_HANDLE;
  default: /* unknown, or for graph nodes only (device-updatable kernel node) */
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult sim_launch_ex(const CUlaunchConfig *c, struct sim_func *f, void **params, void **extra) {
  CUresult r = sim_check_launch(f, c->hStream, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX,
                                c->blockDimY, c->blockDimZ, c->sharedMemBytes);
  for (unsigned i = 0; !r && i < c->numAttrs; i++)
    r = sim_check_attr(f, c, &c->attrs[i]);
  if (!r)
    r = run_launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                   c->blockDimZ, c->sharedMemBytes, params, extra);
  /* the kernel has run to its end: its events have triggered */
  for (unsigned i = 0; !r && i < c->numAttrs; i++) {
    const CUlaunchAttribute *at = &c->attrs[i];
    struct sim_event *e = NULL;
    if (at->id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT)
      e = sim_lookup(at->value.programmaticEvent.event, SIM_EVENT);
    else if (at->id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT)
      e = sim_lookup(at->value.launchCompletionEvent.event, SIM_EVENT);
    if (e) {
      e->recorded = 1;
      e->ns = sim_now_ns();
    }
  }
  return r;
}

CUresult sim_LaunchKernelEx(const CUlaunchConfig *config, CUfunction fn, void **params,
                            void **extra) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!config || (config->numAttrs && !config->attrs))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  return sim_leave(sim_launch_ex(config, sim_lookup(fn, SIM_FUNC), params, extra));
}

/* the shared memory per SM the simulation reports shared by num_blocks blocks, each also paying 1 KiB the driver reserves, and
   capped by what one block may opt into */
CUresult sim_OccupancyAvailableDynamicSMemPerBlock(size_t *bytes, CUfunction fn, int num_blocks,
                                                   int block_size) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_func *f = sim_lookup(fn, SIM_FUNC);
  if (!f)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!bytes || num_blocks <= 0 || block_size <= 0 || block_size > 1024)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  size_t per = SIM_SMEM_PER_SM / (size_t)num_blocks, reserved = 1024;
  per = per > reserved ? per - reserved : 0;
  if (per > (size_t)f->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES])
    per = (size_t)f->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES];
  *bytes = per;
  return sim_leave(CUDA_SUCCESS);
}

/* clusters of the launch's cluster size that fit on the device at once:
   the blocks one SM holds, over all SMs, as whole clusters */
CUresult sim_OccupancyMaxActiveClusters(int *clusters, CUfunction fn, const CUlaunchConfig *config) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_func *f = sim_lookup(fn, SIM_FUNC);
  if (!f)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!clusters || !config || (config->numAttrs && !config->attrs))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  /* the kernel's compiled-in cluster size, else the launch's; with
     neither there is no cluster to count (0, as driver 580 answers) */
  unsigned x = (unsigned)f->attrs[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH],
           y = (unsigned)f->attrs[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT],
           z = (unsigned)f->attrs[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH];
  for (unsigned i = 0; i < config->numAttrs; i++)
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      x = config->attrs[i].value.clusterDim.x;
      y = config->attrs[i].value.clusterDim.y;
      z = config->attrs[i].value.clusterDim.z;
      if ((r = check_cluster(f, config, x, y, z)))
        return sim_leave(r);
    }
  if (!x || !y || !z) {
    *clusters = 0;
    return sim_leave(CUDA_SUCCESS);
  }
  uint64_t threads = (uint64_t)config->blockDimX * config->blockDimY * config->blockDimZ;
  if (!threads || threads > 1024)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  int dev = (int)(sim_cur() - sim.devs);
  sim_leave(CUDA_SUCCESS);
  int per_sm = 0;
  r = sim_OccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&per_sm, fn, (int)threads,
                                                             config->sharedMemBytes, 0);
  if (r)
    return r;
  int sms = 0;
  if ((r = sim_DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)))
    return r;
  *clusters = (int)((uint64_t)sms * (uint64_t)per_sm / ((uint64_t)x * y * z));
  return CUDA_SUCCESS;
}
