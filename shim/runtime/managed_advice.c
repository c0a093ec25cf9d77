/*
 * What the program said about its managed memory, page by page: advice
 * (cudaMemAdvise) and where it last prefetched (cudaMemPrefetchAsync), so
 * that cudaMemRangeGetAttribute(s) answers as CUDA does. Pages move at
 * synchronizations whatever was said (managed.c); this is bookkeeping
 * only, made for a block at its first advice or prefetch.
 * A location is kept as a device ordinal, cudaCpuDeviceId for the host (a
 * host NUMA node counts as the host), or cudaInvalidDeviceId: none.
 */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "shim/core/host.h"
#include "shim/runtime/runtime.h"

#define PAGE 4096u
#define ACCESSED_HOST 63 /* bit of accessed_by for the host; devices below */

struct advised {
  struct advised *next;
  uint64_t base, pages;
  unsigned char *read_mostly;
  int32_t *preferred, *prefetched;
  uint64_t *accessed_by;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct advised *blocks;

static int32_t location_code(struct cudaMemLocation l) {
  return l.type == cudaMemLocationTypeDevice ? l.id : cudaCpuDeviceId;
}

/* the block's record, made when `make`; NULL when none (or out of memory) */
static struct advised *record(uint64_t base, uint64_t size, int make) {
  for (struct advised *a = blocks; a; a = a->next)
    if (a->base == base) return a;
  if (!make) return NULL;
  uint64_t pages = (size + PAGE - 1) / PAGE;
  struct advised *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->base = base;
  a->pages = pages;
  a->read_mostly = calloc(pages, 1);
  a->preferred = malloc(pages * sizeof *a->preferred);
  a->prefetched = malloc(pages * sizeof *a->prefetched);
  a->accessed_by = calloc(pages, sizeof *a->accessed_by);
  if (!a->read_mostly || !a->preferred || !a->prefetched || !a->accessed_by) {
    free(a->read_mostly), free(a->preferred), free(a->prefetched), free(a->accessed_by), free(a);
    return NULL;
  }
  for (uint64_t i = 0; i < pages; i++) a->preferred[i] = a->prefetched[i] = cudaInvalidDeviceId;
  a->next = blocks;
  blocks = a;
  return a;
}

/* [p, p + count) inside one managed block: its pages [first, end), and the
   block's record (made when `make`; NULL when there is none). 0, or -1
   when the range is no managed memory */
static int span(const void *p, size_t count, int make, struct advised **a, uint64_t *first,
                uint64_t *end) {
  uint64_t base, size, at = (uint64_t)(uintptr_t)p;
  if (!count || !ferry_host_managed(p, &base, &size) || at - base + count > size) return -1;
  *first = (at - base) / PAGE;
  *end = (at - base + count + PAGE - 1) / PAGE;
  *a = record(base, size, make);
  return 0;
}

void ferry_managed_advise(const void *p, size_t count, enum cudaMemoryAdvise advice,
                          struct cudaMemLocation where) {
  uint64_t first = 0, end = 0;
  struct advised *a = NULL;
  pthread_mutex_lock(&lock);
  span(p, count, 1, &a, &first, &end);
  int bit = where.type == cudaMemLocationTypeDevice ? where.id : ACCESSED_HOST;
  for (uint64_t i = first; a && i < end; i++) {
    switch (advice) {
    case cudaMemAdviseSetReadMostly: a->read_mostly[i] = 1; break;
    case cudaMemAdviseUnsetReadMostly: a->read_mostly[i] = 0; break;
    case cudaMemAdviseSetPreferredLocation: a->preferred[i] = location_code(where); break;
    case cudaMemAdviseUnsetPreferredLocation: a->preferred[i] = cudaInvalidDeviceId; break;
    case cudaMemAdviseSetAccessedBy: a->accessed_by[i] |= 1ull << bit; break;
    case cudaMemAdviseUnsetAccessedBy: a->accessed_by[i] &= ~(1ull << bit); break;
    }
  }
  pthread_mutex_unlock(&lock);
}

void ferry_managed_prefetched(const void *p, size_t count, struct cudaMemLocation to) {
  uint64_t first = 0, end = 0;
  struct advised *a = NULL;
  pthread_mutex_lock(&lock);
  span(p, count, 1, &a, &first, &end);
  for (uint64_t i = first; a && i < end; i++) a->prefetched[i] = location_code(to);
  pthread_mutex_unlock(&lock);
}

void ferry_managed_advice_forget(const void *base) {
  pthread_mutex_lock(&lock);
  for (struct advised **pa = &blocks; *pa; pa = &(*pa)->next) {
    struct advised *a = *pa;
    if (a->base != (uint64_t)(uintptr_t)base) continue;
    *pa = a->next;
    free(a->read_mostly), free(a->preferred), free(a->prefetched), free(a->accessed_by), free(a);
    break;
  }
  pthread_mutex_unlock(&lock);
}

/* the code every page of [first, end) has, or cudaInvalidDeviceId */
static int32_t same(const int32_t *codes, uint64_t first, uint64_t end) {
  for (uint64_t i = first + 1; i < end; i++)
    if (codes[i] != codes[first]) return cudaInvalidDeviceId;
  return codes[first];
}

static int range_attribute(void *data, size_t size, enum cudaMemRangeAttribute attr, const void *p,
                           size_t count) {
  uint64_t first, end;
  struct advised *a; /* NULL: nothing said about the block yet */
  if (!data || span(p, count, 0, &a, &first, &end)) return cudaErrorInvalidValue;
  int32_t *out = data, code;
  int preferred = attr == cudaMemRangeAttributePreferredLocation ||
                  attr == cudaMemRangeAttributePreferredLocationType ||
                  attr == cudaMemRangeAttributePreferredLocationId;
  switch (attr) {
  case cudaMemRangeAttributeReadMostly:
    if (size != 4) return cudaErrorInvalidValue;
    *out = 1;
    for (uint64_t i = first; i < end; i++) *out = *out && a && a->read_mostly[i];
    return 0;
  case cudaMemRangeAttributePreferredLocation:
  case cudaMemRangeAttributeLastPrefetchLocation:
  case cudaMemRangeAttributePreferredLocationId:
  case cudaMemRangeAttributeLastPrefetchLocationId:
  case cudaMemRangeAttributePreferredLocationType:
  case cudaMemRangeAttributeLastPrefetchLocationType:
    if (size != 4) return cudaErrorInvalidValue;
    code = a ? same(preferred ? a->preferred : a->prefetched, first, end) : cudaInvalidDeviceId;
    if (attr == cudaMemRangeAttributePreferredLocationType || attr == cudaMemRangeAttributeLastPrefetchLocationType)
      *out = code >= 0                   ? cudaMemLocationTypeDevice
             : code == cudaCpuDeviceId ? cudaMemLocationTypeHost
                                       : cudaMemLocationTypeInvalid;
    else if (attr == cudaMemRangeAttributePreferredLocationId || attr == cudaMemRangeAttributeLastPrefetchLocationId)
      *out = code >= 0 ? code : 0; /* to be ignored for other types */
    else
      *out = code;
    return 0;
  case cudaMemRangeAttributeAccessedBy: {
    if (!size || size % 4) return cudaErrorInvalidValue;
    uint64_t all = ~0ull;
    for (uint64_t i = first; i < end; i++) all &= a ? a->accessed_by[i] : 0;
    size_t n = size / 4, k = 0;
    for (int d = 0; d < ACCESSED_HOST && k < n; d++)
      if (all & (1ull << d)) out[k++] = d;
    if ((all >> ACCESSED_HOST & 1) && k < n) out[k++] = cudaCpuDeviceId;
    while (k < n) out[k++] = cudaInvalidDeviceId;
    return 0;
  }
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t cudaMemRangeGetAttribute(void *data, size_t size, enum cudaMemRangeAttribute attr,
                                     const void *p, size_t count) {
  int rc = ferry_ensure_init();
  if (rc) return ferry_ret(rc);
  pthread_mutex_lock(&lock);
  rc = range_attribute(data, size, attr, p, count);
  pthread_mutex_unlock(&lock);
  return ferry_ret(rc);
}

cudaError_t cudaMemRangeGetAttributes(void **data, size_t *sizes, enum cudaMemRangeAttribute *attrs,
                                      size_t n, const void *p, size_t count) {
  int rc = ferry_ensure_init();
  if (rc) return ferry_ret(rc);
  if (!data || !sizes || !attrs || !n) return ferry_ret(cudaErrorInvalidValue);
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < n && !rc; i++) rc = range_attribute(data[i], sizes[i], attrs[i], p, count);
  pthread_mutex_unlock(&lock);
  return ferry_ret(rc);
}
