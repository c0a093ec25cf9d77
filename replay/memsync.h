/*
 * Mem-sync: every live region of a vGPU copied from its remote GPU to the
 * local one at the same addresses. Regions close together are merged into
 * one range (the gaps are mapped memory, so copying them is harmless) and
 * many ranges travel in one gather request, so a thousand small
 * allocations cost about what one large one does. Requests are pipelined:
 * while batch k arrives in one page-locked buffer, batch k-1 is on its way
 * to the GPU from the other. The target is the migration's (in-process or
 * a ferry-mhelper): the copies are calls, the buffers shared memory; or
 * another server, whose copies carry their bytes: a thread sends each
 * filled buffer while the source fills the next.
 */
#ifndef FERRY_MEMSYNC_H
#define FERRY_MEMSYNC_H

#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "replay/target.h"

/* where the bytes come from: the remote server (shim) or a test double */
struct ferry_memsync_source {
  /* asks for the bytes of n {addr, size} pairs, back to back */
  int (*request)(void *ctx, const uint64_t *pairs, uint32_t n);
  /* reads the answer to the oldest request into dst (len bytes) */
  int (*receive)(void *ctx, void *dst, uint64_t len);
  void *ctx;
};

struct ferry_memsync_opts {
  uint64_t batch_bytes;  /* bytes per request, also the size of each buffer */
  uint32_t max_ranges;   /* ranges per request */
  uint64_t merge_gap;    /* regions closer than this (in mapped memory) become one range */
  unsigned buffers;      /* buffers (requests in flight), 2 to 8 */
  /* the buffers, batch_bytes each: host memory the target copies from with
     memcpy_htod_host, page-locked there by the caller so copies overlap */
  void *const *bufs;
  /* the target cannot read this process's memory (another server): the
     bytes go with each copy (memcpy_htod_async), and bufs need no locking */
  int bulk;
  void (*progress)(void *ctx, uint64_t done, uint64_t total);
  void *progress_ctx;
};
void ferry_memsync_defaults(struct ferry_memsync_opts *o);

struct ferry_memsync_stats {
  uint64_t regions, ranges, requests, bytes;
  double ms;
};

/* the merged ranges for regions (sorted, as the arena keeps them) within
   mappings (sorted): pairs of {addr, size}; returns the count, or -1 when
   out of memory. *pairs is malloc'ed. */
long ferry_memsync_plan(const struct ferry_region *regions, size_t nregions,
                        const struct ferry_mapping *maps, size_t nmaps, uint64_t merge_gap,
                        uint64_t **pairs);

/* is [a, b) inside back-to-back mappings (sorted)? *cursor starts at 0 and
   moves on, so calls must come in increasing a */
int ferry_memsync_mapped(const struct ferry_mapping *maps, size_t nmaps, size_t *cursor,
                         uint64_t a, uint64_t b);

/* copies the ranges; 0 or a cudaError_t (reason in err) */
int ferry_memsync_run(const struct ferry_target *t, const uint64_t *pairs, size_t npairs,
                      const struct ferry_memsync_source *src, const struct ferry_memsync_opts *o,
                      struct ferry_memsync_stats *st, char *err, size_t errlen);

#endif
