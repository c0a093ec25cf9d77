/*
 * Stream-ordered allocation and memory pools (cudaMallocAsync,
 * cudaFreeAsync, cudaMemPool*), all in the client: a pool's blocks are
 * ordinary allocations of the vGPU's arena (so a migration moves them as
 * any memory), and a block the program freed stays allocated in its pool
 * for reuse, so cudaFreeAsync forwards nothing. The rules (which block may
 * serve which stream, what a synchronization completes) are
 * common/pool.c's; here are the handles, the lock, and the points where
 * streams, events and the device synchronize (stream.c, device.c).
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <string.h>

#include "common/log.h"
#include "common/pool.h"
#include "shim/core/link.h"
#include "shim/runtime/graph.h"
#include "shim/runtime/runtime.h"

#define STREAM_PER_THREAD_ID 2u

struct ferry_mempool {
  int vgpu;
  uint64_t token; /* shared with other processes (mempool_ipc.c): its random id; else 0 */
  int destroyed; /* cudaMemPoolDestroy: its blocks go once unused and complete */
  struct ferry_pool pool;
};

/* one vGPU's pools; the lock is taken before the arena's */
static struct vgpu_pools {
  pthread_mutex_t lock;
  int used; /* atomic: a pool was made (synchronizations skip everything before) */
  struct ferry_pool_clock clock;
  struct ferry_mempool *def, *current;
  struct ferry_mempool *orphans; /* cudaMalloc memory freed with cudaFreeAsync */
  struct ferry_mempool **all;    /* every pool but orphans, destroyed ones until empty */
  size_t n, cap;
} pools[FERRY_MAX_VGPUS];
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;
static void pools_init(void) {
  for (int i = 0; i < FERRY_MAX_VGPUS; i++) pthread_mutex_init(&pools[i].lock, NULL);
}
static struct vgpu_pools *pools_of(const struct ferry_vgpu *v) {
  pthread_once(&pools_once, pools_init);
  return &pools[v->index];
}

/* the per-thread default stream is one per thread where the vGPU runs in
   this process: each thread's is its own stream here */
static uint32_t stream_key(uint32_t sid) {
  static uint32_t next;
  static _Thread_local uint32_t mine;
  if (sid != STREAM_PER_THREAD_ID) return sid;
  if (!mine) mine = 0x80000000u + __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
  return mine;
}

/* ---- blocks come from the arena ---- */
static int block_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  void *p;
  int rc = ferry_device_alloc(ctx, size, &p);
  if (!rc) *addr = (uint64_t)(uintptr_t)p;
  return rc;
}
static int block_release(void *ctx, uint64_t addr) { return ferry_device_release(ctx, addr); }

static struct ferry_mempool *pool_new(int vgpu) {
  struct ferry_mempool *m = calloc(1, sizeof *m);
  if (m) {
    m->vgpu = vgpu;
    ferry_pool_init(&m->pool);
  }
  return m;
}

/* the vGPU's pools exist (its default pool is current); under the lock */
static int ready(struct vgpu_pools *vp, int vgpu) {
  if (vp->def) return 0;
  if (!(vp->def = pool_new(vgpu)) || !(vp->orphans = pool_new(vgpu))) goto oom;
  vp->orphans->pool.threshold = 0;
  if (!(vp->all = malloc(8 * sizeof *vp->all))) goto oom;
  vp->cap = 8;
  vp->all[0] = vp->def;
  vp->n = 1;
  vp->current = vp->def;
  ferry_pool_clock_init(&vp->clock);
  __atomic_store_n(&vp->used, 1, __ATOMIC_RELEASE);
  return 0;
oom:
  free(vp->def);
  free(vp->orphans);
  vp->def = vp->orphans = NULL;
  return cudaErrorMemoryAllocation;
}

static void pool_drop(struct vgpu_pools *vp, size_t i) {
  ferry_pool_destroy(&vp->all[i]->pool);
  free(vp->all[i]);
  vp->all[i] = vp->all[--vp->n];
}

/* a synchronization completed frees: pools give back what their release
   threshold does not keep, destroyed pools everything, and memory from
   cudaMalloc freed with cudaFreeAsync is freed. Under the lock. */
static void settle(struct ferry_vgpu *v, struct vgpu_pools *vp) {
  struct ferry_pool_backend be = {block_alloc, block_release, v};
  int rc = ferry_pool_trim(&vp->orphans->pool, &vp->clock, 0, &be);
  for (size_t i = 0; i < vp->n && !rc; i++) {
    struct ferry_mempool *m = vp->all[i];
    if (!m->destroyed) {
      rc = ferry_pool_settle(&m->pool, &vp->clock, &be);
      continue;
    }
    rc = ferry_pool_trim(&m->pool, &vp->clock, 0, &be);
    if (!rc && !m->pool.nlive && !m->pool.npooled) pool_drop(vp, i--);
  }
  if (rc) ferry_log("device %d: giving pooled memory back failed (error %d)", v->index, rc);
}

/* ---- the synchronization points (stream.c, device.c, memory.c) ---- */
uint64_t ferry_mempool_clock(struct ferry_vgpu *v) {
  struct vgpu_pools *vp = pools_of(v);
  if (!__atomic_load_n(&vp->used, __ATOMIC_ACQUIRE)) return 0;
  pthread_mutex_lock(&vp->lock);
  uint64_t now = ferry_pool_clock_now(&vp->clock);
  pthread_mutex_unlock(&vp->lock);
  return now;
}

#define IF_USED(vp)                                                                            \
  if (!__atomic_load_n(&(vp)->used, __ATOMIC_ACQUIRE)) return;                                 \
  pthread_mutex_lock(&(vp)->lock)

void ferry_mempool_stream_synced(struct ferry_vgpu *v, uint32_t sid, uint64_t at) {
  struct vgpu_pools *vp = pools_of(v);
  IF_USED(vp);
  ferry_pool_stream_synced(&vp->clock, stream_key(sid), at);
  settle(v, vp);
  pthread_mutex_unlock(&vp->lock);
}

void ferry_mempool_device_synced(struct ferry_vgpu *v, uint64_t at) {
  struct vgpu_pools *vp = pools_of(v);
  IF_USED(vp);
  ferry_pool_device_synced(&vp->clock, at);
  settle(v, vp);
  pthread_mutex_unlock(&vp->lock);
}

void ferry_mempool_event_recorded(struct ferry_vgpu *v, uint32_t event, uint32_t sid) {
  struct vgpu_pools *vp = pools_of(v);
  IF_USED(vp);
  ferry_pool_event_recorded(&vp->clock, event, stream_key(sid)); /* out of memory: frees wait longer */
  pthread_mutex_unlock(&vp->lock);
}

void ferry_mempool_event_waited(struct ferry_vgpu *v, uint32_t sid, uint32_t event) {
  struct vgpu_pools *vp = pools_of(v);
  IF_USED(vp);
  ferry_pool_event_waited(&vp->clock, stream_key(sid), event);
  pthread_mutex_unlock(&vp->lock);
}

void ferry_mempool_event_synced(struct ferry_vgpu *v, uint32_t event) {
  struct vgpu_pools *vp = pools_of(v);
  IF_USED(vp);
  ferry_pool_event_synced(&vp->clock, event);
  settle(v, vp);
  pthread_mutex_unlock(&vp->lock);
}

void ferry_mempool_event_forget(struct ferry_vgpu *v, uint32_t event) {
  struct vgpu_pools *vp = pools_of(v);
  IF_USED(vp);
  ferry_pool_event_forget(&vp->clock, event);
  pthread_mutex_unlock(&vp->lock);
}

/* a destroyed stream's id may name a new stream later */
void ferry_mempool_stream_forget(struct ferry_vgpu *v, uint32_t sid) {
  struct vgpu_pools *vp = pools_of(v);
  IF_USED(vp);
  ferry_pool_orphan(&vp->orphans->pool, &vp->clock, sid);
  for (size_t i = 0; i < vp->n; i++) ferry_pool_orphan(&vp->all[i]->pool, &vp->clock, sid);
  ferry_pool_stream_forget(&vp->clock, sid);
  pthread_mutex_unlock(&vp->lock);
}

/* cudaDeviceReset: the device's memory is gone, and its pools with it */
void ferry_mempool_reset(struct ferry_vgpu *v) {
  struct vgpu_pools *vp = pools_of(v);
  IF_USED(vp);
  for (size_t i = 0; i < vp->n; i++) {
    ferry_pool_destroy(&vp->all[i]->pool);
    free(vp->all[i]);
  }
  ferry_pool_destroy(&vp->orphans->pool);
  free(vp->orphans);
  free(vp->all);
  ferry_pool_clock_destroy(&vp->clock);
  vp->def = vp->current = vp->orphans = NULL;
  vp->all = NULL;
  vp->n = vp->cap = 0;
  __atomic_store_n(&vp->used, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&vp->lock);
}

/* cudaFree of addr: a block a pool holds freed is not the program's to free
   (cudaErrorInvalidValue); one it handed out leaves the pool */
int ferry_mempool_on_free(struct ferry_vgpu *v, uint64_t addr) {
  struct vgpu_pools *vp = pools_of(v);
  if (!__atomic_load_n(&vp->used, __ATOMIC_ACQUIRE)) return 0;
  int rc = 0;
  pthread_mutex_lock(&vp->lock);
  if (ferry_pool_pooled(&vp->orphans->pool, addr)) rc = cudaErrorInvalidValue;
  for (size_t i = 0; i < vp->n && !rc; i++) {
    struct ferry_mempool *m = vp->all[i];
    if (ferry_pool_pooled(&m->pool, addr)) rc = cudaErrorInvalidValue;
    else if (ferry_pool_forget(&m->pool, addr) == 0) break;
  }
  pthread_mutex_unlock(&vp->lock);
  return rc;
}

cudaMemPool_t ferry_mempool_of(struct ferry_vgpu *v, uint64_t addr) {
  struct vgpu_pools *vp = pools_of(v);
  if (!__atomic_load_n(&vp->used, __ATOMIC_ACQUIRE)) return NULL;
  cudaMemPool_t found = NULL;
  pthread_mutex_lock(&vp->lock);
  for (size_t i = 0; i < vp->n && !found; i++)
    if (ferry_pool_live(&vp->all[i]->pool, addr)) found = (cudaMemPool_t)vp->all[i];
  pthread_mutex_unlock(&vp->lock);
  return found;
}

/* ---- handles: a cudaMemPool_t is its struct, checked against the lists ---- */
static struct ferry_mempool *pool_lookup(cudaMemPool_t h, struct vgpu_pools **vpp) {
  int rc = ferry_ensure_init();
  if (rc || !h) return NULL;
  for (int d = 0; d < ferry.count; d++) {
    struct vgpu_pools *vp = pools_of(&ferry.vgpus[d]);
    if (!__atomic_load_n(&vp->used, __ATOMIC_ACQUIRE)) continue;
    pthread_mutex_lock(&vp->lock);
    for (size_t i = 0; i < vp->n; i++)
      if ((cudaMemPool_t)vp->all[i] == h && !vp->all[i]->destroyed) {
        *vpp = vp; /* returned locked */
        return vp->all[i];
      }
    pthread_mutex_unlock(&vp->lock);
  }
  return NULL;
}

int ferry_mempool_token(cudaMemPool_t pool, uint64_t *token) {
  struct vgpu_pools *vp;
  struct ferry_mempool *m = pool_lookup(pool, &vp);
  if (!m) return cudaErrorInvalidValue;
  *token = m->token;
  pthread_mutex_unlock(&vp->lock);
  return 0;
}

uint64_t ferry_mempool_block_token(struct ferry_vgpu *v, uint64_t addr) {
  struct vgpu_pools *vp = pools_of(v);
  if (!__atomic_load_n(&vp->used, __ATOMIC_ACQUIRE)) return 0;
  uint64_t token = 0;
  pthread_mutex_lock(&vp->lock);
  for (size_t i = 0; i < vp->n && !token; i++)
    if (ferry_pool_live(&vp->all[i]->pool, addr)) token = vp->all[i]->token;
  pthread_mutex_unlock(&vp->lock);
  return token;
}

static int device_pools(int device, struct vgpu_pools **vpp) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (device < 0 || device >= ferry.count) return cudaErrorInvalidDevice;
  struct vgpu_pools *vp = pools_of(&ferry.vgpus[device]);
  pthread_mutex_lock(&vp->lock);
  if ((rc = ready(vp, device))) {
    pthread_mutex_unlock(&vp->lock);
    return rc;
  }
  *vpp = vp;
  return 0;
}

/* ---- allocation ---- */
/* size bytes for work on stream sid of v, from pool m (NULL: v's current) */
int ferry_mempool_malloc(struct ferry_vgpu *v, uint32_t sid, cudaMemPool_t pool, size_t size,
                         void **ptr) {
  struct vgpu_pools *vp;
  struct ferry_mempool *m;
  int rc;
  if (pool) {
    if (!(m = pool_lookup(pool, &vp))) return cudaErrorInvalidValue;
    if (m->vgpu != v->index) {
      pthread_mutex_unlock(&vp->lock);
      ferry_log("cudaMallocFromPoolAsync with a stream of another device is not supported by ferry");
      return cudaErrorNotSupported;
    }
  } else {
    if ((rc = device_pools(v->index, &vp))) return rc;
    m = vp->current;
  }
  struct ferry_pool_backend be = {block_alloc, block_release, v};
  uint64_t addr = 0;
  rc = ferry_pool_alloc(&m->pool, &vp->clock, size, stream_key(sid), &be, &addr);
  if (rc == cudaErrorMemoryAllocation) { /* what other pools keep unused may make room */
    settle(v, vp);
    for (size_t i = 0; i < vp->n; i++) ferry_pool_trim(&vp->all[i]->pool, &vp->clock, 0, &be);
    rc = ferry_pool_alloc(&m->pool, &vp->clock, size, stream_key(sid), &be, &addr);
  }
  pthread_mutex_unlock(&vp->lock);
  if (!rc) *ptr = (void *)(uintptr_t)addr;
  return rc;
}

/* ptr (of v) freed in stream sid's order; sid is FERRY_POOL_NO_STREAM for
   a stream of another vGPU (then only a synchronization of v completes it) */
int ferry_mempool_free(struct ferry_vgpu *v, uint32_t sid, void *ptr) {
  uint64_t addr = (uint64_t)(uintptr_t)ptr;
  struct vgpu_pools *vp;
  int rc = device_pools(v->index, &vp);
  if (rc) return rc;
  uint32_t key = sid == FERRY_POOL_NO_STREAM ? sid : stream_key(sid);
  rc = -1;
  for (size_t i = 0; i < vp->n && rc == -1; i++) rc = ferry_pool_free(&vp->all[i]->pool, &vp->clock, addr, key);
  if (rc == -1) {
    /* not a pool's: memory from cudaMalloc (freed once its free is
       complete), or not a live allocation at all */
    pthread_mutex_lock(&v->arena_lock);
    const struct ferry_region *r = ferry_arena_find(&v->arena, addr);
    uint64_t size = r && r->addr == addr ? r->size : 0;
    pthread_mutex_unlock(&v->arena_lock);
    int again = ferry_pool_pooled(&vp->orphans->pool, addr);
    for (size_t i = 0; i < vp->n && !again; i++) again = ferry_pool_pooled(&vp->all[i]->pool, addr);
    rc = !size || again ? cudaErrorInvalidValue
                        : ferry_pool_adopt(&vp->orphans->pool, &vp->clock, addr, size, key);
  }
  pthread_mutex_unlock(&vp->lock);
  return rc;
}

static int from_pool(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream, int per_thread) {
  struct ferry_vgpu *v;
  uint32_t sid;
  int rc = ferry_stream_resolve(stream, per_thread, &v, &sid);
  if (rc) return rc;
  if (!ptr || !pool) return cudaErrorInvalidValue;
  if ((rc = ferry_capture_refuse(v, sid, "cudaMallocFromPoolAsync / cuMemAllocFromPoolAsync"))) return rc;
  if (!size) {
    *ptr = NULL;
    return 0;
  }
  return ferry_mempool_malloc(v, sid, pool, size, ptr);
}
cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  return ferry_ret(from_pool(ptr, size, pool, stream, 0));
}
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                         cudaStream_t stream) {
  return ferry_ret(from_pool(ptr, size, pool, stream, 1));
}

/* ---- pools ---- */
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device) {
  if (!pool) return ferry_ret(cudaErrorInvalidValue);
  struct vgpu_pools *vp;
  int rc = device_pools(device, &vp);
  if (rc) return ferry_ret(rc);
  *pool = (cudaMemPool_t)vp->def;
  pthread_mutex_unlock(&vp->lock);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *pool, int device) {
  if (!pool) return ferry_ret(cudaErrorInvalidValue);
  struct vgpu_pools *vp;
  int rc = device_pools(device, &vp);
  if (rc) return ferry_ret(rc);
  *pool = (cudaMemPool_t)vp->current;
  pthread_mutex_unlock(&vp->lock);
  return cudaSuccess;
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool) {
  struct vgpu_pools *vp, *pvp;
  int rc = device_pools(device, &vp);
  if (rc) return ferry_ret(rc);
  pthread_mutex_unlock(&vp->lock);
  struct ferry_mempool *m = pool_lookup(pool, &pvp);
  if (!m) return ferry_ret(cudaErrorInvalidValue);
  rc = m->vgpu == device ? 0 : cudaErrorInvalidDevice; /* a pool serves its own device */
  if (!rc) vp->current = m;
  pthread_mutex_unlock(&pvp->lock);
  return ferry_ret(rc);
}

/* the device a cudaMemLocation names: 0 and *device, or a refusal for the
   host and NUMA locations (ferry's pools hold device memory only) */
static int location_device(const struct cudaMemLocation *loc, const char *call, int *device) {
  if (!loc) return cudaErrorInvalidValue;
  if (loc->type != cudaMemLocationTypeDevice) {
    ferry_log("%s of a host or NUMA location is not supported by ferry (device pools only)", call);
    return cudaErrorNotSupported;
  }
  *device = loc->id;
  return 0;
}

static int pinned_type(enum cudaMemAllocationType type, const char *call) {
  if (type == cudaMemAllocationTypePinned) return 0;
  ferry_log("%s of a managed-memory pool is not supported by ferry", call);
  return cudaErrorNotSupported;
}

cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t *pool, struct cudaMemLocation *loc,
                                     enum cudaMemAllocationType type) {
  int device, rc = location_device(loc, "cudaMemGetDefaultMemPool", &device);
  if (!rc) rc = pinned_type(type, "cudaMemGetDefaultMemPool");
  return rc ? ferry_ret(rc) : cudaDeviceGetDefaultMemPool(pool, device);
}
cudaError_t cudaMemGetMemPool(cudaMemPool_t *pool, struct cudaMemLocation *loc,
                              enum cudaMemAllocationType type) {
  int device, rc = location_device(loc, "cudaMemGetMemPool", &device);
  if (!rc) rc = pinned_type(type, "cudaMemGetMemPool");
  return rc ? ferry_ret(rc) : cudaDeviceGetMemPool(pool, device);
}
cudaError_t cudaMemSetMemPool(struct cudaMemLocation *loc, enum cudaMemAllocationType type,
                              cudaMemPool_t pool) {
  int device, rc = location_device(loc, "cudaMemSetMemPool", &device);
  if (!rc) rc = pinned_type(type, "cudaMemSetMemPool");
  return rc ? ferry_ret(rc) : cudaDeviceSetMemPool(device, pool);
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props) {
  if (!pool || !props) return ferry_ret(cudaErrorInvalidValue);
  if (props->allocType != cudaMemAllocationTypePinned) {
    if (props->allocType == cudaMemAllocationTypeInvalid) return ferry_ret(cudaErrorInvalidValue);
    return ferry_ret(pinned_type(props->allocType, "cudaMemPoolCreate"));
  }
  uint64_t token = 0;
  if (props->handleTypes == cudaMemHandleTypePosixFileDescriptor) {
    while (!token)
      if (getrandom(&token, sizeof token, 0) != (ssize_t)sizeof token) return ferry_ret(cudaErrorUnknown);
  } else if (props->handleTypes != cudaMemHandleTypeNone) {
    ferry_log("cudaMemPoolCreate with handle types 0x%x: ferry shares pools as POSIX file "
              "descriptors only (cudaMemHandleTypePosixFileDescriptor)", (unsigned)props->handleTypes);
    return ferry_ret(cudaErrorNotSupported);
  }
  int device, rc = location_device(&props->location, "cudaMemPoolCreate", &device);
  if (rc) return ferry_ret(rc);
  struct vgpu_pools *vp;
  if ((rc = device_pools(device, &vp))) return ferry_ret(rc == cudaErrorInvalidDevice ? cudaErrorInvalidValue : rc);
  struct ferry_mempool *m = NULL;
  if (vp->n == vp->cap) {
    struct ferry_mempool **all = realloc(vp->all, vp->cap * 2 * sizeof *all);
    if (all) vp->all = all, vp->cap *= 2;
  }
  if (vp->n < vp->cap && (m = pool_new(device))) vp->all[vp->n++] = m;
  if (m) m->token = token;
  pthread_mutex_unlock(&vp->lock);
  if (!m) return ferry_ret(cudaErrorMemoryAllocation);
  *pool = (cudaMemPool_t)m;
  return cudaSuccess;
}

/* its unused blocks go as soon as their frees are complete, the others once
   freed; a device's default pool cannot be destroyed */
cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  struct vgpu_pools *vp;
  struct ferry_mempool *m = pool_lookup(pool, &vp);
  if (!m) {
    int rc = ferry_mempool_imported_destroy(pool);
    return ferry_ret(rc < 0 ? cudaErrorInvalidValue : rc);
  }
  int rc = 0;
  if (m == vp->def) rc = cudaErrorInvalidValue;
  else {
    if (vp->current == m) vp->current = vp->def;
    m->destroyed = 1;
    settle(&ferry.vgpus[m->vgpu], vp);
  }
  pthread_mutex_unlock(&vp->lock);
  return ferry_ret(rc);
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  struct vgpu_pools *vp;
  struct ferry_mempool *m = pool_lookup(pool, &vp);
  if (!m) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_pool_backend be = {block_alloc, block_release, &ferry.vgpus[m->vgpu]};
  int rc = ferry_pool_trim(&m->pool, &vp->clock, keep, &be);
  pthread_mutex_unlock(&vp->lock);
  return ferry_ret(rc);
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value) {
  struct vgpu_pools *vp;
  struct ferry_mempool *m = pool_lookup(pool, &vp);
  if (!m) return ferry_ret(cudaErrorInvalidValue);
  int rc = ferry_pool_set_attr(&m->pool, (int)attr, value);
  pthread_mutex_unlock(&vp->lock);
  return ferry_ret(rc);
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value) {
  struct vgpu_pools *vp;
  struct ferry_mempool *m = pool_lookup(pool, &vp);
  if (!m) return ferry_ret(cudaErrorInvalidValue);
  int rc = ferry_pool_get_attr(&m->pool, (int)attr, value);
  pthread_mutex_unlock(&vp->lock);
  return ferry_ret(rc);
}

/* the pool's own device always reads and writes it; another vGPU never
   can (each may be a GPU of another machine), as with peer access */
/* an imported pool's memory is mapped for the device that imported it only */
static cudaError_t imported_access(int device, const struct cudaMemAccessDesc *descs, size_t count) {
  if (count && !descs) return ferry_ret(cudaErrorInvalidValue);
  for (size_t i = 0; i < count; i++) {
    if (descs[i].location.type != cudaMemLocationTypeDevice || descs[i].location.id < 0 ||
        descs[i].location.id >= ferry.count)
      return ferry_ret(cudaErrorInvalidDevice);
    if (descs[i].location.id == device || descs[i].flags == cudaMemAccessFlagsProtNone) continue;
    ferry_log("cudaMemPoolSetAccess for device %d on a pool imported by device %d: ferry maps an "
              "imported pool's memory for the device that imported it only; returning "
              "cudaErrorNotSupported", descs[i].location.id, device);
    return ferry_ret(cudaErrorNotSupported);
  }
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc *descs,
                                 size_t count) {
  struct vgpu_pools *vp;
  struct ferry_mempool *m = pool_lookup(pool, &vp);
  int imported;
  if (!m && ferry_mempool_imported(pool, &imported)) return imported_access(imported, descs, count);
  if (!m) return ferry_ret(cudaErrorInvalidValue);
  int device = m->vgpu;
  pthread_mutex_unlock(&vp->lock);
  if (count && !descs) return ferry_ret(cudaErrorInvalidValue);
  for (size_t i = 0; i < count; i++) {
    if (descs[i].location.type != cudaMemLocationTypeDevice || descs[i].location.id < 0 ||
        descs[i].location.id >= ferry.count)
      return ferry_ret(cudaErrorInvalidDevice);
    if (descs[i].location.id == device) {
      if (descs[i].flags != cudaMemAccessFlagsProtReadWrite) return ferry_ret(cudaErrorInvalidValue);
      continue;
    }
    if (descs[i].flags != cudaMemAccessFlagsProtNone && descs[i].flags != cudaMemAccessFlagsProtRead &&
        descs[i].flags != cudaMemAccessFlagsProtReadWrite)
      return ferry_ret(cudaErrorInvalidValue);
  }
  /* another device's access: it maps all of this device's memory (peer.c) */
  for (size_t i = 0; i < count; i++) {
    if (descs[i].location.id == device) continue;
    struct ferry_vgpu *d = &ferry.vgpus[descs[i].location.id], *p = &ferry.vgpus[device];
    if (descs[i].flags == cudaMemAccessFlagsProtNone) {
      ferry_peer_revoke(d, p, FERRY_PEER_POOL);
      continue;
    }
    char call[80];
    snprintf(call, sizeof call, "cudaMemPoolSetAccess for device %d on a pool of device %d",
             descs[i].location.id, device);
    int rc = ferry_peer_grant(d, p, FERRY_PEER_POOL, call);
    if (rc) return ferry_ret(rc);
  }
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags, cudaMemPool_t pool,
                                 struct cudaMemLocation *loc) {
  if (!flags || !loc) return ferry_ret(cudaErrorInvalidValue);
  struct vgpu_pools *vp;
  struct ferry_mempool *m = pool_lookup(pool, &vp);
  int device;
  if (!m && ferry_mempool_imported(pool, &device)) {
    if (loc->type != cudaMemLocationTypeDevice || loc->id < 0 || loc->id >= ferry.count)
      return ferry_ret(cudaErrorInvalidDevice);
    *flags = loc->id == device ? cudaMemAccessFlagsProtReadWrite : cudaMemAccessFlagsProtNone;
    return cudaSuccess;
  }
  if (!m) return ferry_ret(cudaErrorInvalidValue);
  device = m->vgpu;
  pthread_mutex_unlock(&vp->lock);
  if (loc->type != cudaMemLocationTypeDevice || loc->id < 0 || loc->id >= ferry.count)
    return ferry_ret(cudaErrorInvalidDevice);
  *flags = loc->id == device || ferry_peer_has(&ferry.vgpus[loc->id], &ferry.vgpus[device], FERRY_PEER_POOL)
               ? cudaMemAccessFlagsProtReadWrite
               : cudaMemAccessFlagsProtNone;
  return cudaSuccess;
}
