/*
 * Driver API: modules the program loads itself (cuModuleLoad*, fat
 * binaries, cubins, PTX), their functions and globals, and launches. A
 * module is loaded on its context's vGPU at once, with no names: each
 * function is resolved when the program asks for it (module_function, a
 * recorded call, so a migration replays it to the same index). Handles are
 * ferry objects that live across migrations. Functions of the runtime front
 * end (cudaGetFuncBySymbol, cuKernelGetFunction of a cudaKernel_t) launch
 * here too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/image.h"
#include "common/log.h"
#include "protocol/layout.h"
#include "shim/core/shadow.h"
#include "shim/driver/cu.h"
#include "shim/runtime/graph.h"

#define MODULE_MAGIC 0x444f4d46u /* "FMOD" */
#define FUNC_MAGIC 0x434e5546u   /* "FUNC" */

struct cu_func;
struct cu_module {
  uint32_t magic;
  struct cu_module *next; /* every module loaded (ferry_cu_modules_forget) */
  int vgpu;
  uint32_t id;
  void *image; /* ours: the replay log points at it until the module is unloaded */
  pthread_mutex_t lock;
  struct cu_func **funcs;
  uint32_t nfuncs, cap;
  /* names the module does not hold: a module never changes, and cuDNN
     asks for the same absent names at every step */
  char **absent;
  uint32_t nabsent, absent_cap;
};

struct cu_func {
  uint32_t magic;
  struct cu_module *m;
  uint32_t index;
  char *name;
  struct ferry_layout layout;
  int max_dynamic_smem; /* as cuFuncSetAttribute raised it: launches past it fail at once */
};

/* dynamic shared memory a kernel gets without opting in (CUDA's 48 KiB) */
#define DEFAULT_DYNAMIC_SMEM (48 * 1024)

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cu_module *modules;

static CUresult load_image(CUmodule *out, const void *image, uint64_t size) {
  struct ferry_vgpu *v;
  CUresult rc = ferry_cu_current(&v);
  if (rc) return rc;
  struct cu_module *m = calloc(1, sizeof *m);
  void *copy = malloc(size);
  if (!m || !copy) {
    free(m);
    free(copy);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memcpy(copy, image, size);
  *m = (struct cu_module){.magic = MODULE_MAGIC, .vgpu = v->index, .id = ferry_module_id_new(),
                          .image = copy};
  pthread_mutex_init(&m->lock, NULL);
  struct ferry_module_load_args a = {.module = m->id};
  struct ferry_module_load_rets r;
  struct ferry_bulk bulk = {.in = copy, .in_len = size};
  rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_module_load, &a, &r, &bulk));
  if (rc) {
    free(copy);
    free(m);
    return rc;
  }
  pthread_mutex_lock(&modules_lock);
  m->next = modules;
  modules = m;
  pthread_mutex_unlock(&modules_lock);
  *out = (CUmodule)m;
  return CUDA_SUCCESS;
}

/* what cuModuleLoadData takes: a fat binary, a cubin or PTX text */
CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  uint64_t size;
  const char *kind;
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  if (ferry_image_size(image, UINT64_MAX, &size, &kind) || !strcmp(kind, "wrapper"))
    return CUDA_ERROR_INVALID_IMAGE;
  return load_image(module, image, size);
}

/* JIT options change only logs and compile settings the server's driver
   chooses for itself */
CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n,
                            CUjit_option *options, void **values) {
  (void)options, (void)values;
  if (n) ferry_debug("cuModuleLoadDataEx: %u JIT options not forwarded", n);
  return cuModuleLoadData(module, image);
}

/* a fat binary, or the wrapper __cudaRegisterFatBinary takes */
CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fat) {
  uint64_t size;
  const char *kind;
  if (!module || !fat) return CUDA_ERROR_INVALID_VALUE;
  if (ferry_image_size(fat, UINT64_MAX, &size, &kind)) return CUDA_ERROR_INVALID_IMAGE;
  if (!strcmp(kind, "wrapper")) {
    const struct {
      int magic, version;
      const unsigned long long *data;
      void *rest;
    } *w = fat;
    return load_image(module, w->data, size);
  }
  return load_image(module, fat, size);
}

char *ferry_cu_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 65536 + 1 > cap) {
      char *p = realloc(buf, cap = (n + 65536 + 1) * 2);
      if (!p) break;
      buf = p;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  int bad = ferror(f) || !buf || n + 1 > cap;
  fclose(f);
  if (bad) {
    free(buf);
    return NULL;
  }
  buf[n] = '\0'; /* PTX files end without the NUL cuModuleLoadData wants */
  *len = n;
  return buf;
}

CUresult cuModuleLoad(CUmodule *module, const char *path) {
  if (!module || !path) return CUDA_ERROR_INVALID_VALUE;
  size_t len;
  char *buf = ferry_cu_read_file(path, &len);
  if (!buf) return CUDA_ERROR_FILE_NOT_FOUND;
  uint64_t size;
  const char *kind;
  CUresult rc = ferry_image_size(buf, len + 1, &size, &kind) || !strcmp(kind, "wrapper")
                    ? CUDA_ERROR_INVALID_IMAGE
                    : load_image(module, buf, size);
  free(buf);
  return rc;
}

static void forget_globals(int vgpu, uint32_t module);

static struct cu_module *module_of(CUmodule h) {
  struct cu_module *m = (struct cu_module *)h;
  return m && m->magic == MODULE_MAGIC ? m : NULL;
}

CUresult cuModuleUnload(CUmodule module) {
  struct cu_module *m = module_of(module);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_module_unload_args a = {m->id};
  rc = FERRY_CU_RT(ferry_call(&ferry.vgpus[m->vgpu], FERRY_CALL_module_unload, &a, NULL, NULL));
  if (rc) return rc;
  /* the program's function handles die with their module, as in CUDA */
  for (uint32_t i = 0; i < m->nfuncs; i++) {
    m->funcs[i]->magic = 0;
    ferry_layout_free(&m->funcs[i]->layout);
    free(m->funcs[i]->name);
  }
  m->magic = 0;
  free(m->image);
  m->image = NULL;
  for (uint32_t i = 0; i < m->nabsent; i++) free(m->absent[i]);
  free(m->absent);
  m->absent = NULL;
  m->nabsent = m->absent_cap = 0;
  forget_globals(m->vgpu, m->id);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *out, CUmodule module, const char *name) {
  struct cu_module *m = module_of(module);
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  pthread_mutex_lock(&m->lock);
  for (uint32_t i = 0; i < m->nfuncs; i++)
    if (!strcmp(m->funcs[i]->name, name)) {
      *out = (CUfunction)m->funcs[i];
      pthread_mutex_unlock(&m->lock);
      return CUDA_SUCCESS;
    }
  for (uint32_t i = 0; i < m->nabsent; i++)
    if (!strcmp(m->absent[i], name)) {
      pthread_mutex_unlock(&m->lock);
      return CUDA_ERROR_NOT_FOUND;
    }
  struct ferry_module_function_args a = {.module = m->id, .name = name};
  struct ferry_module_function_rets r;
  struct cu_func *f = NULL;
  rc = FERRY_CU_RT(ferry_call(&ferry.vgpus[m->vgpu], FERRY_CALL_module_function, &a, &r, NULL));
  if (rc == CUDA_ERROR_NOT_FOUND && m->nabsent < 4096) { /* kept (a bounded list) */
    if (m->nabsent == m->absent_cap) {
      uint32_t cap = m->absent_cap ? 2 * m->absent_cap : 8;
      char **p = realloc(m->absent, cap * sizeof *p);
      if (p) m->absent = p, m->absent_cap = cap;
    }
    char *copy = m->nabsent < m->absent_cap ? strdup(name) : NULL;
    if (copy) m->absent[m->nabsent++] = copy;
  }
  if (!rc) {
    const unsigned char *p = r.layout.ptr;
    f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(name))) rc = CUDA_ERROR_OUT_OF_MEMORY;
    else if (ferry_layout_read(&p, p + r.layout.len, &f->layout)) rc = CUDA_ERROR_INVALID_IMAGE;
  }
  if (!rc && m->nfuncs == m->cap) {
    uint32_t cap = m->cap ? m->cap * 2 : 8;
    struct cu_func **p = realloc(m->funcs, cap * sizeof *p);
    if (p) m->funcs = p, m->cap = cap;
    else rc = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (rc) {
    if (f) free(f->name);
    free(f);
  } else {
    f->magic = FUNC_MAGIC;
    f->m = m;
    f->index = r.index;
    m->funcs[m->nfuncs++] = f;
    *out = (CUfunction)f;
  }
  pthread_mutex_unlock(&m->lock);
  return rc;
}

/* ---- module globals ----
 * A module variable's address is the driver's choice on each GPU. The
 * program keeps the address it was handed first; after a migration ferry
 * translates it, in copies, sets and launch parameters, to where the
 * variable lives now (ferry_global_now), and the migration copies its
 * contents over (globals_prepare). */
struct cu_global {
  int vgpu;
  uint32_t module;
  char *name;
  uint64_t size;
  uint64_t handed; /* the address the program holds */
  uint64_t now;    /* where it is on the vGPU's current GPU */
  uint64_t next;   /* where it will be if the running migration succeeds */
};
static pthread_mutex_t globals_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cu_global *globals;
static size_t nglobals, cglobals;
static int globals_moved; /* atomic: some handed address no longer holds */
/* every handed address lies in [handed_lo, handed_hi) (atomics, written
   under globals_lock): launches test each word of their parameters */
static uint64_t handed_lo = UINT64_MAX, handed_hi;

static CUresult remember_global(int vgpu, uint32_t module, const char *name, uint64_t *addr,
                                uint64_t size) {
  CUresult rc = CUDA_SUCCESS;
  pthread_mutex_lock(&globals_lock);
  size_t i = 0;
  while (i < nglobals && !(globals[i].vgpu == vgpu && globals[i].module == module &&
                           !strcmp(globals[i].name, name)))
    i++;
  if (i < nglobals) {
    *addr = globals[i].handed; /* asked again after a move: the same answer */
  } else if (nglobals == cglobals &&
             !(globals = realloc(globals, (cglobals = cglobals ? cglobals * 2 : 16) * sizeof *globals))) {
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    nglobals = cglobals = 0;
  } else if (!(globals[i].name = strdup(name))) {
    rc = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    globals[i] = (struct cu_global){vgpu, module, globals[i].name, size, *addr, *addr, 0};
    nglobals++;
    if (*addr < __atomic_load_n(&handed_lo, __ATOMIC_RELAXED))
      __atomic_store_n(&handed_lo, *addr, __ATOMIC_RELAXED);
    if (*addr + (size ? size : 1) > __atomic_load_n(&handed_hi, __ATOMIC_RELAXED))
      __atomic_store_n(&handed_hi, *addr + (size ? size : 1), __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&globals_lock);
  return rc;
}

/* an unloaded module's variables are gone: a migration must not look for them */
static void forget_globals(int vgpu, uint32_t module) {
  pthread_mutex_lock(&globals_lock);
  size_t keep = 0;
  for (size_t i = 0; i < nglobals; i++) {
    if (globals[i].vgpu == vgpu && globals[i].module == module) free(globals[i].name);
    else globals[keep++] = globals[i];
  }
  nglobals = keep;
  pthread_mutex_unlock(&globals_lock);
}

uint64_t ferry_global_now(int vgpu, uint64_t addr) {
  if (!__atomic_load_n(&globals_moved, __ATOMIC_ACQUIRE)) return addr;
  if (addr < __atomic_load_n(&handed_lo, __ATOMIC_RELAXED) ||
      addr >= __atomic_load_n(&handed_hi, __ATOMIC_RELAXED))
    return addr;
  pthread_mutex_lock(&globals_lock);
  for (size_t i = 0; i < nglobals; i++) {
    const struct cu_global *g = &globals[i];
    if (g->vgpu == vgpu && addr >= g->handed && addr - g->handed < (g->size ? g->size : 1)) {
      addr = g->now + (addr - g->handed);
      break;
    }
  }
  pthread_mutex_unlock(&globals_lock);
  return addr;
}

static int globals_prepare(int vgpu, ferry_global_lookup_fn lookup, ferry_global_copy_fn add_copy,
                          void *ctx) {
  pthread_mutex_lock(&globals_lock);
  int rc = 0;
  for (size_t i = 0; i < nglobals && !rc; i++) {
    struct cu_global *g = &globals[i];
    if (g->vgpu != vgpu) continue;
    uint64_t size = 0;
    rc = lookup(ctx, g->module, g->name, &g->next, &size);
    if (!rc && size != g->size) rc = -1;
    if (!rc) rc = add_copy(ctx, g->now, g->next, g->size);
  }
  pthread_mutex_unlock(&globals_lock);
  return rc;
}

static void globals_commit(int vgpu) {
  pthread_mutex_lock(&globals_lock);
  for (size_t i = 0; i < nglobals; i++)
    if (globals[i].vgpu == vgpu) {
      globals[i].now = globals[i].next;
      if (globals[i].now != globals[i].handed) __atomic_store_n(&globals_moved, 1, __ATOMIC_RELEASE);
      ferry_debug("device %d: module %u variable %s (%llu bytes): the program holds %#llx, it is now at %#llx",
                  vgpu, globals[i].module, globals[i].name, (unsigned long long)globals[i].size,
                  (unsigned long long)globals[i].handed, (unsigned long long)globals[i].now);
    }
  pthread_mutex_unlock(&globals_lock);
}

/* migration and the runtime front end's copies reach the globals through
   the core's hooks */
__attribute__((constructor)) static void globals_hooks(void) {
  ferry_hooks.global_now = ferry_global_now;
  ferry_hooks.globals_prepare = globals_prepare;
  ferry_hooks.globals_commit = globals_commit;
}

/* a reset dropped vgpu's modules: their handles die, as in CUDA, and its
   globals are looked up again */
void ferry_cu_modules_forget(int vgpu) {
  pthread_mutex_lock(&modules_lock);
  for (struct cu_module *m = modules; m; m = m->next)
    if (m->vgpu == vgpu && m->magic == MODULE_MAGIC) {
      pthread_mutex_lock(&m->lock);
      for (uint32_t i = 0; i < m->nfuncs; i++) m->funcs[i]->magic = 0;
      m->magic = 0;
      pthread_mutex_unlock(&m->lock);
    }
  pthread_mutex_unlock(&modules_lock);
  pthread_mutex_lock(&globals_lock);
  size_t keep = 0;
  for (size_t i = 0; i < nglobals; i++) {
    if (globals[i].vgpu == vgpu) free(globals[i].name);
    else globals[keep++] = globals[i];
  }
  nglobals = keep;
  pthread_mutex_unlock(&globals_lock);
  ferry_cu_cls_drop(ferry_cu_primary(vgpu));
  ferry_cu_ctx_objects_forget(vgpu);
}

CUresult ferry_cu_global(struct ferry_vgpu *v, uint32_t module, const char *name, CUdeviceptr *dptr,
                         size_t *bytes) {
  struct ferry_module_global_args a = {.module = module, .name = name};
  struct ferry_module_global_rets r;
  CUresult rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_module_global, &a, &r, NULL));
  if (rc) return rc;
  uint64_t addr = r.addr;
  if ((rc = remember_global(v->index, module, name, &addr, r.size))) return rc;
  if (dptr) *dptr = (CUdeviceptr)addr;
  if (bytes) *bytes = (size_t)r.size;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule module, const char *name) {
  struct cu_module *m = module_of(module);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  CUresult rc = ferry_cu_ready();
  return rc ? rc : ferry_cu_global(&ferry.vgpus[m->vgpu], m->id, name, dptr, bytes);
}

CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  *mode = CU_MODULE_EAGER_LOADING; /* ferry loads every module at once */
  return CUDA_SUCCESS;
}

/* ---- functions ---- */
static struct cu_func *func_of(CUfunction h) {
  struct cu_func *f = (struct cu_func *)h;
  return f && f->magic == FUNC_MAGIC ? f : NULL;
}

/* a runtime front end kernel (cudaGetFuncBySymbol, cuKernelGetFunction) */
static struct ferry_kernel *rt_kernel_of(const void *h) {
  struct ferry_kernel *k;
  return h && !func_of((CUfunction)h) && !ferry_kernel_lookup(h, &k) ? k : NULL;
}

/* f on the current context's vGPU: a module's function, a library's
   kernel, or (with *rt set) a runtime front end kernel */
static CUresult resolve_fn(CUfunction h, struct ferry_vgpu **v, struct ferry_cu_fn *fn,
                           struct ferry_kernel **rt) {
  *rt = NULL;
  CUresult rc = ferry_cu_current(v);
  if (rc) return rc;
  struct cu_func *f = func_of(h);
  if (f) {
    if (f->m->vgpu != (*v)->index) return CUDA_ERROR_INVALID_HANDLE;
    *fn = (struct ferry_cu_fn){f->m->id << 16 | f->index, &f->layout, &f->max_dynamic_smem};
    return CUDA_SUCCESS;
  }
  struct cu_kernel *k = ferry_cu_kernel_of(h);
  if (k) return ferry_cu_kernel_on(k, *v, fn);
  if (!(*rt = rt_kernel_of(h))) return CUDA_ERROR_INVALID_HANDLE;
  *fn = (struct ferry_cu_fn){0, NULL, NULL};
  return FERRY_CU_RT(ferry_kernel_func_id(*rt, *v, &fn->id));
}

static CUresult func_id(CUfunction h, struct ferry_vgpu **v, uint32_t *id) {
  struct ferry_cu_fn fn;
  struct ferry_kernel *rt;
  CUresult rc = resolve_fn(h, v, &fn, &rt);
  if (!rc) *id = fn.id;
  return rc;
}

CUresult cuFuncGetAttribute(int *value, CUfunction_attribute attr, CUfunction h) {
  struct ferry_vgpu *v;
  struct ferry_func_get_attributes_args a;
  struct ferry_func_get_attributes_rets r;
  if (!value || attr < 0 || attr >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = func_id(h, &v, &a.func);
  if (!rc) rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_func_get_attributes, &a, &r, NULL));
  if (rc) return rc;
  /* the reply holds the values in CUfunction_attribute order */
  int32_t x = 0;
  if ((uint64_t)(attr + 1) * 4 <= r.attrs.len) memcpy(&x, (const char *)r.attrs.ptr + attr * 4, 4);
  *value = x;
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction h, CUfunction_attribute attr, int value) {
  struct ferry_vgpu *v;
  struct ferry_func_set_attribute_args a = {.attr = (uint32_t)attr, .value = value};
  struct ferry_cu_fn fn;
  struct ferry_kernel *rt;
  CUresult rc = resolve_fn(h, &v, &fn, &rt);
  a.func = fn.id;
  if (!rc && !ferry_func_attr_unchanged(v, a.func, a.attr, value))
    rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_func_set_attribute, &a, NULL, NULL));
  if (!rc && fn.max_dynamic_smem && attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    *fn.max_dynamic_smem = value;
  return rc;
}

CUresult cuFuncSetCacheConfig(CUfunction h, CUfunc_cache config) {
  struct ferry_vgpu *v;
  struct ferry_func_set_cache_config_args a = {.config = (uint32_t)config};
  CUresult rc = func_id(h, &v, &a.func);
  return rc ? rc : FERRY_CU_RT(ferry_call(v, FERRY_CALL_func_set_cache_config, &a, NULL, NULL));
}

CUresult cuFuncGetParamInfo(CUfunction h, size_t index, size_t *offset, size_t *size) {
  if (ferry_cu_kernel_of(h)) return cuKernelGetParamInfo((CUkernel)h, index, offset, size);
  struct cu_func *f = func_of(h);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (index >= f->layout.nparams) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = f->layout.offsets[index];
  if (size) *size = f->layout.sizes[index];
  return CUDA_SUCCESS;
}

CUresult ferry_cu_function_names(CUmodule module, char **names, unsigned *count) {
  struct cu_module *m = module_of(module);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_module_function_names_args a = {.module = m->id};
  struct ferry_module_function_names_rets r;
  rc = FERRY_CU_RT(ferry_call(&ferry.vgpus[m->vgpu], FERRY_CALL_module_function_names, &a, &r, NULL));
  if (rc) return rc;
  if (r.names.len && ((const char *)r.names.ptr)[r.names.len - 1]) return CUDA_ERROR_UNKNOWN;
  if (!(*names = malloc(r.names.len + 1))) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(*names, r.names.ptr, r.names.len);
  *count = 0;
  for (uint32_t i = 0; i < r.names.len; i++) *count += !(*names)[i];
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule module) {
  char *names = NULL;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_function_names(module, &names, count);
  free(names);
  return rc;
}

CUresult cuModuleEnumerateFunctions(CUfunction *fns, unsigned int n, CUmodule module) {
  char *names = NULL;
  unsigned count = 0;
  if (!fns) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_function_names(module, &names, &count);
  if (!rc && n != count) rc = CUDA_ERROR_INVALID_VALUE;
  const char *name = names;
  for (unsigned i = 0; !rc && i < n; i++, name += strlen(name) + 1)
    rc = cuModuleGetFunction(&fns[i], module, name);
  free(names);
  return rc;
}

CUresult cuFuncGetName(const char **name, CUfunction h) {
  struct cu_func *f = func_of(h);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name;
  return CUDA_SUCCESS;
}

CUresult cuFuncGetModule(CUmodule *module, CUfunction h) {
  struct cu_func *f = func_of(h);
  if (!module) return CUDA_ERROR_INVALID_VALUE;
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *module = (CUmodule)f->m;
  return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *blocks, CUfunction h,
                                                              int block_size, size_t smem,
                                                              unsigned int flags) {
  struct ferry_vgpu *v;
  struct ferry_occupancy_args a = {.block_size = block_size, .dynamic_smem = smem, .flags = flags};
  struct ferry_occupancy_rets r;
  if (!blocks) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = func_id(h, &v, &a.func);
  if (!rc) rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_occupancy, &a, &r, NULL));
  if (!rc) *blocks = r.blocks;
  return rc;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction h, int block_size,
                                                     size_t smem) {
  return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, h, block_size, smem, 0);
}

/* ---- launches ---- */
static __thread unsigned char params_buf[FERRY_MAX_PARAM_BYTES];

/* the packed parameters: from kernelParams, or the buffer `extra` names */
static CUresult pack_params(const struct ferry_layout *l, void **params, void **extra,
                            ferry_blob *out) {
  if (params) {
    ferry_layout_pack(l, params, params_buf);
    *out = (ferry_blob){params_buf, l->bytes};
    return CUDA_SUCCESS;
  }
  const void *buf = NULL;
  size_t size = 0;
  for (int i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
    else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) size = *(size_t *)extra[i + 1];
    else return CUDA_ERROR_INVALID_VALUE;
  }
  if (!l->nparams) {
    *out = (ferry_blob){NULL, 0};
    return CUDA_SUCCESS;
  }
  if (!buf) return CUDA_ERROR_INVALID_VALUE;
  /* more than the parameters' size is refused this way (a padded struct's,
     on an H100, driver 580); less is taken, the rest zero: NCCL passes only
     the used part of its kernels' 4 KiB argument structure */
  if (size > l->bytes) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  if (size < l->bytes) {
    memcpy(params_buf, buf, size);
    memset(params_buf + size, 0, l->bytes - size);
    buf = params_buf;
  }
  *out = (ferry_blob){buf, l->bytes};
  return CUDA_SUCCESS;
}

/* After a migration, a pointer-aligned word of the parameters that holds a
   handed-out global's address is that address (a kernel gets its own
   globals without one): it is given where the global lives now
   (ferry_params_now, shared with graphs' kernel nodes). */
static __thread unsigned char translated_buf[FERRY_MAX_PARAM_BYTES];
static void translate_params(const struct ferry_layout *l, int vgpu, ferry_blob *packed) {
  packed->ptr = ferry_params_now(l, vgpu, packed->ptr, packed->len, translated_buf);
}

static CUresult launch(CUfunction h, dim3 grid, dim3 block, unsigned shmem, CUstream stream,
                       void **params, void **extra, unsigned flags, ferry_blob attrs) {
  struct ferry_vgpu *v;
  struct ferry_cu_fn fn;
  struct ferry_kernel *rt;
  CUresult rc = resolve_fn(h, &v, &fn, &rt);
  if (rc) return rc;
  if (rt) {
    if (extra) return ferry_cu_unsupported("cuLaunchKernel with `extra` for a runtime kernel");
    return FERRY_CU_RT(ferry_launch(rt, grid, block, params, shmem, (cudaStream_t)stream, flags, attrs));
  }
  struct ferry_vgpu *sv;
  uint32_t sid;
  if ((rc = FERRY_CU_RT(ferry_stream_resolve((cudaStream_t)stream, flags & FERRY_LAUNCH_PER_THREAD,
                                             &sv, &sid))))
    return rc;
  if (sv != v) return CUDA_ERROR_INVALID_HANDLE;
  if ((rc = FERRY_CU_RT(ferry_launch_check(v, grid, block)))) return rc;
  /* the driver refuses this at the launch, not at the next synchronization */
  if (shmem > DEFAULT_DYNAMIC_SMEM && (int)shmem > *fn.max_dynamic_smem) return CUDA_ERROR_INVALID_VALUE;
  ferry_blob packed;
  if ((rc = pack_params(fn.layout, params, extra, &packed))) return rc;
  /* pinned host memory passed to the kernel (zero-copy: XLA's delay kernel) */
  int scanned = ferry_shadow_scan(v, packed.ptr, packed.len);
  if (scanned > 0) return FERRY_CU_RT(scanned);
  struct ferry_launch_args a = {.func = fn.id,
                                .gx = grid.x, .gy = grid.y, .gz = grid.z,
                                .bx = block.x, .by = block.y, .bz = block.z,
                                .shmem = shmem,
                                .stream = sid,
                                .cooperative = (flags & FERRY_LAUNCH_COOPERATIVE) != 0,
                                .params = packed,
                                .attrs = attrs};
  /* a capturing stream's launch becomes a kernel node, with the addresses
     the program was given: the graph's are translated where it is sent */
  int captured = ferry_capture_launch(v, sid, &a, fn.layout, h);
  if (captured) return FERRY_CU_RT(FERRY_CAPTURE_DONE(captured));
  /* a move at this launch comes first: its parameters are translated for
     the GPU it then runs on (JAX lost a constant's address this way) */
  ferry_migrate_at_launch(v->index);
  const ferry_blob given = packed;
  for (;;) {
    /* a move between the translation and the call makes the call stale:
       translated again for the GPU it moved to */
    uint64_t gen = __atomic_load_n(&v->generation, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&globals_moved, __ATOMIC_ACQUIRE)) {
      packed = given;
      translate_params(fn.layout, v->index, &packed);
      a.params = packed;
    }
    ferry_expect_generation(v, gen);
    int r = ferry_call(v, FERRY_CALL_launch, &a, NULL, NULL);
    ferry_expect_generation(NULL, 0);
    if (r != FERRY_STALE) return FERRY_CU_RT(r);
  }
}

static const ferry_blob no_attrs = {NULL, 0};

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shmem, CUstream stream, void **params,
                        void **extra) {
  return launch(f, (dim3){gx, gy, gz}, (dim3){bx, by, bz}, shmem, stream, params, extra, 0, no_attrs);
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                             void **params, void **extra) {
  return launch(f, (dim3){gx, gy, gz}, (dim3){bx, by, bz}, shmem, stream, params, extra,
                FERRY_LAUNCH_PER_THREAD, no_attrs);
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                   unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                   CUstream stream, void **params) {
  return launch(f, (dim3){gx, gy, gz}, (dim3){bx, by, bz}, shmem, stream, params, NULL,
                FERRY_LAUNCH_COOPERATIVE, no_attrs);
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                        CUstream stream, void **params) {
  return launch(f, (dim3){gx, gy, gz}, (dim3){bx, by, bz}, shmem, stream, params, NULL,
                FERRY_LAUNCH_COOPERATIVE | FERRY_LAUNCH_PER_THREAD, no_attrs);
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra,
                          unsigned flags) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  CUlaunchAttribute attrs[FERRY_MAX_LAUNCH_ATTRS];
  uint32_t n;
  CUresult rc = FERRY_CU_RT(ferry_launch_attrs(c->attrs, c->numAttrs, attrs, &n, &flags));
  if (rc) return rc;
  ferry_blob blob = {n ? attrs : NULL, n * (uint32_t)sizeof *attrs};
  return launch(f, (dim3){c->gridDimX, c->gridDimY, c->gridDimZ},
                (dim3){c->blockDimX, c->blockDimY, c->blockDimZ}, c->sharedMemBytes, c->hStream,
                params, extra, flags, blob);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
  return launch_ex(c, f, params, extra, 0);
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
  return launch_ex(c, f, params, extra, FERRY_LAUNCH_PER_THREAD);
}

/* the runtime front end's cudaKernel_t is a function handle here too */
CUresult cuKernelGetFunction(CUfunction *out, CUkernel kernel) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  if (!func_of((CUfunction)kernel) && !ferry_cu_kernel_of(kernel) && !rt_kernel_of(kernel))
    return CUDA_ERROR_INVALID_HANDLE;
  *out = (CUfunction)kernel;
  return CUDA_SUCCESS;
}

CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *bytes, CUfunction h, int num_blocks,
                                                 int block_size) {
  struct ferry_vgpu *v;
  struct ferry_occupancy_smem_args a = {.num_blocks = num_blocks, .block_size = block_size};
  struct ferry_occupancy_smem_rets r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = func_id(h, &v, &a.func);
  if (!rc) rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_occupancy_smem, &a, &r, NULL));
  if (!rc) *bytes = (size_t)r.bytes;
  return rc;
}

CUresult cuOccupancyMaxActiveClusters(int *clusters, CUfunction h, const CUlaunchConfig *c) {
  struct ferry_vgpu *v;
  uint32_t id;
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = func_id(h, &v, &id);
  if (!rc)
    rc = FERRY_CU_RT(ferry_occupancy_clusters(
        v, id, (dim3){c->gridDimX, c->gridDimY, c->gridDimZ},
        (dim3){c->blockDimX, c->blockDimY, c->blockDimZ}, c->sharedMemBytes, c->attrs, c->numAttrs,
        clusters));
  return rc;
}

/* The block size with the highest occupancy, as the CUDA occupancy
   calculator searches it: from the largest block down a warp at a time,
   each size asked of the device (the dynamic shared memory may depend on
   it: the program's callback runs here), the first best kept. */
static CUresult potential_block_size(int *min_grid, int *block, CUfunction h, CUoccupancyB2DSize smem_of,
                                     size_t smem, int limit, unsigned flags) {
  struct ferry_vgpu *v;
  int max_threads = 0, per_sm = 0, sms = 0, warp = 32;
  if (!min_grid || !block) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, h);
  if (!rc) rc = ferry_cu_current(&v);
  if (!rc) rc = cuDeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, v->index);
  if (!rc) rc = cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, v->index);
  if (!rc) rc = cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, v->index);
  if (rc) return rc;
  if (limit > 0 && limit < max_threads) max_threads = limit;
  if (warp <= 0 || max_threads < 1) return CUDA_ERROR_INVALID_VALUE;
  int best = 0, best_size = 0, best_blocks = 0;
  for (int bs = (max_threads + warp - 1) / warp * warp; bs > 0; bs -= warp) {
    int size = bs > max_threads ? max_threads : bs, blocks = 0;
    size_t dyn = smem_of ? smem_of(size) : smem;
    rc = cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, h, size, dyn, flags);
    if (rc) return rc;
    if (blocks * size > best) best = blocks * size, best_size = size, best_blocks = blocks;
    if (per_sm > 0 && best >= per_sm) break; /* no size can do better */
  }
  *block = best_size;
  *min_grid = best_blocks * sms;
  return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block, CUfunction h,
                                          CUoccupancyB2DSize smem_of, size_t smem, int limit) {
  return potential_block_size(min_grid, block, h, smem_of, smem, limit, 0);
}
CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *min_grid, int *block, CUfunction h,
                                                   CUoccupancyB2DSize smem_of, size_t smem, int limit,
                                                   unsigned int flags) {
  return potential_block_size(min_grid, block, h, smem_of, smem, limit, flags);
}
