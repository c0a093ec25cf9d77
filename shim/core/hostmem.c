/*
 * Host memory the program pins (cudaMallocHost, cudaHostAlloc,
 * cudaHostRegister). Memory ferry allocates comes from the shared host
 * arena: a memfd mapped at a fixed address that every ferry-mhelper maps at
 * the same address, so a helper's GPU copies straight from and into the
 * program's pinned buffers, with no host copy and no bytes on any channel.
 * The same arena holds the staging buffers of pageable copies and of
 * mem-sync. Where the arena cannot be made, pinned memory is plain memory
 * and helpers are refused; remote and in-process GPUs never need it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "shim/core/host.h"
#include "shim/core/link.h"
#include "shim/core/local.h"
#include "shim/core/shadow.h"

/* ---- the shared host arena ---- */
static struct {
  pthread_once_t once;
  pthread_mutex_t lock; /* the allocator */
  int fd;               /* -1: no arena */
  char why[160];        /* why there is none */
  struct ferry_arena arena;
} shared = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, -1, "", {0}};

static void arena_open(void) {
  int fd = memfd_create("ferry-host", MFD_CLOEXEC);
  if (fd < 0) {
    snprintf(shared.why, sizeof shared.why, "memfd_create: %s", strerror(errno));
    return;
  }
  /* sparse: only touched pages cost memory; punched holes give them back */
  void *p = MAP_FAILED;
  if (ftruncate(fd, (off_t)FERRY_HOST_ARENA_SIZE) == 0)
    p = mmap((void *)FERRY_HOST_ARENA_BASE, FERRY_HOST_ARENA_SIZE, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_NORESERVE | MAP_FIXED_NOREPLACE, fd, 0);
  if (p == MAP_FAILED || (uint64_t)(uintptr_t)p != FERRY_HOST_ARENA_BASE) {
    snprintf(shared.why, sizeof shared.why, "cannot map shared host memory at 0x%llx: %s",
             (unsigned long long)FERRY_HOST_ARENA_BASE, strerror(errno));
    if (p != MAP_FAILED) munmap(p, FERRY_HOST_ARENA_SIZE);
    close(fd);
    return;
  }
  if (ferry_arena_init(&shared.arena, FERRY_HOST_ARENA_BASE, FERRY_HOST_ARENA_SIZE, 4096)) {
    snprintf(shared.why, sizeof shared.why, "out of memory");
    munmap(p, FERRY_HOST_ARENA_SIZE);
    close(fd);
    return;
  }
  shared.fd = fd;
}

int ferry_host_arena_fd(char *err, size_t errlen) {
  pthread_once(&shared.once, arena_open);
  if (shared.fd < 0 && err) snprintf(err, errlen, "%s", shared.why);
  return shared.fd;
}

static int map_none(void *ctx, uint64_t addr, uint64_t size) {
  (void)ctx, (void)addr, (void)size;
  return 0;
}
static int punch(void *ctx, uint64_t addr, uint64_t size) {
  (void)ctx;
  fallocate(shared.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
            (off_t)(addr - FERRY_HOST_ARENA_BASE), (off_t)size);
  return 0;
}
static const struct ferry_arena_backend shared_be = {map_none, punch, NULL};

void *ferry_host_shared_alloc(size_t size) {
  if (ferry_host_arena_fd(NULL, 0) < 0) return NULL;
  uint64_t addr = 0;
  uint64_t span = ((uint64_t)(size ? size : 1) + 4095) & ~4095ull;
  pthread_mutex_lock(&shared.lock);
  int rc = ferry_arena_alloc(&shared.arena, span, &shared_be, &addr);
  pthread_mutex_unlock(&shared.lock);
  return rc ? NULL : (void *)(uintptr_t)addr;
}

void ferry_host_shared_free(void *p) {
  pthread_mutex_lock(&shared.lock);
  ferry_arena_free(&shared.arena, (uint64_t)(uintptr_t)p, &shared_be);
  pthread_mutex_unlock(&shared.lock);
}

static int in_arena(const void *p) {
  uint64_t a = (uint64_t)(uintptr_t)p;
  return shared.fd >= 0 && a >= FERRY_HOST_ARENA_BASE && a - FERRY_HOST_ARENA_BASE < FERRY_HOST_ARENA_SIZE;
}

/* ---- pinned blocks ---- */
struct host_block {
  void *ptr;
  size_t size;
  unsigned flags;
  int registered; /* cudaHostRegister'ed, not allocated by us */
  int managed;    /* cudaMallocManaged's */
  int locked;     /* page-locked by a local driver (after a migration) */
};
static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static int nregistered; /* cudaHostRegister'ed blocks (atomic: read without the lock) */
static struct host_block *host_blocks;
static size_t nhost, host_cap;
/* the first local GPU: pinned buffers are page-locked with its driver
   (portable: for every context) so that async copies stay asynchronous */
static struct ferry_local *lock_gpu;
/* bit per vGPU served by a ferry-mhelper: its pinned blocks are page-locked
   there too (under host_lock, so that no block is missed by both sides) */
static uint32_t helper_vgpus;

static void host_lock_with(struct ferry_local *L, struct host_block *b) {
  if (!L || b->locked || !b->size) return;
  b->locked = ferry_local_host_lock(L, b->ptr, b->size) == 0;
}

void ferry_host_register_local(struct ferry_local *L) {
  pthread_mutex_lock(&host_lock);
  if (!lock_gpu) lock_gpu = L;
  for (size_t i = 0; i < nhost; i++) {
    host_lock_with(lock_gpu, &host_blocks[i]);
    ferry_debug("pinned block %p, %zu bytes (%s): %s", host_blocks[i].ptr, host_blocks[i].size,
                host_blocks[i].managed ? "managed" : host_blocks[i].registered ? "registered" : "allocated",
                host_blocks[i].locked ? "page-locked for the local GPU" : "NOT page-locked");
  }
  pthread_mutex_unlock(&host_lock);
}

void ferry_host_forget_local(struct ferry_local *L) {
  pthread_mutex_lock(&host_lock);
  if (lock_gpu == L) {
    for (size_t i = 0; i < nhost; i++)
      if (host_blocks[i].locked) {
        ferry_local_host_unlock(L, host_blocks[i].ptr);
        host_blocks[i].locked = 0;
      }
    lock_gpu = NULL;
  }
  pthread_mutex_unlock(&host_lock);
}

/* host_register/host_unregister of one shared block on the helper vGPUs in mask */
static void tell_helpers(uint32_t mask, void *p, size_t size, int on) {
  for (int i = 0; i < ferry.count; i++) {
    if (!(mask & (1u << i))) continue;
    struct ferry_host_register_args r = {(uint64_t)(uintptr_t)p, size};
    struct ferry_host_unregister_args u = {(uint64_t)(uintptr_t)p};
    int rc = on ? ferry_helper_call(&ferry.vgpus[i], FERRY_CALL_host_register, &r, NULL, NULL)
                : ferry_helper_call(&ferry.vgpus[i], FERRY_CALL_host_unregister, &u, NULL, NULL);
    if (rc && rc != FERRY_NOT_HELPER && on)
      ferry_debug("device %d: page-locking %zu bytes of pinned memory in its helper failed (%d); "
                  "its copies stay correct but synchronous", i, size, rc);
  }
}

int ferry_host_register_helper(struct ferry_vgpu *v) {
  pthread_mutex_lock(&host_lock);
  helper_vgpus |= 1u << v->index;
  size_t n = 0;
  struct host_block *snap = malloc((nhost ? nhost : 1) * sizeof *snap);
  for (size_t i = 0; snap && i < nhost; i++)
    if (!host_blocks[i].registered && in_arena(host_blocks[i].ptr)) snap[n++] = host_blocks[i];
  pthread_mutex_unlock(&host_lock);
  if (!snap) return cudaErrorMemoryAllocation;
  /* the caller holds v's gate: these go straight over the link */
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    struct ferry_host_register_args r = {(uint64_t)(uintptr_t)snap[i].ptr, snap[i].size};
    rc = ferry_link_call(&v->link, FERRY_CALL_host_register, &r, NULL, NULL);
  }
  free(snap);
  return rc;
}

void ferry_host_forget_helper(int vgpu) {
  pthread_mutex_lock(&host_lock);
  helper_vgpus &= ~(1u << vgpu);
  pthread_mutex_unlock(&host_lock);
}

static int host_add(void *p, size_t size, unsigned flags, int registered, int managed,
                    uint32_t *helpers) {
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
  host_blocks[nhost] = (struct host_block){p, size, flags, registered, managed, 0};
  if (registered) __atomic_add_fetch(&nregistered, 1, __ATOMIC_RELEASE);
  host_lock_with(lock_gpu, &host_blocks[nhost++]);
  *helpers = !registered && in_arena(p) ? helper_vgpus : 0;
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

static int host_remove(void *p, int registered, uint32_t *helpers) {
  int found = 0;
  pthread_mutex_lock(&host_lock);
  for (size_t i = 0; i < nhost; i++) {
    if (host_blocks[i].ptr != p || host_blocks[i].registered != registered) continue;
    if (host_blocks[i].locked) ferry_local_host_unlock(lock_gpu, p);
    *helpers = !registered && in_arena(p) ? helper_vgpus : 0;
    if (registered) __atomic_sub_fetch(&nregistered, 1, __ATOMIC_RELEASE);
    host_blocks[i] = host_blocks[--nhost];
    found = 1;
    break;
  }
  pthread_mutex_unlock(&host_lock);
  return found;
}

int ferry_host_pinned(const void *p) {
  struct host_block b;
  return host_find(p, &b);
}

int ferry_host_any_registered(void) { return __atomic_load_n(&nregistered, __ATOMIC_ACQUIRE) > 0; }

int ferry_host_block(const void *p, uint64_t *base, uint64_t *size, int *shared) {
  struct host_block b;
  if (!host_find(p, &b)) return 0;
  *base = (uint64_t)(uintptr_t)b.ptr;
  *size = b.size ? b.size : 1;
  *shared = !b.registered && in_arena(b.ptr);
  return 1;
}

int ferry_host_is_shared(const void *p, uint64_t n) {
  struct host_block b;
  if (!in_arena(p) || !host_find(p, &b) || b.registered) return 0;
  return (uint64_t)((const char *)p - (const char *)b.ptr) + n <= b.size;
}

/* mapped blocks up to this size get their shadow at their vGPU's next launch */
#define MAPPED_AHEAD_MAX (16u << 20)

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags) {
  if (!ptr) return ferry_ret(cudaErrorInvalidValue);
  unsigned known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
  if (flags & ~known) return ferry_ret(cudaErrorInvalidValue);
  void *p = ferry_host_shared_alloc(size);
  int in_shared = p != NULL;
  if (!p && posix_memalign(&p, 4096, size ? size : 1)) return ferry_ret(cudaErrorMemoryAllocation);
  uint32_t helpers = 0;
  if (host_add(p, size, flags, 0, 0, &helpers)) {
    if (in_shared) ferry_host_shared_free(p);
    else free(p);
    return ferry_ret(cudaErrorMemoryAllocation);
  }
  if (helpers) tell_helpers(helpers, p, size ? size : 1, 1);
  /* NCCL's abort flag and work FIFO are this small; a large mapped buffer
     (a staging area) is shadowed only once the device is seen to use it:
     its shadow would cost the server as much memory */
  if ((flags & cudaHostAllocMapped) && size <= MAPPED_AHEAD_MAX)
    ferry_shadow_mapped_alloc(p, ferry_thread()->device);
  *ptr = p;
  return cudaSuccess;
}

/* Under unified addressing the device pointer of pinned memory is its host
   address; on a server, kernels reach a shadow of it there (shadow.c). */
cudaError_t cudaHostGetDevicePointer(void **dptr, void *hptr, unsigned int flags) {
  int err;
  struct host_block b;
  if (!dptr || flags || !host_find(hptr, &b)) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  int rc = ferry_shadow_expose(v, (uint64_t)(uintptr_t)hptr);
  if (rc && rc != 1) return ferry_ret(rc);
  *dptr = hptr;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }

/* ---- managed memory: a block of the shared arena every kernel of its
   vGPU may use; shadow.c keeps it coherent as CUDA does on devices
   without concurrent managed access (runtime/managed.c) ---- */
void *ferry_host_managed_alloc(size_t size, unsigned flags) {
  void *p = ferry_host_shared_alloc(size);
  if (!p) return NULL;
  uint32_t helpers = 0;
  if (host_add(p, size, flags, 0, 1, &helpers)) {
    ferry_host_shared_free(p);
    return NULL;
  }
  if (helpers) tell_helpers(helpers, p, size, 1);
  return p;
}

int ferry_host_managed(const void *p, uint64_t *base, uint64_t *size) {
  struct host_block b;
  if (!host_find(p, &b) || !b.managed) return 0;
  if (base) *base = (uint64_t)(uintptr_t)b.ptr;
  if (size) *size = b.size;
  return 1;
}

int ferry_host_managed_free(void *p) {
  uint64_t base;
  uint32_t helpers = 0;
  if (!ferry_host_managed(p, &base, NULL) || base != (uint64_t)(uintptr_t)p ||
      !host_remove(p, 0, &helpers))
    return cudaErrorInvalidValue;
  ferry_shadow_forget(p);
  if (helpers) tell_helpers(helpers, p, 0, 0);
  ferry_host_shared_free(p);
  return 0;
}

cudaError_t cudaFreeHost(void *ptr) {
  if (!ptr) return cudaSuccess;
  uint32_t helpers = 0;
  if (!host_remove(ptr, 0, &helpers)) return ferry_ret(cudaErrorInvalidValue);
  ferry_shadow_forget(ptr);
  if (in_arena(ptr)) {
    if (helpers) tell_helpers(helpers, ptr, 0, 0);
    ferry_host_shared_free(ptr);
  } else {
    free(ptr);
  }
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
  if (!ptr || !size) return ferry_ret(cudaErrorInvalidValue);
  unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory |
                   cudaHostRegisterReadOnly;
  if (flags & ~known) return ferry_ret(cudaErrorInvalidValue);
  struct host_block b;
  if (host_find(ptr, &b)) return ferry_ret(cudaErrorHostMemoryAlreadyRegistered);
  uint32_t helpers;
  return ferry_ret(host_add(ptr, size, flags, 1, 0, &helpers));
}

cudaError_t cudaHostUnregister(void *ptr) {
  uint32_t helpers;
  if (!host_remove(ptr, 1, &helpers)) return ferry_ret(cudaErrorHostMemoryNotRegistered);
  ferry_shadow_forget(ptr);
  return cudaSuccess;
}

cudaError_t cudaHostGetFlags(unsigned int *flags, void *ptr) {
  struct host_block b;
  if (!flags || !host_find(ptr, &b)) return ferry_ret(cudaErrorInvalidValue);
  *flags = b.flags;
  return cudaSuccess;
}
