/*
 * First-fit extent allocator over the arena's address range, plus a
 * refcounted table of physical mappings and the program's reservations.
 * See arena.h for why.
 */
#include "arena.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

#define ERR_ALLOC 2   /* cudaErrorMemoryAllocation */
#define ERR_INVALID 1 /* cudaErrorInvalidValue */

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static uint64_t round_down(uint64_t v, uint64_t a) { return v / a * a; }

int ferry_arena_init(struct ferry_arena *a, uint64_t base, uint64_t size, uint64_t granularity) {
  memset(a, 0, sizeof *a);
  if (!granularity || base % granularity || size % granularity || size / granularity < 2)
    return ERR_INVALID;
  a->base = base;
  a->size = size;
  a->granularity = granularity;
  if (ferry_grow((void **)&a->free_list, &a->free_cap, 1, sizeof *a->free_list)) return ERR_ALLOC;
  a->free_list[0] = (struct ferry_extent){base + granularity, base + size}; /* past the floor */
  a->nfree = 1;
  return 0;
}

void ferry_arena_destroy(struct ferry_arena *a) {
  free(a->free_list);
  free(a->regions);
  free(a->maps);
  free(a->resv);
  memset(a, 0, sizeof *a);
}

static int carve(struct ferry_arena *a, size_t i, uint64_t start, uint64_t end);

/* the free extent holding all of [start, end), or nfree */
static size_t free_holding(const struct ferry_arena *a, uint64_t start, uint64_t end) {
  for (size_t i = 0; i < a->nfree; i++)
    if (a->free_list[i].start <= start && end <= a->free_list[i].end) return i;
  return a->nfree;
}

void ferry_arena_reset(struct ferry_arena *a) {
  uint64_t base = a->base, size = a->size, g = a->granularity;
  struct ferry_reservation *resv = a->resv;
  size_t nresv = a->nresv, cap = a->resv_cap;
  a->resv = NULL;
  ferry_arena_destroy(a);
  ferry_arena_init(a, base, size, g);
  a->resv = resv, a->nresv = nresv, a->resv_cap = cap;
  /* a fresh free list has room for them all: they were carved from it */
  for (size_t r = 0; r < nresv; r++) {
    size_t i = free_holding(a, resv[r].addr, resv[r].addr + resv[r].size);
    if (i < a->nfree) carve(a, i, resv[r].addr, resv[r].addr + resv[r].size);
  }
}

/* index of the first element whose addr is > p; regions and mappings both
   begin with their uint64_t addr, so one search serves both tables */
static size_t upper_bound(const void *table, size_t n, size_t stride, uint64_t p) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    uint64_t addr;
    memcpy(&addr, (const char *)table + mid * stride, sizeof addr);
    if (addr <= p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
static size_t regions_upper(const struct ferry_arena *a, uint64_t p) {
  return upper_bound(a->regions, a->nregions, sizeof *a->regions, p);
}
static size_t maps_upper(const struct ferry_arena *a, uint64_t p) {
  return upper_bound(a->maps, a->nmaps, sizeof *a->maps, p);
}
_Static_assert(offsetof(struct ferry_region, addr) == 0, "addr first");
_Static_assert(offsetof(struct ferry_mapping, addr) == 0, "addr first");

const struct ferry_region *ferry_arena_find_any(const struct ferry_arena *a, uint64_t p) {
  size_t i = regions_upper(a, p);
  if (i == 0) return NULL;
  const struct ferry_region *r = &a->regions[i - 1];
  uint64_t len = r->size ? r->size : 1;
  return p - r->addr < len ? r : NULL;
}

const struct ferry_region *ferry_arena_find(const struct ferry_arena *a, uint64_t p) {
  const struct ferry_region *r = ferry_arena_find_any(a, p);
  return r && !r->parked ? r : NULL;
}

size_t ferry_arena_first_after(const struct ferry_arena *a, uint64_t p) {
  size_t i = regions_upper(a, p);
  return i > 0 && a->regions[i - 1].addr + a->regions[i - 1].size > p ? i - 1 : i;
}

int ferry_arena_covers(const struct ferry_arena *a, uint64_t p, uint64_t len) {
  const struct ferry_region *r = ferry_arena_find(a, p);
  if (!r) return 0;
  uint64_t end = p + len;
  if (end < p) return 0;
  if (end <= r->addr + r->size) return 1;
  if (!r->handle) return 0;
  /* VMM regions are sorted and never overlap: walk the ones that follow */
  const struct ferry_region *last = a->regions + a->nregions;
  for (const struct ferry_region *n = r + 1; n < last; r = n++) {
    if (!n->handle || n->parked || n->addr != r->addr + r->size) return 0;
    if (end <= n->addr + n->size) return 1;
  }
  return 0;
}

/* take [start, end) out of free extent i, which contains it */
static int carve(struct ferry_arena *a, size_t i, uint64_t start, uint64_t end) {
  struct ferry_extent e = a->free_list[i];
  int left = start > e.start, right = end < e.end;
  if (left && right) {
    if (ferry_grow((void **)&a->free_list, &a->free_cap, a->nfree + 1, sizeof *a->free_list)) return -1;
    memmove(&a->free_list[i + 2], &a->free_list[i + 1], (a->nfree - i - 1) * sizeof *a->free_list);
    a->free_list[i] = (struct ferry_extent){e.start, start};
    a->free_list[i + 1] = (struct ferry_extent){end, e.end};
    a->nfree++;
  } else if (left) {
    a->free_list[i].end = start;
  } else if (right) {
    a->free_list[i].start = end;
  } else {
    memmove(&a->free_list[i], &a->free_list[i + 1], (a->nfree - i - 1) * sizeof *a->free_list);
    a->nfree--;
  }
  return 0;
}

/* give [start, end) back, coalescing with neighbours */
static int release_range(struct ferry_arena *a, uint64_t start, uint64_t end) {
  size_t i = 0;
  while (i < a->nfree && a->free_list[i].start < start) i++;
  int join_left = i > 0 && a->free_list[i - 1].end == start;
  int join_right = i < a->nfree && a->free_list[i].start == end;
  if (join_left && join_right) {
    a->free_list[i - 1].end = a->free_list[i].end;
    memmove(&a->free_list[i], &a->free_list[i + 1], (a->nfree - i - 1) * sizeof *a->free_list);
    a->nfree--;
  } else if (join_left) {
    a->free_list[i - 1].end = end;
  } else if (join_right) {
    a->free_list[i].start = start;
  } else {
    if (ferry_grow((void **)&a->free_list, &a->free_cap, a->nfree + 1, sizeof *a->free_list)) return -1;
    memmove(&a->free_list[i + 1], &a->free_list[i], (a->nfree - i) * sizeof *a->free_list);
    a->free_list[i] = (struct ferry_extent){start, end};
    a->nfree++;
  }
  return 0;
}

static int insert_map(struct ferry_arena *a, uint64_t addr, uint64_t size) {
  if (ferry_grow((void **)&a->maps, &a->maps_cap, a->nmaps + 1, sizeof *a->maps)) return -1;
  size_t i = maps_upper(a, addr);
  memmove(&a->maps[i + 1], &a->maps[i], (a->nmaps - i) * sizeof *a->maps);
  a->maps[i] = (struct ferry_mapping){addr, size, 0};
  a->nmaps++;
  a->mapped_bytes += size;
  return 0;
}

static void remove_map(struct ferry_arena *a, size_t i) {
  a->mapped_bytes -= a->maps[i].size;
  memmove(&a->maps[i], &a->maps[i + 1], (a->nmaps - i - 1) * sizeof *a->maps);
  a->nmaps--;
}

/* unmap (and forget) mappings inside [lo, hi) that have no users */
static void drop_unused_maps(struct ferry_arena *a, uint64_t lo, uint64_t hi,
                             const struct ferry_arena_backend *be) {
  size_t i = maps_upper(a, lo);
  if (i > 0) i--;
  while (i < a->nmaps && a->maps[i].addr < hi) {
    struct ferry_mapping m = a->maps[i];
    if (m.users == 0 && m.addr + m.size > lo) {
      if (be) be->unmap(be->ctx, m.addr, m.size);
      remove_map(a, i);
      continue;
    }
    i++;
  }
}

/* change the user count of every mapping overlapping [lo, hi) */
static void count_users(struct ferry_arena *a, uint64_t lo, uint64_t hi, int delta) {
  size_t i = maps_upper(a, lo);
  if (i > 0) i--;
  for (; i < a->nmaps && a->maps[i].addr < hi; i++)
    if (a->maps[i].addr + a->maps[i].size > lo) a->maps[i].users += (uint32_t)delta;
}

/* map every granule of [lo, hi) not yet mapped, one backend call per gap */
static int map_gaps(struct ferry_arena *a, uint64_t lo, uint64_t hi,
                    const struct ferry_arena_backend *be) {
  uint64_t cur = lo;
  while (cur < hi) {
    size_t i = maps_upper(a, cur);
    if (i > 0 && a->maps[i - 1].addr + a->maps[i - 1].size > cur) {
      cur = a->maps[i - 1].addr + a->maps[i - 1].size;
      continue;
    }
    uint64_t gap_end = i < a->nmaps && a->maps[i].addr < hi ? a->maps[i].addr : hi;
    if (ferry_grow((void **)&a->maps, &a->maps_cap, a->nmaps + 1, sizeof *a->maps)) return ERR_ALLOC;
    int rc = be ? be->map(be->ctx, cur, gap_end - cur) : 0;
    if (rc) return rc;
    if (insert_map(a, cur, gap_end - cur)) return ERR_ALLOC;
    cur = gap_end;
  }
  return 0;
}

int ferry_arena_alloc(struct ferry_arena *a, uint64_t size, const struct ferry_arena_backend *be,
                      uint64_t *addr) {
  if (size == 0 || size > a->size) return ERR_ALLOC;
  /* large allocations get granule-aligned, dedicated mappings so that freeing
     them returns memory at once */
  uint64_t align = size >= a->granularity ? a->granularity : FERRY_ARENA_ALIGN;
  uint64_t span = round_up(size, FERRY_ARENA_ALIGN);
  if (align == a->granularity) span = round_up(size, a->granularity);
  for (size_t i = 0; i < a->nfree; i++) {
    uint64_t start = round_up(a->free_list[i].start, align);
    if (start >= a->free_list[i].end || a->free_list[i].end - start < span) continue;
    if (ferry_grow((void **)&a->regions, &a->regions_cap, a->nregions + 1, sizeof *a->regions))
      return ERR_ALLOC;
    uint64_t lo = round_down(start, a->granularity), hi = round_up(start + span, a->granularity);
    /* the floor is mapped with the granule above it (arena.h) */
    if (lo == a->base + a->granularity) lo = a->base;
    int rc = map_gaps(a, lo, hi, be);
    if (rc) {
      drop_unused_maps(a, lo, hi, be);
      return rc;
    }
    if (carve(a, i, start, start + span)) {
      drop_unused_maps(a, lo, hi, be);
      return ERR_ALLOC;
    }
    count_users(a, start, start + span, +1);
    size_t r = regions_upper(a, start);
    memmove(&a->regions[r + 1], &a->regions[r], (a->nregions - r) * sizeof *a->regions);
    a->regions[r] = (struct ferry_region){start, size, 0, 0};
    a->nregions++;
    a->live_bytes += size;
    *addr = start;
    return 0;
  }
  return ERR_ALLOC;
}

int ferry_arena_free(struct ferry_arena *a, uint64_t addr, const struct ferry_arena_backend *be) {
  size_t r = regions_upper(a, addr);
  if (r == 0 || a->regions[r - 1].addr != addr || a->regions[r - 1].handle) return ERR_INVALID;
  r--;
  uint64_t size = a->regions[r].size;
  uint64_t span = size >= a->granularity ? round_up(size, a->granularity)
                                         : round_up(size, FERRY_ARENA_ALIGN);
  memmove(&a->regions[r], &a->regions[r + 1], (a->nregions - r - 1) * sizeof *a->regions);
  a->nregions--;
  a->live_bytes -= size;
  count_users(a, addr, addr + span, -1);
  drop_unused_maps(a, round_down(addr, a->granularity), round_up(addr + span, a->granularity), be);
  return release_range(a, addr, addr + span) ? ERR_ALLOC : 0;
}

/* ---- reservations and the program's own mappings ---- */

static size_t resv_upper(const struct ferry_arena *a, uint64_t p) {
  return upper_bound(a->resv, a->nresv, sizeof *a->resv, p);
}
_Static_assert(offsetof(struct ferry_reservation, addr) == 0, "addr first");

const struct ferry_reservation *ferry_arena_reservation(const struct ferry_arena *a, uint64_t p) {
  size_t i = resv_upper(a, p);
  if (i == 0) return NULL;
  const struct ferry_reservation *r = &a->resv[i - 1];
  return p - r->addr < r->size ? r : NULL;
}

int ferry_arena_reserve(struct ferry_arena *a, uint64_t size, uint64_t align, uint64_t hint,
                        uint64_t *addr) {
  if (align < a->granularity) align = a->granularity;
  if (size == 0 || size > a->size || (align & (align - 1))) return ERR_ALLOC;
  size = round_up(size, a->granularity);
  if (ferry_grow((void **)&a->resv, &a->resv_cap, a->nresv + 1, sizeof *a->resv)) return ERR_ALLOC;
  size_t at = a->nfree;
  uint64_t start = 0;
  if (hint && hint % align == 0 && hint + size > hint) {
    at = free_holding(a, hint, hint + size);
    start = hint;
  }
  /* from the top down: cudaMalloc's allocations fill the arena from the
     bottom, and the two stay apart */
  for (size_t i = a->nfree; at == a->nfree && i-- > 0;) {
    const struct ferry_extent *e = &a->free_list[i];
    if (e->end - e->start < size) continue;
    uint64_t s = round_down(e->end - size, align);
    if (s >= e->start) at = i, start = s;
  }
  if (at == a->nfree) return ERR_ALLOC;
  if (carve(a, at, start, start + size)) return ERR_ALLOC;
  size_t r = resv_upper(a, start);
  memmove(&a->resv[r + 1], &a->resv[r], (a->nresv - r) * sizeof *a->resv);
  a->resv[r] = (struct ferry_reservation){start, size};
  a->nresv++;
  *addr = start;
  return 0;
}

int ferry_arena_unreserve(struct ferry_arena *a, uint64_t addr) {
  size_t r = resv_upper(a, addr);
  if (r == 0 || a->resv[r - 1].addr != addr) return ERR_INVALID;
  struct ferry_reservation v = a->resv[--r];
  size_t i = regions_upper(a, v.addr + v.size - 1);
  if (i > 0 && a->regions[i - 1].addr + a->regions[i - 1].size > v.addr) return ERR_INVALID;
  if (release_range(a, v.addr, v.addr + v.size)) return ERR_ALLOC;
  memmove(&a->resv[r], &a->resv[r + 1], (a->nresv - r - 1) * sizeof *a->resv);
  a->nresv--;
  return 0;
}

int ferry_arena_map_at(struct ferry_arena *a, uint64_t addr, uint64_t size, uint64_t handle,
                       const struct ferry_arena_backend *be) {
  const struct ferry_reservation *v = ferry_arena_reservation(a, addr);
  if (!handle || !size || addr % a->granularity || size % a->granularity || !v ||
      size > v->addr + v->size - addr)
    return ERR_INVALID;
  size_t r = regions_upper(a, addr + size - 1);
  if (r > 0 && a->regions[r - 1].addr + a->regions[r - 1].size > addr) return ERR_INVALID;
  if (ferry_grow((void **)&a->regions, &a->regions_cap, a->nregions + 1, sizeof *a->regions) ||
      ferry_grow((void **)&a->maps, &a->maps_cap, a->nmaps + 1, sizeof *a->maps))
    return ERR_ALLOC;
  int rc = be ? be->map(be->ctx, addr, size) : 0;
  if (rc) return rc;
  insert_map(a, addr, size); /* room was made above: cannot fail */
  a->maps[maps_upper(a, addr) - 1].users = 1;
  r = regions_upper(a, addr);
  memmove(&a->regions[r + 1], &a->regions[r], (a->nregions - r) * sizeof *a->regions);
  a->regions[r] = (struct ferry_region){addr, size, handle, 0};
  a->nregions++;
  a->live_bytes += size;
  return 0;
}

/* index of the VMM region starting at addr, or nregions */
static size_t vmm_region(const struct ferry_arena *a, uint64_t addr) {
  size_t r = regions_upper(a, addr);
  if (r == 0 || a->regions[r - 1].addr != addr || !a->regions[r - 1].handle) return a->nregions;
  return r - 1;
}

int ferry_arena_park(struct ferry_arena *a, uint64_t addr, int parked) {
  size_t r = vmm_region(a, addr);
  if (r == a->nregions) return ERR_INVALID;
  a->regions[r].parked = parked;
  return 0;
}

int ferry_arena_unmap_at(struct ferry_arena *a, uint64_t addr, const struct ferry_arena_backend *be) {
  size_t r = vmm_region(a, addr);
  if (r == a->nregions) return ERR_INVALID;
  uint64_t size = a->regions[r].size;
  int rc = be ? be->unmap(be->ctx, addr, size) : 0;
  if (rc) return rc; /* still mapped there: still the handle's */
  memmove(&a->regions[r], &a->regions[r + 1], (a->nregions - r - 1) * sizeof *a->regions);
  a->nregions--;
  a->live_bytes -= size;
  size_t m = maps_upper(a, addr);
  if (m > 0 && a->maps[m - 1].addr == addr) remove_map(a, m - 1);
  return 0;
}
