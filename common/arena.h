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
 *
 * Reservations (the driver API's cuMemAddressReserve) are extents taken
 * out of the free list, so ordinary allocations avoid them; the program
 * maps memory of its own handles inside them (ferry_arena_map_at). Such a
 * mapping is a region too, tagged with its handle, so that pointer checks
 * and mem-sync treat it like any allocation; a region the program unmapped
 * while its handle lives on is "parked": still mapped on the GPU and
 * copied by mem-sync (the handle owns its contents), but not the program's
 * to use. Reservations survive a reset; mappings do not.
 * Not thread-safe: callers hold their own lock.
 */
#ifndef FERRY_ARENA_H
#define FERRY_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define FERRY_ARENA_ALIGN 512u /* cudaMalloc guarantees 256; textures over linear memory need 512 */

struct ferry_region {
  uint64_t addr, size; /* size as requested by the program */
  uint64_t handle;     /* 0: an allocation; else the program's VMM handle mapped here */
  int parked;          /* VMM: unmapped by the program, its memory kept for the handle */
};

struct ferry_reservation {
  uint64_t addr, size; /* granule multiples */
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
  struct ferry_reservation *resv; /* sorted by addr */
  size_t nresv, resv_cap;
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
/* forget every allocation and mapping without unmapping (the GPU side was
   reset); reservations stay */
void ferry_arena_reset(struct ferry_arena *a);

/* 0 and *addr, or cudaErrorMemoryAllocation / the backend's error; a failed
   allocation leaves the arena exactly as it was */
int ferry_arena_alloc(struct ferry_arena *a, uint64_t size, const struct ferry_arena_backend *be,
                      uint64_t *addr);
/* 0, or cudaErrorInvalidValue when addr is not the start of a live
   allocation (a VMM mapping is not one) */
int ferry_arena_free(struct ferry_arena *a, uint64_t addr, const struct ferry_arena_backend *be);

/* the live allocation or mapped VMM region containing p, or NULL (a parked
   region is not the program's) */
const struct ferry_region *ferry_arena_find(const struct ferry_arena *a, uint64_t p);
/* the same, parked regions included */
const struct ferry_region *ferry_arena_find_any(const struct ferry_arena *a, uint64_t p);
/* [p, p + len) lies in one live allocation, or in back-to-back mapped VMM
   regions (a copy may cross from one handle's memory into the next) */
int ferry_arena_covers(const struct ferry_arena *a, uint64_t p, uint64_t len);

/* index of the first region (parked ones included) that ends after p:
   regions[i..] overlapping a range start there; nregions when none */
size_t ferry_arena_first_after(const struct ferry_arena *a, uint64_t p);

/* ---- reservations and the program's own mappings (program VMM) ---- */
/* reserves size (rounded up to the granularity) aligned to align (a power
   of two; at least the granularity); at hint when that range is free,
   else wherever it fits, from the top of the arena down.
   0 and *addr, or cudaErrorMemoryAllocation */
int ferry_arena_reserve(struct ferry_arena *a, uint64_t size, uint64_t align, uint64_t hint,
                        uint64_t *addr);
/* gives the reservation starting at addr back; cudaErrorInvalidValue when
   none starts there or a region (mapped or parked) still lies inside */
int ferry_arena_unreserve(struct ferry_arena *a, uint64_t addr);
/* the reservation containing p, or NULL */
const struct ferry_reservation *ferry_arena_reservation(const struct ferry_arena *a, uint64_t p);
/* maps [addr, addr + size) for handle (non-zero): granule-aligned, inside
   one reservation, over no other region; cudaErrorInvalidValue, or the
   backend's error with the arena unchanged */
int ferry_arena_map_at(struct ferry_arena *a, uint64_t addr, uint64_t size, uint64_t handle,
                       const struct ferry_arena_backend *be);
/* the VMM region starting at addr: parked (1) or the program's again (0);
   cudaErrorInvalidValue when there is none */
int ferry_arena_park(struct ferry_arena *a, uint64_t addr, int parked);
/* unmaps the VMM region starting at addr and forgets it */
int ferry_arena_unmap_at(struct ferry_arena *a, uint64_t addr, const struct ferry_arena_backend *be);
static inline int ferry_arena_contains(const struct ferry_arena *a, uint64_t p) {
  return p >= a->base && p - a->base < a->size;
}

#endif
