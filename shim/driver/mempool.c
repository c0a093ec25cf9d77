/*
 * Driver API: stream-ordered allocation from pools (cuMemAllocFromPoolAsync,
 * cuMemPool*, the device's default and current pools), over the runtime
 * front end's pools (runtime/mempool.c): a CUmemoryPool is a cudaMemPool_t,
 * a CUdevice a device ordinal, and the structures and attributes are laid
 * out and numbered alike.
 */
#include <limits.h>

#include "shim/driver/cu.h"

#define POOL(p) ((cudaMemPool_t)(p))

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s,
                                int per_thread) {
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  void *p = NULL;
  CUresult rc = READY_THEN(per_thread ? cudaMallocFromPoolAsync_ptsz(&p, size, POOL(pool), (cudaStream_t)s)
                                      : cudaMallocFromPoolAsync(&p, size, POOL(pool), (cudaStream_t)s));
  if (!rc) *dptr = (CUdeviceptr)(uintptr_t)p;
  return rc;
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t n, CUmemoryPool pool, CUstream s) {
  return alloc_from_pool(d, n, pool, s, 0);
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *d, size_t n, CUmemoryPool pool, CUstream s) {
  return alloc_from_pool(d, n, pool, s, 1);
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
  return READY_THEN(cudaDeviceGetDefaultMemPool((cudaMemPool_t *)pool, (int)dev));
}
CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  return READY_THEN(cudaDeviceGetMemPool((cudaMemPool_t *)pool, (int)dev));
}
CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  return READY_THEN(cudaDeviceSetMemPool((int)dev, POOL(pool)));
}
CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool, CUmemLocation *loc, CUmemAllocationType type) {
  return READY_THEN(cudaMemGetDefaultMemPool((cudaMemPool_t *)pool, (struct cudaMemLocation *)loc,
                                             (enum cudaMemAllocationType)type));
}
CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *loc, CUmemAllocationType type) {
  return READY_THEN(cudaMemGetMemPool((cudaMemPool_t *)pool, (struct cudaMemLocation *)loc,
                                      (enum cudaMemAllocationType)type));
}
CUresult cuMemSetMemPool(CUmemLocation *loc, CUmemAllocationType type, CUmemoryPool pool) {
  return READY_THEN(cudaMemSetMemPool((struct cudaMemLocation *)loc, (enum cudaMemAllocationType)type,
                                      POOL(pool)));
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
  return READY_THEN(cudaMemPoolCreate((cudaMemPool_t *)pool, (const struct cudaMemPoolProps *)props));
}
CUresult cuMemPoolDestroy(CUmemoryPool pool) { return READY_THEN(cudaMemPoolDestroy(POOL(pool))); }
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  return READY_THEN(cudaMemPoolTrimTo(POOL(pool), keep));
}
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  return READY_THEN(cudaMemPoolSetAttribute(POOL(pool), (enum cudaMemPoolAttr)attr, value));
}
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  return READY_THEN(cudaMemPoolGetAttribute(POOL(pool), (enum cudaMemPoolAttr)attr, value));
}
CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count) {
  return READY_THEN(cudaMemPoolSetAccess(POOL(pool), (const struct cudaMemAccessDesc *)map, count));
}
CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool pool, CUmemLocation *loc) {
  return READY_THEN(cudaMemPoolGetAccess((enum cudaMemAccessFlags *)flags, POOL(pool),
                                         (struct cudaMemLocation *)loc));
}

/* sharing pools between processes: the runtime front end's (runtime/mempool_ipc.c) */
CUresult cuMemPoolExportToShareableHandle(void *handle, CUmemoryPool pool,
                                          CUmemAllocationHandleType type, unsigned long long flags) {
  if (flags > UINT_MAX) return CUDA_ERROR_INVALID_VALUE;
  return READY_THEN(cudaMemPoolExportToShareableHandle(handle, POOL(pool),
                                                       (enum cudaMemAllocationHandleType)type,
                                                       (unsigned)flags));
}
CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool, void *handle,
                                            CUmemAllocationHandleType type, unsigned long long flags) {
  if (flags > UINT_MAX) return CUDA_ERROR_INVALID_VALUE;
  return READY_THEN(cudaMemPoolImportFromShareableHandle((cudaMemPool_t *)pool, handle,
                                                         (enum cudaMemAllocationHandleType)type,
                                                         (unsigned)flags));
}
CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *data, CUdeviceptr ptr) {
  return READY_THEN(cudaMemPoolExportPointer((struct cudaMemPoolPtrExportData *)data, (void *)(uintptr_t)ptr));
}
CUresult cuMemPoolImportPointer(CUdeviceptr *ptr, CUmemoryPool pool, CUmemPoolPtrExportData *data) {
  return READY_THEN(cudaMemPoolImportPointer((void **)ptr, POOL(pool),
                                             (struct cudaMemPoolPtrExportData *)data));
}
