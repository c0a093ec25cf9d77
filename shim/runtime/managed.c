/*
 * Managed memory (cudaMallocManaged) the way CUDA serves it on devices
 * without concurrent managed access: one address for the host and the
 * device, the host's writes visible to the next kernel, the kernels' to the
 * host after a synchronization. The memory is a block of the program's
 * shared host arena; on a server, its shadow is kept coherent around every
 * piece of work of its vGPU (core/shadow.c, docs/mapped-memory.md); in the
 * process or a helper the GPU reaches it directly. The device attributes
 * say so (managedMemory 1, concurrentManagedAccess 0, core/init.c), so
 * programs take the path they take on such devices.
 */
#include <cuda.h>

#include "common/log.h"
#include "shim/core/host.h"
#include "shim/core/shadow.h"
#include "shim/runtime/runtime.h"

cudaError_t cudaMallocManaged(void **ptr, size_t size, unsigned int flags) {
  int err = ferry_ensure_init();
  if (err) return ferry_ret(err);
  if (!ptr || !size || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
    return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  void *p = ferry_host_managed_alloc(size, flags);
  if (!p) {
    char why[160] = "";
    if (ferry_host_arena_fd(why, sizeof why) < 0)
      ferry_log("cudaMallocManaged needs ferry's shared host memory, which is unavailable (%s); "
                "returning cudaErrorMemoryAllocation", why);
    return ferry_ret(cudaErrorMemoryAllocation);
  }
  if ((err = ferry_shadow_manage(v, (uint64_t)(uintptr_t)p, size))) {
    ferry_host_managed_free(p);
    return ferry_ret(err);
  }
  *ptr = p;
  return cudaSuccess;
}

/* [p, p + count) lies in one managed block */
static int managed_range(const void *p, size_t count) {
  uint64_t base, size;
  if (!ferry_host_managed(p, &base, &size)) return 0;
  return (uint64_t)(uintptr_t)p - base + count <= size;
}

/* To the device: the pages the host changed go now, in the stream (the
   stream's vGPU's, which may be another than to.id: the one that has the
   memory); to the host: the stream's work is waited for, which brings the
   pages its kernels changed back. */
static int prefetch(const void *p, size_t count, struct cudaMemLocation to, cudaStream_t stream,
                    int per_thread) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (!count || !managed_range(p, count)) return cudaErrorInvalidValue;
  struct ferry_vgpu *v;
  uint32_t sid;
  if ((rc = ferry_stream_resolve(stream, per_thread, &v, &sid))) return rc;
  switch (to.type) {
  case cudaMemLocationTypeDevice:
    if (to.id < 0 || to.id >= ferry.count) return cudaErrorInvalidDevice;
    ferry_managed_prefetched(p, count, to);
    /* the pages go now, in the stream: a transfer the program can overlap
       with its own work, as CUDA's prefetch is */
    return ferry_shadow_prefetch(v, sid);
  case cudaMemLocationTypeHost:
  case cudaMemLocationTypeHostNuma:
  case cudaMemLocationTypeHostNumaCurrent:
    ferry_managed_prefetched(p, count, to);
    return per_thread ? cudaStreamSynchronize_ptsz(stream) : cudaStreamSynchronize(stream);
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t cudaMemPrefetchAsync(const void *p, size_t count, struct cudaMemLocation to,
                                 unsigned int flags, cudaStream_t stream) {
  if (flags) return ferry_ret(cudaErrorInvalidValue);
  return ferry_ret(prefetch(p, count, to, stream, 0));
}
cudaError_t cudaMemPrefetchAsync_ptsz(const void *p, size_t count, struct cudaMemLocation to,
                                      unsigned int flags, cudaStream_t stream) {
  if (flags) return ferry_ret(cudaErrorInvalidValue);
  return ferry_ret(prefetch(p, count, to, stream, 1));
}

/* Hints about where pages should live: the pages move at the points above
   whatever the hint, so a valid one is kept (managed_advice.c) and changes
   nothing else. */
cudaError_t cudaMemAdvise(const void *p, size_t count, enum cudaMemoryAdvise advice,
                          struct cudaMemLocation location) {
  int rc = ferry_ensure_init();
  if (rc) return ferry_ret(rc);
  if (!count || !managed_range(p, count)) return ferry_ret(cudaErrorInvalidValue);
  if (advice < cudaMemAdviseSetReadMostly || advice > cudaMemAdviseUnsetAccessedBy)
    return ferry_ret(cudaErrorInvalidValue);
  if (location.type == cudaMemLocationTypeDevice && (location.id < 0 || location.id >= ferry.count))
    return ferry_ret(cudaErrorInvalidDevice);
  ferry_managed_advise(p, count, advice, location); /* for cudaMemRangeGetAttribute */
  return cudaSuccess;
}

/* which streams may touch a block: without concurrent access every
   stream's work is treated as touching every block, so any attachment holds */
static int attach(cudaStream_t stream, void *p, size_t length, unsigned flags, int per_thread) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  struct ferry_vgpu *v;
  uint32_t sid;
  if ((rc = ferry_stream_resolve(stream, per_thread, &v, &sid))) return rc;
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost && flags != cudaMemAttachSingle)
    return cudaErrorInvalidValue;
  return managed_range(p, length ? length : 1) ? 0 : cudaErrorInvalidValue;
}
cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void *p, size_t length, unsigned int flags) {
  return ferry_ret(attach(stream, p, length, flags, 0));
}
cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void *p, size_t length,
                                          unsigned int flags) {
  return ferry_ret(attach(stream, p, length, flags, 1));
}
