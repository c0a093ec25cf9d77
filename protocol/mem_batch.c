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

static uint64_t pieces_of(uint64_t size, uint64_t chunk) { return size / chunk + (size % chunk != 0); }

int ferry_mem_hash_batched(ferry_batch_call call, void *ctx, const uint64_t *pairs, size_t n,
                           uint64_t chunk, uint64_t *hashes) {
  if (!chunk) return -1;
  uint64_t *b = malloc(FERRY_HASH_MAX_RANGES * 16);
  if (!b) return -1;
  size_t i = 0;
  uint64_t off = 0, done = 0; /* into range i; hashes written */
  int rc = 0;
  while (i < n && !rc) {
    size_t nb = 0;
    uint64_t pieces = 0;
    while (i < n && nb < FERRY_HASH_MAX_RANGES && pieces < FERRY_HASH_MAX_PIECES) {
      uint64_t left = pairs[2 * i + 1] - off, room = FERRY_HASH_MAX_PIECES - pieces;
      uint64_t take = pieces_of(left, chunk) <= room ? left : room * chunk;
      b[2 * nb] = pairs[2 * i] + off;
      b[2 * nb + 1] = take;
      nb++;
      pieces += pieces_of(take, chunk);
      if (take == left) i++, off = 0;
      else off += take;
    }
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
    size_t nb = 0;
    uint64_t bytes = 0;
    while (i < n && nb < FERRY_GATHER_MAX_RANGES && bytes < FERRY_GATHER_MAX_BYTES) {
      uint64_t left = pairs[2 * i + 1] - off, room = FERRY_GATHER_MAX_BYTES - bytes;
      uint64_t take = left <= room ? left : room;
      b[2 * nb] = pairs[2 * i] + off;
      b[2 * nb + 1] = take;
      nb++;
      bytes += take;
      if (take == left) i++, off = 0;
      else off += take;
    }
    struct ferry_memcpy_dtoh_gather_args a = {.ranges = {b, (uint32_t)(nb * 16)}};
    struct ferry_bulk bulk = {.out = out + done, .out_len = bytes};
    rc = call(ctx, FERRY_CALL_memcpy_dtoh_gather, &a, NULL, &bulk);
    done += bytes;
  }
  free(b);
  return rc;
}
