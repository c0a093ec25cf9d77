/*
 * Shadows of the program's mapped host memory on a remote GPU. Under
 * unified addressing a kernel may be handed a pinned host pointer
 * (zero-copy); a GPU in another machine cannot reach that memory, so the
 * server maps device memory at the same addresses, inside the window of the
 * program's shared host arena, and the client keeps the two copies coherent
 * (shim/core/shadow.c). A helper shares the arena itself and refuses
 * shadows of it; memory the program registered lies outside the arena, and
 * a server or a helper reserves its granules at exactly their addresses.
 */
#include "executor/exec_internal.h"

#include <stdio.h>

#include "common/log.h"

/* the shared host arena's window: a helper shares it, a server shadows it */
static int in_window(uint64_t addr, uint64_t size) {
  return addr >= FERRY_HOST_WINDOW_BASE && addr - FERRY_HOST_WINDOW_BASE < FERRY_HOST_WINDOW_SIZE &&
         size <= FERRY_HOST_WINDOW_SIZE - (addr - FERRY_HOST_WINDOW_BASE);
}

static int shadow_range(struct ferry_exec *ex, const char *call, uint64_t addr, uint64_t size) {
  if (!size || addr % ex->gran || size % ex->gran || addr + size < addr) return 0;
  if (in_window(addr, size)) {
    if (ex->host_hi > ex->host_lo) {
      if (!ex->violation[0])
        snprintf(ex->violation, sizeof ex->violation,
                 "%s of the shared host arena in a process that shares it", call);
      return 0;
    }
    return 1;
  }
  /* memory the program registered, outside the window: never over the
     vGPU's arena or across the window */
  uint64_t end = addr + size;
  int arena = ex->arena_ok && addr < ex->arena_base + ex->arena_size && end > ex->arena_base;
  return !arena && !(addr < FERRY_HOST_WINDOW_BASE + FERRY_HOST_WINDOW_SIZE && end > FERRY_HOST_WINDOW_BASE);
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

/* one granule outside the window, reserved at exactly its address (the
   program's registered memory): refused where this process has something
   there */
static int reserve_loose(struct ferry_exec *ex, uint64_t at) {
  if (ex->nloose == ex->cloose) {
    size_t cap = ex->cloose ? ex->cloose * 2 : 16;
    uint64_t *p = realloc(ex->loose, cap * sizeof *p);
    if (!p) return EXEC_MEMORY_ALLOCATION;
    ex->loose = p;
    ex->cloose = cap;
  }
  CUdeviceptr got = 0;
  CUresult r = ex->d->MemAddressReserve(&got, ex->gran, 0, at, 0);
  if (r != CUDA_SUCCESS) return CU(r);
  if (got != at) {
    ex->d->MemAddressFree(got, ex->gran);
    return EXEC_MEMORY_ALLOCATION;
  }
  int err = exec_map_at(ex, at, ex->gran);
  if (err) {
    ex->d->MemAddressFree(at, ex->gran);
    return err;
  }
  ex->loose[ex->nloose++] = at;
  return EXEC_OK;
}

int ferry_x_shadow_map(struct ferry_exec *ex, const struct ferry_shadow_map_args *a,
                       struct ferry_shadow_map_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (!shadow_range(ex, "shadow_map", a->addr, a->size)) return EXEC_INVALID_VALUE;
  int window = in_window(a->addr, a->size);
  int err = window ? reserve_window(ex) : EXEC_OK, made = 0;
  for (uint64_t at = a->addr; !err && at < a->addr + a->size; at += ex->gran) {
    if (exec_mapped_at(ex, at, ex->gran)) continue;
    err = window ? exec_map_at(ex, at, ex->gran) : reserve_loose(ex, at);
    made += !err;
  }
  ferry_debug("shadow_map 0x%llx + %llu: %d granules mapped now (%d)", (unsigned long long)a->addr,
              (unsigned long long)a->size, made, err);
  return err;
}

int ferry_x_shadow_unmap(struct ferry_exec *ex, const struct ferry_shadow_unmap_args *a,
                         struct ferry_shadow_unmap_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (!shadow_range(ex, "shadow_unmap", a->addr, a->size)) return EXEC_INVALID_VALUE;
  int err = EXEC_OK;
  for (uint64_t at = a->addr; at < a->addr + a->size; at += ex->gran) {
    if (!exec_mapped_at(ex, at, ex->gran)) continue;
    int e = exec_unmap_at(ex, at, ex->gran);
    ferry_debug("shadow_unmap 0x%llx (%d)", (unsigned long long)at, e);
    for (size_t i = 0; !e && i < ex->nloose; i++)
      if (ex->loose[i] == at) {
        ex->d->MemAddressFree(at, ex->gran);
        ex->loose[i] = ex->loose[--ex->nloose];
        break;
      }
    if (!err) err = e;
  }
  return err;
}

void exec_free_loose(struct ferry_exec *ex, int driver_ok) {
  for (size_t i = 0; i < ex->nloose && driver_ok; i++) ex->d->MemAddressFree(ex->loose[i], ex->gran);
  free(ex->loose);
  ex->loose = NULL;
  ex->nloose = ex->cloose = 0;
}
