/*
 * Memory pool IPC (cudaMemPoolExportToShareableHandle,
 * cudaMemPoolImportFromShareableHandle, cudaMemPoolExportPointer,
 * cudaMemPoolImportPointer; the driver's cuMemPool* forms call them) between
 * programs whose vGPUs are sessions of one ferry-server, on top of CUDA IPC
 * (ipc.c). A pool made with POSIX file descriptor handles has a random
 * token (mempool.c); its shareable handle is a sealed memfd holding the
 * token (common/ipc_fd.h); an exported pointer is its block's CUDA IPC
 * handle with the token beside it, so that a pointer is imported only into
 * its own pool. An imported pool is the token and the device that imported
 * it, where its pointers are mapped; a pointer is an IPC import, closed
 * when the program frees it.
 */
#include <cuda.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ipc_fd.h"
#include "common/grow.h"
#include "common/log.h"
#include "protocol/ipc.h"
#include "shim/core/link.h"
#include "shim/runtime/runtime.h"

#define IMPORTED_POOL_MAGIC 0x4c4f4f50u /* "POOL" */

struct imported_pool {
  uint32_t magic;
  int vgpu;       /* where its pointers are mapped: the device current at the import */
  uint64_t token; /* the exporter's pool */
};

struct imported_ptr {
  uint64_t ptr;
  struct imported_pool *pool;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct imported_pool **pools;
static size_t npools, cpools;
static struct imported_ptr *ptrs;
static size_t nptrs, cptrs;

/* lock held */
static struct imported_pool *find_pool(cudaMemPool_t h) {
  for (size_t i = 0; i < npools; i++)
    if ((cudaMemPool_t)pools[i] == h) return pools[i];
  return NULL;
}

int ferry_mempool_imported(cudaMemPool_t pool, int *vgpu) {
  pthread_mutex_lock(&lock);
  struct imported_pool *p = find_pool(pool);
  if (p) *vgpu = p->vgpu;
  pthread_mutex_unlock(&lock);
  return p != NULL;
}

int ferry_mempool_imported_destroy(cudaMemPool_t pool) {
  pthread_mutex_lock(&lock);
  struct imported_pool *p = find_pool(pool);
  int live = 0;
  for (size_t i = 0; p && i < nptrs; i++) live |= ptrs[i].pool == p;
  if (p && !live) {
    for (size_t i = 0; i < npools; i++)
      if (pools[i] == p) pools[i] = pools[--npools];
    free(p);
  }
  pthread_mutex_unlock(&lock);
  /* CUDA wants the imported pointers freed first */
  return !p ? -1 : live ? cudaErrorInvalidValue : 0;
}

/* ---- the exporter ---- */

cudaError_t cudaMemPoolExportToShareableHandle(void *handle, cudaMemPool_t pool,
                                               enum cudaMemAllocationHandleType type,
                                               unsigned int flags) {
  if (!handle || flags) return ferry_ret(cudaErrorInvalidValue);
  uint64_t token = 0;
  int rc = ferry_mempool_token(pool, &token);
  if (rc) return ferry_ret(rc);
  if (type != cudaMemHandleTypePosixFileDescriptor || !token) {
    ferry_log("cudaMemPoolExportToShareableHandle: ferry exports pools made with POSIX file "
              "descriptor handles (cudaMemHandleTypePosixFileDescriptor) as such only; "
              "returning cudaErrorInvalidValue");
    return ferry_ret(cudaErrorInvalidValue);
  }
  struct ferry_ipc_handle h = {.magic = FERRY_IPC_POOL_MAGIC, .spare = token};
  int fd = ferry_ipc_fd_make(&h);
  if (fd < 0) {
    ferry_log("cudaMemPoolExportToShareableHandle: no file descriptor for the pool (memfd_create: "
              "%s); returning cudaErrorMemoryAllocation", strerror(errno));
    return ferry_ret(cudaErrorMemoryAllocation);
  }
  *(int *)handle = fd;
  return cudaSuccess;
}

cudaError_t cudaMemPoolExportPointer(struct cudaMemPoolPtrExportData *data, void *ptr) {
  if (!data || !ptr) return ferry_ret(cudaErrorInvalidValue);
  int rc = ferry_ensure_init();
  if (rc) return ferry_ret(rc);
  struct ferry_vgpu *v = ferry_vgpu_of(ptr);
  uint64_t token = v ? ferry_mempool_block_token(v, (uint64_t)(uintptr_t)ptr) : 0;
  if (!token) {
    ferry_log("cudaMemPoolExportPointer: %p is not a block of a pool made with POSIX file "
              "descriptor handles; returning cudaErrorInvalidValue", ptr);
    return ferry_ret(cudaErrorInvalidValue);
  }
  struct ferry_ipc_handle h;
  if ((rc = ferry_ipc_export_mem(ptr, &h, "cudaMemPoolExportPointer"))) return ferry_ret(rc);
  h.spare = token;
  _Static_assert(sizeof h <= sizeof *data, "a pointer's export data holds a ferry IPC handle");
  memset(data, 0, sizeof *data);
  memcpy(data, &h, sizeof h);
  return cudaSuccess;
}

/* ---- the importer ---- */

cudaError_t cudaMemPoolImportFromShareableHandle(cudaMemPool_t *pool, void *handle,
                                                 enum cudaMemAllocationHandleType type,
                                                 unsigned int flags) {
  const char *call = "cudaMemPoolImportFromShareableHandle";
  if (!pool || flags) return ferry_ret(cudaErrorInvalidValue);
  if (type != cudaMemHandleTypePosixFileDescriptor) {
    ferry_log("%s of a handle type other than cudaMemHandleTypePosixFileDescriptor: ferry imports "
              "only the descriptors it exported; returning cudaErrorInvalidValue", call);
    return ferry_ret(cudaErrorInvalidValue);
  }
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  if ((err = ferry_ipc_local_refused(call, v))) return ferry_ret(err);
  int fd = (int)(intptr_t)handle;
  struct ferry_ipc_handle h;
  int why = ferry_ipc_fd_read(fd, &h);
  if (!why && h.magic != FERRY_IPC_POOL_MAGIC) why = FERRY_IPC_FD_NOT_OURS; /* a VMM handle's */
  if (why) {
    ferry_log("%s: descriptor %d is %s; ferry imports only descriptors that "
              "cudaMemPoolExportToShareableHandle made through ferry; returning "
              "cudaErrorInvalidValue", call, fd, ferry_ipc_fd_why(why));
    return ferry_ret(cudaErrorInvalidValue);
  }
  struct imported_pool *p = malloc(sizeof *p);
  if (!p) return ferry_ret(cudaErrorMemoryAllocation);
  *p = (struct imported_pool){IMPORTED_POOL_MAGIC, v->index, h.spare};
  pthread_mutex_lock(&lock);
  int rc = ferry_grow((void **)&pools, &cpools, npools + 1, sizeof *pools) ? cudaErrorMemoryAllocation : 0;
  if (!rc) pools[npools++] = p;
  pthread_mutex_unlock(&lock);
  if (rc) {
    free(p);
    return ferry_ret(rc);
  }
  *pool = (cudaMemPool_t)p;
  return cudaSuccess;
}

cudaError_t cudaMemPoolImportPointer(void **ptr, cudaMemPool_t pool,
                                     struct cudaMemPoolPtrExportData *data) {
  if (!ptr || !data) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_ipc_handle h;
  memcpy(&h, data, sizeof h);
  pthread_mutex_lock(&lock);
  struct imported_pool *p = find_pool(pool);
  int vgpu = p ? p->vgpu : -1;
  uint64_t token = p ? p->token : 0;
  pthread_mutex_unlock(&lock);
  /* another pool's pointer is an error, not a line: programs try each pool */
  if (!p || h.magic != FERRY_IPC_MEM_MAGIC || h.spare != token || !h.range || !h.size ||
      h.offset >= h.range || h.size > h.range - h.offset)
    return ferry_ret(cudaErrorInvalidValue);
  void *got = NULL;
  int rc = ferry_ipc_open_mem(&ferry.vgpus[vgpu], &h, &got, "cudaMemPoolImportPointer");
  if (rc) return ferry_ret(rc);
  pthread_mutex_lock(&lock);
  rc = ferry_grow((void **)&ptrs, &cptrs, nptrs + 1, sizeof *ptrs) ? cudaErrorMemoryAllocation : 0;
  if (!rc) {
    ptrs[nptrs] = (struct imported_ptr){(uint64_t)(uintptr_t)got, p};
    __atomic_store_n(&nptrs, nptrs + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&lock);
  if (rc) {
    ferry_ipc_close_mem(got);
    return ferry_ret(rc);
  }
  *ptr = got;
  return cudaSuccess;
}

int ferry_mempool_import_has(const void *ptr) {
  if (!__atomic_load_n(&nptrs, __ATOMIC_ACQUIRE)) return 0; /* the common case, unlocked */
  pthread_mutex_lock(&lock);
  int found = 0;
  for (size_t i = 0; i < nptrs && !found; i++) found = ptrs[i].ptr == (uint64_t)(uintptr_t)ptr;
  pthread_mutex_unlock(&lock);
  return found;
}

int ferry_mempool_import_free(void *ptr) {
  pthread_mutex_lock(&lock);
  size_t i = 0;
  while (i < nptrs && ptrs[i].ptr != (uint64_t)(uintptr_t)ptr) i++;
  int found = i < nptrs;
  if (found) {
    ptrs[i] = ptrs[nptrs - 1];
    __atomic_store_n(&nptrs, nptrs - 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&lock);
  return found ? ferry_ipc_close_mem(ptr) : -1;
}
