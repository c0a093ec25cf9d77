/*
 * Device memory: allocation in the client-chosen arena, copies in every
 * direction, sets, symbols and pointer queries. Device pointers are
 * checked against the live-region table first, so a bad pointer is a
 * clear cudaErrorInvalidValue here rather than a fault on the server.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "shim.h"

struct ferry_vgpu *ferry_vgpu_of(const void *p) {
  uint64_t a = (uint64_t)(uintptr_t)p;
  if (a < FERRY_ARENA_BASE) return NULL;
  uint64_t i = (a - FERRY_ARENA_BASE) / FERRY_ARENA_STRIDE;
  if (i >= (uint64_t)ferry.count) return NULL;
  return &ferry.vgpus[i];
}

/* ---- allocation ---- */
static int map_remote(void *ctx, uint64_t addr, uint64_t size) {
  struct ferry_mem_map_args a = {addr, size};
  return ferry_call(ctx, FERRY_CALL_mem_map, &a, NULL, NULL);
}
static int unmap_remote(void *ctx, uint64_t addr, uint64_t size) {
  struct ferry_mem_unmap_args a = {addr, size};
  return ferry_call(ctx, FERRY_CALL_mem_unmap, &a, NULL, NULL);
}

static int device_alloc(struct ferry_vgpu *v, uint64_t size, void **out) {
  struct ferry_arena_backend be = {map_remote, unmap_remote, v};
  uint64_t addr = 0;
  pthread_mutex_lock(&v->arena_lock);
  int rc = ferry_arena_alloc(&v->arena, size, &be, &addr);
  pthread_mutex_unlock(&v->arena_lock);
  if (rc == cudaErrorInvalidValue) rc = cudaErrorMemoryAllocation;
  if (!rc) *out = (void *)(uintptr_t)addr;
  return rc;
}

cudaError_t cudaMalloc(void **ptr, size_t size) {
  if (!ptr) return ferry_ret(cudaErrorInvalidValue);
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  if (size == 0) {
    *ptr = NULL;
    return cudaSuccess;
  }
  return ferry_ret(device_alloc(v, size, ptr));
}

cudaError_t cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height) {
  if (!ptr || !pitch) return ferry_ret(cudaErrorInvalidValue);
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  size_t align = 512; /* CUDA pads rows to the texture alignment */
  size_t p = (width + align - 1) / align * align;
  if (width == 0 || height == 0) {
    *ptr = NULL;
    *pitch = p;
    return cudaSuccess;
  }
  int rc = device_alloc(v, (uint64_t)p * height, ptr);
  if (!rc) *pitch = p;
  return ferry_ret(rc);
}

cudaError_t cudaFree(void *ptr) {
  int rc = ferry_ensure_init();
  if (rc) return ferry_ret(rc);
  if (!ptr) return cudaSuccess; /* the classic "create the context" idiom */
  struct ferry_vgpu *v = ferry_vgpu_of(ptr);
  if (!v) return ferry_ret(cudaErrorInvalidValue);
  if (v->dead) return ferry_ret(cudaErrorDevicesUnavailable);
  pthread_mutex_lock(&v->arena_lock);
  int live = ferry_arena_find(&v->arena, (uint64_t)(uintptr_t)ptr) != NULL;
  pthread_mutex_unlock(&v->arena_lock);
  if (!live) return ferry_ret(cudaErrorInvalidValue);
  /* cudaFree waits for the device: kernels still running may use the memory
     (Thrust frees temporary storage right after launching into it) */
  struct ferry_device_synchronize_args sync = {0};
  rc = ferry_call(v, FERRY_CALL_device_synchronize, &sync, NULL, NULL);
  if (rc) return ferry_ret(rc);
  struct ferry_arena_backend be = {map_remote, unmap_remote, v};
  pthread_mutex_lock(&v->arena_lock);
  rc = ferry_arena_free(&v->arena, (uint64_t)(uintptr_t)ptr, &be);
  pthread_mutex_unlock(&v->arena_lock);
  return ferry_ret(rc);
}

/* Stream-ordered allocation: allocating at once is always early enough;
   freeing waits for the stream, so no queued work can touch freed memory. */
static int malloc_async(void **ptr, size_t size, cudaStream_t stream, int per_thread) {
  struct ferry_vgpu *v;
  uint32_t sid;
  int rc = ferry_stream_resolve(stream, per_thread, &v, &sid);
  if (rc) return rc;
  if (!ptr) return cudaErrorInvalidValue;
  if (!size) {
    *ptr = NULL;
    return 0;
  }
  return device_alloc(v, size, ptr);
}

static int free_async(void *ptr, cudaStream_t stream, int per_thread) {
  struct ferry_vgpu *v;
  struct ferry_stream_synchronize_args a;
  int rc = ferry_stream_resolve(stream, per_thread, &v, &a.stream);
  if (!rc) rc = ferry_call(v, FERRY_CALL_stream_synchronize, &a, NULL, NULL);
  return rc ? rc : (int)cudaFree(ptr);
}

cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream) {
  return ferry_ret(malloc_async(ptr, size, stream, 0));
}
cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream) {
  return ferry_ret(malloc_async(ptr, size, stream, 1));
}
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  return ferry_ret(free_async(ptr, stream, 0));
}
cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream) {
  return ferry_ret(free_async(ptr, stream, 1));
}

/* ---- host memory: always local to the program ---- */
struct host_block {
  void *ptr;
  size_t size;
  unsigned flags;
  int registered; /* cudaHostRegister'ed, not allocated by us */
  int locked;     /* page-locked by a local driver (after a migration) */
};
static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_block *host_blocks;
static size_t nhost, host_cap;
/* the first local GPU: pinned buffers are page-locked with its driver
   (portable: for every context) so that async copies stay asynchronous */
static struct ferry_local *lock_gpu;

static void host_lock_with(struct ferry_local *L, struct host_block *b) {
  if (!L || b->locked || !b->size) return;
  b->locked = ferry_local_host_lock(L, b->ptr, b->size) == 0;
}

void ferry_host_register_local(struct ferry_local *L) {
  pthread_mutex_lock(&host_lock);
  if (!lock_gpu) lock_gpu = L;
  for (size_t i = 0; i < nhost; i++) host_lock_with(lock_gpu, &host_blocks[i]);
  pthread_mutex_unlock(&host_lock);
}

static int host_add(void *p, size_t size, unsigned flags, int registered) {
  pthread_mutex_lock(&host_lock);
  if (nhost == host_cap) {
    size_t cap = host_cap ? host_cap * 2 : 32;
    struct host_block *b = realloc(host_blocks, cap * sizeof *b);
    if (!b) {
      pthread_mutex_unlock(&host_lock);
      return cudaErrorMemoryAllocation;
    }
    host_blocks = b;
    host_cap = cap;
  }
  host_blocks[nhost] = (struct host_block){p, size, flags, registered, 0};
  host_lock_with(lock_gpu, &host_blocks[nhost++]);
  pthread_mutex_unlock(&host_lock);
  return 0;
}

/* finds the block containing p; copies it out */
static int host_find(const void *p, struct host_block *out) {
  int found = 0;
  pthread_mutex_lock(&host_lock);
  for (size_t i = 0; i < nhost; i++) {
    const char *b = host_blocks[i].ptr;
    if ((const char *)p >= b && (const char *)p < b + (host_blocks[i].size ? host_blocks[i].size : 1)) {
      *out = host_blocks[i];
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&host_lock);
  return found;
}

static int host_remove(void *p, int registered) {
  int found = 0;
  pthread_mutex_lock(&host_lock);
  for (size_t i = 0; i < nhost; i++) {
    if (host_blocks[i].ptr != p || host_blocks[i].registered != registered) continue;
    if (host_blocks[i].locked) ferry_local_host_unlock(lock_gpu, p);
    host_blocks[i] = host_blocks[--nhost];
    found = 1;
    break;
  }
  pthread_mutex_unlock(&host_lock);
  return found;
}

/* Mapped (zero-copy) host memory stays usable for copies, which is all most
   programs do with it; only device access is impossible from a remote GPU,
   so that is where ferry refuses (cudaHostGetDevicePointer), loudly. */
static void mapped_note(const char *call) {
  static int warned;
  if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
    ferry_log("%s with the mapped flag: the memory works for copies, but a remote GPU cannot "
              "access it directly (cudaHostGetDevicePointer returns cudaErrorNotSupported)",
              call);
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags) {
  if (!ptr) return ferry_ret(cudaErrorInvalidValue);
  unsigned known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
  if (flags & ~known) return ferry_ret(cudaErrorInvalidValue);
  if (flags & cudaHostAllocMapped) mapped_note("cudaHostAlloc");
  void *p = NULL;
  if (posix_memalign(&p, 4096, size ? size : 1)) return ferry_ret(cudaErrorMemoryAllocation);
  if (host_add(p, size, flags, 0)) {
    free(p);
    return ferry_ret(cudaErrorMemoryAllocation);
  }
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **dptr, void *hptr, unsigned int flags) {
  (void)flags;
  struct host_block b;
  if (!dptr || !host_find(hptr, &b)) return ferry_ret(cudaErrorInvalidValue);
  static int warned;
  if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
    ferry_log("cudaHostGetDevicePointer: a remote GPU cannot access this host's memory; "
              "returning cudaErrorNotSupported");
  return ferry_ret(cudaErrorNotSupported);
}

cudaError_t cudaMallocHost(void **ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }

cudaError_t cudaFreeHost(void *ptr) {
  if (!ptr) return cudaSuccess;
  if (!host_remove(ptr, 0)) return ferry_ret(cudaErrorInvalidValue);
  free(ptr);
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
  if (!ptr || !size) return ferry_ret(cudaErrorInvalidValue);
  unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory |
                   cudaHostRegisterReadOnly;
  if (flags & ~known) return ferry_ret(cudaErrorInvalidValue);
  if (flags & cudaHostRegisterMapped) mapped_note("cudaHostRegister");
  struct host_block b;
  if (host_find(ptr, &b)) return ferry_ret(cudaErrorHostMemoryAlreadyRegistered);
  return ferry_ret(host_add(ptr, size, flags, 1));
}

cudaError_t cudaHostUnregister(void *ptr) {
  if (!host_remove(ptr, 1)) return ferry_ret(cudaErrorHostMemoryNotRegistered);
  return cudaSuccess;
}

cudaError_t cudaHostGetFlags(unsigned int *flags, void *ptr) {
  struct host_block b;
  if (!flags || !host_find(ptr, &b)) return ferry_ret(cudaErrorInvalidValue);
  *flags = b.flags;
  return cudaSuccess;
}

/* ---- copies ---- */
/* the vGPU for a device-side pointer: its arena's, else the current one
   (module globals from cudaGetSymbolAddress live outside the arena) */
static int device_side(const void *p, uint64_t count, struct ferry_vgpu **v) {
  int err;
  *v = ferry_vgpu_of(p);
  if (!*v) {
    *v = ferry_current(&err);
    return *v ? 0 : err;
  }
  if ((*v)->dead) return cudaErrorDevicesUnavailable;
  pthread_mutex_lock(&(*v)->arena_lock);
  const struct ferry_region *r = ferry_arena_find(&(*v)->arena, (uint64_t)(uintptr_t)p);
  int ok = r && (uint64_t)(uintptr_t)p + count <= r->addr + (r->size ? r->size : 0);
  pthread_mutex_unlock(&(*v)->arena_lock);
  return ok || count == 0 ? 0 : cudaErrorInvalidValue;
}

static enum cudaMemcpyKind resolve_kind(const void *dst, const void *src, enum cudaMemcpyKind kind) {
  if (kind != cudaMemcpyDefault) return kind;
  int d = ferry_vgpu_of(dst) != NULL, s = ferry_vgpu_of(src) != NULL;
  return s ? (d ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
           : (d ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
}

static int is_pinned(const void *p) {
  struct host_block b;
  return host_find(p, &b);
}

static int stream_id_for(struct ferry_vgpu *v, cudaStream_t s, int per_thread, uint32_t *id) {
  struct ferry_vgpu *sv;
  int rc = ferry_stream_resolve(s, per_thread, &sv, id);
  if (!rc && sv != v) rc = cudaErrorInvalidResourceHandle;
  return rc;
}

/* async: 0 synchronous cudaMemcpy; 1 cudaMemcpyAsync */
static int copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                cudaStream_t stream, int per_thread, int async) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (count == 0) return 0;
  if (!dst || !src) return cudaErrorInvalidValue;
  if ((unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  kind = resolve_kind(dst, src, kind);
  struct ferry_vgpu *dv = NULL, *sv = NULL;
  uint32_t sid = 0;
  switch (kind) {
  case cudaMemcpyHostToHost:
    memmove(dst, src, count);
    return 0;
  case cudaMemcpyHostToDevice: {
    if ((rc = device_side(dst, count, &dv)) || (rc = stream_id_for(dv, stream, per_thread, &sid)))
      return rc;
    if (ferry_is_local(dv)) return ferry_local_copy(dv, dst, src, count, 1, sid, async);
    struct ferry_bulk bulk = {.in = src, .in_len = count};
    /* Once the bytes are on their way the source may be reused, and nothing
       but a later CUDA call (ordered after this one) can observe device
       memory: so a synchronous copy into a checked arena range is pipelined
       too, and a failure surfaces at the next synchronizing call, as CUDA's
       asynchronous errors do. Copies outside the arena (module globals)
       wait for their answer. */
    if (async || ferry_vgpu_of(dst)) {
      struct ferry_memcpy_htod_async_args a = {(uint64_t)(uintptr_t)dst, sid};
      return ferry_call(dv, FERRY_CALL_memcpy_htod_async, &a, NULL, &bulk);
    }
    struct ferry_memcpy_htod_args a = {(uint64_t)(uintptr_t)dst, sid};
    return ferry_call(dv, FERRY_CALL_memcpy_htod, &a, NULL, &bulk);
  }
  case cudaMemcpyDeviceToHost: {
    if ((rc = device_side(src, count, &sv)) || (rc = stream_id_for(sv, stream, per_thread, &sid)))
      return rc;
    if (ferry_is_local(sv)) return ferry_local_copy(sv, dst, src, count, 2, sid, async);
    /* CUDA returns from an async copy into pageable memory only when it is
       done; pinned memory is filled in later, at the next synchronization */
    if (async && is_pinned(dst)) {
      uint64_t token = ferry_defer(sv, dst, count);
      if (!token) return cudaErrorMemoryAllocation;
      struct ferry_memcpy_dtoh_async_args a = {(uint64_t)(uintptr_t)src, count, sid, token};
      return ferry_call(sv, FERRY_CALL_memcpy_dtoh_async, &a, NULL, NULL);
    }
    struct ferry_memcpy_dtoh_args a = {(uint64_t)(uintptr_t)src, count, sid};
    struct ferry_bulk bulk = {.out = dst, .out_len = count};
    return ferry_call(sv, FERRY_CALL_memcpy_dtoh, &a, NULL, &bulk);
  }
  case cudaMemcpyDeviceToDevice: {
    if ((rc = device_side(src, count, &sv)) || (rc = device_side(dst, count, &dv))) return rc;
    if (sv != dv) {
      /* two servers: stage through this host */
      void *tmp = malloc(count);
      if (!tmp) return cudaErrorMemoryAllocation;
      rc = copy(tmp, src, count, cudaMemcpyDeviceToHost, NULL, per_thread, 0);
      if (!rc) rc = copy(dst, tmp, count, cudaMemcpyHostToDevice, NULL, per_thread, 0);
      free(tmp);
      return rc;
    }
    if ((rc = stream_id_for(dv, stream, per_thread, &sid))) return rc;
    if (async) {
      struct ferry_memcpy_dtod_async_args a = {(uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src,
                                               count, sid};
      return ferry_call(dv, FERRY_CALL_memcpy_dtod_async, &a, NULL, NULL);
    }
    struct ferry_memcpy_dtod_args a = {(uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, count,
                                       sid};
    return ferry_call(dv, FERRY_CALL_memcpy_dtod, &a, NULL, NULL);
  }
  default:
    return cudaErrorInvalidMemcpyDirection;
  }
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  return ferry_ret(copy(dst, src, count, kind, NULL, 0, 0));
}
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  return ferry_ret(copy(dst, src, count, kind, NULL, 1, 0));
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return ferry_ret(copy(dst, src, count, kind, stream, 0, 1));
}
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                 enum cudaMemcpyKind kind, cudaStream_t stream) {
  return ferry_ret(copy(dst, src, count, kind, stream, 1, 1));
}

static int copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                  size_t height, enum cudaMemcpyKind kind, cudaStream_t stream, int per_thread,
                  int async) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (width == 0 || height == 0) return 0;
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  if (!dst || !src) return cudaErrorInvalidValue;
  if ((unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  kind = resolve_kind(dst, src, kind);
  uint64_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
  struct ferry_vgpu *v;
  uint32_t sid;
  if (kind == cudaMemcpyHostToHost) {
    for (size_t r = 0; r < height; r++)
      memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return 0;
  }
  if (kind == cudaMemcpyHostToDevice) {
    if ((rc = device_side(dst, dspan, &v)) || (rc = stream_id_for(v, stream, per_thread, &sid)))
      return rc;
    const void *packed = src;
    char *tmp = NULL;
    if (spitch != width) {
      if (!(tmp = malloc(width * height))) return cudaErrorMemoryAllocation;
      for (size_t r = 0; r < height; r++) memcpy(tmp + r * width, (const char *)src + r * spitch, width);
      packed = tmp;
    }
    struct ferry_memcpy2d_htod_args a = {(uint64_t)(uintptr_t)dst, dpitch, width, height, sid,
                                         (uint32_t)async};
    struct ferry_bulk bulk = {.in = packed, .in_len = width * height};
    rc = ferry_call(v, FERRY_CALL_memcpy2d_htod, &a, NULL, &bulk);
    free(tmp);
    return rc;
  }
  if (kind == cudaMemcpyDeviceToHost) {
    if ((rc = device_side(src, sspan, &v)) || (rc = stream_id_for(v, stream, per_thread, &sid)))
      return rc;
    char *tmp = NULL;
    void *packed = dst;
    if (dpitch != width) {
      if (!(tmp = malloc(width * height))) return cudaErrorMemoryAllocation;
      packed = tmp;
    }
    struct ferry_memcpy2d_dtoh_args a = {(uint64_t)(uintptr_t)src, spitch, width, height, sid};
    struct ferry_bulk bulk = {.out = packed, .out_len = width * height};
    rc = ferry_call(v, FERRY_CALL_memcpy2d_dtoh, &a, NULL, &bulk);
    if (!rc && tmp)
      for (size_t r = 0; r < height; r++) memcpy((char *)dst + r * dpitch, tmp + r * width, width);
    free(tmp);
    return rc;
  }
  struct ferry_vgpu *sv;
  if ((rc = device_side(src, sspan, &sv)) || (rc = device_side(dst, dspan, &v))) return rc;
  if (sv != v) {
    ferry_log("cudaMemcpy2D between two remote devices is not supported");
    return cudaErrorNotSupported;
  }
  if ((rc = stream_id_for(v, stream, per_thread, &sid))) return rc;
  struct ferry_memcpy2d_dtod_args a = {(uint64_t)(uintptr_t)dst, dpitch, (uint64_t)(uintptr_t)src,
                                       spitch, width, height, sid};
  rc = ferry_call(v, FERRY_CALL_memcpy2d_dtod, &a, NULL, NULL);
  if (!rc && !async) {
    struct ferry_stream_synchronize_args s = {sid};
    rc = ferry_call(v, FERRY_CALL_stream_synchronize, &s, NULL, NULL);
  }
  return rc;
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind) {
  return ferry_ret(copy2d(dst, dpitch, src, spitch, width, height, kind, NULL, 0, 0));
}
cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind) {
  return ferry_ret(copy2d(dst, dpitch, src, spitch, width, height, kind, NULL, 1, 0));
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream) {
  return ferry_ret(copy2d(dst, dpitch, src, spitch, width, height, kind, stream, 0, 1));
}
cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind,
                                   cudaStream_t stream) {
  return ferry_ret(copy2d(dst, dpitch, src, spitch, width, height, kind, stream, 1, 1));
}

/* ---- sets ---- */
static int set2d(void *dst, size_t pitch, int value, size_t width, size_t height,
                 cudaStream_t stream, int per_thread) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (width == 0 || height == 0) return 0;
  if (width > pitch && height > 1) return cudaErrorInvalidPitchValue;
  struct ferry_vgpu *v;
  uint32_t sid;
  if ((rc = device_side(dst, pitch * (height - 1) + width, &v)) ||
      (rc = stream_id_for(v, stream, per_thread, &sid)))
    return rc;
  if (height == 1) {
    struct ferry_memset_args a = {(uint64_t)(uintptr_t)dst, (uint32_t)value & 0xff, width, sid};
    return ferry_call(v, FERRY_CALL_memset, &a, NULL, NULL);
  }
  struct ferry_memset2d_args a = {(uint64_t)(uintptr_t)dst, pitch, (uint32_t)value & 0xff, width,
                                  height, sid};
  return ferry_call(v, FERRY_CALL_memset2d, &a, NULL, NULL);
}

cudaError_t cudaMemset(void *dst, int value, size_t count) {
  return ferry_ret(set2d(dst, count, value, count, 1, NULL, 0));
}
cudaError_t cudaMemset_ptds(void *dst, int value, size_t count) {
  return ferry_ret(set2d(dst, count, value, count, 1, NULL, 1));
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t count, cudaStream_t stream) {
  return ferry_ret(set2d(dst, count, value, count, 1, stream, 0));
}
cudaError_t cudaMemsetAsync_ptsz(void *dst, int value, size_t count, cudaStream_t stream) {
  return ferry_ret(set2d(dst, count, value, count, 1, stream, 1));
}
cudaError_t cudaMemset2D(void *dst, size_t pitch, int value, size_t width, size_t height) {
  return ferry_ret(set2d(dst, pitch, value, width, height, NULL, 0));
}
cudaError_t cudaMemset2D_ptds(void *dst, size_t pitch, int value, size_t width, size_t height) {
  return ferry_ret(set2d(dst, pitch, value, width, height, NULL, 1));
}
cudaError_t cudaMemset2DAsync(void *dst, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream) {
  return ferry_ret(set2d(dst, pitch, value, width, height, stream, 0));
}
cudaError_t cudaMemset2DAsync_ptsz(void *dst, size_t pitch, int value, size_t width,
                                   size_t height, cudaStream_t stream) {
  return ferry_ret(set2d(dst, pitch, value, width, height, stream, 1));
}

/* ---- symbols ---- */
int ferry_symbol_address_taken; /* a migration cannot keep these (issue 3) */

static int symbol_range(const void *symbol, size_t count, size_t offset, uint64_t *addr) {
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return err;
  uint64_t size;
  int rc = ferry_symbol_lookup(symbol, v, addr, &size);
  if (rc) return rc;
  if (offset > size || count > size - offset) return cudaErrorInvalidValue;
  *addr += offset;
  return 0;
}

/* a migration moves module variables: a copy that looked an address up
   before the vGPU moved is refused by the call path and looked up again */
static int symbol_copy(const void *symbol, size_t count, size_t offset, void *dst,
                       const void *src, int to_device, enum cudaMemcpyKind kind,
                       cudaStream_t stream, int per_thread, int async) {
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return err;
  for (;;) {
    uint64_t gen = __atomic_load_n(&v->generation, __ATOMIC_ACQUIRE), addr;
    int rc = symbol_range(symbol, count, offset, &addr);
    if (rc) return rc;
    ferry_expect_generation(v, gen);
    if (to_device) rc = copy((void *)(uintptr_t)addr, src, count, kind, stream, per_thread, async);
    else rc = copy(dst, (const void *)(uintptr_t)addr, count, kind, stream, per_thread, async);
    ferry_expect_generation(NULL, 0);
    if (rc != FERRY_STALE) return rc;
  }
}

static int to_symbol(const void *symbol, const void *src, size_t count, size_t offset,
                     enum cudaMemcpyKind kind, cudaStream_t stream, int per_thread, int async) {
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  if (kind == cudaMemcpyDefault) kind = ferry_vgpu_of(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
  return symbol_copy(symbol, count, offset, NULL, src, 1, kind, stream, per_thread, async);
}

static int from_symbol(void *dst, const void *symbol, size_t count, size_t offset,
                       enum cudaMemcpyKind kind, cudaStream_t stream, int per_thread, int async) {
  if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  if (kind == cudaMemcpyDefault) kind = ferry_vgpu_of(dst) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost;
  return symbol_copy(symbol, count, offset, dst, NULL, 0, kind, stream, per_thread, async);
}

cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind) {
  return ferry_ret(to_symbol(symbol, src, count, offset, kind, NULL, 0, 0));
}
cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind) {
  return ferry_ret(to_symbol(symbol, src, count, offset, kind, NULL, 1, 0));
}
cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return ferry_ret(to_symbol(symbol, src, count, offset, kind, stream, 0, 1));
}
cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count,
                                         size_t offset, enum cudaMemcpyKind kind,
                                         cudaStream_t stream) {
  return ferry_ret(to_symbol(symbol, src, count, offset, kind, stream, 1, 1));
}
cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
                                 enum cudaMemcpyKind kind) {
  return ferry_ret(from_symbol(dst, symbol, count, offset, kind, NULL, 0, 0));
}
cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind) {
  return ferry_ret(from_symbol(dst, symbol, count, offset, kind, NULL, 1, 0));
}
cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t stream) {
  return ferry_ret(from_symbol(dst, symbol, count, offset, kind, stream, 0, 1));
}
cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count,
                                           size_t offset, enum cudaMemcpyKind kind,
                                           cudaStream_t stream) {
  return ferry_ret(from_symbol(dst, symbol, count, offset, kind, stream, 1, 1));
}

cudaError_t cudaGetSymbolAddress(void **ptr, const void *symbol) {
  if (!ptr) return ferry_ret(cudaErrorInvalidValue);
  uint64_t addr;
  int rc = symbol_range(symbol, 0, 0, &addr);
  if (rc) return ferry_ret(rc);
  ferry_symbol_address_taken = 1;
  *ptr = (void *)(uintptr_t)addr;
  return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol) {
  if (!size) return ferry_ret(cudaErrorInvalidValue);
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  uint64_t addr, sz;
  int rc = ferry_symbol_lookup(symbol, v, &addr, &sz);
  if (!rc) *size = sz;
  return ferry_ret(rc);
}

/* ---- pointer queries ---- */
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr) {
  if (!attr) return ferry_ret(cudaErrorInvalidValue);
  int rc = ferry_ensure_init();
  if (rc) return ferry_ret(rc);
  memset(attr, 0, sizeof *attr);
  attr->type = cudaMemoryTypeUnregistered;
  attr->device = -2; /* what CUDA reports for unregistered host memory */
  struct ferry_vgpu *v = ferry_vgpu_of(ptr);
  struct host_block b;
  if (v) {
    pthread_mutex_lock(&v->arena_lock);
    int live = ferry_arena_find(&v->arena, (uint64_t)(uintptr_t)ptr) != NULL;
    pthread_mutex_unlock(&v->arena_lock);
    if (!live) return ferry_ret(cudaErrorInvalidValue);
    attr->type = cudaMemoryTypeDevice;
    attr->device = v->index;
    attr->devicePointer = (void *)ptr;
  } else if (host_find(ptr, &b)) {
    attr->type = cudaMemoryTypeHost;
    attr->device = ferry_thread()->device;
    attr->hostPointer = (void *)ptr;
  }
  return cudaSuccess;
}
