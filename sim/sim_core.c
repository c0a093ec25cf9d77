/*
 * The simulated devices (FERRY_SIM_GPUS, default 1) and their primary
 * contexts: initialisation, device queries, context retain/reset, limits,
 * the handle registry and the ops table itself. Error codes follow the
 * real driver so that the executor's error paths are exercised in CI.
 */
#include "protocol/nvlink.h"
#include "sim/sim.h"

#include <dlfcn.h>
#include <search.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/setting.h"

struct sim_state sim = {.lock = PTHREAD_MUTEX_INITIALIZER};
static _Thread_local struct sim_dev *current_ctx;

struct sim_dev *sim_cur(void) { return current_ctx; }

uint64_t sim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

CUresult sim_enter_noctx(void) {
  pthread_mutex_lock(&sim.lock);
  if (!sim.initialized || sim.torn_down) {
    pthread_mutex_unlock(&sim.lock);
    return sim.torn_down ? CUDA_ERROR_DEINITIALIZED : CUDA_ERROR_NOT_INITIALIZED;
  }
  return CUDA_SUCCESS;
}

static void tear_down_at_exit(void) {
  pthread_mutex_lock(&sim.lock);
  sim.torn_down = 1;
  pthread_mutex_unlock(&sim.lock);
}

CUresult sim_enter(void) {
  CUresult r = sim_enter_noctx();
  if (r != CUDA_SUCCESS)
    return r;
  const struct sim_dev *c = current_ctx;
  if (c == NULL)
    r = CUDA_ERROR_INVALID_CONTEXT;
  else if (c->sticky != CUDA_SUCCESS) /* that device's only */
    r = c->sticky;
  else if (c->refs == 0)
    r = CUDA_ERROR_INVALID_CONTEXT;
  if (r != CUDA_SUCCESS)
    pthread_mutex_unlock(&sim.lock);
  return r;
}

CUresult sim_leave(CUresult r) {
  pthread_mutex_unlock(&sim.lock);
  return r;
}

/* ---- handle registry ---- */

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y ? -1 : x > y;
}

int sim_register(void *obj) {
  struct sim_obj *o = obj;
  /* memory handles carry the device of their memory (sim_vmm.c) */
  if (o->kind != SIM_MEMHANDLE)
    o->dev = current_ctx ? current_ctx->dev : 0;
  return tsearch(obj, &sim.registry, cmp_ptr) ? 0 : -1;
}

void sim_unregister(void *obj) { tdelete(obj, &sim.registry, cmp_ptr); }

void *sim_lookup_any(const void *handle, enum sim_kind kind) {
  if (!handle)
    return NULL;
  void **node = tfind(handle, &sim.registry, cmp_ptr);
  if (!node)
    return NULL;
  struct sim_obj *o = *node;
  return o->kind == kind ? o : NULL;
}

/* a handle of another context is refused like a made-up one
   (CUDA_ERROR_INVALID_HANDLE at the callers); memory handles are not
   context objects */
void *sim_lookup(const void *handle, enum sim_kind kind) {
  struct sim_obj *o = sim_lookup_any(handle, kind);
  if (o && kind != SIM_MEMHANDLE && (!current_ctx || o->dev != current_ctx->dev))
    return NULL;
  return o;
}

int sim_stream_ok(CUstream s) {
  return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD ||
         sim_lookup(s, SIM_STREAM) != NULL;
}

/* twalk has no user argument; the lock serialises its use of these */
static struct sim_obj **walk_items;
static size_t walk_n, walk_cap;
static void collect(const void *node, VISIT which, int depth) {
  (void)depth;
  if (which != postorder && which != leaf)
    return;
  if (walk_n == walk_cap) {
    size_t cap = walk_cap ? walk_cap * 2 : 64;
    struct sim_obj **p = realloc(walk_items, cap * sizeof *p);
    if (!p)
      return;
    walk_items = p;
    walk_cap = cap;
  }
  walk_items[walk_n++] = *(struct sim_obj *const *)node;
}

void sim_ctx_destroy_objects(int dev) {
  walk_n = 0;
  twalk(sim.registry, collect);
  for (size_t i = 0; i < walk_n; i++) /* only that context's objects */
    if (walk_items[i]->dev != dev || walk_items[i]->kind == SIM_MEMHANDLE ||
        walk_items[i]->kind == SIM_GRAPH_NODE) /* nodes go with their graph */
      walk_items[i] = NULL;
  /* functions belong to modules: free modules (which free their functions)
     after dropping every function from the registry */
  for (size_t i = 0; i < walk_n; i++) {
    struct sim_obj *o = walk_items[i];
    if (!o)
      continue;
    if (o->kind == SIM_STREAM || o->kind == SIM_EVENT || o->kind == SIM_FUNC) {
      sim_unregister(o);
      if (o->kind != SIM_FUNC)
        free(o);
      walk_items[i] = NULL;
    } else if (o->kind == SIM_GRAPH || o->kind == SIM_GRAPH_EXEC) {
      sim_unregister(o);
      sim_graph_obj_free(o);
      walk_items[i] = NULL;
    } else if (o->kind == SIM_LINK) {
      sim_unregister(o);
      sim_link_free(o);
      walk_items[i] = NULL;
    } else if (o->kind == SIM_ARRAY || o->kind == SIM_TEXOBJ || o->kind == SIM_SURFOBJ) {
      sim_unregister(o); /* context-owned too (sim_array.c) */
      sim_array_obj_free(o);
      walk_items[i] = NULL;
    }
  }
  for (size_t i = 0; i < walk_n; i++) {
    struct sim_obj *o = walk_items[i];
    if (o && o->kind == SIM_MODULE) {
      sim_unregister(o);
      sim_module_free((struct sim_module *)o);
    }
  }
  free(walk_items);
  walk_items = NULL;
  walk_n = walk_cap = 0;
}

static void reset_context_state(struct sim_dev *c) {
  sim_ctx_destroy_objects(c->dev);
  c->sticky = c->poisoned ? CUDA_ERROR_CONTEXT_IS_DESTROYED : CUDA_SUCCESS;
  c->limits[CU_LIMIT_STACK_SIZE] = 1024;
  c->limits[CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20;
  c->limits[CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20;
  c->limits[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2;
  c->limits[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
  c->limits[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 32;
  c->limits[CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0;
  c->cache_config = CU_FUNC_CACHE_PREFER_NONE;
}

/* ---- initialisation and device queries ---- */

/* FERRY_SIM_GPUS: 1..SIM_MAX_GPUS; anything else is reported and means 1 */
static int gpu_count_from_env(void) {
  const char *e = getenv("FERRY_SIM_GPUS");
  if (!e || !*e)
    return 1;
  uint64_t n;
  if (ferry_parse_uint(e, 1, SIM_MAX_GPUS, &n)) {
    fprintf(stderr, "ferry sim: FERRY_SIM_GPUS=%s is not in 1..%d; simulating 1 GPU\n", e,
            SIM_MAX_GPUS);
    return 1;
  }
  return (int)n;
}

CUresult sim_Init(unsigned int flags) {
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&sim.lock);
  if (!sim.initialized) {
    sim.initialized = 1;
    atexit(tear_down_at_exit);
    sim.ngpus = gpu_count_from_env();
    for (int k = 0; k < sim.ngpus; k++) {
      sim.devs[k].dev = k;
      reset_context_state(&sim.devs[k]);
    }
  }
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_DriverGetVersion(int *version) {
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult sim_DeviceGetCount(int *count) {
  CUresult r = sim_enter_noctx();
  if (r)
    return r;
  if (!count)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  *count = sim.ngpus;
  return sim_leave(CUDA_SUCCESS);
}

static CUresult enter_dev(CUdevice dev) {
  CUresult r = sim_enter_noctx();
  if (r)
    return r;
  if (dev < 0 || dev >= sim.ngpus)
    return sim_leave(CUDA_ERROR_INVALID_DEVICE);
  return CUDA_SUCCESS;
}

CUresult sim_DeviceGet(CUdevice *dev, int ordinal) {
  CUresult r = sim_enter_noctx();
  if (r)
    return r;
  if (!dev)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if (ordinal < 0 || ordinal >= sim.ngpus)
    return sim_leave(CUDA_ERROR_INVALID_DEVICE);
  *dev = ordinal;
  return sim_leave(CUDA_SUCCESS);
}

/* every pair of simulated GPUs reaches each other, as NVLinked ones do */
CUresult sim_DeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
  CUresult r = enter_dev(dev);
  if (r)
    return r;
  if (!can)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if (peer < 0 || peer >= sim.ngpus)
    return sim_leave(CUDA_ERROR_INVALID_DEVICE);
  *can = peer != dev;
  return sim_leave(CUDA_SUCCESS);
}

#define SIM_DEVICE_NAME "ferry CPU simulation (sm_90)"

CUresult sim_DeviceGetName(char *name, int len, CUdevice dev) {
  CUresult r = enter_dev(dev);
  if (r)
    return r;
  if (!name || len <= 0)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  snprintf(name, (size_t)len, "%s", SIM_DEVICE_NAME);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_DeviceGetUuid(CUuuid *uuid, CUdevice dev) {
  CUresult r = enter_dev(dev);
  if (r)
    return r;
  if (!uuid)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  char id[17]; /* "ferry-sim-gpu-00", -01, ...: 16 bytes, distinct per device */
  snprintf(id, sizeof id, "ferry-sim-gpu-%02d", dev);
  memcpy(uuid->bytes, id, 16);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_DeviceTotalMem(size_t *bytes, CUdevice dev) {
  CUresult r = enter_dev(dev);
  if (r)
    return r;
  if (!bytes)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  *bytes = SIM_TOTAL_MEM;
  return sim_leave(CUDA_SUCCESS);
}

/* the PCI buses of the eight H100s of a DGX H100, so devices differ */
static const int pci_bus[SIM_MAX_GPUS] = {0x19, 0x3b, 0x4c, 0x5d, 0x9b, 0xbb, 0xcb, 0xdb};

/* what an H100 SXM reports; anything not listed is 0 */
static int device_attribute(CUdevice_attribute a, CUdevice dev) {
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return SIM_MAX_SHARED_DEFAULT;
  case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
  case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
  case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
  case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH: return 131072;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH: return 131072;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT: return 65536;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH: return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT: return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH: return 16384;
  case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
  case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return pci_bus[dev];
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
  case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return 32;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
  case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return SIM_SMEM_PER_SM;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
  case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: return 0;
  case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: return 2;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return SIM_MAX_SHARED_OPTIN;
  case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
  case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return 32505856;
  case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;
  case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
  case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return 1;
  case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: return 1;
  case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return 4;
  case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS: return 1;
  case CU_DEVICE_ATTRIBUTE_NUMA_ID: return -1;
  case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: return -1;
  default: return 0;
  }
}

CUresult sim_DeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  CUresult r = enter_dev(dev);
  if (r)
    return r;
  if (!pi || (int)attrib < 1 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  *pi = device_attribute(attrib, dev);
  return sim_leave(CUDA_SUCCESS);
}

/* ---- the primary contexts: one per device, each on its own ---- */

CUresult sim_DevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  CUresult r = enter_dev(dev);
  if (r)
    return r;
  if (!ctx)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_dev *c = &sim.devs[dev];
  if (c->poisoned)
    return sim_leave(CUDA_ERROR_ILLEGAL_ADDRESS);
  c->refs++;
  *ctx = (CUcontext)c;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_DevicePrimaryCtxRelease(CUdevice dev) {
  CUresult r = enter_dev(dev);
  if (r)
    return r;
  struct sim_dev *c = &sim.devs[dev];
  if (c->refs == 0)
    return sim_leave(CUDA_ERROR_INVALID_CONTEXT);
  /* the last release destroys the context and everything it owned */
  if (--c->refs == 0)
    reset_context_state(c);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_DevicePrimaryCtxReset(CUdevice dev) {
  CUresult r = enter_dev(dev);
  if (r)
    return r;
  /* a reset destroys the device's allocations too; it does not drop
     retains. It does not bring back a context poisoned by a kernel fault. */
  reset_context_state(&sim.devs[dev]);
  sim_vmm_destroy_dev(dev);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_DevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  CUresult r = enter_dev(dev);
  if (r)
    return r;
  const unsigned known = CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX |
                         CU_CTX_SYNC_MEMOPS;
  unsigned sched = flags & CU_CTX_SCHED_MASK;
  if ((flags & ~known) || (sched != 0 && sched != CU_CTX_SCHED_SPIN &&
                           sched != CU_CTX_SCHED_YIELD && sched != CU_CTX_SCHED_BLOCKING_SYNC))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  sim.devs[dev].flags = flags;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_CtxSetCurrent(CUcontext ctx) {
  CUresult r = sim_enter_noctx();
  if (r)
    return r;
  struct sim_dev *c = NULL;
  for (int k = 0; ctx && k < sim.ngpus; k++)
    if (ctx == (CUcontext)&sim.devs[k])
      c = &sim.devs[k];
  if (ctx != NULL && (c == NULL || c->refs == 0))
    return sim_leave(CUDA_ERROR_INVALID_CONTEXT);
  current_ctx = c;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_CtxSynchronize(void) {
  CUresult r = sim_enter();
  return r ? r : sim_leave(CUDA_SUCCESS);
}

CUresult sim_CtxSetLimit(CUlimit limit, size_t value) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if ((unsigned)limit >= CU_LIMIT_MAX)
    return sim_leave(CUDA_ERROR_UNSUPPORTED_LIMIT);
  current_ctx->limits[limit] = value;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_CtxGetLimit(size_t *value, CUlimit limit) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!value)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if ((unsigned)limit >= CU_LIMIT_MAX)
    return sim_leave(CUDA_ERROR_UNSUPPORTED_LIMIT);
  *value = current_ctx->limits[limit];
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_CtxSetCacheConfig(CUfunc_cache config) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  current_ctx->cache_config = config;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_CtxGetStreamPriorityRange(int *least, int *greatest) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (least)
    *least = 0;
  if (greatest)
    *greatest = -5;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_ProfilerStart(void) {
  CUresult r = sim_enter();
  return r ? r : sim_leave(CUDA_SUCCESS);
}

CUresult sim_ProfilerStop(void) {
  CUresult r = sim_enter();
  return r ? r : sim_leave(CUDA_SUCCESS);
}

/* ---- the ops table ---- */

/* FERRY_SIM_NVLINKS=N (0 to 9, default 0): each simulated GPU has N active
   P2P NVLinks to every other, as NVML would report them (the nvlinks call) */
static unsigned sim_nvlinks(CUdevice dev, const char *bus_id, struct ferry_nvlink *out) {
  (void)bus_id;
  const char *e = getenv("FERRY_SIM_NVLINKS");
  uint64_t per = 0;
  if (!e || !*e)
    return 0;
  if (ferry_parse_uint(e, 0, 9, &per)) {
    fprintf(stderr, "ferry sim: FERRY_SIM_NVLINKS=%s is not in 0..9; simulating none\n", e);
    return 0;
  }
  unsigned n = 0;
  for (int k = 0; k < sim.ngpus; k++)
    for (uint64_t i = 0; k != dev && i < per && n < FERRY_NVLINK_MAX; i++, n++) {
      memset(&out[n], 0, sizeof out[n]);
      out[n].link = n;
      out[n].flags = FERRY_NVLINK_P2P | FERRY_NVLINK_ACTIVE;
      snprintf(out[n].remote_bus, sizeof out[n].remote_bus, "%08x:%02x:00.0", 0u,
               (unsigned)pci_bus[k]);
    }
  return n;
}

static struct ferry_driver sim_driver = {
    .name = "sim",
#define SIM_MEMBER(member, symbol, params) .member = sim_##member,
    FERRY_DRIVER_FUNCS(SIM_MEMBER)
#undef SIM_MEMBER
    .nvlinks = sim_nvlinks,
};

const struct ferry_driver *ferry_driver_sim(const char *twins_path, char *err, size_t errlen) {
  pthread_mutex_lock(&sim.lock);
  /* a later call may name other twins (tests do); modules already loaded
     keep pointing into the old table, so the old object stays loaded */
  if (twins_path) {
    void *dl = dlopen(twins_path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
      snprintf(err, errlen, "cannot load CPU twins %s: %s", twins_path, dlerror());
      pthread_mutex_unlock(&sim.lock);
      return NULL;
    }
    const struct ferry_twin *t = dlsym(dl, "ferry_twins");
    if (!t) {
      snprintf(err, errlen, "%s exports no ferry_twins table", twins_path);
      dlclose(dl);
      pthread_mutex_unlock(&sim.lock);
      return NULL;
    }
    sim.twins_dl = dl;
    sim.twins = t;
    sim.twin_vars = dlsym(dl, "ferry_twin_vars");
  } else {
    sim.twins = NULL;
    sim.twin_vars = NULL;
  }
  pthread_mutex_unlock(&sim.lock);
  return &sim_driver;
}
