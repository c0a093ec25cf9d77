/*
 * Driver API: libraries and kernels (cuLibrary*, cuKernel*), the CUDA 12+
 * way NVIDIA's runtime loads a program's fat binaries, static runtime and
 * math libraries included. A library belongs to no context: it is sent to
 * a vGPU only when one of its kernels or globals is first used there (a
 * library of cuBLAS holds hundreds of MiB a program may never touch), as
 * the runtime front end does with registered fat binaries. The load and
 * each kernel's resolution are recorded calls, so a migration replays them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/image.h"
#include "common/log.h"
#include "protocol/layout.h"
#include "shim/driver/cu.h"

#define LIB_MAGIC 0x42494c46u    /* "FLIB" */
#define KERNEL_MAGIC 0x4e524b46u /* "FKRN" */

struct cu_kernel;
struct cu_library {
  uint32_t magic;
  struct cu_library *next; /* every library ever loaded (forget_vgpu) */
  uint32_t id; /* its module id on every vGPU */
  const void *image;
  uint64_t size;
  void *owned; /* a copy, when the caller may free its image */
  pthread_mutex_t lock;
  unsigned char loaded[FERRY_MAX_VGPUS];
  struct cu_kernel **kernels;
  uint32_t nkernels, cap;
};

struct cu_kernel {
  uint32_t magic;
  struct cu_library *lib;
  char *name;
  uint32_t index[FERRY_MAX_VGPUS];
  unsigned char present[FERRY_MAX_VGPUS]; /* resolved on that vGPU */
  int absent; /* the library does not hold it (images never change) */
  int have_layout;
  struct ferry_layout layout;
  int max_dynamic_smem;
};

static pthread_mutex_t libs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cu_library *libs;

/* the runtime front end's cudaDeviceReset (the core's device_reset hook):
   modules die, libraries load again when next used, globals are looked up
   again, program VMM handles die */
static void forget_vgpu(int vgpu) {
  pthread_mutex_lock(&libs_lock);
  for (struct cu_library *l = libs; l; l = l->next) {
    pthread_mutex_lock(&l->lock);
    l->loaded[vgpu] = 0;
    for (uint32_t i = 0; i < l->nkernels; i++) l->kernels[i]->present[vgpu] = 0;
    pthread_mutex_unlock(&l->lock);
  }
  pthread_mutex_unlock(&libs_lock);
  ferry_cu_modules_forget(vgpu);
  ferry_cu_vmm_forget(vgpu);
}
__attribute__((constructor)) static void reset_hook(void) { ferry_hooks.device_reset = forget_vgpu; }

static CUresult library_load(CUlibrary *out, const void *code, unsigned nopts,
                             const CUlibraryOption *opts, void **vals) {
  uint64_t size;
  const char *kind;
  if (!out || !code) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  if (ferry_image_size(code, UINT64_MAX, &size, &kind)) return CUDA_ERROR_INVALID_IMAGE;
  int preserved = 0;
  for (unsigned i = 0; i < nopts && opts; i++) {
    if (opts[i] == CU_LIBRARY_BINARY_IS_PRESERVED) preserved = vals && vals[i];
    else if (opts[i] == CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE && vals && vals[i])
      return ferry_cu_unsupported("cuLibraryLoadData with a host universal function and data table");
  }
  struct cu_library *l = calloc(1, sizeof *l);
  if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
  l->magic = LIB_MAGIC;
  l->size = size;
  /* the runtime passes the wrapper __cudaRegisterFatBinary got: the
     container it points at lives as long as the program */
  if (!strcmp(kind, "wrapper")) {
    l->image = ((const struct { int magic, version; const void *data; void *rest; } *)code)->data;
  } else if (preserved) {
    l->image = code;
  } else {
    if (!(l->owned = malloc(size))) {
      free(l);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(l->owned, code, size);
    l->image = l->owned;
  }
  l->id = ferry_module_id_new();
  pthread_mutex_init(&l->lock, NULL);
  pthread_mutex_lock(&libs_lock);
  l->next = libs;
  libs = l;
  pthread_mutex_unlock(&libs_lock);
  *out = (CUlibrary)l;
  return CUDA_SUCCESS;
}

/* JIT options change only logs and compile settings the server's driver chooses */
CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jit_opts, void **jit_vals,
                           unsigned int njit, CUlibraryOption *opts, void **vals, unsigned int nopts) {
  (void)jit_opts, (void)jit_vals, (void)njit;
  return library_load(lib, code, nopts, opts, vals);
}

CUresult cuLibraryLoadFromFile(CUlibrary *lib, const char *path, CUjit_option *jit_opts,
                               void **jit_vals, unsigned int njit, CUlibraryOption *opts,
                               void **vals, unsigned int nopts) {
  (void)jit_opts, (void)jit_vals, (void)njit, (void)opts, (void)vals, (void)nopts;
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  size_t len;
  char *buf = ferry_cu_read_file(path, &len);
  if (!buf) return CUDA_ERROR_FILE_NOT_FOUND;
  CUresult rc = library_load(lib, buf, 0, NULL, NULL); /* copies: not preserved */
  free(buf);
  return rc;
}

static struct cu_library *lib_of(CUlibrary h) {
  struct cu_library *l = (struct cu_library *)h;
  return l && l->magic == LIB_MAGIC ? l : NULL;
}

struct cu_kernel *ferry_cu_kernel_of(const void *h) {
  struct cu_kernel *k = (struct cu_kernel *)h;
  return k && k->magic == KERNEL_MAGIC ? k : NULL;
}

/* sends the library to v the first time v needs it; l->lock held */
static CUresult ensure_loaded(struct cu_library *l, struct ferry_vgpu *v) {
  if (l->loaded[v->index]) return CUDA_SUCCESS;
  struct ferry_module_load_args a = {.module = l->id};
  struct ferry_module_load_rets r;
  struct ferry_bulk bulk = {.in = l->image, .in_len = l->size};
  CUresult rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_module_load, &a, &r, &bulk));
  if (!rc) l->loaded[v->index] = 1;
  return rc;
}

CUresult cuLibraryUnload(CUlibrary h) {
  struct cu_library *l = lib_of(h);
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  CUresult rc = ferry_cu_ready(), first = CUDA_SUCCESS;
  if (rc) return rc;
  pthread_mutex_lock(&l->lock);
  for (int i = 0; i < ferry.count; i++) {
    if (!l->loaded[i] || ferry_dead(&ferry.vgpus[i])) continue;
    struct ferry_module_unload_args a = {l->id};
    rc = FERRY_CU_RT(ferry_call(&ferry.vgpus[i], FERRY_CALL_module_unload, &a, NULL, NULL));
    if (rc && !first) first = rc;
    l->loaded[i] = 0;
  }
  for (uint32_t i = 0; i < l->nkernels; i++) l->kernels[i]->magic = 0; /* they die with it */
  l->magic = 0;
  pthread_mutex_unlock(&l->lock);
  free(l->owned);
  l->owned = NULL;
  return first;
}

/* A kernel is known by name at once; it is resolved on a vGPU (and the
   library loaded there) when it is first used on it. */
CUresult cuLibraryGetKernel(CUkernel *out, CUlibrary h, const char *name) {
  struct cu_library *l = lib_of(h);
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&l->lock);
  struct cu_kernel *k = NULL;
  for (uint32_t i = 0; i < l->nkernels && !k; i++)
    if (!strcmp(l->kernels[i]->name, name)) k = l->kernels[i];
  CUresult rc = CUDA_SUCCESS;
  if (!k) {
    if (l->nkernels == l->cap) {
      uint32_t cap = l->cap ? l->cap * 2 : 8;
      struct cu_kernel **p = realloc(l->kernels, cap * sizeof *p);
      if (p) l->kernels = p, l->cap = cap;
    }
    k = l->nkernels < l->cap ? calloc(1, sizeof *k) : NULL;
    if (k && !(k->name = strdup(name))) {
      free(k);
      k = NULL;
    }
    if (k) {
      k->magic = KERNEL_MAGIC;
      k->lib = l;
      l->kernels[l->nkernels++] = k;
    } else {
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  pthread_mutex_unlock(&l->lock);
  /* CUDA says at once whether the name exists: ask the current vGPU when there is one */
  struct ferry_vgpu *v;
  struct ferry_cu_fn fn;
  if (!rc && !ferry_cu_current(&v) && (rc = ferry_cu_kernel_on(k, v, &fn)) == CUDA_ERROR_NOT_FOUND)
    return rc;
  if (!rc) *out = (CUkernel)k;
  return rc == CUDA_ERROR_NOT_FOUND ? rc : (rc ? rc : CUDA_SUCCESS);
}

CUresult ferry_cu_kernel_on(struct cu_kernel *k, struct ferry_vgpu *v, struct ferry_cu_fn *out) {
  struct cu_library *l = k->lib;
  /* every launch asks: once resolved on v, no lock (present is set last) */
  if (__atomic_load_n(&k->present[v->index], __ATOMIC_ACQUIRE) && k->magic == KERNEL_MAGIC) {
    *out = (struct ferry_cu_fn){l->id << 16 | k->index[v->index], &k->layout, &k->max_dynamic_smem};
    return CUDA_SUCCESS;
  }
  pthread_mutex_lock(&l->lock);
  CUresult rc = k->magic == KERNEL_MAGIC ? ensure_loaded(l, v) : CUDA_ERROR_INVALID_HANDLE;
  if (!rc && k->absent) rc = CUDA_ERROR_NOT_FOUND;
  if (!rc && !k->present[v->index]) {
    struct ferry_module_function_args a = {.module = l->id, .name = k->name};
    struct ferry_module_function_rets r;
    rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_module_function, &a, &r, NULL));
    if (rc == CUDA_ERROR_NOT_FOUND) k->absent = 1;
    struct ferry_layout layout;
    const unsigned char *p = r.layout.ptr;
    if (!rc && ferry_layout_read(&p, p + r.layout.len, &layout)) rc = CUDA_ERROR_INVALID_IMAGE;
    if (!rc) {
      if (!k->have_layout) {
        k->layout = layout;
        k->have_layout = 1;
      } else {
        if (!ferry_layout_equal(&k->layout, &layout)) rc = CUDA_ERROR_INVALID_IMAGE;
        ferry_layout_free(&layout);
      }
    }
    if (!rc) {
      k->index[v->index] = r.index;
      __atomic_store_n(&k->present[v->index], 1, __ATOMIC_RELEASE);
    }
  }
  if (!rc) *out = (struct ferry_cu_fn){l->id << 16 | k->index[v->index], &k->layout, &k->max_dynamic_smem};
  pthread_mutex_unlock(&l->lock);
  return rc;
}

CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary h, const char *name) {
  struct cu_library *l = lib_of(h);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  struct ferry_vgpu *v;
  CUresult rc = ferry_cu_current(&v);
  if (rc) return rc;
  pthread_mutex_lock(&l->lock);
  rc = ensure_loaded(l, v);
  pthread_mutex_unlock(&l->lock);
  return rc ? rc : ferry_cu_global(v, l->id, name, dptr, bytes);
}

CUresult cuKernelGetLibrary(CUlibrary *lib, CUkernel h) {
  struct cu_kernel *k = ferry_cu_kernel_of(h);
  if (!lib) return CUDA_ERROR_INVALID_VALUE;
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  *lib = (CUlibrary)k->lib;
  return CUDA_SUCCESS;
}

CUresult cuKernelGetName(const char **name, CUkernel h) {
  struct cu_kernel *k = ferry_cu_kernel_of(h);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  *name = k->name;
  return CUDA_SUCCESS;
}

/* per-device kernel calls: run with that device's primary context current */
#define ON_DEVICE_CTX(dev, expr)                                                               \
  __extension__({                                                                              \
    struct ferry_thread *od_t_ = ferry_thread();                                               \
    struct ferry_cuctx *od_ctx_ = od_t_->ctx;                                                  \
    int od_none_ = od_t_->ctx_none, od_dev_ = od_t_->device;                                   \
    CUresult od_rc_ = ferry_cu_ready();                                                        \
    if (!od_rc_ && ((dev) < 0 || (dev) >= ferry.count)) od_rc_ = CUDA_ERROR_INVALID_DEVICE;    \
    if (!od_rc_) {                                                                             \
      od_t_->ctx = (struct ferry_cuctx *)ferry_cu_primary(dev);                                \
      od_t_->ctx_none = 0;                                                                     \
      od_rc_ = (expr);                                                                         \
    }                                                                                          \
    od_t_->ctx = od_ctx_, od_t_->ctx_none = od_none_, od_t_->device = od_dev_;                 \
    od_rc_;                                                                                    \
  })

CUresult cuKernelGetAttribute(int *value, CUfunction_attribute attr, CUkernel k, CUdevice dev) {
  return ON_DEVICE_CTX(dev, cuFuncGetAttribute(value, attr, (CUfunction)k));
}
CUresult cuKernelSetAttribute(CUfunction_attribute attr, int value, CUkernel k, CUdevice dev) {
  return ON_DEVICE_CTX(dev, cuFuncSetAttribute((CUfunction)k, attr, value));
}
CUresult cuKernelSetCacheConfig(CUkernel k, CUfunc_cache config, CUdevice dev) {
  return ON_DEVICE_CTX(dev, cuFuncSetCacheConfig((CUfunction)k, config));
}

CUresult cuKernelGetParamInfo(CUkernel h, size_t index, size_t *offset, size_t *size) {
  struct cu_kernel *k = ferry_cu_kernel_of(h);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  if (!k->have_layout) {
    struct ferry_vgpu *v;
    struct ferry_cu_fn fn;
    CUresult rc = ferry_cu_current(&v);
    if (!rc) rc = ferry_cu_kernel_on(k, v, &fn);
    if (rc) return rc;
  }
  if (index >= k->layout.nparams) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = k->layout.offsets[index];
  if (size) *size = k->layout.sizes[index];
  return CUDA_SUCCESS;
}
