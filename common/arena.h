/*
 * The client-side device address allocator. ferry picks every device
 * address itself, inside a per-vGPU arena, so pointers are identical on the
 * server and stay valid when the vGPU later moves to a local GPU.
 *
 * Physical memory is mapped in granularity-sized runs ("mappings"). Small
 * allocations share mappings; a mapping is unmapped when the last
 * allocation touching it is freed. Mapping work is done through callbacks,
 * so the allocator itself is plain bookkeeping and easy to test.
 *
 * The arena's first granule, the floor, is never handed out. It belongs to
 * the mapping of the granule above it, so it is mapped whenever that
 * granule is (always while the first allocation of an empty arena lives),
 * in the same backend call, and unmapped with it. Natively the first
 * cudaMalloc lies above memory of the driver's own, so a kernel that reads a
 * little before its first allocation (Rodinia's srad_v2 reads a row before
 * its image) reads mapped memory; without the floor it would read below the
 * arena's reservation and fault. No region covers the floor, so mem-sync
 * never copies it and copies into it are refused.
 * Not thread-safe: callers hold their own lock.
 */
#ifndef FERRY_ARENA_H
#define FERRY_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define FERRY_ARENA_ALIGN 512u /* cudaMalloc guarantees 256; textures over linear memory need 512 */

struct ferry_region {
  uint64_t addr, size; /* size as requested by the program */
};

struct ferry_mapping {
  uint64_t addr, size;
  uint32_t users; /* live allocations overlapping it */
};

struct ferry_extent {
  uint64_t start, end;
};

struct ferry_arena {
  uint64_t base, size, granularity;
  struct ferry_extent *free_list; /* sorted, coalesced */
  size_t nfree, free_cap;
  struct ferry_region *regions; /* sorted by addr: the live-region table */
  size_t nregions, regions_cap;
  struct ferry_mapping *maps; /* sorted by addr */
  size_t nmaps, maps_cap;
  uint64_t live_bytes, mapped_bytes; /* mapped_bytes: the floor too, while mapped */
};

/* map/unmap one run on the GPU; return 0 or a cudaError_t */
struct ferry_arena_backend {
  int (*map)(void *ctx, uint64_t addr, uint64_t size);
  int (*unmap)(void *ctx, uint64_t addr, uint64_t size);
  void *ctx;
};

/* size: two granules at least (the floor and room for allocations) */
int ferry_arena_init(struct ferry_arena *a, uint64_t base, uint64_t size, uint64_t granularity);
void ferry_arena_destroy(struct ferry_arena *a);
/* forget everything without unmapping (the GPU side was reset) */
void ferry_arena_reset(struct ferry_arena *a);

/* 0 and *addr, or cudaErrorMemoryAllocation / the backend's error; a failed
   allocation leaves the arena exactly as it was */
int ferry_arena_alloc(struct ferry_arena *a, uint64_t size, const struct ferry_arena_backend *be,
                      uint64_t *addr);
/* 0, or cudaErrorInvalidValue when addr is not the start of a live allocation */
int ferry_arena_free(struct ferry_arena *a, uint64_t addr, const struct ferry_arena_backend *be);

/* the live allocation containing p, or NULL */
const struct ferry_region *ferry_arena_find(const struct ferry_arena *a, uint64_t p);
static inline int ferry_arena_contains(const struct ferry_arena *a, uint64_t p) {
  return p >= a->base && p - a->base < a->size;
}

#endif
