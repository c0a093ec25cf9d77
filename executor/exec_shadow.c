/*
 * Shadows of the program's mapped host memory on a remote GPU. Under
 * unified addressing a kernel may be handed a pinned host pointer
 * (zero-copy); a GPU in another machine cannot reach that memory, so the
 * server maps device memory at the same addresses, inside the window of the
 * program's shared host arena, and the client keeps the two copies coherent
 * (shim/core/shadow.c). A helper or the program's own executor shares the
 * host memory itself and refuses these calls.
 */
#include "executor/exec_internal.h"

#include <stdio.h>

#include "common/log.h"

static int window_range(struct ferry_exec *ex, const char *call, uint64_t addr, uint64_t size) {
  if (ex->host_hi > ex->host_lo) {
    if (!ex->violation[0])
      snprintf(ex->violation, sizeof ex->violation,
               "%s in a process that shares the program's host memory", call);
    return 0;
  }
  return size && addr % ex->gran == 0 && size % ex->gran == 0 && addr >= FERRY_HOST_WINDOW_BASE &&
         addr - FERRY_HOST_WINDOW_BASE < FERRY_HOST_WINDOW_SIZE &&
         size <= FERRY_HOST_WINDOW_SIZE - (addr - FERRY_HOST_WINDOW_BASE);
}

static int reserve_window(struct ferry_exec *ex) {
  if (ex->window_ok) return EXEC_OK;
  CUdeviceptr got = 0;
  CUresult r = ex->d->MemAddressReserve(&got, FERRY_HOST_WINDOW_SIZE, 0, FERRY_HOST_WINDOW_BASE, 0);
  if (r != CUDA_SUCCESS) return CU(r);
  if (got != FERRY_HOST_WINDOW_BASE) { /* taken in this process: shadows cannot be placed */
    ex->d->MemAddressFree(got, FERRY_HOST_WINDOW_SIZE);
    return EXEC_MEMORY_ALLOCATION;
  }
  ex->window_ok = 1;
  return EXEC_OK;
}

int ferry_x_shadow_map(struct ferry_exec *ex, const struct ferry_shadow_map_args *a,
                       struct ferry_shadow_map_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (!window_range(ex, "shadow_map", a->addr, a->size)) return EXEC_INVALID_VALUE;
  int err = reserve_window(ex), made = 0;
  for (uint64_t at = a->addr; !err && at < a->addr + a->size; at += ex->gran)
    if (!exec_mapped_at(ex, at, ex->gran) && !(err = exec_map_at(ex, at, ex->gran))) made++;
  ferry_debug("shadow_map 0x%llx + %llu: %d granules mapped now (%d)", (unsigned long long)a->addr,
              (unsigned long long)a->size, made, err);
  return err;
}

int ferry_x_shadow_unmap(struct ferry_exec *ex, const struct ferry_shadow_unmap_args *a,
                         struct ferry_shadow_unmap_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (!window_range(ex, "shadow_unmap", a->addr, a->size)) return EXEC_INVALID_VALUE;
  int err = EXEC_OK;
  for (uint64_t at = a->addr; at < a->addr + a->size; at += ex->gran)
    if (exec_mapped_at(ex, at, ex->gran)) {
      int e = exec_unmap_at(ex, at, ex->gran);
      ferry_debug("shadow_unmap 0x%llx (%d)", (unsigned long long)at, e);
      if (!err) err = e;
    }
  return err;
}
