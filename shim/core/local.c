/*
 * Local mode: after a migration a vGPU's calls run in this process, through
 * the same executor the server uses, on a GPU of this machine, until a
 * migration moves it on (they are recorded and gated as remote ones are:
 * remote.c). The executor is single-threaded, so calls take one lock;
 * calls that block (waiting for a stream, an event, the device) and plain
 * copies look their handles up under the lock and wait outside it, so one
 * thread's wait never stalls another's launches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "executor/exec.h"
#include "protocol/clone.h"
#include "shim/core/link.h"
#include "shim/core/local.h"

struct ferry_local {
  struct ferry_exec *ex;
  const struct ferry_driver *d;
  CUcontext ctx;
  uint64_t serial; /* which opening: a later context may reuse ctx's value */
  pthread_mutex_t lock;
  int gpu;
  char name[256];
};

static uint64_t open_serial;

struct ferry_exec *ferry_local_exec(struct ferry_local *L) { return L->ex; }
const char *ferry_local_name(struct ferry_local *L) { return L->name; }
int ferry_local_gpu(struct ferry_local *L) { return L->gpu; }

const struct ferry_driver *ferry_local_driver(char *err, size_t errlen) {
  const char *b = getenv("FERRY_LOCAL_BACKEND");
  if (b && !strcmp(b, "sim")) return ferry_driver_sim(getenv("FERRY_SIM_KERNELS"), err, errlen);
  if (b && *b && strcmp(b, "cuda")) {
    snprintf(err, errlen, "FERRY_LOCAL_BACKEND='%s': expected cuda or sim", b);
    return NULL;
  }
  return ferry_driver_cuda(err, errlen);
}

int ferry_placeholder_reserve(struct ferry_vgpu *v) {
  uint64_t base = ferry_arena_base(v->index);
  /* keeps host mappings out of the device range, so a host pointer can never
     equal a device pointer */
  void *p = mmap((void *)base, FERRY_ARENA_STRIDE, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED || (uint64_t)p != base) {
    if (p != MAP_FAILED) munmap(p, FERRY_ARENA_STRIDE);
    return -1;
  }
  v->placeholder = 1;
  return 0;
}

void ferry_placeholder_release(struct ferry_vgpu *v) {
  if (!v->placeholder) return;
  munmap((void *)ferry_arena_base(v->index), FERRY_ARENA_STRIDE);
  v->placeholder = 0;
}

static void release_placeholder(void *ctx) { ferry_placeholder_release(ctx); }

struct ferry_local *ferry_local_open(struct ferry_vgpu *v, int gpu, char *err, size_t errlen) {
  const struct ferry_driver *d = ferry_local_driver(err, errlen);
  if (!d) return NULL;
  struct ferry_local *L = calloc(1, sizeof *L);
  if (!L) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  L->d = d;
  L->gpu = gpu;
  pthread_mutex_init(&L->lock, NULL);
  L->ex = ferry_exec_open_local(d, (unsigned)gpu, ferry_arena_base(v->index), FERRY_ARENA_STRIDE,
                                release_placeholder, v, err, errlen);
  if (!L->ex) {
    free(L);
    return NULL;
  }
  L->ctx = ferry_exec_context(L->ex);
  L->serial = __atomic_add_fetch(&open_serial, 1, __ATOMIC_RELAXED);
  /* it runs in the program's process: every host address is its own */
  ferry_exec_allow_host(L->ex, 0, UINT64_MAX);
  CUdevice dev;
  if (d->DeviceGet(&dev, gpu) || d->DeviceGetName(L->name, sizeof L->name, dev))
    snprintf(L->name, sizeof L->name, "GPU %d", gpu);
  return L;
}

/* the opening whose context this thread made current (0: none) */
static __thread uint64_t thread_serial;

void ferry_local_close(struct ferry_local *L) {
  if (!L) return;
  ferry_exec_close(L->ex);
  thread_serial = 0;
  pthread_mutex_destroy(&L->lock);
  free(L);
}

/* the context must be current in each thread that calls the driver; a
   thread that used a closed one still has it current, so the check is on
   the opening, not on the context's value */
static inline void make_current(struct ferry_local *L) {
  if (thread_serial != L->serial) {
    L->d->CtxSetCurrent(L->ctx);
    thread_serial = L->serial;
  }
}

static int deliver(void *ctx, uint64_t token, const void *p, size_t n, const char *refused) {
  (void)refused; /* the executor in this process sets no limit */
  ferry_deferred_complete(&((struct ferry_vgpu *)ctx)->link, token, p, n);
  return 0;
}

/* reply blobs live in the executor until its next call, which another
   thread may make: copy them into this thread's reply buffer */
static int keep_rets(unsigned call, void *rets) {
  size_t extra = ferry_rets_extra(call, rets);
  if (!extra) return 0;
  struct ferry_buf *b = &ferry_thread()->reply;
  b->len = 0;
  size_t sz = ferry_rets_size[call];
  if (ferry_buf_reserve(b, sz + extra + 16)) return cudaErrorMemoryAllocation;
  char *tmp = b->data;
  char *copy = tmp + ((sz + 15) & ~(size_t)15);
  ferry_rets_clone(call, rets, tmp, copy);
  memcpy(rets, tmp, sz);
  return 0;
}

/* a WAITS call: its handle resolved under the lock, the wait outside */
static int wait_unlocked(struct ferry_local *L, unsigned call, const void *args) {
  struct ferry_wait w;
  pthread_mutex_lock(&L->lock);
  int rc = ferry_exec_wait_of(L->ex, call, args, &w);
  pthread_mutex_unlock(&L->lock);
  return rc ? rc : ferry_exec_wait(&w);
}

/* Calls that release or wait, answered once NVIDIA's driver in this
   process was torn down (CUDA_ERROR_DEINITIALIZED), which happens only as
   the program exits: its teardown registers when it starts, and a vGPU
   moved into the process started it after the program's static objects
   (thrust's allocator, miniFE's vectors), whose destructors then free
   through a dead driver. Natively the driver starts first and outlives
   them. Nothing can read the GPU afterwards: these succeed; launches and
   copies keep the error. */
static int release_at_exit(unsigned call) {
  switch (call) {
  case FERRY_CALL_device_synchronize:
  case FERRY_CALL_stream_synchronize:
  case FERRY_CALL_event_synchronize:
  case FERRY_CALL_mem_unmap:
  case FERRY_CALL_module_unload:
  case FERRY_CALL_stream_destroy:
  case FERRY_CALL_event_destroy:
  case FERRY_CALL_array_destroy:
  case FERRY_CALL_tex_destroy:
  case FERRY_CALL_surf_destroy:
  case FERRY_CALL_graph_exec_destroy:
  case FERRY_CALL_shadow_unmap: return 1;
  default: return 0;
  }
}

int ferry_local_call(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                     const struct ferry_bulk *bulk) {
  struct ferry_local *L = v->lx;
  make_current(L);
  int rc;
  unsigned flags = ferry_calls[call].flags;
  if (flags & WAITS) {
    rc = wait_unlocked(L, call, args);
  } else {
    pthread_mutex_lock(&L->lock);
    rc = ferry_exec_call_mem(L->ex, call, args, rets, bulk);
    /* CUDA reports a bad launch or copy at once; do not report it again */
    if (rc && (flags & ASYNC)) ferry_exec_take_async_error(L->ex);
    if (!rc && rets) rc = keep_rets(call, rets);
    pthread_mutex_unlock(&L->lock);
  }
  if (flags & SYNC) {
    pthread_mutex_lock(&L->lock);
    ferry_exec_flush_deferred(L->ex, deliver, v);
    int late = ferry_exec_take_async_error(L->ex);
    pthread_mutex_unlock(&L->lock);
    if (!rc) rc = late;
  }
  if (rc == CUDA_ERROR_DEINITIALIZED && release_at_exit(call)) rc = 0;
  return rc;
}

int ferry_local_copy(struct ferry_vgpu *v, void *dst, const void *src, uint64_t n, int kind,
                     uint32_t stream, int async) {
  pthread_rwlock_rdlock(&v->gate);
  int rc = ferry_stale(v)       ? FERRY_STALE
           : !ferry_is_local(v) ? FERRY_NOT_LOCAL
                                : ferry_local_copy_held(v, dst, src, n, kind, stream, async);
  pthread_rwlock_unlock(&v->gate);
  return rc;
}

int ferry_local_copy_held(struct ferry_vgpu *v, void *dst, const void *src, uint64_t n, int kind,
                          uint32_t stream, int async) {
  struct ferry_local *L = v->lx;
  make_current(L);
  CUstream s;
  pthread_mutex_lock(&L->lock);
  int rc = ferry_exec_stream(L->ex, stream, &s);
  pthread_mutex_unlock(&L->lock);
  if (rc) return rc;
  const struct ferry_driver *d = L->d;
  CUresult r;
  switch (kind) {
  case 1: r = d->MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, n, s); break;
  case 2: r = d->MemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, n, s); break;
  default: r = d->MemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n, s); break;
  }
  if (r == CUDA_SUCCESS && !async) r = d->StreamSynchronize(s);
  return ferry_cuda_error_from_cu(r);
}

int ferry_local_host_lock(struct ferry_local *L, void *p, size_t n) {
  make_current(L);
  CUresult r = L->d->MemHostRegister(p, n, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
  if (r != CUDA_SUCCESS)
    ferry_debug("page-locking %zu bytes of host memory failed (%d): its copies stay synchronous",
                n, (int)r);
  return r == CUDA_SUCCESS ? 0 : -1;
}

void ferry_local_host_unlock(struct ferry_local *L, void *p) {
  make_current(L);
  L->d->MemHostUnregister(p);
}
