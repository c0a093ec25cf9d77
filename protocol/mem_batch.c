/*
 * Requests over device ranges larger than one call may carry: mem_hash's
 * reply holds at most FERRY_HASH_MAX_PIECES hashes and its request
 * FERRY_HASH_MAX_RANGES ranges, a gather at most FERRY_GATHER_MAX_RANGES
 * ranges and FERRY_GATHER_MAX_BYTES bytes (protocol/wire.h). Both are cut
 * into as few calls as those bounds allow, a range split where it must be,
 * and the answers land in order as one call's would: a 2.9 GB mapped
 * buffer's pages (miniFE's) are hashed and gathered like a small one's.
 */
#include "protocol/mem_batch.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/wire.h"

static uint64_t pieces_of(uint64_t size, uint64_t unit) { return size / unit + (size % unit != 0); }

/* The next request: ranges from (*i, *off) into b, at most max_ranges of
   them and max_units units (pieces of `unit` bytes) in all, a range split
   where the bound falls. How many ranges; *units the units they hold. */
static size_t next_batch(const uint64_t *pairs, size_t n, size_t *i, uint64_t *off, uint64_t unit,
                         size_t max_ranges, uint64_t max_units, uint64_t *b, uint64_t *units) {
  size_t nb = 0;
  *units = 0;
  while (*i < n && nb < max_ranges && *units < max_units) {
    uint64_t left = pairs[2 * *i + 1] - *off, room = max_units - *units;
    uint64_t take = pieces_of(left, unit) <= room ? left : room * unit;
    b[2 * nb] = pairs[2 * *i] + *off;
    b[2 * nb + 1] = take;
    nb++;
    *units += pieces_of(take, unit);
    if (take == left) ++*i, *off = 0;
    else *off += take;
  }
  return nb;
}

int ferry_mem_hash_batched(ferry_batch_call call, void *ctx, const uint64_t *pairs, size_t n,
                           uint64_t chunk, uint64_t *hashes) {
  if (!chunk) return -1;
  uint64_t *b = malloc(FERRY_HASH_MAX_RANGES * 16);
  if (!b) return -1;
  size_t i = 0;
  uint64_t off = 0, done = 0; /* into range i; hashes written */
  int rc = 0;
  while (i < n && !rc) {
    uint64_t pieces;
    size_t nb = next_batch(pairs, n, &i, &off, chunk, FERRY_HASH_MAX_RANGES,
                           FERRY_HASH_MAX_PIECES, b, &pieces);
    struct ferry_mem_hash_args a = {.ranges = {b, (uint32_t)(nb * 16)}, .chunk = chunk};
    struct ferry_mem_hash_rets r = {{0}};
    rc = call(ctx, FERRY_CALL_mem_hash, &a, &r, NULL);
    if (!rc && r.hashes.len != pieces * 8) rc = -1;
    /* the reply's buffer is the next call's: copied out now */
    if (!rc) memcpy(hashes + done, r.hashes.ptr, pieces * 8);
    done += pieces;
  }
  free(b);
  return rc;
}

int ferry_gather_batched(ferry_batch_call call, void *ctx, const uint64_t *pairs, size_t n,
                         unsigned char *out) {
  uint64_t *b = malloc(FERRY_GATHER_MAX_RANGES * 16);
  if (!b) return -1;
  size_t i = 0;
  uint64_t off = 0, done = 0;
  int rc = 0;
  while (i < n && !rc) {
    uint64_t bytes;
    size_t nb = next_batch(pairs, n, &i, &off, 1, FERRY_GATHER_MAX_RANGES, FERRY_GATHER_MAX_BYTES,
                           b, &bytes);
    struct ferry_memcpy_dtoh_gather_args a = {.ranges = {b, (uint32_t)(nb * 16)}};
    struct ferry_bulk bulk = {.out = out + done, .out_len = bytes};
    rc = call(ctx, FERRY_CALL_memcpy_dtoh_gather, &a, NULL, &bulk);
    done += bytes;
  }
  free(b);
  return rc;
}
