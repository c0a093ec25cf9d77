/* Device-range requests cut to what one call carries (mem_batch.c). */
#ifndef FERRY_MEM_BATCH_H
#define FERRY_MEM_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/codec.h"

/* one call to a server, helper or GPU: a link's, a migration target's */
typedef int (*ferry_batch_call)(void *ctx, unsigned call, const void *args, void *rets,
                                const struct ferry_bulk *bulk);

/* the hash of every chunk-sized piece of pairs[0..n) ({addr, size}), in
   order, into hashes: 0, the first failed call's error, or -1 (a reply of
   the wrong length, no memory, chunk 0) */
int ferry_mem_hash_batched(ferry_batch_call call, void *ctx, const uint64_t *pairs, size_t n,
                           uint64_t chunk, uint64_t *hashes);
/* the bytes of pairs[0..n), packed in order into out: 0, the first failed
   call's error, or -1 (no memory) */
int ferry_gather_batched(ferry_batch_call call, void *ctx, const uint64_t *pairs, size_t n,
                         unsigned char *out);

#endif
