/*
 * Twins of ferry's own kernels, which the simulation knows without any
 * twins table: the mem_hash kernel (executor/hash_kernel.cu). A PTX or
 * cubin module that declares one of these names gets its twin here when
 * the loaded twins table has none, so ferry's checks run in CI as on a GPU.
 */
#include "sim/sim.h"

#include "common/chunk_hash.h"

/* ferry_hash_pieces(const uint64_t *pieces, uint64_t *hashes): block b
   hashes piece b, {addr, len} at pieces[2b] */
static void hash_pieces(const struct ferry_twin_thread *t, const unsigned char *params) {
  const uint64_t *pieces = FERRY_TWIN_ARG(const uint64_t *, params, 0);
  uint64_t *hashes = FERRY_TWIN_ARG(uint64_t *, params, 8);
  uint64_t b = t->block_idx.x;
  hashes[b] = ferry_chunk_hash((const void *)(uintptr_t)pieces[2 * b], pieces[2 * b + 1]);
}

/* the layouts are the PTX's: two 8-byte pointers */
const struct ferry_twin sim_builtin_twins[] = {
    {FERRY_HASH_KERNEL, hash_pieces, 1, 2, {{0, 8}, {8, 8}}},
    {NULL, NULL, 0, 0, {{0, 0}}},
};
