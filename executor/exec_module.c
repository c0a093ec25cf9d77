/*
 * Modules and kernels. module_load resolves every kernel's parameter
 * layout (cuFuncGetParamInfo, counted until CUDA_ERROR_INVALID_VALUE) and
 * every variable's address in one round trip; module_function and
 * module_global resolve one name at a time (the driver API's front end).
 * launch unpacks the client's packed parameter buffer into the pointer
 * array cuLaunchKernel wants, and hands launch attributes, when there are
 * any, to cuLaunchKernelEx.
 */
#include "executor/exec_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/image.h"
#include "common/log.h"

/* a sanity bound; kernel parameters are at most 32 KiB */
#define EXEC_MAX_PARAMS 32768u
#define EXEC_MAX_IMAGE (4ull << 30)
#define EXEC_MAX_FUNC_INDEX 0xffffu /* func = module << 16 | index */

static void module_free(struct ferry_exec *ex, struct exec_module *m, int driver_ok) {
  if (m->mod && driver_ok)
    ex->d->ModuleUnload(m->mod);
  for (uint32_t i = 0; i < m->nfuncs; i++) {
    free(m->funcs[i].layout);
    free(m->funcs[i].name);
  }
  free(m->funcs);
  free(m->image);
  memset(m, 0, sizeof *m);
}

void exec_free_modules(struct ferry_exec *ex, int driver_ok) {
  for (uint32_t i = 0; i < ex->nmods; i++)
    if (ex->mods[i].mod)
      module_free(ex, &ex->mods[i], driver_ok);
}

int exec_func(struct ferry_exec *ex, uint32_t func, struct exec_func **out) {
  uint32_t mod = func >> 16, idx = func & 0xffff;
  if (mod >= ex->nmods || !ex->mods[mod].mod || idx >= ex->mods[mod].nfuncs) {
    exec_bad_handle(ex, "kernel", func);
    return EXEC_INVALID_HANDLE;
  }
  struct exec_func *f = &ex->mods[mod].funcs[idx];
  if (!f->fn)
    return EXEC_INVALID_DEVICE_FUNC;
  *out = f;
  return EXEC_OK;
}

/* a loaded module by id, or a protocol violation (the client never loaded it) */
static struct exec_module *live_module(struct ferry_exec *ex, uint32_t id) {
  if (id >= ex->nmods || !ex->mods[id].mod) {
    exec_bad_handle(ex, "module", id);
    return NULL;
  }
  return &ex->mods[id];
}

/* NUL-separated names; a missing final NUL is tolerated */
static uint32_t count_names(ferry_blob b) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < b.len; i++)
    if (((const char *)b.ptr)[i] == '\0' || i + 1 == b.len)
      n++;
  return n;
}

/* copies the next name into buf (NUL-terminated); advances *pos */
static const char *next_name(ferry_blob b, uint32_t *pos, char **buf) {
  const char *s = (const char *)b.ptr + *pos;
  uint32_t n = 0;
  while (*pos + n < b.len && s[n] != '\0')
    n++;
  *pos += n + 1;
  char *p = realloc(*buf, n + 1);
  if (!p)
    return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  *buf = p;
  return p;
}

static int resolve_func(struct ferry_exec *ex, CUmodule mod, const char *name, struct exec_func *f) {
  const struct ferry_driver *d = ex->d;
  CUresult res = name[0] ? d->ModuleGetFunction(&f->fn, mod, name) : CUDA_ERROR_NOT_FOUND;
  if (res == CUDA_ERROR_NOT_FOUND) {
    f->fn = NULL;
    return EXEC_OK;
  }
  if (res != CUDA_SUCCESS)
    return CU(res);
  uint32_t cap = 0;
  for (uint32_t i = 0;; i++) {
    size_t off = 0, size = 0;
    res = d->FuncGetParamInfo(f->fn, i, &off, &size);
    if (res == CUDA_ERROR_INVALID_VALUE)
      break; /* past the last parameter */
    if (res != CUDA_SUCCESS)
      return CU(res);
    if (i >= EXEC_MAX_PARAMS || off + size > EXEC_MAX_PARAMS)
      return EXEC_INVALID_VALUE;
    if (i == cap) {
      cap = cap ? cap * 2 : 8;
      uint32_t *p = realloc(f->layout, cap * 2 * sizeof *p);
      if (!p)
        return EXEC_MEMORY_ALLOCATION;
      f->layout = p;
    }
    f->layout[2 * i] = (uint32_t)off;
    f->layout[2 * i + 1] = (uint32_t)size;
    f->nparams = i + 1;
    if (off + size > f->need)
      f->need = (uint32_t)(off + size);
  }
  return EXEC_OK;
}

static int append(char **buf, size_t *len, size_t *cap, const void *p, size_t n) {
  if (*len + n > *cap) {
    size_t c = *cap ? *cap * 2 : 256;
    while (c < *len + n)
      c *= 2;
    char *q = realloc(*buf, c);
    if (!q)
      return -1;
    *buf = q;
    *cap = c;
  }
  memcpy(*buf + *len, p, n);
  *len += n;
  return 0;
}

/* func_layouts: per function u32 nparams (0xFFFFFFFF: absent) then
   (u32 offset, u32 size) pairs; var_info: per variable u64 address, u64
   size (0, 0: absent). Host byte order, which is little endian on every
   platform ferry supports. */
static int load_names(struct ferry_exec *ex, struct exec_module *m,
                      const struct ferry_module_load_args *a, struct ferry_module_load_rets *r) {
  int err = EXEC_OK;
  char *name = NULL, *fl = NULL, *vi = NULL;
  size_t fl_len = 0, fl_cap = 0, vi_len = 0, vi_cap = 0;
  uint32_t nf = count_names(a->func_names), nv = count_names(a->var_names);
  if (nf > 0x10000)
    return EXEC_INVALID_VALUE;
  m->funcs = calloc(nf ? nf : 1, sizeof *m->funcs);
  if (!m->funcs)
    return EXEC_MEMORY_ALLOCATION;
  m->nfuncs = nf;
  uint32_t pos = 0;
  for (uint32_t i = 0; i < nf && !err; i++) {
    struct exec_func *f = &m->funcs[i];
    if (!next_name(a->func_names, &pos, &name)) {
      err = EXEC_MEMORY_ALLOCATION;
      break;
    }
    if ((err = resolve_func(ex, m->mod, name, f)))
      break;
    if (!(f->name = strdup(name))) {
      err = EXEC_MEMORY_ALLOCATION;
      break;
    }
    uint32_t n = f->fn ? f->nparams : 0xFFFFFFFFu;
    if (append(&fl, &fl_len, &fl_cap, &n, 4) ||
        (f->nparams && append(&fl, &fl_len, &fl_cap, f->layout, f->nparams * 8u)))
      err = EXEC_MEMORY_ALLOCATION;
  }
  pos = 0;
  for (uint32_t i = 0; i < nv && !err; i++) {
    if (!next_name(a->var_names, &pos, &name)) {
      err = EXEC_MEMORY_ALLOCATION;
      break;
    }
    CUdeviceptr addr = 0;
    size_t size = 0;
    CUresult res = name[0] ? ex->d->ModuleGetGlobal(&addr, &size, m->mod, name)
                           : CUDA_ERROR_NOT_FOUND;
    if (res == CUDA_ERROR_NOT_FOUND)
      addr = 0, size = 0;
    else if (res != CUDA_SUCCESS) {
      err = CU(res);
      break;
    }
    uint64_t pair[2] = {addr, size};
    if (append(&vi, &vi_len, &vi_cap, pair, sizeof pair))
      err = EXEC_MEMORY_ALLOCATION;
  }
  free(name);
  if (!err && (fl_len > UINT32_MAX || vi_len > UINT32_MAX))
    err = EXEC_INVALID_VALUE;
  if (err) {
    free(fl);
    free(vi);
    return err;
  }
  /* the reply blobs live until the next call */
  ex->ret_buf[0] = fl;
  ex->ret_buf[1] = vi;
  r->func_layouts = (ferry_blob){fl, (uint32_t)fl_len};
  r->var_info = (ferry_blob){vi, (uint32_t)vi_len};
  return EXEC_OK;
}

/* the driver gets a pointer and no length: what the image's headers say
   it spans must be bytes that came, or the driver reads past them. A
   wrapper holds a pointer of the client's process: never an image here. */
static int image_fits(const void *image, uint64_t len) {
  uint64_t size;
  const char *kind;
  /* refused before it is parsed: parsing a wrapper follows its pointer
     (found by fuzz_session) */
  if (len >= 4 && ferry_u32_at(image) == FERRY_WRAPPER_MAGIC) return 0;
  return ferry_image_size(image, len, &size, &kind) == 0 && strcmp(kind, "wrapper") != 0;
}

int ferry_x_module_load(struct ferry_exec *ex, const struct ferry_module_load_args *a,
                        struct ferry_module_load_rets *r, struct ferry_io *io) {
  if (!io->in)
    return EXEC_INVALID_VALUE;
  uint64_t len = io->in->len;
  int err = EXEC_OK;
  if (a->module > EXEC_MAX_MODULE_ID || len < 16 || len > EXEC_MAX_IMAGE)
    err = EXEC_INVALID_VALUE;
  else if (a->module < ex->nmods && ex->mods[a->module].mod)
    err = EXEC_INVALID_VALUE; /* the id is live */
  if (err)
    return exec_drain(io->in, len) ? EXEC_UNKNOWN : err;
  /* the buffer grows as the bytes arrive: an announced length alone, with
     nothing behind it, costs no memory */
  size_t cap = len < (16u << 20) ? (size_t)len : (16u << 20), got = 0;
  char *image = malloc(cap);
  while (image && got < len) {
    if (got == cap) {
      size_t want = cap * 2 < len ? cap * 2 : (size_t)len;
      char *p = realloc(image, want);
      if (!p) {
        free(image);
        image = NULL;
        break;
      }
      image = p;
      cap = want;
    }
    size_t k = cap - got;
    if (io->in->read(io->in->ctx, image + got, k)) {
      free(image);
      return EXEC_UNKNOWN;
    }
    got += k;
  }
  if (!image)
    return exec_drain(io->in, len - got) ? EXEC_UNKNOWN : EXEC_MEMORY_ALLOCATION;
  if (a->module >= ex->nmods) {
    uint32_t cap = ex->nmods ? ex->nmods : 8;
    while (cap <= a->module)
      cap *= 2;
    struct exec_module *p = realloc(ex->mods, cap * sizeof *p);
    if (!p) {
      free(image);
      return EXEC_MEMORY_ALLOCATION;
    }
    memset(p + ex->nmods, 0, (cap - ex->nmods) * sizeof *p);
    ex->mods = p;
    ex->nmods = cap;
  }
  struct exec_module *m = &ex->mods[a->module];
  CUresult res = image_fits(image, len) ? ex->d->ModuleLoadData(&m->mod, image)
                                        : CUDA_ERROR_INVALID_IMAGE;
  if (res != CUDA_SUCCESS) {
    m->mod = NULL;
    free(image);
    return CU(res);
  }
  m->image = image;
  if ((err = load_names(ex, m, a, r)))
    module_free(ex, m, 1);
  return err;
}

int ferry_x_module_unload(struct ferry_exec *ex, const struct ferry_module_unload_args *a,
                          struct ferry_module_unload_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  struct exec_module *m = live_module(ex, a->module);
  if (!m)
    return EXEC_INVALID_HANDLE;
  CUresult res = ex->d->ModuleUnload(m->mod);
  m->mod = NULL;
  module_free(ex, m, 0);
  return CU(res);
}

/* the reply's layout blob: u32 nparams, then (offset, size) pairs */
static int layout_blob(struct ferry_exec *ex, const struct exec_func *f, ferry_blob *out) {
  size_t n = 4 + (size_t)f->nparams * 8;
  unsigned char *p = exec_ret_alloc(ex, 0, n);
  if (!p)
    return EXEC_MEMORY_ALLOCATION;
  memcpy(p, &f->nparams, 4);
  if (f->nparams)
    memcpy(p + 4, f->layout, (size_t)f->nparams * 8);
  *out = (ferry_blob){p, (uint32_t)n};
  return EXEC_OK;
}

/* resolves name and appends it to the module's list; a name the module
   lacks appends nothing, so indexes stay those the client was given */
static int append_func(struct ferry_exec *ex, struct exec_module *m, const char *name) {
  if (m->nfuncs > EXEC_MAX_FUNC_INDEX)
    return EXEC_INVALID_VALUE; /* func ids hold 16 bits of index */
  struct exec_func f = {0};
  int err = resolve_func(ex, m->mod, name, &f);
  if (!err && !f.fn)
    err = CU(CUDA_ERROR_NOT_FOUND);
  if (!err && !(f.name = strdup(name)))
    err = EXEC_MEMORY_ALLOCATION;
  struct exec_func *p = err ? NULL : realloc(m->funcs, (m->nfuncs + 1) * sizeof *p);
  if (!err && !p)
    err = EXEC_MEMORY_ALLOCATION;
  if (err) {
    free(f.layout);
    free(f.name);
    return err;
  }
  m->funcs = p;
  m->funcs[m->nfuncs++] = f;
  return EXEC_OK;
}

int ferry_x_module_function(struct ferry_exec *ex, const struct ferry_module_function_args *a,
                            struct ferry_module_function_rets *r, struct ferry_io *io) {
  (void)io;
  struct exec_module *m = live_module(ex, a->module);
  if (!m)
    return EXEC_INVALID_HANDLE;
  if (!a->name)
    return EXEC_INVALID_VALUE;
  uint32_t i = 0;
  while (i < m->nfuncs && !(m->funcs[i].name && strcmp(m->funcs[i].name, a->name) == 0))
    i++;
  if (i == m->nfuncs) {
    int err = append_func(ex, m, a->name);
    if (err)
      return err;
  } else if (!m->funcs[i].fn) {
    return CU(CUDA_ERROR_NOT_FOUND); /* named in module_load, absent from the module */
  }
  r->index = i;
  return layout_blob(ex, &m->funcs[i], &r->layout);
}

int ferry_x_module_function_names(struct ferry_exec *ex,
                                  const struct ferry_module_function_names_args *a,
                                  struct ferry_module_function_names_rets *r, struct ferry_io *io) {
  (void)io;
  struct exec_module *m = live_module(ex, a->module);
  if (!m)
    return EXEC_INVALID_HANDLE;
  unsigned count = 0;
  CUresult res = ex->d->ModuleGetFunctionCount(&count, m->mod);
  if (res != CUDA_SUCCESS)
    return CU(res);
  CUfunction *fns = count ? calloc(count, sizeof *fns) : NULL;
  if (count && !fns)
    return EXEC_MEMORY_ALLOCATION;
  if (count && (res = ex->d->ModuleEnumerateFunctions(fns, count, m->mod)) != CUDA_SUCCESS) {
    free(fns);
    return CU(res);
  }
  size_t len = 0;
  for (unsigned i = 0; i < count && res == CUDA_SUCCESS; i++) {
    const char *name = NULL;
    res = ex->d->FuncGetName(&name, fns[i]);
    len += res == CUDA_SUCCESS && name ? strlen(name) + 1 : 0;
  }
  char *names = res == CUDA_SUCCESS && len <= FERRY_MAX_BODY / 2 ? exec_ret_alloc(ex, 0, len ? len : 1) : NULL;
  size_t at = 0;
  for (unsigned i = 0; names && i < count; i++) {
    const char *name = NULL;
    if (ex->d->FuncGetName(&name, fns[i]) == CUDA_SUCCESS && name) {
      size_t n = strlen(name) + 1;
      memcpy(names + at, name, n);
      at += n;
    }
  }
  free(fns);
  if (res != CUDA_SUCCESS)
    return CU(res);
  if (!names)
    return EXEC_MEMORY_ALLOCATION;
  r->names = (ferry_blob){names, (uint32_t)at};
  return EXEC_OK;
}

int ferry_x_module_global(struct ferry_exec *ex, const struct ferry_module_global_args *a,
                          struct ferry_module_global_rets *r, struct ferry_io *io) {
  (void)io;
  struct exec_module *m = live_module(ex, a->module);
  if (!m)
    return EXEC_INVALID_HANDLE;
  if (!a->name)
    return EXEC_INVALID_VALUE;
  CUdeviceptr addr = 0;
  size_t size = 0;
  CUresult res = a->name[0] ? ex->d->ModuleGetGlobal(&addr, &size, m->mod, a->name)
                            : CUDA_ERROR_NOT_FOUND;
  r->addr = res == CUDA_SUCCESS ? addr : 0;
  r->size = res == CUDA_SUCCESS ? size : 0;
  return CU(res);
}

/* plain-valued attributes only: a handle in a value would be a pointer of
   the client's process. The shim forwards no others (shim/runtime/launch.c). */
int exec_attr_is_plain(CUlaunchAttributeID id) {
  switch (id) {
  case CU_LAUNCH_ATTRIBUTE_IGNORE:
  case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: /* base_ptr: the same address here */
  case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
  case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
  case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
  case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
  case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
  case CU_LAUNCH_ATTRIBUTE_PRIORITY:
  case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
  case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
  case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
  case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
  case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
    return 1;
  default:
    return 0;
  }
}

/* cuLaunchKernelEx with the client's attributes (cudaLaunchKernelExC) */
static int launch_with_attrs(struct ferry_exec *ex, const struct ferry_launch_args *a,
                             CUfunction fn, CUstream s, void **params) {
  /* one slot more for the cooperative flag; the array is aligned, the blob
     inside the frame may not be */
  CUlaunchAttribute attrs[FERRY_MAX_LAUNCH_ATTRS + 1];
  if (a->attrs.len % sizeof *attrs || a->attrs.len / sizeof *attrs > FERRY_MAX_LAUNCH_ATTRS)
    return EXEC_INVALID_VALUE;
  unsigned n = a->attrs.len / (unsigned)sizeof *attrs;
  memcpy(attrs, a->attrs.ptr, a->attrs.len);
  for (unsigned i = 0; i < n; i++)
    if (!exec_attr_is_plain(attrs[i].id))
      return EXEC_INVALID_VALUE;
  if (a->cooperative) {
    memset(&attrs[n], 0, sizeof attrs[n]);
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n++].value.cooperative = 1;
  }
  CUlaunchConfig cfg = {.gridDimX = a->gx, .gridDimY = a->gy, .gridDimZ = a->gz,
                        .blockDimX = a->bx, .blockDimY = a->by, .blockDimZ = a->bz,
                        .sharedMemBytes = a->shmem, .hStream = s,
                        .attrs = attrs, .numAttrs = n};
  return CU(ex->d->LaunchKernelEx(&cfg, fn, params, NULL));
}

/* the params blob, laid out as f's parameters, in aligned memory that
   lives until the next call; *out the void ** the driver takes (NULL for a
   kernel without parameters) */
int exec_pack_params(struct ferry_exec *ex, const struct exec_func *f, ferry_blob params,
                     void ***out) {
  if (params.len < f->need)
    return EXEC_INVALID_VALUE;
  /* the blob may sit unaligned in the frame: copy it to aligned memory */
  if (params.len > ex->param_cap) {
    size_t cap = (params.len + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, cap);
    if (!p)
      return EXEC_MEMORY_ALLOCATION;
    free(ex->param_buf);
    ex->param_buf = p;
    ex->param_cap = cap;
  }
  if (f->nparams > ex->ptrs_cap) {
    void **p = realloc(ex->param_ptrs, f->nparams * sizeof *p);
    if (!p)
      return EXEC_MEMORY_ALLOCATION;
    ex->param_ptrs = p;
    ex->ptrs_cap = f->nparams;
  }
  if (params.len)
    memcpy(ex->param_buf, params.ptr, params.len);
  for (uint32_t i = 0; i < f->nparams; i++)
    ex->param_ptrs[i] = (char *)ex->param_buf + f->layout[2 * i];
  *out = f->nparams ? ex->param_ptrs : NULL;
  return EXEC_OK;
}

/* FERRY_SYNC_LAUNCHES=1 (a debugging aid, in the server's environment):
   each launch is waited for, and one that fails is named with its
   parameters, which an asynchronous error never is */
static int sync_launch_check(struct ferry_exec *ex, const struct exec_func *f,
                             const struct ferry_launch_args *a, CUstream s, int err) {
  static int on = -1;
  if (on < 0) on = getenv("FERRY_SYNC_LAUNCHES") && strcmp(getenv("FERRY_SYNC_LAUNCHES"), "1") == 0;
  if (!on || err) return err;
  err = CU(ex->d->StreamSynchronize(s));
  if (err) {
    char hex[3 * 64 + 1] = "";
    const unsigned char *p = a->params.ptr;
    for (uint32_t i = 0; i < a->params.len && i < 64; i++) snprintf(hex + 3 * i, 4, "%02x ", p[i]);
    ferry_log("launch of %s (grid %ux%ux%u, block %ux%ux%u, %u bytes of parameters: %s) failed: "
              "cudaError %d", f->name ? f->name : "?", a->gx, a->gy, a->gz, a->bx, a->by, a->bz,
              a->params.len, hex, err);
  }
  return err;
}

int ferry_x_launch(struct ferry_exec *ex, const struct ferry_launch_args *a,
                   struct ferry_launch_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  struct exec_func *f;
  CUstream s;
  void **params;
  int err = exec_func(ex, a->func, &f);
  if (!err)
    err = exec_stream(ex, a->stream, &s);
  if (!err)
    err = exec_pack_params(ex, f, a->params, &params);
  if (err)
    return err;
  if (a->attrs.len)
    err = launch_with_attrs(ex, a, f->fn, s, params);
  else if (a->cooperative)
    err = CU(ex->d->LaunchCooperativeKernel(f->fn, a->gx, a->gy, a->gz, a->bx, a->by, a->bz,
                                            a->shmem, s, params));
  else
    err = CU(ex->d->LaunchKernel(f->fn, a->gx, a->gy, a->gz, a->bx, a->by, a->bz, a->shmem, s,
                                 params, NULL));
  return sync_launch_check(ex, f, a, s, err);
}

int ferry_x_func_get_attributes(struct ferry_exec *ex, const struct ferry_func_get_attributes_args *a,
                                struct ferry_func_get_attributes_rets *r, struct ferry_io *io) {
  (void)io;
  struct exec_func *f;
  int err = exec_func(ex, a->func, &f);
  if (err)
    return err;
  int32_t *attrs = exec_ret_alloc(ex, 0, CU_FUNC_ATTRIBUTE_MAX * sizeof(int32_t));
  if (!attrs)
    return EXEC_MEMORY_ALLOCATION;
  for (int i = 0; i < CU_FUNC_ATTRIBUTE_MAX; i++) {
    int v = 0;
    CUresult res = ex->d->FuncGetAttribute(&v, (CUfunction_attribute)i, f->fn);
    if (res == CUDA_ERROR_ILLEGAL_ADDRESS || res == CUDA_ERROR_INVALID_CONTEXT)
      return CU(res); /* a broken context, not an unsupported attribute */
    attrs[i] = res == CUDA_SUCCESS ? v : 0;
  }
  r->attrs = (ferry_blob){attrs, CU_FUNC_ATTRIBUTE_MAX * (uint32_t)sizeof(int32_t)};
  return EXEC_OK;
}

int ferry_x_func_set_attribute(struct ferry_exec *ex, const struct ferry_func_set_attribute_args *a,
                               struct ferry_func_set_attribute_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  struct exec_func *f;
  int err = exec_func(ex, a->func, &f);
  return err ? err : CU(ex->d->FuncSetAttribute(f->fn, (CUfunction_attribute)a->attr, a->value));
}

int ferry_x_func_set_cache_config(struct ferry_exec *ex,
                                  const struct ferry_func_set_cache_config_args *a,
                                  struct ferry_func_set_cache_config_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  struct exec_func *f;
  int err = exec_func(ex, a->func, &f);
  return err ? err : CU(ex->d->FuncSetCacheConfig(f->fn, (CUfunc_cache)a->config));
}

int ferry_x_occupancy_smem(struct ferry_exec *ex, const struct ferry_occupancy_smem_args *a,
                           struct ferry_occupancy_smem_rets *r, struct ferry_io *io) {
  (void)io;
  struct exec_func *f;
  size_t bytes = 0;
  int err = exec_func(ex, a->func, &f);
  if (!err)
    err = CU(ex->d->OccupancyAvailableDynamicSMemPerBlock(&bytes, f->fn, a->num_blocks, a->block_size));
  r->bytes = bytes;
  return err;
}

int ferry_x_occupancy(struct ferry_exec *ex, const struct ferry_occupancy_args *a,
                      struct ferry_occupancy_rets *r, struct ferry_io *io) {
  (void)io;
  struct exec_func *f;
  int blocks = 0;
  int err = exec_func(ex, a->func, &f);
  if (!err)
    err = CU(ex->d->OccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        &blocks, f->fn, a->block_size, a->dynamic_smem, a->flags));
  r->blocks = blocks;
  return err;
}

int ferry_x_occupancy_clusters(struct ferry_exec *ex, const struct ferry_occupancy_clusters_args *a,
                               struct ferry_occupancy_clusters_rets *r, struct ferry_io *io) {
  (void)io;
  struct exec_func *f;
  CUlaunchAttribute attrs[FERRY_MAX_LAUNCH_ATTRS];
  int err = exec_func(ex, a->func, &f);
  if (err)
    return err;
  if (a->attrs.len % sizeof *attrs || a->attrs.len / sizeof *attrs > FERRY_MAX_LAUNCH_ATTRS)
    return EXEC_INVALID_VALUE;
  unsigned n = a->attrs.len / (unsigned)sizeof *attrs;
  if (n)
    memcpy(attrs, a->attrs.ptr, a->attrs.len);
  for (unsigned i = 0; i < n; i++)
    if (!exec_attr_is_plain(attrs[i].id))
      return EXEC_INVALID_VALUE;
  CUlaunchConfig cfg = {.gridDimX = a->gx, .gridDimY = a->gy, .gridDimZ = a->gz,
                        .blockDimX = a->bx, .blockDimY = a->by, .blockDimZ = a->bz,
                        .sharedMemBytes = a->shmem, .attrs = n ? attrs : NULL, .numAttrs = n};
  int clusters = 0;
  err = CU(ex->d->OccupancyMaxActiveClusters(&clusters, f->fn, &cfg));
  r->clusters = clusters;
  return err;
}
