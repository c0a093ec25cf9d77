/*
 * Driver API: initialisation, devices and contexts. A vGPU has one context
 * on its server; the program sees a primary context per vGPU and may make
 * more (cuCtxCreate), each standing for its vGPU's one. A thread's current
 * context is also the runtime front end's current device, so the two front
 * ends always agree on where a call goes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "shim/driver/cu.h"

#define CTX_MAGIC 0x58544346u /* "FCTX" */

struct ferry_cuctx {
  uint32_t magic;
  int vgpu;
  int primary;
  unsigned flags;
};

static struct ferry_cuctx primaries[FERRY_MAX_VGPUS];
static int primary_refs[FERRY_MAX_VGPUS];     /* under ctx_lock */
static unsigned primary_flags[FERRY_MAX_VGPUS]; /* under ctx_lock */
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static int cu_inited; /* atomic: cuInit succeeded */

CUresult ferry_cu_ready(void) {
  /* a runtime front end that connected counts: NVIDIA's runtime calls cuInit itself */
  if (!__atomic_load_n(&cu_inited, __ATOMIC_ACQUIRE) && !__atomic_load_n(&ferry.count, __ATOMIC_ACQUIRE))
    return CUDA_ERROR_NOT_INITIALIZED;
  return ferry_cu_result(ferry_ensure_init());
}

CUresult cuInit(unsigned int flags) {
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  int rc = ferry_ensure_init();
  if (!rc) __atomic_store_n(&cu_inited, 1, __ATOMIC_RELEASE);
  /* like the driver on a machine without GPUs */
  return rc == cudaErrorNoDevice || rc == cudaErrorInitializationError ? CUDA_ERROR_NO_DEVICE
                                                                      : ferry_cu_result(rc);
}

/* the servers' driver; with none reachable, the CUDA this library was built
   for: there is a driver (this one), only no device, so that NVIDIA's
   runtime says "no CUDA-capable device" rather than "driver insufficient" */
CUresult cuDriverGetVersion(int *version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = FERRY_CU_RT(cudaDriverGetVersion(version));
  if (!rc && !*version) *version = CUDA_VERSION;
  return rc;
}

CUcontext ferry_cu_primary(int vgpu) {
  struct ferry_cuctx *c = &primaries[vgpu];
  if (!c->magic) *c = (struct ferry_cuctx){CTX_MAGIC, vgpu, 1, 0};
  return (CUcontext)c;
}

static struct ferry_cuctx *ctx_of(CUcontext h) {
  struct ferry_cuctx *c = (struct ferry_cuctx *)h;
  if (!c) return NULL;
  /* primaries are ours by address; created contexts carry the magic */
  if (c >= primaries && c < primaries + FERRY_MAX_VGPUS) return c->vgpu < ferry.count ? c : NULL;
  return c->magic == CTX_MAGIC && c->vgpu >= 0 && c->vgpu < ferry.count ? c : NULL;
}

struct ferry_vgpu *ferry_cu_ctx_vgpu(CUcontext ctx) {
  struct ferry_cuctx *c = ctx_of(ctx);
  return c ? &ferry.vgpus[c->vgpu] : NULL;
}

/* the thread's current context, explicit or its device's active primary one */
static struct ferry_cuctx *current_ctx(struct ferry_thread *t) {
  if (t->ctx) return t->ctx;
  if (t->ctx_none || t->device < 0 || t->device >= ferry.count) return NULL;
  if (!__atomic_load_n(&ferry.vgpus[t->device].primary_active, __ATOMIC_RELAXED)) return NULL;
  return (struct ferry_cuctx *)ferry_cu_primary(t->device);
}

static void make_current(struct ferry_thread *t, struct ferry_cuctx *c) {
  t->ctx = c;
  t->ctx_none = c == NULL;
  if (c) t->device = c->vgpu;
}

CUresult ferry_cu_current(struct ferry_vgpu **v) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_thread *t = ferry_thread();
  struct ferry_cuctx *c = current_ctx(t);
  if (!c || c->magic != CTX_MAGIC) return CUDA_ERROR_INVALID_CONTEXT;
  t->device = c->vgpu;
  *v = &ferry.vgpus[c->vgpu];
  return ferry_dead(*v) ? CUDA_ERROR_DEVICE_UNAVAILABLE : CUDA_SUCCESS;
}

/* ---- devices ---- */
static CUresult device_at(CUdevice dev, struct ferry_vgpu **v) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  if (dev < 0 || dev >= ferry.count) return CUDA_ERROR_INVALID_DEVICE;
  *v = &ferry.vgpus[dev];
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (!rc) *count = ferry.count;
  return rc;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  struct ferry_vgpu *v;
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = device_at(ordinal, &v);
  if (!rc) *dev = ordinal;
  return rc;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  struct ferry_vgpu *v;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = device_at(dev, &v);
  if (!rc) snprintf(name, (size_t)len, "%s", v->props.name);
  return rc;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
  struct ferry_vgpu *v;
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = device_at(dev, &v);
  if (!rc) memcpy(uuid->bytes, v->uuid, sizeof uuid->bytes);
  return rc;
}
#undef cuDeviceGetUuid /* the first version has the same form */
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
  struct ferry_vgpu *v;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = device_at(dev, &v);
  if (!rc) *bytes = v->total_mem;
  return rc;
}

/* CUdevice_attribute and cudaDeviceAttr share their numbers */
CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attr, CUdevice dev) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  return rc ? rc : FERRY_CU_RT(cudaDeviceGetAttribute(value, (enum cudaDeviceAttr)attr, dev));
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev) {
  if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  return rc ? rc : cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
  if (!can) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  return rc ? rc : FERRY_CU_RT(cudaDeviceCanAccessPeer(can, dev, peer));
}

/* ---- primary contexts ---- */
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  struct ferry_vgpu *v;
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = device_at(dev, &v);
  if (rc) return rc;
  pthread_mutex_lock(&ctx_lock);
  primary_refs[dev]++;
  pthread_mutex_unlock(&ctx_lock);
  __atomic_store_n(&v->primary_active, 1, __ATOMIC_RELAXED);
  *ctx = ferry_cu_primary(dev);
  return CUDA_SUCCESS;
}

/* The vGPU's remote context lives as long as the program: a last release
   does not free what it holds (CUDA would), so a later retain finds it. */
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  struct ferry_vgpu *v;
  CUresult rc = device_at(dev, &v);
  if (rc) return rc;
  pthread_mutex_lock(&ctx_lock);
  rc = primary_refs[dev] > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  if (!rc) primary_refs[dev]--;
  pthread_mutex_unlock(&ctx_lock);
  return rc;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  struct ferry_vgpu *v;
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = device_at(dev, &v);
  if (rc) return rc;
  pthread_mutex_lock(&ctx_lock);
  *flags = primary_flags[dev];
  pthread_mutex_unlock(&ctx_lock);
  *active = __atomic_load_n(&v->primary_active, __ATOMIC_RELAXED);
  return CUDA_SUCCESS;
}

/* runs a runtime entry point with device dev current, the thread's own restored */
#define ON_DEVICE(dev, expr)                                                                   \
  __extension__({                                                                              \
    struct ferry_thread *od_t_ = ferry_thread();                                               \
    int od_keep_ = od_t_->device;                                                              \
    od_t_->device = (dev);                                                                     \
    CUresult od_rc_ = FERRY_CU_RT(expr);                                                       \
    od_t_->device = od_keep_;                                                                  \
    od_rc_;                                                                                    \
  })

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  struct ferry_vgpu *v;
  CUresult rc = device_at(dev, &v);
  if (rc) return rc;
  /* CU_CTX_SCHED_* and CU_CTX_LMEM_RESIZE_TO_MAX equal the cudaDevice* flags */
  rc = ON_DEVICE(dev, cudaSetDeviceFlags(flags));
  if (!rc) {
    pthread_mutex_lock(&ctx_lock);
    primary_flags[dev] = flags;
    pthread_mutex_unlock(&ctx_lock);
  }
  return rc;
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  struct ferry_vgpu *v;
  CUresult rc = device_at(dev, &v);
  return rc ? rc : ON_DEVICE(dev, cudaDeviceReset());
}

/* ---- created contexts and the context stack ---- */
CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev) {
  struct ferry_vgpu *v;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (params && (params->execAffinityParams || params->numExecAffinityParams || params->cigParams))
    return ferry_cu_unsupported("cuCtxCreate with execution affinity or CIG parameters");
  CUresult rc = device_at(dev, &v);
  if (rc) return rc;
  struct ferry_cuctx *c = calloc(1, sizeof *c);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  *c = (struct ferry_cuctx){CTX_MAGIC, dev, 0, flags};
  struct ferry_thread *t = ferry_thread();
  /* the new context is pushed onto the thread's stack */
  if (t->ctx_depth < FERRY_CTX_STACK) t->ctx_stack[t->ctx_depth++] = current_ctx(t);
  make_current(t, c);
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

/* A created context stands for its vGPU's one remote context: destroying
   it frees nothing there (the memory, modules and streams made in it stay
   until the program ends). Its handle stays readable, marked dead. */
CUresult cuCtxDestroy_v2(CUcontext ctx) {
  struct ferry_cuctx *c = ctx_of(ctx);
  if (!c || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
  struct ferry_thread *t = ferry_thread();
  if (t->ctx == c) make_current(t, NULL);
  for (int i = 0; i < t->ctx_depth; i++)
    if (t->ctx_stack[i] == c) t->ctx_stack[i] = NULL;
  c->magic = 0;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  *pctx = (CUcontext)current_ctx(ferry_thread());
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_cuctx *c = NULL;
  if (ctx && !(c = ctx_of(ctx))) return CUDA_ERROR_INVALID_CONTEXT;
  make_current(ferry_thread(), c);
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_cuctx *c = ctx_of(ctx);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  struct ferry_thread *t = ferry_thread();
  if (t->ctx_depth == FERRY_CTX_STACK) return ferry_cu_unsupported("a context stack deeper than 16");
  t->ctx_stack[t->ctx_depth++] = current_ctx(t);
  make_current(t, c);
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_thread *t = ferry_thread();
  struct ferry_cuctx *c = current_ctx(t);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = (CUcontext)c;
  make_current(t, t->ctx_depth ? t->ctx_stack[--t->ctx_depth] : NULL);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *dev) {
  struct ferry_vgpu *v;
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_current(&v);
  if (!rc) *dev = v->index;
  return rc;
}

CUresult cuCtxGetFlags(unsigned int *flags) {
  struct ferry_vgpu *v;
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_current(&v);
  if (rc) return rc;
  struct ferry_cuctx *c = current_ctx(ferry_thread());
  pthread_mutex_lock(&ctx_lock);
  *flags = c->primary ? primary_flags[c->vgpu] : c->flags;
  pthread_mutex_unlock(&ctx_lock);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  if (ctx && !ctx_of(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  *version = 3020; /* contexts of the _v2 API, as the driver reports */
  return CUDA_SUCCESS;
}

/* calls on the current context's device */
#define ON_CURRENT(expr)                                                                       \
  __extension__({                                                                              \
    struct ferry_vgpu *oc_v_;                                                                  \
    CUresult oc_rc_ = ferry_cu_current(&oc_v_);                                                \
    oc_rc_ ? oc_rc_ : FERRY_CU_RT(expr);                                                       \
  })

CUresult cuCtxSynchronize(void) { return ON_CURRENT(cudaDeviceSynchronize()); }
/* CUlimit and cudaLimit, CUfunc_cache and cudaFuncCache share their numbers */
CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  return ON_CURRENT(cudaDeviceSetLimit((enum cudaLimit)limit, value));
}
CUresult cuCtxGetLimit(size_t *value, CUlimit limit) {
  return ON_CURRENT(cudaDeviceGetLimit(value, (enum cudaLimit)limit));
}
CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
  return ON_CURRENT(cudaDeviceGetStreamPriorityRange(least, greatest));
}

/* CUDA 13's forms that name the context */
CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  if (!ctx) return cuCtxSynchronize();
  struct ferry_vgpu *v = ferry_cu_ctx_vgpu(ctx);
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  return v ? ON_DEVICE(v->index, cudaDeviceSynchronize()) : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuCtxGetDevice_v2(CUdevice *dev, CUcontext ctx) {
  if (!ctx) return cuCtxGetDevice(dev);
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_vgpu *v = ferry_cu_ctx_vgpu(ctx);
  if (!v) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = v->index;
  return CUDA_SUCCESS;
}

/* the first versions of these have the forms of their _v2 */
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxSetFlags
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }
CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }
CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

/* ---- peers: between the current context's device and another's ---- */
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  struct ferry_vgpu *p = ferry_cu_ctx_vgpu(peer);
  if (!p) return CUDA_ERROR_INVALID_CONTEXT;
  return ON_CURRENT(cudaDeviceEnablePeerAccess(p->index, flags));
}
CUresult cuCtxDisablePeerAccess(CUcontext peer) {
  struct ferry_vgpu *p = ferry_cu_ctx_vgpu(peer);
  if (!p) return CUDA_ERROR_INVALID_CONTEXT;
  return ON_CURRENT(cudaDeviceDisablePeerAccess(p->index));
}

/* the CUDA 3.2 form */
#undef cuCtxCreate
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  return cuCtxCreate_v4(pctx, NULL, flags, dev);
}

/* ---- settings a remote GPU keeps as CUDA would report them ---- */
static CUfunc_cache cache_config[FERRY_MAX_VGPUS]; /* what cuCtxSetCacheConfig last set */

CUresult cuCtxSetCacheConfig(CUfunc_cache config) {
  struct ferry_vgpu *v;
  CUresult rc = ferry_cu_current(&v);
  if (!rc) rc = FERRY_CU_RT(cudaDeviceSetCacheConfig((enum cudaFuncCache)config));
  if (!rc) __atomic_store_n(&cache_config[v->index], config, __ATOMIC_RELAXED);
  return rc;
}
CUresult cuCtxGetCacheConfig(CUfunc_cache *config) {
  struct ferry_vgpu *v;
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_current(&v);
  if (!rc) *config = __atomic_load_n(&cache_config[v->index], __ATOMIC_RELAXED);
  return rc;
}
/* shared memory bank sizes are fixed since Volta: the calls only report it */
CUresult cuCtxGetSharedMemConfig(CUsharedconfig *config) {
  struct ferry_vgpu *v;
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_current(&v);
  if (!rc) *config = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
  return rc;
}
CUresult cuCtxSetSharedMemConfig(CUsharedconfig config) {
  struct ferry_vgpu *v;
  (void)config;
  return ferry_cu_current(&v);
}
CUresult cuFuncSetSharedMemConfig(CUfunction f, CUsharedconfig config) {
  (void)f, (void)config;
  return ferry_cu_ready();
}

/* PCI addresses as the device's attributes give them */
CUresult cuDeviceGetPCIBusId(char *out, int len, CUdevice dev) {
  int domain, bus, device;
  if (!out || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev);
  if (!rc) rc = cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev);
  if (!rc) rc = cuDeviceGetAttribute(&device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev);
  if (!rc) snprintf(out, (size_t)len, "%08x:%02x:%02x.0", domain, bus, device);
  return rc;
}
/* two vGPUs may be the same GPU of one server, or GPUs of two servers with
   the same address: the first with that address answers */
CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *id) {
  unsigned domain = 0, bus, device;
  if (!dev || !id) return CUDA_ERROR_INVALID_VALUE;
  if (sscanf(id, "%x:%x:%x", &domain, &bus, &device) != 3 && sscanf(id, "%x:%x", &bus, &device) != 2)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  for (int d = 0; !rc && d < ferry.count; d++) {
    int a, b, c;
    if (cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d) ||
        cuDeviceGetAttribute(&b, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d) ||
        cuDeviceGetAttribute(&c, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d))
      continue;
    if ((unsigned)a == domain && (unsigned)b == bus && (unsigned)c == device) {
      *dev = d;
      return CUDA_SUCCESS;
    }
  }
  return rc ? rc : CUDA_ERROR_INVALID_DEVICE;
}

/* vGPUs never reach each other's memory (ferry copies between them through
   the host): no peer attribute holds */
CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attr, CUdevice src, CUdevice dst) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  if (src < 0 || src >= ferry.count || dst < 0 || dst >= ferry.count || src == dst)
    return CUDA_ERROR_INVALID_DEVICE;
  (void)attr;
  *value = 0;
  return CUDA_SUCCESS;
}

/* persisting L2 lines are a performance hint: nothing to reset for correctness */
CUresult cuCtxResetPersistingL2Cache(void) {
  struct ferry_vgpu *v;
  return ferry_cu_current(&v);
}
