/*
 * Copies between the GPU and host memory that the peer shares with this
 * process at the same addresses: ferry-mhelper maps the program's shared
 * host arena, and the executor inside the program sees all of its memory.
 * Such a copy names a host address instead of carrying bytes, so the DMA
 * reads the program's own buffer. A server shares nothing: there every
 * host address is a protocol violation, never a pointer it follows.
 */
#include "executor/exec_internal.h"

#include <stdio.h>
#include <stdlib.h>

void ferry_exec_allow_host(struct ferry_exec *ex, uint64_t base, uint64_t size) {
  ex->host_lo = base;
  ex->host_hi = base + size < base ? UINT64_MAX : base + size;
}

/* [addr, addr + size) lies in the shared range; otherwise a violation */
static int host_ok(struct ferry_exec *ex, const char *call, uint64_t addr, uint64_t size) {
  if (ex->host_hi > ex->host_lo && addr >= ex->host_lo && size <= ex->host_hi - addr) return 1;
  if (!ex->violation[0])
    snprintf(ex->violation, sizeof ex->violation,
             "%s names host memory 0x%llx (+%llu) this process does not share", call,
             (unsigned long long)addr, (unsigned long long)size);
  return 0;
}

int ferry_x_host_register(struct ferry_exec *ex, const struct ferry_host_register_args *a,
                          struct ferry_host_register_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (!a->size || !host_ok(ex, "host_register", a->addr, a->size)) return EXEC_INVALID_VALUE;
  if (ex->nhost_regs == ex->chost_regs) {
    size_t cap = ex->chost_regs ? ex->chost_regs * 2 : 16;
    struct exec_host_reg *p = realloc(ex->host_regs, cap * sizeof *p);
    if (!p) return EXEC_MEMORY_ALLOCATION;
    ex->host_regs = p;
    ex->chost_regs = cap;
  }
  CUresult res = ex->d->MemHostRegister((void *)(uintptr_t)a->addr, a->size,
                                        CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
  if (res != CUDA_SUCCESS) return CU(res);
  ex->host_regs[ex->nhost_regs++] = (struct exec_host_reg){a->addr, a->size};
  return EXEC_OK;
}

int ferry_x_host_unregister(struct ferry_exec *ex, const struct ferry_host_unregister_args *a,
                            struct ferry_host_unregister_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (!host_ok(ex, "host_unregister", a->addr, 1)) return EXEC_INVALID_VALUE;
  for (size_t i = 0; i < ex->nhost_regs; i++) {
    if (ex->host_regs[i].addr != a->addr) continue;
    ex->host_regs[i] = ex->host_regs[--ex->nhost_regs];
    return CU(ex->d->MemHostUnregister((void *)(uintptr_t)a->addr));
  }
  return CU(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

void exec_free_host(struct ferry_exec *ex, int driver_ok) {
  for (size_t i = 0; i < ex->nhost_regs && driver_ok; i++)
    ex->d->MemHostUnregister((void *)(uintptr_t)ex->host_regs[i].addr);
  ex->nhost_regs = 0;
}

int ferry_x_memcpy_htod_host(struct ferry_exec *ex, const struct ferry_memcpy_htod_host_args *a,
                             struct ferry_memcpy_htod_host_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (!host_ok(ex, "memcpy_htod_host", a->host, a->size)) return EXEC_INVALID_VALUE;
  CUstream s;
  int rc = exec_stream(ex, a->stream, &s);
  if (rc) return rc;
  return CU(ex->d->MemcpyHtoDAsync(a->dst, (const void *)(uintptr_t)a->host, a->size, s));
}

int ferry_x_memcpy_dtoh_host(struct ferry_exec *ex, const struct ferry_memcpy_dtoh_host_args *a,
                             struct ferry_memcpy_dtoh_host_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (!host_ok(ex, "memcpy_dtoh_host", a->host, a->size)) return EXEC_INVALID_VALUE;
  CUstream s;
  int rc = exec_stream(ex, a->stream, &s);
  if (rc) return rc;
  return CU(ex->d->MemcpyDtoHAsync((void *)(uintptr_t)a->host, a->src, a->size, s));
}
