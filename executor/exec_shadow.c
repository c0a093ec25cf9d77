/*
 * Shadows of the program's mapped host memory on a remote GPU. Under
 * unified addressing a kernel may be handed a pinned host pointer
 * (zero-copy); a GPU in another machine cannot reach that memory, so the
 * server maps device memory for it and the client keeps the two copies
 * coherent (shim/core/shadow.c). Memory of the program's shared host arena
 * is shadowed at its own addresses, inside the arena's window (a helper
 * shares the arena itself and refuses those); memory the program
 * registered anywhere else is shadowed in the alias window, at addresses
 * the client picks and translates, since a driver grants fixed addresses
 * only where it likes.
 */
#include "executor/exec_internal.h"

#include <stdio.h>

#include "common/log.h"

static int inside(uint64_t addr, uint64_t size, uint64_t base, uint64_t span) {
  return addr >= base && addr - base < span && size <= span - (addr - base);
}

/* the window [addr, addr + size) lies in, reserved now if it was not: 0
   when it lies in none this process may shadow */
static int window_of(struct ferry_exec *ex, const char *call, uint64_t addr, uint64_t size,
                     int *err) {
  *err = EXEC_OK;
  if (!size || addr % ex->gran || size % ex->gran) return 0;
  uint64_t base;
  int *ok;
  if (inside(addr, size, FERRY_HOST_WINDOW_BASE, FERRY_HOST_WINDOW_SIZE)) {
    if (ex->host_hi > ex->host_lo) {
      if (!ex->violation[0])
        snprintf(ex->violation, sizeof ex->violation,
                 "%s of the shared host arena in a process that shares it", call);
      return 0;
    }
    base = FERRY_HOST_WINDOW_BASE, ok = &ex->window_ok;
  } else if (inside(addr, size, FERRY_ALIAS_WINDOW_BASE, FERRY_ALIAS_WINDOW_SIZE)) {
    base = FERRY_ALIAS_WINDOW_BASE, ok = &ex->alias_ok;
  } else {
    return 0;
  }
  uint64_t span = base == FERRY_HOST_WINDOW_BASE ? FERRY_HOST_WINDOW_SIZE : FERRY_ALIAS_WINDOW_SIZE;
  if (*ok) return 1;
  CUdeviceptr got = 0;
  CUresult r = ex->d->MemAddressReserve(&got, span, 0, base, 0);
  if (r != CUDA_SUCCESS) {
    *err = CU(r);
  } else if (got != base) { /* taken in this process: shadows cannot be placed */
    ex->d->MemAddressFree(got, span);
    *err = EXEC_MEMORY_ALLOCATION;
  } else {
    *ok = 1;
  }
  return 1;
}

void exec_free_windows(struct ferry_exec *ex, int driver_ok) {
  if (ex->window_ok && driver_ok) ex->d->MemAddressFree(FERRY_HOST_WINDOW_BASE, FERRY_HOST_WINDOW_SIZE);
  if (ex->alias_ok && driver_ok) ex->d->MemAddressFree(FERRY_ALIAS_WINDOW_BASE, FERRY_ALIAS_WINDOW_SIZE);
  ex->window_ok = ex->alias_ok = 0;
}

int ferry_x_shadow_map(struct ferry_exec *ex, const struct ferry_shadow_map_args *a,
                       struct ferry_shadow_map_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  int err, made = 0;
  if (!window_of(ex, "shadow_map", a->addr, a->size, &err)) return EXEC_INVALID_VALUE;
  for (uint64_t at = a->addr; !err && at < a->addr + a->size; at += ex->gran) {
    if (exec_mapped_at(ex, at, ex->gran)) continue;
    err = exec_map_at(ex, at, ex->gran);
    made += !err;
  }
  ferry_debug("shadow_map 0x%llx + %llu: %d granules mapped now (%d)", (unsigned long long)a->addr,
              (unsigned long long)a->size, made, err);
  return err;
}

int ferry_x_shadow_unmap(struct ferry_exec *ex, const struct ferry_shadow_unmap_args *a,
                         struct ferry_shadow_unmap_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  int err;
  if (!window_of(ex, "shadow_unmap", a->addr, a->size, &err)) return EXEC_INVALID_VALUE;
  for (uint64_t at = a->addr; at < a->addr + a->size; at += ex->gran) {
    if (!exec_mapped_at(ex, at, ex->gran)) continue;
    int e = exec_unmap_at(ex, at, ex->gran);
    ferry_debug("shadow_unmap 0x%llx (%d)", (unsigned long long)at, e);
    if (!err) err = e;
  }
  return err;
}
