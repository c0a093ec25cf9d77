/*
 * Device memory: allocation in the client-chosen arena, copies in every
 * direction, sets, symbols and pointer queries. Device pointers are
 * checked against the live-region table first, so a bad pointer is a
 * clear cudaErrorInvalidValue here rather than a fault on the server.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "shim/core/host.h"
#include "shim/core/link.h"
#include "shim/core/local.h"
#include "shim/core/shadow.h"
#include "shim/core/hooks.h"
#include "shim/migrate/migrate.h"
#include "shim/runtime/graph.h"

struct ferry_vgpu *ferry_vgpu_of(const void *p) {
  uint64_t a = (uint64_t)(uintptr_t)p;
  if (a < FERRY_ARENA_BASE) return NULL;
  uint64_t i = (a - FERRY_ARENA_BASE) / FERRY_ARENA_STRIDE;
  if (i >= (uint64_t)ferry.count) return NULL;
  return &ferry.vgpus[i];
}

/* ---- allocation ---- */
/* the arena's backend: the recorded mem_map / mem_unmap on v's GPU */
static int map_remote(void *ctx, uint64_t addr, uint64_t size) {
  struct ferry_mem_map_args a = {addr, size};
  int rc = ferry_call(ctx, FERRY_CALL_mem_map, &a, NULL, NULL);
  if (!rc && (rc = ferry_peer_mapped(ctx, addr, size))) {
    struct ferry_mem_unmap_args u = {addr, size};
    ferry_call(ctx, FERRY_CALL_mem_unmap, &u, NULL, NULL);
  }
  return rc;
}
static int unmap_remote(void *ctx, uint64_t addr, uint64_t size) {
  struct ferry_mem_unmap_args a = {addr, size};
  ferry_peer_unmapping(ctx, addr, size); /* peers let go of it first */
  return ferry_call(ctx, FERRY_CALL_mem_unmap, &a, NULL, NULL);
}

struct ferry_arena_backend ferry_device_backend(struct ferry_vgpu *v) {
  return (struct ferry_arena_backend){map_remote, unmap_remote, v};
}

int ferry_device_alloc(struct ferry_vgpu *v, uint64_t size, void **out) {
  struct ferry_arena_backend be = ferry_device_backend(v);
  uint64_t addr = 0;
  pthread_mutex_lock(&v->arena_lock);
  int rc = ferry_arena_alloc(&v->arena, size, &be, &addr);
  pthread_mutex_unlock(&v->arena_lock);
  if (rc == cudaErrorInvalidValue) rc = cudaErrorMemoryAllocation;
  if (!rc) *out = (void *)(uintptr_t)addr;
  return rc;
}

/* frees addr with no wait: the caller knows no queued work uses it */
int ferry_device_release(struct ferry_vgpu *v, uint64_t addr) {
  struct ferry_arena_backend be = ferry_device_backend(v);
  pthread_mutex_lock(&v->arena_lock);
  int rc = ferry_arena_free(&v->arena, addr, &be);
  pthread_mutex_unlock(&v->arena_lock);
  if (!rc) ferry_ipc_released(v, addr);
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
  /* potentially unsafe during a capture (the graph would not allocate) */
  int rc = ferry_capture_unsafe();
  return ferry_ret(rc ? rc : ferry_device_alloc(v, size, ptr));
}

cudaError_t cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height) {
  if (!ptr || !pitch) return ferry_ret(cudaErrorInvalidValue);
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  int rc = ferry_capture_unsafe();
  if (rc) return ferry_ret(rc);
  size_t align = 512; /* CUDA pads rows to the texture alignment */
  size_t p = (width + align - 1) / align * align;
  if (width == 0 || height == 0) {
    *ptr = NULL;
    *pitch = p;
    return cudaSuccess;
  }
  rc = ferry_device_alloc(v, (uint64_t)p * height, ptr);
  if (!rc) *pitch = p;
  return ferry_ret(rc);
}

cudaError_t cudaFree(void *ptr) {
  int rc = ferry_ensure_init();
  if (rc) return ferry_ret(rc);
  if (!ptr) { /* the classic "create the context" idiom: the primary context is now active */
    int err;
    ferry_current(&err);
    return cudaSuccess;
  }
  /* managed memory: after the device's work, as any cudaFree */
  if (ferry_host_managed(ptr, NULL, NULL)) {
    if ((rc = (int)cudaDeviceSynchronize())) return ferry_ret(rc);
    if (!(rc = ferry_host_managed_free(ptr))) ferry_managed_advice_forget(ptr);
    return ferry_ret(rc);
  }
  struct ferry_vgpu *v = ferry_vgpu_of(ptr);
  if (!v) return ferry_ret(cudaErrorInvalidValue);
  if (ferry_dead(v)) return ferry_ret(cudaErrorDevicesUnavailable);
  pthread_mutex_lock(&v->arena_lock);
  int live = ferry_arena_find(&v->arena, (uint64_t)(uintptr_t)ptr) != NULL;
  pthread_mutex_unlock(&v->arena_lock);
  if (!live) return ferry_ret(cudaErrorInvalidValue);
  if (ferry_mempool_import_has(ptr)) { /* another program's pool's: closed after the device's work */
    struct ferry_device_synchronize_args sync = {0};
    if ((rc = ferry_call(v, FERRY_CALL_device_synchronize, &sync, NULL, NULL))) return ferry_ret(rc);
    return ferry_ret((rc = ferry_mempool_import_free(ptr)) < 0 ? cudaErrorInvalidValue : rc);
  }
  if ((rc = ferry_capture_unsafe())) return ferry_ret(rc);
  /* a block a pool keeps (freed with cudaFreeAsync) is not the program's */
  if ((rc = ferry_mempool_on_free(v, (uint64_t)(uintptr_t)ptr))) return ferry_ret(rc);
  /* cudaFree waits for the device: kernels still running may use the memory
     (Thrust frees temporary storage right after launching into it) */
  uint64_t at = ferry_mempool_clock(v);
  struct ferry_device_synchronize_args sync = {0};
  rc = ferry_call(v, FERRY_CALL_device_synchronize, &sync, NULL, NULL);
  if (rc) return ferry_ret(rc);
  rc = ferry_device_release(v, (uint64_t)(uintptr_t)ptr);
  if (!rc) ferry_mempool_device_synced(v, at);
  return ferry_ret(rc);
}

/* Stream-ordered allocation from the current pool (mempool.c): a block
   freed earlier is reused without a call; freeing forwards nothing, the
   block stays allocated in its pool until a synchronization shows its
   free complete and the pool's release threshold lets it go. */
static int malloc_async(void **ptr, size_t size, cudaStream_t stream, int per_thread) {
  struct ferry_vgpu *v;
  uint32_t sid;
  int rc = ferry_stream_resolve(stream, per_thread, &v, &sid);
  if (rc) return rc;
  if (!ptr) return cudaErrorInvalidValue;
  if ((rc = ferry_capture_refuse(v, sid, "cudaMallocAsync / cuMemAllocAsync"))) return rc;
  if (!size) {
    *ptr = NULL;
    return 0;
  }
  return ferry_mempool_malloc(v, sid, NULL, size, ptr);
}

static int free_async(void *ptr, cudaStream_t stream, int per_thread) {
  struct ferry_vgpu *sv;
  uint32_t sid;
  int rc = ferry_stream_resolve(stream, per_thread, &sv, &sid);
  if (rc) return rc;
  if ((rc = ferry_capture_refuse(sv, sid, "cudaFreeAsync / cuMemFreeAsync"))) return rc;
  if (!ptr) return 0;
  struct ferry_vgpu *v = ferry_vgpu_of(ptr);
  if (!v) return cudaErrorInvalidValue;
  if (ferry_dead(v)) return cudaErrorDevicesUnavailable;
  if (ferry_mempool_import_has(ptr)) { /* another program's pool's: closed after the stream's work */
    struct ferry_stream_synchronize_args a = {sid};
    if ((rc = ferry_call(sv, FERRY_CALL_stream_synchronize, &a, NULL, NULL))) return rc;
    return (rc = ferry_mempool_import_free(ptr)) < 0 ? cudaErrorInvalidValue : rc;
  }
  /* a stream of another vGPU orders nothing on v: a synchronization of v
     completes the free (no work of another vGPU can use v's memory) */
  return ferry_mempool_free(v, v == sv ? sid : UINT32_MAX, ptr);
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

/* ---- copies ---- */
/* the vGPU for a device-side pointer: its arena's, else the current one
   (module globals from cudaGetSymbolAddress live outside the arena) */
static int device_side(const void *p, uint64_t count, struct ferry_vgpu **v) {
  int err;
  *v = ferry_vgpu_of(p);
  if (!*v) {
    *v = ferry_current(&err);
    if (!*v) return err;
    /* pinned host memory as a device pointer (zero-copy, unified
       addressing): a GPU in this process or a helper reaches it (the memory
       is registered with its driver), a server's reaches its shadow */
    if (ferry_host_pinned(p)) {
      int rc = ferry_shadow_expose(*v, (uint64_t)(uintptr_t)p);
      if (!rc) ferry_shadow_touch(); /* the memset or copy that asked works on it */
      return rc == 1 ? 0 : rc;
    }
    return 0; /* a module variable's address */
  }
  if (ferry_dead(*v)) return cudaErrorDevicesUnavailable;
  pthread_mutex_lock(&(*v)->arena_lock);
  int ok = ferry_arena_covers(&(*v)->arena, (uint64_t)(uintptr_t)p, count);
  pthread_mutex_unlock(&(*v)->arena_lock);
  if (!ok && count)
    ferry_debug("%p + %llu bytes is not inside one live allocation of device %d", p,
                (unsigned long long)count, (*v)->index);
  return ok || count == 0 ? 0 : cudaErrorInvalidValue;
}

/* A device pointer outside every arena is a module variable's: after a
   migration, the driver front end's handed-out addresses are translated to
   where the variable lives now (driver/module.c) */
static void *global_now(const void *p) {
  if (ferry_vgpu_of(p)) return (void *)p;
  return (void *)(uintptr_t)ferry_variable_now(ferry_thread()->device, (uint64_t)(uintptr_t)p);
}
#define GLOBALS_NOW(kind, dst, src)                                                            \
  do {                                                                                         \
    if ((kind) == cudaMemcpyHostToDevice || (kind) == cudaMemcpyDeviceToDevice) dst = global_now(dst); \
    if ((kind) == cudaMemcpyDeviceToHost || (kind) == cudaMemcpyDeviceToDevice) src = global_now(src); \
  } while (0)

static enum cudaMemcpyKind resolve_kind(const void *dst, const void *src, enum cudaMemcpyKind kind) {
  if (kind != cudaMemcpyDefault) return kind;
  int d = ferry_vgpu_of(dst) != NULL, s = ferry_vgpu_of(src) != NULL;
  return s ? (d ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
           : (d ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
}

/* The wire id of stream s for a copy of v's memory. CUDA lets a copy of any
   device's memory be ordered by any stream (unified addressing): a default
   stream stands for v's own, and a stream of another vGPU is waited for
   first, the copy then running in v's default stream, synchronously. */
static int stream_id_for(struct ferry_vgpu *v, cudaStream_t s, int per_thread, uint32_t *id,
                         int *async) {
  struct ferry_vgpu *sv;
  int rc = ferry_stream_resolve(s, per_thread, &sv, id);
  if (rc || sv == v) return rc;
  uintptr_t raw = (uintptr_t)s;
  if (raw == 0 || raw == (uintptr_t)cudaStreamLegacy || raw == (uintptr_t)cudaStreamPerThread)
    return 0; /* the same default stream id on v */
  struct ferry_stream_synchronize_args a = {*id};
  rc = ferry_call(sv, FERRY_CALL_stream_synchronize, &a, NULL, NULL);
  *id = 0;
  *async = 0;
  return rc;
}

/* waits for an explicit stream before a copy that does not run in it */
static int wait_stream(cudaStream_t s, int per_thread) {
  uintptr_t raw = (uintptr_t)s;
  if (raw == 0 || raw == (uintptr_t)cudaStreamLegacy || raw == (uintptr_t)cudaStreamPerThread)
    return 0;
  struct ferry_vgpu *v;
  struct ferry_stream_synchronize_args a;
  int rc = ferry_stream_resolve(s, per_thread, &v, &a.stream);
  return rc ? rc : ferry_call(v, FERRY_CALL_stream_synchronize, &a, NULL, NULL);
}

static int copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                cudaStream_t stream, int per_thread, int async);

/* Two vGPUs with peer access on between them copy on their server
   (peer.c). Otherwise they share no memory (each may be a GPU of another
   machine), so a copy between them goes through this host, chunk by chunk,
   through a pinned bounce buffer: each half takes its vGPU's fastest path
   (shared memory for a helper, the driver in this process, the link
   otherwise). */
#define PEER_CHUNK (8u << 20)
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static void *peer_buf;

static int copy_between(void *dst, const void *src, size_t count) {
  int rc = ferry_peer_copy(dst, src, count);
  if (rc >= 0) return rc;
  pthread_mutex_lock(&peer_lock);
  rc = peer_buf ? 0 : (int)cudaHostAlloc(&peer_buf, PEER_CHUNK, 0);
  for (size_t off = 0; off < count && !rc; off += PEER_CHUNK) {
    size_t n = count - off < PEER_CHUNK ? count - off : PEER_CHUNK;
    rc = copy(peer_buf, (const char *)src + off, n, cudaMemcpyDeviceToHost, NULL, 0, 0);
    if (!rc) rc = copy((char *)dst + off, peer_buf, n, cudaMemcpyHostToDevice, NULL, 0, 0);
  }
  pthread_mutex_unlock(&peer_lock);
  return rc;
}

/* an asynchronous copy between two vGPUs with peer access on, in the
   stream, when the stream's vGPU maps the other's memory; -1 otherwise */
static int peer_copy_async(void *dst, const void *src, size_t count, cudaStream_t stream,
                           int per_thread) {
  struct ferry_vgpu *v;
  uint32_t sid;
  int rc = ferry_stream_resolve(stream, per_thread, &v, &sid);
  if (rc) return rc;
  if ((rc = ferry_capture_refuse(v, sid, "a copy between two devices"))) return rc;
  return ferry_peer_copy_async(dst, src, count, v, sid);
}

static int pinned_not_device(const void *p) { return !ferry_vgpu_of(p) && ferry_host_pinned(p); }

/* async: 0 synchronous cudaMemcpy; 1 cudaMemcpyAsync */
static int copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                cudaStream_t stream, int per_thread, int async) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (count == 0) return 0;
  if (!dst || !src) return cudaErrorInvalidValue;
  if ((unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  kind = resolve_kind(dst, src, kind);
  /* Pinned host memory named as a copy's device side: under unified
     addressing CUDA copies it as host memory (XLA reads its results so).
     Its bytes may still be owed by a deferred copy into it: the stream's
     earlier work lands first. */
  int settle = 0;
  if ((kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) && pinned_not_device(src))
    kind = kind == cudaMemcpyDeviceToHost ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice, settle = 1;
  if ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) && pinned_not_device(dst))
    kind = kind == cudaMemcpyHostToDevice ? cudaMemcpyHostToHost : cudaMemcpyDeviceToHost, settle = 1;
  if (settle && (rc = (int)(per_thread ? cudaStreamSynchronize_ptsz(stream) : cudaStreamSynchronize(stream)))) {
    ferry_debug("copy of %zu bytes %p -> %p: the stream's synchronization failed (%d)", count, src, dst, rc);
    return rc;
  }
  GLOBALS_NOW(kind, dst, src);
  struct ferry_vgpu *dv = NULL, *sv = NULL;
  uint32_t sid = 0;
  switch (kind) {
  case cudaMemcpyHostToHost:
    memmove(dst, src, count);
    return 0;
  case cudaMemcpyHostToDevice: {
    if ((rc = device_side(dst, count, &dv)) || (rc = stream_id_for(dv, stream, per_thread, &sid, &async)))
      return rc;
    /* on a capturing stream: a node the client plays when the graph runs */
    if ((rc = async ? ferry_capture_host_copy(dv, sid, dst, count, src, count, count, 1,
                                              cudaMemcpyHostToDevice)
                    : ferry_capture_refuse(dv, sid, "cudaMemcpy / cuMemcpyHtoD (host to device)")) ||
        (!async && (rc = ferry_capture_unsafe())))
      return FERRY_CAPTURE_DONE(rc);
    if (ferry_is_local(dv) && (rc = ferry_local_copy(dv, dst, src, count, 1, sid, async)) != FERRY_NOT_LOCAL)
      return rc;
    if ((rc = ferry_shared_copy(dv, dst, src, count, 1, sid, async)) != FERRY_NOT_HELPER) return rc;
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
    if ((rc = device_side(src, count, &sv)) || (rc = stream_id_for(sv, stream, per_thread, &sid, &async)))
      return rc;
    if ((rc = async ? ferry_capture_host_copy(sv, sid, dst, count, src, count, count, 1,
                                              cudaMemcpyDeviceToHost)
                    : ferry_capture_refuse(sv, sid, "cudaMemcpy / cuMemcpyDtoH (device to host)")) ||
        (!async && (rc = ferry_capture_unsafe())))
      return FERRY_CAPTURE_DONE(rc);
    if (ferry_is_local(sv) && (rc = ferry_local_copy(sv, dst, src, count, 2, sid, async)) != FERRY_NOT_LOCAL)
      return rc;
    if ((rc = ferry_shared_copy(sv, dst, src, count, 0, sid, async)) != FERRY_NOT_HELPER) return rc;
    /* CUDA returns from an async copy into pageable memory only when it is
       done; pinned memory is filled in later, at the next synchronization */
    if (async && ferry_host_pinned(dst)) {
      struct ferry_memcpy_dtoh_async_args a = {(uint64_t)(uintptr_t)src, count, sid, 0};
      return ferry_call_deferred(sv, dst, &a);
    }
    struct ferry_memcpy_dtoh_args a = {(uint64_t)(uintptr_t)src, count, sid};
    struct ferry_bulk bulk = {.out = dst, .out_len = count};
    return ferry_call(sv, FERRY_CALL_memcpy_dtoh, &a, NULL, &bulk);
  }
  case cudaMemcpyDeviceToDevice: {
    if ((rc = device_side(src, count, &sv)) || (rc = device_side(dst, count, &dv))) return rc;
    if (sv != dv) {
      if (async && (rc = peer_copy_async(dst, src, count, stream, per_thread)) >= 0) return rc;
      if ((rc = stream_id_for(dv, stream, per_thread, &sid, &async)) ||
          (rc = ferry_capture_refuse(dv, sid, "a copy between two devices")))
        return rc;
      return (rc = wait_stream(stream, per_thread)) ? rc : copy_between(dst, src, count);
    }
    if ((rc = stream_id_for(dv, stream, per_thread, &sid, &async))) return rc;
    if ((rc = ferry_capture_copy(dv, sid, (uint64_t)(uintptr_t)dst, count, (uint64_t)(uintptr_t)src,
                                 count, count, 1)))
      return FERRY_CAPTURE_DONE(rc);
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

/* ---- peer copies: between two vGPUs, or within one ---- */
/* p lies in a live allocation of device `dev` (count bytes from p) */
static int on_device(const void *p, size_t count, int dev) {
  struct ferry_vgpu *v;
  if (dev < 0 || dev >= ferry.count) return cudaErrorInvalidDevice;
  int rc = device_side(p, count, &v);
  return rc ? rc : v != &ferry.vgpus[dev] ? cudaErrorInvalidValue : 0;
}

static int copy_peer(void *dst, int dst_dev, const void *src, int src_dev, size_t count,
                     cudaStream_t stream, int async) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (count == 0) return 0;
  if ((rc = on_device(dst, count, dst_dev)) || (rc = on_device(src, count, src_dev))) return rc;
  if (dst_dev == src_dev) return copy(dst, src, count, cudaMemcpyDeviceToDevice, stream, 0, async);
  if (async && (rc = peer_copy_async(dst, src, count, stream, 0)) >= 0) return rc;
  struct ferry_vgpu *v;
  uint32_t sid;
  if ((rc = ferry_stream_resolve(stream, 0, &v, &sid)) ||
      (rc = ferry_capture_refuse(v, sid, "cudaMemcpyPeer between two devices")))
    return rc;
  return (rc = wait_stream(stream, 0)) ? rc : copy_between(dst, src, count);
}

cudaError_t cudaMemcpyPeer(void *dst, int dst_dev, const void *src, int src_dev, size_t count) {
  return ferry_ret(copy_peer(dst, dst_dev, src, src_dev, count, NULL, 0));
}
cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_dev, const void *src, int src_dev,
                                size_t count, cudaStream_t stream) {
  return ferry_ret(copy_peer(dst, dst_dev, src, src_dev, count, stream, 1));
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
  GLOBALS_NOW(kind, dst, src);
  uint64_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
  struct ferry_vgpu *v;
  uint32_t sid;
  if (kind == cudaMemcpyHostToHost) {
    for (size_t r = 0; r < height; r++)
      memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return 0;
  }
  if (kind == cudaMemcpyHostToDevice) {
    if ((rc = device_side(dst, dspan, &v)) || (rc = stream_id_for(v, stream, per_thread, &sid, &async)))
      return rc;
    if ((rc = async ? ferry_capture_host_copy(v, sid, dst, dpitch, src, spitch, width, height,
                                              cudaMemcpyHostToDevice)
                    : ferry_capture_refuse(v, sid, "cudaMemcpy2D / cuMemcpy2D (host to device)")) ||
        (!async && (rc = ferry_capture_unsafe())))
      return FERRY_CAPTURE_DONE(rc);
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
    if ((rc = device_side(src, sspan, &v)) || (rc = stream_id_for(v, stream, per_thread, &sid, &async)))
      return rc;
    if ((rc = async ? ferry_capture_host_copy(v, sid, dst, dpitch, src, spitch, width, height,
                                              cudaMemcpyDeviceToHost)
                    : ferry_capture_refuse(v, sid, "cudaMemcpy2D / cuMemcpy2D (device to host)")) ||
        (!async && (rc = ferry_capture_unsafe())))
      return FERRY_CAPTURE_DONE(rc);
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
    ferry_log("cudaMemcpy2D between two devices is not supported (cudaMemcpy and cudaMemcpyPeer are)");
    return cudaErrorNotSupported;
  }
  if ((rc = stream_id_for(v, stream, per_thread, &sid, &async))) return rc;
  if ((rc = ferry_capture_copy(v, sid, (uint64_t)(uintptr_t)dst, dpitch, (uint64_t)(uintptr_t)src,
                               spitch, width, height)))
    return FERRY_CAPTURE_DONE(rc);
  struct ferry_memcpy2d_dtod_args a = {(uint64_t)(uintptr_t)dst, dpitch, (uint64_t)(uintptr_t)src,
                                       spitch, width, height, sid};
  /* device to device: CUDA does no host-side synchronization for the
     synchronous form either (API synchronization behavior); the stream
     orders it */
  return ferry_call(v, FERRY_CALL_memcpy2d_dtod, &a, NULL, NULL);
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
  dst = global_now(dst);
  struct ferry_vgpu *v;
  uint32_t sid;
  int async = 1; /* a memset is ordered by its stream either way */
  if ((rc = device_side(dst, pitch * (height - 1) + width, &v)) ||
      (rc = stream_id_for(v, stream, per_thread, &sid, &async)))
    return rc;
  if ((rc = ferry_capture_memset(v, sid, (uint64_t)(uintptr_t)dst, height == 1 ? width : pitch,
                                 (uint32_t)value & 0xff, 1, width, height)))
    return FERRY_CAPTURE_DONE(rc);
  if (height == 1) {
    struct ferry_memset_args a = {(uint64_t)(uintptr_t)dst, (uint32_t)value & 0xff, width, sid};
    return ferry_call(v, FERRY_CALL_memset, &a, NULL, NULL);
  }
  struct ferry_memset2d_args a = {(uint64_t)(uintptr_t)dst, pitch, (uint32_t)value & 0xff, width,
                                  height, sid};
  return ferry_call(v, FERRY_CALL_memset2d, &a, NULL, NULL);
}

/* cuMemsetD16/D32 and their 2D forms: width in elements of elem (2 or 4)
   bytes; a value whose bytes are all equal takes the byte set */
int ferry_memset_wide(void *dst, size_t pitch, uint32_t value, unsigned elem, size_t width,
                      size_t height, cudaStream_t stream, int per_thread) {
  uint32_t byte = value & 0xff;
  int uniform = elem == 1 || (elem == 2 ? value == byte * 0x0101u : value == byte * 0x01010101u);
  if (height == 1) pitch = width * elem;
  if (uniform) return set2d(dst, pitch, (int)byte, width * elem, height, stream, per_thread);
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (width == 0 || height == 0) return 0;
  dst = global_now(dst);
  if (((uintptr_t)dst | pitch) % elem) return cudaErrorInvalidValue; /* CUDA wants alignment */
  if (width * elem > pitch && height > 1) return cudaErrorInvalidPitchValue;
  struct ferry_vgpu *v;
  uint32_t sid;
  int async = 1;
  if ((rc = device_side(dst, pitch * (height - 1) + width * elem, &v)) ||
      (rc = stream_id_for(v, stream, per_thread, &sid, &async)))
    return rc;
  if ((rc = ferry_capture_memset(v, sid, (uint64_t)(uintptr_t)dst, pitch, value, elem, width, height)))
    return FERRY_CAPTURE_DONE(rc);
  struct ferry_memset_wide_args a = {(uint64_t)(uintptr_t)dst, pitch, value, elem, width, height, sid};
  return ferry_call(v, FERRY_CALL_memset_wide, &a, NULL, NULL);
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
  if (v) {
    pthread_mutex_lock(&v->arena_lock);
    int live = ferry_arena_find(&v->arena, (uint64_t)(uintptr_t)ptr) != NULL;
    pthread_mutex_unlock(&v->arena_lock);
    if (!live) return ferry_ret(cudaErrorInvalidValue);
    attr->type = cudaMemoryTypeDevice;
    attr->device = v->index;
    attr->devicePointer = (void *)ptr;
  } else if (ferry_host_managed(ptr, NULL, NULL)) {
    attr->type = cudaMemoryTypeManaged;
    attr->device = ferry_thread()->device;
    attr->devicePointer = attr->hostPointer = (void *)ptr;
  } else if (ferry_host_pinned(ptr)) {
    attr->type = cudaMemoryTypeHost;
    attr->device = ferry_thread()->device;
    attr->hostPointer = (void *)ptr;
  }
  return cudaSuccess;
}
