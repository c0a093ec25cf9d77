/*
 * mem_hash, migration's change check: every chunk-byte piece of the client's
 * ranges is hashed on the GPU by ferry's own kernel (hash_kernel.cu, built
 * in as PTX), so that a region on the source and on the target GPU compare
 * by 8 bytes a piece instead of by their bytes. The kernel computes
 * ferry_chunk_hash (common/chunk_hash.h); the simulation runs its CPU twin
 * (sim/sim_builtin.c), which gives the same hashes.
 */
#include "executor/exec_internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/chunk_hash.h"

#define HASH_MAX_PIECES FERRY_HASH_MAX_PIECES
/* the pinned buffer: descriptors {addr, len} of every piece, then hashes */
#define HASH_DESC_BYTES ((size_t)HASH_MAX_PIECES * 16)
#define HASH_BUF_BYTES (HASH_DESC_BYTES + (size_t)HASH_MAX_PIECES * 8)

extern const char ferry_hash_ptx[]; /* hash_kernel.ptx, embedded by embed_ptx.cmake */

void exec_free_hash(struct ferry_exec *ex, int driver_ok) {
  if (ex->hash_mod && driver_ok)
    ex->d->ModuleUnload(ex->hash_mod);
  if (ex->hash_buf && driver_ok)
    ex->d->MemFreeHost(ex->hash_buf);
  ex->hash_mod = NULL;
  ex->hash_fn = NULL;
  ex->hash_buf = NULL;
}

/* the kernel and its buffer, kept until close or a device reset */
static int hash_ready(struct ferry_exec *ex) {
  const struct ferry_driver *d = ex->d;
  CUresult res;
  if (!ex->hash_mod) {
    CUmodule mod;
    if ((res = d->ModuleLoadData(&mod, ferry_hash_ptx)) != CUDA_SUCCESS)
      return CU(res);
    if ((res = d->ModuleGetFunction(&ex->hash_fn, mod, FERRY_HASH_KERNEL)) != CUDA_SUCCESS) {
      d->ModuleUnload(mod);
      ex->hash_fn = NULL;
      return CU(res);
    }
    ex->hash_mod = mod;
  }
  if (!ex->hash_buf) {
    /* with unified addressing the kernel uses the host pointer itself */
    if ((res = d->MemHostAlloc(&ex->hash_buf, HASH_BUF_BYTES, CU_MEMHOSTALLOC_DEVICEMAP)) !=
        CUDA_SUCCESS) {
      ex->hash_buf = NULL;
      return CU(res);
    }
  }
  return EXEC_OK;
}

/* checks the ranges and counts their pieces */
static int count_pieces(const struct ferry_exec *ex, const uint64_t *pairs, uint32_t nranges,
                        uint64_t chunk, uint32_t *out) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < nranges; i++) {
    uint64_t addr = pairs[2 * i], size = pairs[2 * i + 1];
    if (addr % 8 || addr + size < addr)
      return EXEC_INVALID_VALUE;
    uint64_t n = size / chunk + (size % chunk != 0);
    if (n > HASH_MAX_PIECES - total)
      return EXEC_INVALID_VALUE;
    /* the kernel must never fault, which would end the context */
    if (size && !exec_mapped_range(ex, addr, size))
      return EXEC_INVALID_VALUE;
    total += n;
  }
  *out = (uint32_t)total;
  return EXEC_OK;
}

/* runs the kernel over the n pieces of the ranges; hashes land in the buffer */
static int hash_pieces(struct ferry_exec *ex, const uint64_t *pairs, uint32_t nranges,
                       uint64_t chunk, uint32_t n) {
  uint64_t *desc = ex->hash_buf, k = 0;
  for (uint32_t i = 0; i < nranges; i++) {
    uint64_t addr = pairs[2 * i], size = pairs[2 * i + 1];
    for (uint64_t j = 0; j < size / chunk + (size % chunk != 0); j++, k++) {
      uint64_t off = j * chunk; /* < size: no overflow, whatever chunk is */
      desc[2 * k] = addr + off;
      desc[2 * k + 1] = size - off < chunk ? size - off : chunk;
    }
  }
  CUstream s;
  int err = exec_stream(ex, 0, &s); /* ordered after the session's work, like gather */
  if (err)
    return err;
  uint64_t pdesc = (uintptr_t)ex->hash_buf, phash = pdesc + HASH_DESC_BYTES;
  void *params[] = {&pdesc, &phash};
  CUresult res = ex->d->LaunchKernel(ex->hash_fn, n, 1, 1, FERRY_HASH_THREADS, 1, 1, 0, s, params,
                                     NULL);
  if (res == CUDA_SUCCESS)
    res = ex->d->StreamSynchronize(s);
  return CU(res);
}

int ferry_x_mem_hash(struct ferry_exec *ex, const struct ferry_mem_hash_args *a,
                     struct ferry_mem_hash_rets *r, struct ferry_io *io) {
  (void)io;
  r->hashes = (ferry_blob){NULL, 0};
  if (a->chunk == 0 || a->chunk % 8 || a->ranges.len % 16)
    return EXEC_INVALID_VALUE;
  uint32_t nranges = a->ranges.len / 16, n = 0;
  uint64_t *pairs = malloc(a->ranges.len ? a->ranges.len : 1);
  if (!pairs)
    return EXEC_MEMORY_ALLOCATION;
  if (a->ranges.len)
    memcpy(pairs, a->ranges.ptr, a->ranges.len); /* the blob may be unaligned */
  int err = count_pieces(ex, pairs, nranges, a->chunk, &n);
  if (!err) /* even for no pieces: a call with no ranges pays the JIT early */
    err = hash_ready(ex);
  if (!err && n)
    err = hash_pieces(ex, pairs, nranges, a->chunk, n);
  free(pairs);
  if (err)
    return err;
  uint64_t *hashes = exec_ret_alloc(ex, 0, (size_t)n * 8);
  if (!hashes)
    return EXEC_MEMORY_ALLOCATION;
  if (n)
    memcpy(hashes, (char *)ex->hash_buf + HASH_DESC_BYTES, (size_t)n * 8);
  r->hashes = (ferry_blob){hashes, n * 8};
  return EXEC_OK;
}
