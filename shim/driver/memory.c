/*
 * Driver API: device and host memory, copies and sets. A CUdeviceptr is an
 * address in the vGPU's client-chosen arena, the same the runtime front
 * end hands out, so memory from cudaMalloc and cuMemAlloc mixes freely;
 * each call runs through the runtime front end's entry point.
 */
#include <string.h>

#include "shim/driver/cu.h"

#define DEV(p) ((void *)(uintptr_t)(p))

/* ---- allocation ---- */
CUresult cuMemAlloc(CUdeviceptr *dptr, size_t size) {
  if (!dptr || !size) return CUDA_ERROR_INVALID_VALUE;
  void *p = NULL;
  CUresult rc = CURRENT_THEN(cudaMalloc(&p, size));
  if (!rc) *dptr = (CUdeviceptr)(uintptr_t)p;
  return rc;
}

CUresult cuMemAllocPitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                         unsigned int elem) {
  if (!dptr || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
    return CUDA_ERROR_INVALID_VALUE;
  void *p = NULL;
  CUresult rc = CURRENT_THEN(cudaMallocPitch(&p, pitch, width, height));
  if (!rc) *dptr = (CUdeviceptr)(uintptr_t)p;
  return rc;
}

/* 0 is freed without a word, as NVIDIA's runtime's cudaFree(NULL) relies on */
CUresult cuMemFree(CUdeviceptr dptr) { return READY_THEN(cudaFree(DEV(dptr))); }

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream s, int per_thread) {
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  void *p = NULL;
  CUresult rc = CURRENT_THEN(per_thread ? cudaMallocAsync_ptsz(&p, size, (cudaStream_t)s)
                                        : cudaMallocAsync(&p, size, (cudaStream_t)s));
  if (!rc) *dptr = (CUdeviceptr)(uintptr_t)p;
  return rc;
}
CUresult cuMemAllocAsync(CUdeviceptr *d, size_t n, CUstream s) { return alloc_async(d, n, s, 0); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *d, size_t n, CUstream s) { return alloc_async(d, n, s, 1); }
CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s) {
  return READY_THEN(cudaFreeAsync(DEV(d), (cudaStream_t)s));
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s) {
  return READY_THEN(cudaFreeAsync_ptsz(DEV(d), (cudaStream_t)s));
}

CUresult cuMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  return CURRENT_THEN(cudaMemGetInfo(free_bytes, total_bytes));
}

CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr dptr) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_vgpu *v = ferry_vgpu_of(DEV(dptr));
  if (!v) return CUDA_ERROR_NOT_FOUND;
  pthread_mutex_lock(&v->arena_lock);
  const struct ferry_region *r = ferry_arena_find(&v->arena, dptr);
  if (r && base) *base = r->addr;
  if (r && size) *size = r->size;
  pthread_mutex_unlock(&v->arena_lock);
  return r ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* ---- host memory (CU_MEMHOSTALLOC_* equal cudaHostAlloc*, CU_MEMHOSTREGISTER_* cudaHostRegister*) */
CUresult cuMemAllocHost(void **pp, size_t size) { return CURRENT_THEN(cudaMallocHost(pp, size)); }
CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags) {
  return CURRENT_THEN(cudaHostAlloc(pp, size, flags));
}
CUresult cuMemFreeHost(void *p) { return READY_THEN(cudaFreeHost(p)); }
CUresult cuMemHostRegister(void *p, size_t size, unsigned int flags) {
  return CURRENT_THEN(cudaHostRegister(p, size, flags));
}
CUresult cuMemHostUnregister(void *p) { return READY_THEN(cudaHostUnregister(p)); }
CUresult cuMemHostGetFlags(unsigned int *flags, void *p) { return READY_THEN(cudaHostGetFlags(flags, p)); }
/* ---- managed memory (runtime/managed.c; the driver's CUmemLocation and
   advice values are the runtime's) ---- */
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags) {
  void *p = NULL;
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = CURRENT_THEN(cudaMallocManaged(&p, size, flags));
  if (rc == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
  return rc;
}
static struct cudaMemLocation location_of(CUmemLocation l) {
  return (struct cudaMemLocation){.type = (enum cudaMemLocationType)l.type, .id = l.id};
}
static CUmemLocation device_location(CUdevice d) {
  return (CUmemLocation){.type = d == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE,
                         .id = d == CU_DEVICE_CPU ? 0 : d};
}
CUresult cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation to, unsigned int flags, CUstream s) {
  return READY_THEN(cudaMemPrefetchAsync(DEV(p), n, location_of(to), flags, (cudaStream_t)s));
}
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t n, CUmemLocation to, unsigned int flags,
                                    CUstream s) {
  return READY_THEN(cudaMemPrefetchAsync_ptsz(DEV(p), n, location_of(to), flags, (cudaStream_t)s));
}
#undef cuMemPrefetchAsync
CUresult cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice to, CUstream s) {
  return cuMemPrefetchAsync_v2(p, n, device_location(to), 0, s);
}
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t n, CUdevice to, CUstream s) {
  return cuMemPrefetchAsync_v2_ptsz(p, n, device_location(to), 0, s);
}
CUresult cuMemAdvise_v2(CUdeviceptr p, size_t n, CUmem_advise advice, CUmemLocation where) {
  return READY_THEN(cudaMemAdvise(DEV(p), n, (enum cudaMemoryAdvise)advice, location_of(where)));
}
#undef cuMemAdvise
CUresult cuMemAdvise(CUdeviceptr p, size_t n, CUmem_advise advice, CUdevice d) {
  return cuMemAdvise_v2(p, n, advice, device_location(d));
}
CUresult cuMemRangeGetAttribute(void *data, size_t size, CUmem_range_attribute attr, CUdeviceptr p,
                                size_t count) {
  return READY_THEN(cudaMemRangeGetAttribute(data, size, (enum cudaMemRangeAttribute)attr, DEV(p), count));
}
CUresult cuMemRangeGetAttributes(void **data, size_t *sizes, CUmem_range_attribute *attrs, size_t n,
                                 CUdeviceptr p, size_t count) {
  return READY_THEN(cudaMemRangeGetAttributes(data, sizes, (enum cudaMemRangeAttribute *)attrs, n, DEV(p), count));
}
#undef cuStreamAttachMemAsync
CUresult cuStreamAttachMemAsync(CUstream s, CUdeviceptr p, size_t n, unsigned int flags) {
  return READY_THEN(cudaStreamAttachMemAsync((cudaStream_t)s, DEV(p), n, flags));
}
CUresult cuStreamAttachMemAsync_ptsz(CUstream s, CUdeviceptr p, size_t n, unsigned int flags) {
  return READY_THEN(cudaStreamAttachMemAsync_ptsz((cudaStream_t)s, DEV(p), n, flags));
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr *dptr, void *p, unsigned int flags) {
  void *d = NULL;
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = CURRENT_THEN(cudaHostGetDevicePointer(&d, p, flags));
  if (rc == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)d;
  return rc;
}

/* ---- copies ---- */
#define COPY(dst, src, n, kind, per_thread)                                                    \
  READY_THEN((per_thread) ? cudaMemcpy_ptds((dst), (src), (n), (kind))                         \
                          : cudaMemcpy((dst), (src), (n), (kind)))
#define COPY_ASYNC(dst, src, n, kind, s, per_thread)                                           \
  READY_THEN((per_thread) ? cudaMemcpyAsync_ptsz((dst), (src), (n), (kind), (cudaStream_t)(s)) \
                          : cudaMemcpyAsync((dst), (src), (n), (kind), (cudaStream_t)(s)))

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
  return COPY(DEV(dst), src, n, cudaMemcpyHostToDevice, 0);
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n) {
  return COPY(DEV(dst), src, n, cudaMemcpyHostToDevice, 1);
}
CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
  return COPY(dst, DEV(src), n, cudaMemcpyDeviceToHost, 0);
}
CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) {
  return COPY(dst, DEV(src), n, cudaMemcpyDeviceToHost, 1);
}
CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return COPY(DEV(dst), DEV(src), n, cudaMemcpyDeviceToDevice, 0);
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return COPY(DEV(dst), DEV(src), n, cudaMemcpyDeviceToDevice, 1);
}
/* unified addressing: the addresses tell the direction */
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return COPY(DEV(dst), DEV(src), n, cudaMemcpyDefault, 0);
}
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return COPY(DEV(dst), DEV(src), n, cudaMemcpyDefault, 1);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  return COPY_ASYNC(DEV(dst), src, n, cudaMemcpyHostToDevice, s, 0);
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  return COPY_ASYNC(DEV(dst), src, n, cudaMemcpyHostToDevice, s, 1);
}
CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  return COPY_ASYNC(dst, DEV(src), n, cudaMemcpyDeviceToHost, s, 0);
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  return COPY_ASYNC(dst, DEV(src), n, cudaMemcpyDeviceToHost, s, 1);
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return COPY_ASYNC(DEV(dst), DEV(src), n, cudaMemcpyDeviceToDevice, s, 0);
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return COPY_ASYNC(DEV(dst), DEV(src), n, cudaMemcpyDeviceToDevice, s, 1);
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return COPY_ASYNC(DEV(dst), DEV(src), n, cudaMemcpyDefault, s, 0);
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return COPY_ASYNC(DEV(dst), DEV(src), n, cudaMemcpyDefault, s, 1);
}

static int ctx_device(CUcontext c) {
  struct ferry_vgpu *v = ferry_cu_ctx_vgpu(c);
  return v ? v->index : -1;
}
CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n) {
  return READY_THEN(cudaMemcpyPeer(DEV(dst), ctx_device(dctx), DEV(src), ctx_device(sctx), n));
}
CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                           size_t n, CUstream s) {
  return READY_THEN(cudaMemcpyPeerAsync(DEV(dst), ctx_device(dctx), DEV(src), ctx_device(sctx), n,
                                        (cudaStream_t)s));
}

CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n) {
  return cuMemcpyPeer(dst, dctx, src, sctx, n);
}
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                                size_t n, CUstream s) {
  return cuMemcpyPeerAsync(dst, dctx, src, sctx, n, s);
}

/* one side of a 2D copy: its address at (x, y) and its pitch; arrays are
   not served on this path */
static CUresult side(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array,
                     size_t pitch, size_t x, size_t y, char **p, int *on_device) {
  switch (type) {
  case CU_MEMORYTYPE_HOST: *p = (char *)host; *on_device = 0; break;
  case CU_MEMORYTYPE_DEVICE: *p = DEV(dev); *on_device = 1; break;
  case CU_MEMORYTYPE_UNIFIED: *p = DEV(dev); *on_device = ferry_vgpu_of(*p) != NULL; break;
  case CU_MEMORYTYPE_ARRAY: /* copy2d hands these to ferry_cu_copy2d_array */
    (void)array;
    return CUDA_ERROR_INVALID_VALUE;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  *p += y * pitch + x;
  return CUDA_SUCCESS;
}

static CUresult copy2d(const CUDA_MEMCPY2D *c, CUstream s, int async, int per_thread) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
    return ferry_cu_copy2d_array(c, s, async, per_thread);
  char *src = NULL, *dst = NULL;
  int sdev = 0, ddev = 0;
  CUresult rc = side(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcPitch,
                     c->srcXInBytes, c->srcY, &src, &sdev);
  if (!rc) rc = side(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstPitch,
                     c->dstXInBytes, c->dstY, &dst, &ddev);
  if (rc) return rc;
  enum cudaMemcpyKind kind = sdev ? (ddev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                  : (ddev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  size_t dp = c->dstPitch ? c->dstPitch : c->WidthInBytes, sp = c->srcPitch ? c->srcPitch : c->WidthInBytes;
  cudaStream_t st = (cudaStream_t)s;
  if (!async)
    return READY_THEN(per_thread ? cudaMemcpy2D_ptds(dst, dp, src, sp, c->WidthInBytes, c->Height, kind)
                                 : cudaMemcpy2D(dst, dp, src, sp, c->WidthInBytes, c->Height, kind));
  return READY_THEN(per_thread
                        ? cudaMemcpy2DAsync_ptsz(dst, dp, src, sp, c->WidthInBytes, c->Height, kind, st)
                        : cudaMemcpy2DAsync(dst, dp, src, sp, c->WidthInBytes, c->Height, kind, st));
}
CUresult cuMemcpy2D(const CUDA_MEMCPY2D *c) { return copy2d(c, NULL, 0, 0); }
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *c) { return copy2d(c, NULL, 0, 1); }
CUresult cuMemcpy2DUnaligned(const CUDA_MEMCPY2D *c) { return copy2d(c, NULL, 0, 0); }
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *c) { return copy2d(c, NULL, 0, 1); }
CUresult cuMemcpy2DAsync(const CUDA_MEMCPY2D *c, CUstream s) { return copy2d(c, s, 1, 0); }
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *c, CUstream s) { return copy2d(c, s, 1, 1); }

/* ---- sets: byte sets as the runtime's, 16/32-bit ones through ferry_memset_wide; the
   synchronous forms are the asynchronous ones on the default stream ---- */
static CUresult set(CUdeviceptr d, size_t pitch, uint32_t value, unsigned elem, size_t w, size_t h,
                    CUstream s, int per_thread) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  /* the synchronous forms do not wait either: on device memory (all ferry
     sets) CUDA's return at once, ordered by the stream (the driver API's
     "API synchronization behavior"); waiting serialized loops of sets and
     launches that CUDA pipelines */
  return FERRY_CU_RT(ferry_memset_wide(DEV(d), pitch, value, elem, w, h, (cudaStream_t)s, per_thread));
}

#define SETS(bits, type, elem)                                                                 \
  CUresult cuMemsetD##bits(CUdeviceptr d, type v, size_t n) {                                  \
    return set(d, 0, v, elem, n, 1, NULL, 0);                                                  \
  }                                                                                            \
  CUresult cuMemsetD##bits##_v2_ptds(CUdeviceptr d, type v, size_t n) {                        \
    return set(d, 0, v, elem, n, 1, NULL, 1);                                                  \
  }                                                                                            \
  CUresult cuMemsetD##bits##Async(CUdeviceptr d, type v, size_t n, CUstream s) {               \
    return set(d, 0, v, elem, n, 1, s, 0);                                                     \
  }                                                                                            \
  CUresult cuMemsetD##bits##Async_ptsz(CUdeviceptr d, type v, size_t n, CUstream s) {          \
    return set(d, 0, v, elem, n, 1, s, 1);                                                     \
  }                                                                                            \
  CUresult cuMemsetD2D##bits(CUdeviceptr d, size_t p, type v, size_t w, size_t h) {            \
    return set(d, p, v, elem, w, h, NULL, 0);                                                  \
  }                                                                                            \
  CUresult cuMemsetD2D##bits##_v2_ptds(CUdeviceptr d, size_t p, type v, size_t w, size_t h) {  \
    return set(d, p, v, elem, w, h, NULL, 1);                                                  \
  }                                                                                            \
  CUresult cuMemsetD2D##bits##Async(CUdeviceptr d, size_t p, type v, size_t w, size_t h,       \
                                    CUstream s) {                                              \
    return set(d, p, v, elem, w, h, s, 0);                                                     \
  }                                                                                            \
  CUresult cuMemsetD2D##bits##Async_ptsz(CUdeviceptr d, size_t p, type v, size_t w, size_t h,  \
                                         CUstream s) {                                         \
    return set(d, p, v, elem, w, h, s, 1);                                                     \
  }
SETS(8, unsigned char, 1)
SETS(16, unsigned short, 2)
SETS(32, unsigned int, 4)

/* ---- pointer queries ---- */
static CUresult pointer_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr) {
  struct ferry_vgpu *v = ferry_vgpu_of(DEV(ptr));
  const struct ferry_region *r = NULL;
  uint64_t base = 0, size = 0, handle = 0;
  int reserved = 0;
  if (v) {
    pthread_mutex_lock(&v->arena_lock);
    r = ferry_arena_find(&v->arena, ptr);
    if (r) base = r->addr, size = r->size, handle = r->handle;
    /* program VMM memory: CUDA's range is the whole reservation, mapped or not */
    const struct ferry_reservation *res = ferry_arena_reservation(&v->arena, ptr);
    if (res && (!r || handle)) base = res->addr, size = res->size, reserved = 1;
    pthread_mutex_unlock(&v->arena_lock);
  }
  if (!r && reserved) { /* reserved, nothing mapped there */
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = base; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = size; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(int *)data = 0; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  int shared;
  int pinned = !r && ferry_host_block(DEV(ptr), &base, &size, &shared);
  if (!r && !pinned) return CUDA_ERROR_INVALID_VALUE; /* memory the driver does not know */
  switch (attr) {
  case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    if (!handle) break;
    *(unsigned long long *)data = ferry_cu_vmm_handle_types(handle);
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    if (!handle) break;
    *(int *)data = 0; /* cudaIpcGetMemHandle is for cudaMalloc's memory */
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_CONTEXT:
    *(CUcontext *)data = ferry_cu_primary(r ? v->index : ferry_thread()->device);
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    *(CUmemorytype *)data = r ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
  case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    if ((attr == CU_POINTER_ATTRIBUTE_HOST_POINTER) == (r != NULL)) return CUDA_ERROR_INVALID_VALUE;
    *(void **)data = DEV(ptr);
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    *(int *)data = r ? v->index : ferry_thread()->device;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    *(int *)data = !r && ferry_host_managed(DEV(ptr), NULL, NULL);
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_MAPPED:
  case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    *(int *)data = 1;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    *(unsigned long long *)data = r ? base : (unsigned long long)ptr;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    *(CUdeviceptr *)data = base;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: /* NULL for memory not from a pool, as in CUDA */
    *(CUmemoryPool *)data = r ? (CUmemoryPool)ferry_mempool_of(v, ptr) : NULL;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    *(size_t *)data = size;
    return CUDA_SUCCESS;
  default:
    break;
  }
  return ferry_cu_unsupported("a cuPointerGetAttribute attribute other than context, type, "
                              "pointers, ordinal, managed, mapped, sync, buffer id, range and pool");
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr) {
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  return rc ? rc : pointer_attribute(data, attr, ptr);
}

/* attributes CUDA cannot answer for this pointer are left as they are */
CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
                                CUdeviceptr ptr) {
  if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  for (unsigned i = 0; i < n; i++) {
    if (!data[i]) continue;
    rc = pointer_attribute(data[i], attrs[i], ptr);
    if (rc == CUDA_ERROR_NOT_SUPPORTED) return rc;
    if (rc && attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) *(CUmemorytype *)data[i] = 0;
  }
  return CUDA_SUCCESS;
}

/* every ferry copy is ordered as SYNC_MEMOPS asks */
CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attr, CUdeviceptr ptr) {
  (void)ptr;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (attr != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)
    return ferry_cu_unsupported("cuPointerSetAttribute of an attribute other than SYNC_MEMOPS");
  return ferry_cu_ready();
}
