/*
 * The gather read behind migration's mem-sync: many device ranges come back
 * as one reply, so a thousand small allocations cost one round trip, not a
 * thousand. The bytes stream through the same pinned double buffers as any
 * device-to-host copy.
 */
#include "executor/exec_internal.h"

#include <stdlib.h>
#include <string.h>

#define GATHER_MAX_RANGES FERRY_GATHER_MAX_RANGES
#define GATHER_MAX_BYTES FERRY_GATHER_MAX_BYTES

struct gather {
  const uint64_t *pairs; /* addr, size, addr, size, ... */
  uint64_t *starts;      /* packed offset of each range */
  uint32_t n;
};

/* index of the range holding packed offset off */
static uint32_t range_at(const struct gather *g, uint64_t off) {
  uint32_t lo = 0, hi = g->n;
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    if (g->starts[mid] <= off)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

static int gather_span(struct ferry_exec *ex, const struct exec_xfer *x, uint64_t off, char *buf,
                       size_t n) {
  const struct gather *g = x->ctx;
  for (uint32_t i = range_at(g, off); n && i < g->n; i++) {
    uint64_t in = off - g->starts[i], size = g->pairs[2 * i + 1];
    if (in >= size)
      continue; /* an empty range */
    size_t k = size - in < n ? (size_t)(size - in) : n;
    CUresult res = ex->d->MemcpyDtoHAsync(buf, g->pairs[2 * i] + in, k, x->s);
    if (res != CUDA_SUCCESS)
      return CU(res);
    buf += k, off += k, n -= k;
  }
  return EXEC_OK;
}

int ferry_x_memcpy_dtoh_gather(struct ferry_exec *ex, const struct ferry_memcpy_dtoh_gather_args *a,
                               struct ferry_memcpy_dtoh_gather_rets *r, struct ferry_io *io) {
  (void)r;
  if (a->ranges.len % 16 || a->ranges.len / 16 > GATHER_MAX_RANGES || !a->ranges.len)
    return EXEC_INVALID_VALUE;
  struct gather g = {.n = a->ranges.len / 16};
  uint64_t *pairs = malloc(a->ranges.len), *starts = malloc(g.n * sizeof *starts);
  int err = pairs && starts ? EXEC_OK : EXEC_MEMORY_ALLOCATION;
  uint64_t total = 0;
  if (!err) {
    memcpy(pairs, a->ranges.ptr, a->ranges.len); /* the blob may be unaligned */
    for (uint32_t i = 0; i < g.n && !err; i++) {
      uint64_t addr = pairs[2 * i], size = pairs[2 * i + 1];
      /* module globals lie outside the arena; the driver checks every range */
      if (addr + size < addr || total + size > GATHER_MAX_BYTES)
        err = EXEC_INVALID_VALUE;
      starts[i] = total;
      total += size;
    }
  }
  g.pairs = pairs;
  g.starts = starts;
  struct exec_xfer x = {0, 0, 0, NULL, 0, gather_span, &g};
  if (!err)
    err = exec_stream(ex, a->stream, &x.s);
  if (!err)
    err = exec_push(ex, &x, total, io->out);
  free(pairs);
  free(starts);
  return err;
}
