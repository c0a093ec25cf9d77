/* Answers of pure queries (function attributes, occupancy), kept per vGPU
   (query_cache.c) so that repeated questions cost no round trip. */
#ifndef FERRY_CORE_QUERY_CACHE_H
#define FERRY_CORE_QUERY_CACHE_H

#include "shim/core/vgpu.h"

/* For CACHED calls: get fills rets on a hit (0) and leaves the encoded key
   and the epoch for put, which keeps an answer unless something changed
   since. Bump before and after an INVALIDATES call. */
int ferry_query_cache_get(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                          struct ferry_buf *key, uint64_t *epoch);
void ferry_query_cache_put(struct ferry_vgpu *v, unsigned call, const void *rets,
                           const struct ferry_buf *key, uint64_t epoch_before);
void ferry_query_cache_bump(struct ferry_vgpu *v);
/* before a launch of kernel (or executable graph) `key`: its first since
   the last change drops the answers (it may grow the stack limit) */
void ferry_query_cache_launch(struct ferry_vgpu *v, uint64_t key);

#endif
