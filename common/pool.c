/* Stream-ordered memory pools' bookkeeping: see pool.h. */
#include "common/pool.h"

#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

#define ERR_INVALID_VALUE 1 /* cudaErrorInvalidValue */
#define ERR_NO_MEMORY 2     /* cudaErrorMemoryAllocation */

/* attributes as CUDA numbers them (cudaMemPoolAttr, CUmemPool_attribute) */
enum {
  ATTR_FOLLOW_EVENTS = 1,
  ATTR_OPPORTUNISTIC,
  ATTR_INTERNAL_DEPS,
  ATTR_RELEASE_THRESHOLD,
  ATTR_RESERVED_CURRENT,
  ATTR_RESERVED_HIGH,
  ATTR_USED_CURRENT,
  ATTR_USED_HIGH,
};

/* room for one more than n */
#define GROW(arr, n, cap) \
  (ferry_grow((void **)&(arr), &(cap), (n) + 1, sizeof *(arr)) ? ERR_NO_MEMORY : 0)

/* ---- the clock ---- */
void ferry_pool_clock_init(struct ferry_pool_clock *c) { memset(c, 0, sizeof *c); }

void ferry_pool_clock_destroy(struct ferry_pool_clock *c) {
  for (size_t i = 0; i < c->nstreams; i++) free(c->streams[i].deps);
  free(c->streams);
  free(c->events);
  memset(c, 0, sizeof *c);
}

static struct ferry_pool_stream *stream_of(const struct ferry_pool_clock *c, uint32_t stream) {
  for (size_t i = 0; i < c->nstreams; i++)
    if (c->streams[i].stream == stream) return &c->streams[i];
  return NULL;
}

static struct ferry_pool_stream *stream_add(struct ferry_pool_clock *c, uint32_t stream) {
  struct ferry_pool_stream *s = stream_of(c, stream);
  if (s || GROW(c->streams, c->nstreams, c->streams_cap)) return s;
  s = &c->streams[c->nstreams++];
  memset(s, 0, sizeof *s);
  s->stream = stream;
  return s;
}

void ferry_pool_stream_synced(struct ferry_pool_clock *c, uint32_t stream, uint64_t at) {
  struct ferry_pool_stream *s = stream_add(c, stream);
  if (s && at > s->done) s->done = at; /* out of memory: the free only waits longer */
}

void ferry_pool_device_synced(struct ferry_pool_clock *c, uint64_t at) {
  if (at > c->device_done) c->device_done = at;
}

static struct ferry_pool_event *event_of(const struct ferry_pool_clock *c, uint32_t event) {
  for (size_t i = 0; i < c->nevents; i++)
    if (c->events[i].event == event) return &c->events[i];
  return NULL;
}

int ferry_pool_event_recorded(struct ferry_pool_clock *c, uint32_t event, uint32_t stream) {
  struct ferry_pool_event *e = event_of(c, event);
  if (!e) {
    if (GROW(c->events, c->nevents, c->events_cap)) return ERR_NO_MEMORY;
    e = &c->events[c->nevents++];
    e->event = event;
  }
  e->stream = stream;
  e->seq = c->seq;
  return 0;
}

int ferry_pool_event_waited(struct ferry_pool_clock *c, uint32_t stream, uint32_t event) {
  struct ferry_pool_event *e = event_of(c, event);
  if (!e || e->stream == stream) return 0;
  struct ferry_pool_stream *s = stream_add(c, stream);
  if (!s) return ERR_NO_MEMORY;
  for (size_t i = 0; i < s->ndeps; i++)
    if (s->deps[i].from == e->stream) {
      if (e->seq > s->deps[i].seq) s->deps[i].seq = e->seq;
      return 0;
    }
  if (GROW(s->deps, s->ndeps, s->deps_cap)) return ERR_NO_MEMORY;
  s->deps[s->ndeps++] = (struct ferry_pool_dep){e->stream, e->seq};
  return 0;
}

void ferry_pool_event_synced(struct ferry_pool_clock *c, uint32_t event) {
  struct ferry_pool_event *e = event_of(c, event);
  if (e) ferry_pool_stream_synced(c, e->stream, e->seq);
}

void ferry_pool_event_forget(struct ferry_pool_clock *c, uint32_t event) {
  struct ferry_pool_event *e = event_of(c, event);
  if (e) *e = c->events[--c->nevents];
}

void ferry_pool_stream_forget(struct ferry_pool_clock *c, uint32_t stream) {
  struct ferry_pool_stream *s = stream_of(c, stream);
  if (s) {
    free(s->deps);
    *s = c->streams[--c->nstreams];
  }
  for (size_t i = 0; i < c->nstreams; i++) /* what others learned of it */
    for (size_t j = 0; j < c->streams[i].ndeps; j++)
      if (c->streams[i].deps[j].from == stream) c->streams[i].deps[j--] = c->streams[i].deps[--c->streams[i].ndeps];
  for (size_t i = 0; i < c->nevents; i++) /* an event recorded there says nothing of a new stream */
    if (c->events[i].stream == stream) c->events[i].stream = FERRY_POOL_NO_STREAM;
}

void ferry_pool_orphan(struct ferry_pool *p, const struct ferry_pool_clock *c, uint32_t stream) {
  for (size_t i = 0; i < p->npooled; i++) {
    struct ferry_pool_block *b = &p->pooled[i];
    if (b->stream != stream) continue;
    if (ferry_pool_complete(c, b->stream, b->seq)) b->seq = 0; /* complete for good */
    b->stream = FERRY_POOL_NO_STREAM;
  }
}

int ferry_pool_complete(const struct ferry_pool_clock *c, uint32_t stream, uint64_t seq) {
  if (seq <= c->device_done) return 1;
  const struct ferry_pool_stream *s = stream == FERRY_POOL_NO_STREAM ? NULL : stream_of(c, stream);
  return s && seq <= s->done;
}

/* a pooled block may serve an allocation on stream */
static int reusable(const struct ferry_pool *p, const struct ferry_pool_clock *c,
                    const struct ferry_pool_block *b, uint32_t stream) {
  if (b->stream == stream && stream != FERRY_POOL_NO_STREAM) return 1; /* stream order */
  if (p->opportunistic && ferry_pool_complete(c, b->stream, b->seq)) return 1;
  if (!p->follow_events) return 0;
  const struct ferry_pool_stream *s = stream_of(c, stream);
  for (size_t i = 0; s && i < s->ndeps; i++)
    if (s->deps[i].from == b->stream && b->seq <= s->deps[i].seq) return 1;
  return 0;
}

/* ---- pools ---- */
void ferry_pool_init(struct ferry_pool *p) {
  memset(p, 0, sizeof *p);
  p->follow_events = p->opportunistic = p->internal_deps = 1;
}

void ferry_pool_destroy(struct ferry_pool *p) {
  free(p->live);
  free(p->pooled);
  memset(p, 0, sizeof *p);
}

static size_t live_index(const struct ferry_pool *p, uint64_t addr) {
  size_t lo = 0, hi = p->nlive;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (p->live[mid].addr < addr) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const struct ferry_pool_block *ferry_pool_live(const struct ferry_pool *p, uint64_t addr) {
  size_t i = live_index(p, addr);
  return i < p->nlive && p->live[i].addr == addr ? &p->live[i] : NULL;
}

int ferry_pool_pooled(const struct ferry_pool *p, uint64_t addr) {
  for (size_t i = 0; i < p->npooled; i++)
    if (p->pooled[i].addr == addr) return 1;
  return 0;
}

static int live_add(struct ferry_pool *p, uint64_t addr, uint64_t size) {
  if (GROW(p->live, p->nlive, p->live_cap)) return ERR_NO_MEMORY;
  size_t i = live_index(p, addr);
  memmove(&p->live[i + 1], &p->live[i], (p->nlive - i) * sizeof *p->live);
  p->live[i] = (struct ferry_pool_block){addr, size, 0, 0};
  p->nlive++;
  p->used += size;
  if (p->used > p->used_high) p->used_high = p->used;
  return 0;
}

static void live_remove(struct ferry_pool *p, size_t i) {
  p->used -= p->live[i].size;
  memmove(&p->live[i], &p->live[i + 1], (p->nlive - i - 1) * sizeof *p->live);
  p->nlive--;
}

static void note_reserved(struct ferry_pool *p, uint64_t size) {
  p->reserved += size;
  if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
}

int ferry_pool_alloc(struct ferry_pool *p, const struct ferry_pool_clock *c, uint64_t size,
                     uint32_t stream, const struct ferry_pool_backend *be, uint64_t *addr) {
  if (!size) return ERR_INVALID_VALUE;
  if (size > UINT64_MAX - FERRY_POOL_ALIGN) return ERR_NO_MEMORY;
  size = (size + FERRY_POOL_ALIGN - 1) / FERRY_POOL_ALIGN * FERRY_POOL_ALIGN;
  /* the smallest reusable block that fits and wastes at most half of itself */
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < p->npooled; i++) {
    const struct ferry_pool_block *b = &p->pooled[i];
    if (b->size < size || b->size / 2 > size) continue;
    if ((best == SIZE_MAX || b->size < p->pooled[best].size) && reusable(p, c, b, stream)) best = i;
  }
  if (best != SIZE_MAX) {
    struct ferry_pool_block b = p->pooled[best];
    if (live_add(p, b.addr, b.size)) return ERR_NO_MEMORY;
    memmove(&p->pooled[best], &p->pooled[best + 1], (p->npooled - best - 1) * sizeof *p->pooled);
    p->npooled--;
    *addr = b.addr;
    return 0;
  }
  if (GROW(p->live, p->nlive, p->live_cap)) return ERR_NO_MEMORY;
  int rc = be->alloc(be->ctx, size, addr);
  if (rc == ERR_NO_MEMORY && ferry_pool_trim(p, c, 0, be) == 0) rc = be->alloc(be->ctx, size, addr);
  if (rc) return rc;
  note_reserved(p, size);
  return live_add(p, *addr, size); /* room was made above: cannot fail */
}

static int pool_push(struct ferry_pool *p, struct ferry_pool_clock *c, uint64_t addr,
                     uint64_t size, uint32_t stream) {
  if (GROW(p->pooled, p->npooled, p->pooled_cap)) return ERR_NO_MEMORY;
  p->pooled[p->npooled++] = (struct ferry_pool_block){addr, size, stream, ++c->seq};
  return 0;
}

int ferry_pool_free(struct ferry_pool *p, struct ferry_pool_clock *c, uint64_t addr, uint32_t stream) {
  size_t i = live_index(p, addr);
  if (i >= p->nlive || p->live[i].addr != addr) return -1;
  int rc = pool_push(p, c, addr, p->live[i].size, stream);
  if (!rc) live_remove(p, i);
  return rc;
}

int ferry_pool_adopt(struct ferry_pool *p, struct ferry_pool_clock *c, uint64_t addr, uint64_t size,
                     uint32_t stream) {
  int rc = pool_push(p, c, addr, size, stream);
  if (!rc) note_reserved(p, size);
  return rc;
}

int ferry_pool_forget(struct ferry_pool *p, uint64_t addr) {
  size_t i = live_index(p, addr);
  if (i >= p->nlive || p->live[i].addr != addr) return -1;
  p->reserved -= p->live[i].size;
  live_remove(p, i);
  return 0;
}

int ferry_pool_trim(struct ferry_pool *p, const struct ferry_pool_clock *c, uint64_t keep,
                    const struct ferry_pool_backend *be) {
  while (p->reserved > keep) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < p->npooled; i++)
      if ((best == SIZE_MAX || p->pooled[i].size > p->pooled[best].size) &&
          ferry_pool_complete(c, p->pooled[i].stream, p->pooled[i].seq))
        best = i;
    if (best == SIZE_MAX) return 0; /* the rest is in use or its free may still be pending */
    int rc = be->release(be->ctx, p->pooled[best].addr);
    if (rc) return rc;
    p->reserved -= p->pooled[best].size;
    p->pooled[best] = p->pooled[--p->npooled];
  }
  return 0;
}

int ferry_pool_get_attr(const struct ferry_pool *p, int attr, void *value) {
  if (!value) return ERR_INVALID_VALUE;
  switch (attr) {
  case ATTR_FOLLOW_EVENTS: *(int *)value = p->follow_events; return 0;
  case ATTR_OPPORTUNISTIC: *(int *)value = p->opportunistic; return 0;
  case ATTR_INTERNAL_DEPS: *(int *)value = p->internal_deps; return 0;
  case ATTR_RELEASE_THRESHOLD: *(uint64_t *)value = p->threshold; return 0;
  case ATTR_RESERVED_CURRENT: *(uint64_t *)value = p->reserved; return 0;
  case ATTR_RESERVED_HIGH: *(uint64_t *)value = p->reserved_high; return 0;
  case ATTR_USED_CURRENT: *(uint64_t *)value = p->used; return 0;
  case ATTR_USED_HIGH: *(uint64_t *)value = p->used_high; return 0;
  default: return ERR_INVALID_VALUE;
  }
}

int ferry_pool_set_attr(struct ferry_pool *p, int attr, const void *value) {
  if (!value) return ERR_INVALID_VALUE;
  switch (attr) {
  case ATTR_FOLLOW_EVENTS: p->follow_events = *(const int *)value != 0; return 0;
  case ATTR_OPPORTUNISTIC: p->opportunistic = *(const int *)value != 0; return 0;
  case ATTR_INTERNAL_DEPS: p->internal_deps = *(const int *)value != 0; return 0;
  case ATTR_RELEASE_THRESHOLD: p->threshold = *(const uint64_t *)value; return 0;
  /* the high-water marks may only be reset (to the current value), as in CUDA */
  case ATTR_RESERVED_HIGH:
    if (*(const uint64_t *)value) return ERR_INVALID_VALUE;
    p->reserved_high = p->reserved;
    return 0;
  case ATTR_USED_HIGH:
    if (*(const uint64_t *)value) return ERR_INVALID_VALUE;
    p->used_high = p->used;
    return 0;
  default: return ERR_INVALID_VALUE;
  }
}
