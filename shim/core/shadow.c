/*
 * Pinned host memory that kernels use directly (mapped, zero-copy). Under
 * unified addressing a kernel may be handed a pinned host pointer; a remote
 * GPU cannot reach this machine's memory, so the block gets a shadow: device
 * memory the server maps at the same addresses (shadow_map, inside the
 * window of the shared host arena), kept coherent at the points where CUDA
 * makes device work visible:
 *  - before work that may read it (a launch, a memset, a device copy), the
 *    pages the host changed since the last exchange go to the device, in the
 *    work's stream;
 *  - after a call that waits for the device (a synchronization, a
 *    synchronous copy, a query that finds the work done), the pages the
 *    device changed come back: their hashes (mem_hash) against those of what
 *    the host last exchanged, then those pages only (gather). Bytes both
 *    sides changed in one page are merged byte by byte, the device's winning.
 * Memory the program registered (cudaHostRegister) lies where the program
 * put it, an address a server's driver need not grant: its shadow is made
 * at an alias instead, and the addresses calls carry are translated
 * (shadow_alias.c). The twin is the page contents of the last exchange. A block becomes a
 * shadow when ferry sees the device may use it: its address in a launch's
 * parameters, a memset or device copy naming it, cudaHostGetDevicePointer,
 * or, for a block allocated as mapped, its vGPU's next launch.
 * On a helper or in this process the GPU maps the host memory itself
 * (registered with DEVICEMAP) and nothing here runs; a migration brings
 * the pages home before it leaves a server and makes the shadows again on
 * the next one.
 */
#include "shim/core/shadow.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/chunk_hash.h"
#include "common/crew.h"
#include "common/log.h"
#include "protocol/mem_batch.h"
#include "shim/core/host.h"
#include "shim/core/link.h"

#define PAGE 4096u
#define PULL_WHOLE (256u * 1024u) /* shadows this small come back whole: one round trip */
#define SOME_STREAM UINT32_MAX /* an event's: which stream is not known */
#define SPREAD_MIN (4u << 20)  /* exchanges this large compare and copy on several threads */
#define SPREAD_MAX 8u

struct shadow {
  uint64_t addr, size; /* page-aligned */
  uint64_t dev;        /* where addr is on a server or helper: addr, or its alias */
  int owner;           /* the vGPU whose kernels use it */
  int fresh;           /* its device copy is not made yet (new, or on a new server) */
  int managed;         /* cudaMallocManaged's: any work of its vGPU may use it */
  int loose;           /* cudaHostRegister'ed memory, outside the shared arena: a helper
                          needs a shadow of it too */
  uint64_t start, end; /* the block itself; addr and size round it out to pages */
  int warned;          /* the host changed it while kernels ran: said once */
  unsigned char *twin; /* the pages as last exchanged */
  uint64_t *hash;      /* ferry_chunk_hash of each twin page */
};

struct chunk {
  uint64_t addr; /* granularity-aligned */
  int refs;      /* mapped shadows on it; 0: to unmap at the next exchange */
};

static struct {
  pthread_mutex_t lock; /* everything below; taken under a gate, never around one */
  struct shadow *tab;
  size_t n, cap;
  struct {
    struct chunk *chunks; /* mapped on the vGPU's current server */
    size_t n, cap;
    /* the streams of work on mapped memory not yet waited for; all: too
       many to list, or waited for by an event */
    uint32_t dirty[8];
    int ndirty, dirty_all;
    uint64_t pushed, pulled; /* bytes, for FERRY_STATS and the tests */
    uint64_t pulls;          /* checks of the device's pages after a wait */
  } v[FERRY_MAX_VGPUS];
  /* blocks allocated as mapped, not yet shadows: made at their vGPU's
     next launch (ferry_shadow_mapped_alloc) */
  struct pending_mapped {
    uint64_t addr;
    int vgpu;
  } *pending;
  size_t npending, pending_cap;
  int any_pending; /* npending != 0 (atomic: every launch reads it unlocked) */
  int live[FERRY_MAX_VGPUS];    /* shadows per vGPU (atomic: the fast path reads it unlocked) */
  int managed[FERRY_MAX_VGPUS]; /* managed ones among them (atomic) */
  int loose[FERRY_MAX_VGPUS];   /* loose (aliased) ones among them (atomic) */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int remote(const struct ferry_vgpu *v) { return !ferry_is_local(v) && !v->link.helper_pid; }
/* v's GPU cannot reach s's memory: a server, or a helper for memory it does not share */
static int needs(const struct ferry_vgpu *v, const struct shadow *s) {
  return remote(v) || (!ferry_is_local(v) && s->loose);
}
/* some shadow of v needs its copy on v's GPU (unlocked: the fast path) */
static int shadowed(const struct ferry_vgpu *v) {
  return __atomic_load_n(&S.live[v->index], __ATOMIC_ACQUIRE) &&
         (remote(v) || (!ferry_is_local(v) && __atomic_load_n(&S.loose[v->index], __ATOMIC_ACQUIRE)));
}

static struct shadow *find(uint64_t addr) {
  for (size_t i = 0; i < S.n; i++)
    if (addr - S.tab[i].addr < S.tab[i].size) return &S.tab[i];
  return NULL;
}
/* the shadow whose device copy holds addr */
static struct shadow *find_dev(uint64_t addr) {
  for (size_t i = 0; i < S.n; i++)
    if (addr - S.tab[i].dev < S.tab[i].size) return &S.tab[i];
  return NULL;
}

/* a shadow of [start, end), owned by vGPU vi */
static int add(int vi, uint64_t start, uint64_t end, int managed, int loose) {
  uint64_t base = start / PAGE * PAGE, span = (end + PAGE - 1) / PAGE * PAGE - base;
  if (S.n == S.cap) {
    size_t cap = S.cap ? S.cap * 2 : 8;
    struct shadow *t = realloc(S.tab, cap * sizeof *t);
    if (!t) return cudaErrorMemoryAllocation;
    S.tab = t;
    S.cap = cap;
  }
  uint64_t dev = base;
  if (loose && !(dev = ferry_alias_take(base, span))) {
    ferry_log("device %d: no room is left for a shadow of registered host memory %p (%llu bytes): "
              "more than %llu GiB of it registered at once; returning cudaErrorMemoryAllocation",
              vi, (void *)(uintptr_t)start, (unsigned long long)(end - start),
              (unsigned long long)(FERRY_ALIAS_WINDOW_SIZE >> 30));
    return cudaErrorMemoryAllocation;
  }
  unsigned char *twin = malloc(span);
  uint64_t *hash = calloc(span / PAGE, sizeof *hash);
  if (!twin || !hash) {
    free(twin);
    free(hash);
    if (loose) ferry_alias_give(dev);
    return cudaErrorMemoryAllocation;
  }
  S.tab[S.n++] = (struct shadow){.addr = base, .size = span, .dev = dev, .owner = vi, .fresh = 1,
                                 .managed = managed, .loose = loose, .start = start, .end = end,
                                 .twin = twin, .hash = hash};
  __atomic_add_fetch(&S.live[vi], 1, __ATOMIC_RELEASE);
  if (managed) __atomic_add_fetch(&S.managed[vi], 1, __ATOMIC_RELEASE);
  if (loose) __atomic_add_fetch(&S.loose[vi], 1, __ATOMIC_RELEASE);
  ferry_debug("device %d: its kernels use pinned host memory %p (%llu bytes): it gets a shadow "
              "on each server", vi, (void *)(uintptr_t)base, (unsigned long long)span);
  return 0;
}

int ferry_shadow_expose(struct ferry_vgpu *v, uint64_t addr) {
  uint64_t base, size;
  int shared;
  if (!ferry_host_block((const void *)(uintptr_t)addr, &base, &size, &shared)) return 1;
  pthread_mutex_lock(&S.lock);
  struct shadow *s = find(addr);
  int rc = 0;
  if (s && s->owner != v->index) {
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
      ferry_log("pinned host memory %p is used by kernels of device %d and of device %d: mapped "
                "memory shared by two devices is not supported by ferry; returning "
                "cudaErrorNotSupported", (void *)(uintptr_t)addr, s->owner, v->index);
    rc = cudaErrorNotSupported;
  } else if (!s) {
    /* a helper or this process reaches the arena's memory directly, and
       this process the program's registered memory: recorded all the
       same, so that a move makes the shadow where it is needed */
    rc = add(v->index, base, base + size, 0, !shared);
  }
  pthread_mutex_unlock(&S.lock);
  return rc;
}

int ferry_shadow_manage(struct ferry_vgpu *v, uint64_t addr, uint64_t size) {
  pthread_mutex_lock(&S.lock);
  int rc = add(v->index, addr, addr + size, 1, 0);
  pthread_mutex_unlock(&S.lock);
  return rc;
}

/* this thread's next call works on mapped memory */
static __thread int touching;
/* ... and the last scan found registered memory, which has an alias */
static __thread int aliased_hit;
void ferry_shadow_touch(void) { touching = 1; }

void ferry_shadow_mapped_alloc(const void *p, int vgpu) {
  if (vgpu < 0 || vgpu >= FERRY_MAX_VGPUS) return;
  pthread_mutex_lock(&S.lock);
  if (S.npending == S.pending_cap) {
    size_t cap = S.pending_cap ? S.pending_cap * 2 : 8;
    struct pending_mapped *t = realloc(S.pending, cap * sizeof *t);
    if (!t) { /* it stays an ordinary pinned block: shadowed when named */
      pthread_mutex_unlock(&S.lock);
      return;
    }
    S.pending = t;
    S.pending_cap = cap;
  }
  S.pending[S.npending++] = (struct pending_mapped){(uint64_t)(uintptr_t)p, vgpu};
  __atomic_store_n(&S.any_pending, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&S.lock);
}

/* S.lock held */
static void drop_pending(size_t i) {
  S.pending[i] = S.pending[--S.npending];
  if (!S.npending) __atomic_store_n(&S.any_pending, 0, __ATOMIC_RELEASE);
}

/* v is about to launch: its mapped blocks not yet shadows become shadows.
   1 when there was one, 0, or a cudaError_t */
static int expose_pending(struct ferry_vgpu *v) {
  int hit = 0, more = 1;
  while (more) {
    uint64_t mine[16];
    size_t n = 0;
    pthread_mutex_lock(&S.lock);
    for (size_t i = 0; i < S.npending && n < 16;) {
      if (S.pending[i].vgpu == v->index) {
        mine[n++] = S.pending[i].addr;
        drop_pending(i);
      } else {
        i++;
      }
    }
    pthread_mutex_unlock(&S.lock);
    more = n == 16;
    for (size_t i = 0; i < n; i++) {
      int rc = ferry_shadow_expose(v, mine[i]);
      if (rc > 1) return rc;
      if (!rc) hit = 1;
    }
  }
  return hit;
}

int ferry_shadow_scan(struct ferry_vgpu *v, const void *params, size_t len) {
  const unsigned char *p = params;
  int hit = 0, registered = ferry_host_any_registered();
  if (__atomic_load_n(&S.any_pending, __ATOMIC_ACQUIRE)) {
    int rc = expose_pending(v);
    if (rc > 1) return rc;
    hit = rc;
  }
  for (size_t at = 0; at + 8 <= len; at += 8) {
    uint64_t w;
    memcpy(&w, p + at, 8);
    /* the arena's pinned memory; registered memory anywhere in user space */
    if (w - FERRY_HOST_WINDOW_BASE >= FERRY_HOST_WINDOW_SIZE &&
        (!registered || w < 4096 || w >= (1ull << 47)))
      continue;
    int rc = ferry_shadow_expose(v, w);
    if (rc > 1) return rc;
    if (!rc) {
      hit = 1;
      if (w - FERRY_HOST_WINDOW_BASE >= FERRY_HOST_WINDOW_SIZE) aliased_hit = 1;
    }
  }
  if (hit) touching = 1;
  return hit ? FERRY_SHADOW_HIT : 0;
}

/* ---- the chunks a server maps ---- */

static struct chunk *chunk_find(int vi, uint64_t addr) {
  for (size_t i = 0; i < S.v[vi].n; i++)
    if (S.v[vi].chunks[i].addr == addr) return &S.v[vi].chunks[i];
  return NULL;
}

/* s's chunks are mapped on v's server and counted */
static int map_shadow(struct ferry_vgpu *v, const struct shadow *s) {
  uint64_t g = v->granularity ? v->granularity : 2u << 20;
  uint64_t lo = s->dev / g * g, hi = (s->dev + s->size + g - 1) / g * g;
  int vi = v->index;
  struct ferry_shadow_map_args a = {lo, hi - lo};
  int rc = ferry_source_call(v, FERRY_CALL_shadow_map, &a, NULL, NULL);
  if (rc) {
    ferry_log("device %d: a shadow of pinned host memory %p could not be mapped on its server "
              "(%s); the kernels that use it fail", vi, (void *)(uintptr_t)s->addr,
              cudaGetErrorName((cudaError_t)rc));
    return rc;
  }
  ferry_debug("device %d: shadow of %p (%llu bytes) made at %p", vi, (void *)(uintptr_t)s->addr,
              (unsigned long long)s->size, (void *)(uintptr_t)s->dev);
  for (uint64_t c = lo; c < hi; c += g) {
    struct chunk *k = chunk_find(vi, c);
    if (!k) {
      if (S.v[vi].n == S.v[vi].cap) {
        size_t cap = S.v[vi].cap ? S.v[vi].cap * 2 : 8;
        struct chunk *t = realloc(S.v[vi].chunks, cap * sizeof *t);
        if (!t) return cudaErrorMemoryAllocation;
        S.v[vi].chunks = t;
        S.v[vi].cap = cap;
      }
      k = &S.v[vi].chunks[S.v[vi].n++];
      *k = (struct chunk){c, 0};
    }
    k->refs++;
  }
  return 0;
}

static void unref_chunks(struct ferry_vgpu *v, const struct shadow *s) {
  uint64_t g = v->granularity ? v->granularity : 2u << 20;
  for (uint64_t c = s->dev / g * g; c < s->dev + s->size; c += g) {
    struct chunk *k = chunk_find(v->index, c);
    if (k && k->refs > 0) k->refs--;
  }
}

/* chunks no shadow uses any more leave the server */
static void unmap_unused(struct ferry_vgpu *v) {
  int vi = v->index;
  uint64_t g = v->granularity ? v->granularity : 2u << 20;
  for (size_t i = 0; i < S.v[vi].n;) {
    if (S.v[vi].chunks[i].refs) {
      i++;
      continue;
    }
    struct ferry_shadow_unmap_args a = {S.v[vi].chunks[i].addr, g};
    int rc = ferry_source_call(v, FERRY_CALL_shadow_unmap, &a, NULL, NULL);
    ferry_debug("device %d: shadows left 0x%llx (%d)", vi, (unsigned long long)a.addr, rc);
    S.v[vi].chunks[i] = S.v[vi].chunks[--S.v[vi].n];
  }
}

/* ---- exchanges ---- */

/* ---- page work on several threads ----
   Comparing, copying and hashing pages is bound by one core's memory
   bandwidth, which a remote exchange of many MiB waits for: large ones
   are split over a crew (under S.lock, so one at a time). */
struct spread {
  void (*fn)(void *ctx, size_t lo, size_t hi);
  void *ctx;
  size_t n;
  unsigned parts;
};
static struct ferry_crew *crew;
static unsigned crew_size = 1;

static int spread_part(void *arg, unsigned i) {
  struct spread *sp = arg;
  sp->fn(sp->ctx, sp->n * i / sp->parts, sp->n * (i + 1) / sp->parts);
  return 0;
}

/* fn over [0, n) items of `bytes` in all */
static void spread(size_t n, uint64_t bytes, void (*fn)(void *, size_t, size_t), void *ctx) {
  static int tried;
  if (bytes >= SPREAD_MIN && !tried && !ferry.forked) {
    tried = 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned want = cpus > 1 ? (unsigned)(cpus < SPREAD_MAX ? cpus : SPREAD_MAX) : 1;
    if (want > 1 && (crew = ferry_crew_start(want))) crew_size = want;
  }
  struct spread sp = {fn, ctx, n, crew_size};
  if (bytes < SPREAD_MIN || !crew || ferry.forked || n < crew_size || ferry_crew_run(crew, spread_part, &sp))
    fn(ctx, 0, n);
}

/* from the twin: what the device gets is what the host will compare with */
static int send_pages(struct ferry_vgpu *v, uint32_t stream, const struct shadow *s, uint64_t off,
                      uint64_t n) {
  uint64_t addr = s->dev + off;
  struct ferry_bulk bulk = {.in = s->twin + off, .in_len = n};
  struct ferry_memcpy_htod_async_args a = {addr, stream};
  int rc = ferry_source_call(v, FERRY_CALL_memcpy_htod_async, &a, NULL, &bulk);
  if (!rc) S.v[v->index].pushed += n;
  return rc;
}

/* pages [lo, hi) of a shadow the host may have changed: into the twin,
   rehashed, and marked */
struct compare {
  struct shadow *s;
  unsigned char *changed; /* per page */
  int fresh;              /* the twin is new: every page, unmarked */
};
static void compare_pages(void *arg, size_t lo, size_t hi) {
  struct compare *c = arg;
  struct shadow *s = c->s;
  const unsigned char *host = (const unsigned char *)(uintptr_t)s->addr;
  for (size_t p = lo; p < hi; p++) {
    uint64_t off = (uint64_t)p * PAGE;
    int changed = c->fresh || memcmp(host + off, s->twin + off, PAGE) != 0;
    if (changed) {
      memcpy(s->twin + off, host + off, PAGE);
      s->hash[p] = ferry_chunk_hash(s->twin + off, PAGE);
    }
    if (c->changed) c->changed[p] = (unsigned char)changed;
  }
}

/* the host's changes to v's shadows go to its server, in `stream` */
static int push(struct ferry_vgpu *v, uint32_t stream) {
  int rc = 0;
  unmap_unused(v);
  for (size_t i = 0; i < S.n && !rc; i++) {
    struct shadow *s = &S.tab[i];
    if (s->owner != v->index || !needs(v, s)) continue;
    size_t pages = s->size / PAGE;
    if (s->fresh) {
      if ((rc = map_shadow(v, s))) break;
      struct compare c = {s, NULL, 1};
      spread(pages, s->size, compare_pages, &c);
      if ((rc = send_pages(v, stream, s, 0, s->size))) {
        unref_chunks(v, s);
        break;
      }
      s->fresh = 0;
      continue;
    }
    struct compare c = {s, malloc(pages ? pages : 1), 0};
    if (!c.changed) return cudaErrorMemoryAllocation;
    spread(pages, s->size, compare_pages, &c);
    /* runs of changed pages, one copy each */
    uint64_t run = 0, nrun = 0;
    for (size_t p = 0; p <= pages && !rc; p++) {
      if (p < pages && c.changed[p]) {
        if (!nrun) run = (uint64_t)p * PAGE;
        nrun += PAGE;
      } else if (nrun) {
        rc = send_pages(v, stream, s, run, nrun);
        nrun = 0;
      }
    }
    free(c.changed);
  }
  return rc;
}

/* one page the device changed: into the twin, and into the host's page
   where the host left the bytes as they were; never outside the block
   (registered memory shares its first and last pages with other memory).
   dev_hash: the page's hash as the GPU computed it, or 0 (computed here).
   1 when the host had changed the page too. */
static int take_page(struct shadow *s, uint64_t off, const unsigned char *dev, uint64_t dev_hash) {
  unsigned char *host = (unsigned char *)(uintptr_t)s->addr + off, *twin = s->twin + off;
  uint64_t at = s->addr + off;
  unsigned lo = at < s->start ? (unsigned)(s->start - at) : 0;
  unsigned hi = at + PAGE > s->end ? (unsigned)(s->end - at) : PAGE;
  int both = 0;
  if (lo == 0 && hi == PAGE && memcmp(host, twin, PAGE) == 0) {
    memcpy(host, dev, PAGE);
  } else {
    for (unsigned i = lo; i < hi; i++) {
      if (host[i] != twin[i]) both = 1;
      if (dev[i] != twin[i]) host[i] = dev[i];
    }
  }
  memcpy(twin, dev, PAGE);
  s->hash[off / PAGE] = dev_hash ? dev_hash : ferry_chunk_hash(twin, PAGE);
  return both;
}

/* the pages a pull brought, each into its shadow (on several threads) */
struct take {
  struct taken {
    struct shadow *s; /* NULL: freed meanwhile */
    uint64_t off;
    int both; /* the host had changed it too */
  } *page;
  const unsigned char *data; /* page k at data + k * PAGE */
  const uint64_t *hash;      /* the GPU's hash of page k, or NULL (compared here) */
};
static void take_pages(void *arg, size_t lo, size_t hi) {
  struct take *t = arg;
  for (size_t k = lo; k < hi; k++) {
    struct taken *p = &t->page[k];
    const unsigned char *dev = t->data + k * PAGE;
    uint64_t h = t->hash ? t->hash[k] : 0;
    p->both = 0;
    if (!p->s || (!h && memcmp(p->s->twin + p->off, dev, PAGE) == 0)) continue;
    p->both = take_page(p->s, p->off, dev, h);
  }
}

/* what a batched request gives back: a call's error, or -1 (its own) */
static int batch_rc(int rc) { return rc < 0 ? cudaErrorUnknown : rc; }

/* ranges {addr, size} of pieces of v's made shadows; those pieces' bytes
   come back (in as many gathers as they need) */
static int gather(struct ferry_vgpu *v, const uint64_t *ranges, size_t nranges, unsigned char *out,
                  uint64_t total) {
  int rc = batch_rc(ferry_gather_batched(ferry_source_call_ctx, v, ranges, nranges, out));
  if (!rc) S.v[v->index].pulled += total;
  return rc;
}

/* the device's changes to v's shadows come home */
static int pull(struct ferry_vgpu *v, int strict) {
  S.v[v->index].pulls++;
  size_t n = 0;
  uint64_t total = 0, pages = 0;
  for (size_t i = 0; i < S.n; i++)
    if (S.tab[i].owner == v->index && !S.tab[i].fresh && needs(v, &S.tab[i])) n++, total += S.tab[i].size;
  if (!n) return 0;
  pages = total / PAGE;
  uint64_t *ranges = malloc((total <= PULL_WHOLE ? n : pages) * 16);
  unsigned char *buf = NULL;
  uint64_t *hashes = NULL, *changed_hash = NULL;
  int rc = ranges ? 0 : cudaErrorMemoryAllocation;
  size_t nr = 0;
  for (size_t i = 0; i < S.n && !rc; i++)
    if (S.tab[i].owner == v->index && !S.tab[i].fresh && needs(v, &S.tab[i])) {
      ranges[2 * nr] = S.tab[i].dev;
      ranges[2 * nr + 1] = S.tab[i].size;
      nr++;
    }
  uint64_t want = total;
  if (!rc && total > PULL_WHOLE) {
    /* which pages changed, by their hashes on the GPU (a shadow of more
       pages than one reply holds takes several calls) */
    if (!(hashes = malloc(pages * 8))) rc = cudaErrorMemoryAllocation;
    if (!rc) rc = batch_rc(ferry_mem_hash_batched(ferry_source_call_ctx, v, ranges, nr, PAGE, hashes));
    if (!rc && !(changed_hash = malloc(pages * 8))) rc = cudaErrorMemoryAllocation;
    size_t k = 0, np = 0, nchanged = 0;
    want = 0;
    for (size_t i = 0; i < S.n && !rc; i++) {
      struct shadow *s = &S.tab[i];
      if (s->owner != v->index || s->fresh || !needs(v, s)) continue;
      for (uint64_t p = 0; p < s->size / PAGE; p++, k++) {
        if (hashes[k] == s->hash[p]) continue;
        changed_hash[nchanged++] = hashes[k] ? hashes[k] : 1; /* 0 means "none" below */
        uint64_t at = s->dev + p * PAGE;
        if (np && ranges[2 * (np - 1)] + ranges[2 * np - 1] == at) {
          ranges[2 * np - 1] += PAGE;
        } else {
          ranges[2 * np] = at;
          ranges[2 * np + 1] = PAGE;
          np++;
        }
        want += PAGE;
      }
    }
    nr = np;
  }
  if (!rc && want && !(buf = malloc(want))) rc = cudaErrorMemoryAllocation;
  if (!rc && want) rc = gather(v, ranges, nr, buf, want);
  /* each gathered page into its shadow; pages picked by their hashes did
     change, and the GPU's hash of each is in changed_hash */
  struct take t = {NULL, buf, changed_hash};
  uint64_t both = 0;
  if (!rc && want && !(t.page = malloc(want / PAGE * sizeof *t.page))) rc = cudaErrorMemoryAllocation;
  for (size_t r = 0, k = 0; !rc && r < nr; r++)
    for (uint64_t off = 0; off < ranges[2 * r + 1]; off += PAGE, k++) {
      uint64_t addr = ranges[2 * r] + off;
      t.page[k].s = find_dev(addr);
      t.page[k].off = t.page[k].s ? addr - t.page[k].s->dev : 0;
    }
  if (!rc && want) {
    spread(want / PAGE, want, take_pages, &t);
    for (size_t k = 0; k < want / PAGE && !both; k++)
      if (t.page[k].both && t.page[k].s->managed) both = t.page[k].s->addr + t.page[k].off;
  }
  free(t.page);
  free(ranges);
  free(buf);
  free(hashes);
  free(changed_hash);
  /* With concurrentManagedAccess = 0 (what ferry reports) the host may not
     touch managed memory a running kernel may use; CUDA's answer is a
     fault, ferry's a merge the program cannot rely on: said, and an error */
  if (!rc && both && strict) {
    ferry_log("device %d: the host wrote managed memory at %p while a kernel that may use it "
              "was running; ferry's GPUs report concurrentManagedAccess = 0, under which CUDA does "
              "not allow this (use cudaStreamAttachMemAsync, or synchronize first); "
              "returning cudaErrorIllegalState", v->index, (void *)(uintptr_t)both);
    rc = cudaErrorIllegalState;
  }
  return rc;
}

/* ---- around calls ---- */

/* the stream of work that may read or write shadows, or -1 */
static int64_t device_work(unsigned call, const void *args) {
  switch (call) {
  case FERRY_CALL_launch: return ((const struct ferry_launch_args *)args)->stream;
  case FERRY_CALL_graph_launch: return ((const struct ferry_graph_launch_args *)args)->stream;
  case FERRY_CALL_memset: return ((const struct ferry_memset_args *)args)->stream;
  case FERRY_CALL_memset2d: return ((const struct ferry_memset2d_args *)args)->stream;
  case FERRY_CALL_memset_wide: return ((const struct ferry_memset_wide_args *)args)->stream;
  case FERRY_CALL_memcpy_dtod: return ((const struct ferry_memcpy_dtod_args *)args)->stream;
  case FERRY_CALL_memcpy_dtod_async: return ((const struct ferry_memcpy_dtod_async_args *)args)->stream;
  case FERRY_CALL_memcpy2d_dtod: return ((const struct ferry_memcpy2d_dtod_args *)args)->stream;
  case FERRY_CALL_memcpy3d_dtod: return ((const struct ferry_memcpy3d_dtod_args *)args)->stream;
  default: return -1;
  }
}

/* a call that returns once the device finished work: the stream it waited
   for, UINT32_MAX - 1 for the whole device, or -1 */
#define WHOLE_DEVICE (UINT32_MAX - 1)
static int64_t waits_for(unsigned call, const void *args) {
  switch (call) {
  case FERRY_CALL_device_synchronize: return WHOLE_DEVICE;
  case FERRY_CALL_stream_synchronize: return ((const struct ferry_stream_synchronize_args *)args)->stream;
  case FERRY_CALL_stream_query: return ((const struct ferry_stream_query_args *)args)->stream;
  case FERRY_CALL_memcpy_dtoh: return ((const struct ferry_memcpy_dtoh_args *)args)->stream;
  case FERRY_CALL_memcpy_htod: return ((const struct ferry_memcpy_htod_args *)args)->stream;
  case FERRY_CALL_memcpy_dtod: return ((const struct ferry_memcpy_dtod_args *)args)->stream;
  case FERRY_CALL_memcpy2d_dtoh: return ((const struct ferry_memcpy2d_dtoh_args *)args)->stream;
  case FERRY_CALL_memcpy3d_dtoh: return ((const struct ferry_memcpy3d_dtoh_args *)args)->stream;
  case FERRY_CALL_event_synchronize:
  case FERRY_CALL_event_query: return SOME_STREAM; /* pull, stay dirty */
  default: return -1;
  }
}

static void mark_dirty(int vi, uint32_t stream) {
  if (S.v[vi].dirty_all) return;
  for (int i = 0; i < S.v[vi].ndirty; i++)
    if (S.v[vi].dirty[i] == stream) return;
  if (S.v[vi].ndirty == (int)(sizeof S.v[vi].dirty / sizeof S.v[vi].dirty[0])) S.v[vi].dirty_all = 1;
  else S.v[vi].dirty[S.v[vi].ndirty++] = stream;
}

/* the wait covered stream's work (WHOLE_DEVICE: all of it) */
static void waited_for(int vi, uint32_t stream) {
  if (stream == WHOLE_DEVICE) {
    S.v[vi].ndirty = S.v[vi].dirty_all = 0;
    return;
  }
  for (int i = 0; i < S.v[vi].ndirty; i++)
    if (S.v[vi].dirty[i] == stream) S.v[vi].dirty[i--] = S.v[vi].dirty[--S.v[vi].ndirty];
}

/* Streams with work on mapped memory that the program waits for some other
   way (events, other streams) would make every later wait check the pages
   again: the first check after their work is done forgets them. */
static void settle_idle(struct ferry_vgpu *v) {
  int vi = v->index;
  for (int i = 0; i < S.v[vi].ndirty; i++) {
    struct ferry_stream_query_args q = {S.v[vi].dirty[i]};
    if (ferry_source_call(v, FERRY_CALL_stream_query, &q, NULL, NULL) != cudaErrorNotReady)
      S.v[vi].dirty[i--] = S.v[vi].dirty[--S.v[vi].ndirty];
  }
}

/* A blocking wait while kernels that use pinned memory may still run, and
   the host changed some of it since it last went out: a kernel that polls
   that memory (waits for a flag the host sets) cannot see the change until
   the wait is over, so it runs until its own timeout, or for ever. Said
   once per block (cuda-samples UnifiedMemoryPerf's latch, XLA's timer);
   the wait is then bounded (shadow_wait.c). `waited`: what the call
   waits for (waits_for). The address of such a block, or 0; ids and n:
   the streams to poll (none when too many to name). */
static uint64_t unseen(struct ferry_vgpu *v, unsigned call, const void *args, int64_t waited,
                       uint32_t *ids, int *n) {
  if (call == FERRY_CALL_stream_query || call == FERRY_CALL_event_query) return 0;
  pthread_mutex_lock(&S.lock);
  int vi = v->index;
  uint64_t found = 0;
  for (size_t i = 0; i < S.n && (S.v[vi].ndirty || S.v[vi].dirty_all); i++) {
    struct shadow *s = &S.tab[i];
    if (s->owner != vi || s->managed || s->fresh || !needs(v, s)) continue;
    uint64_t at = s->start - s->addr;
    if (!memcmp((const void *)(uintptr_t)s->start, s->twin + at, s->end - s->start)) continue;
    if (!found) found = s->start;
    if (s->warned) continue;
    s->warned = 1;
    ferry_log("device %d: the host changed pinned memory at %#llx while kernels that may read it "
              "run on the remote GPU, which sees the change only after this wait: a kernel that "
              "polls it (waits for a flag the host sets) runs until its own timeout, or for ever "
              "(docs/mapped-memory.md)", vi, (unsigned long long)s->start);
  }
  *n = 0;
  if (found && waited == WHOLE_DEVICE && !S.v[vi].dirty_all) {
    *n = S.v[vi].ndirty;
    memcpy(ids, S.v[vi].dirty, (size_t)*n * sizeof *ids);
  } else if (found && call == FERRY_CALL_event_synchronize) {
    *n = 1, ids[0] = ((const struct ferry_event_synchronize_args *)args)->event;
  } else if (found && waited >= 0 && waited != WHOLE_DEVICE && waited != SOME_STREAM) {
    *n = 1, ids[0] = (uint32_t)waited;
  }
  pthread_mutex_unlock(&S.lock);
  return found;
}

/* Only work that names mapped memory (its kernels are given a pinned
   pointer, a memset or copy names one) sends the host's changes first and
   leaves pages to bring back; any wait for the device brings them back. */
int ferry_shadow_before(struct ferry_vgpu *v, unsigned call, const void *args) {
  /* managed memory: any work may use it (a kernel finds it through a
     structure as well as through its parameters) */
  int touched = touching || __atomic_load_n(&S.managed[v->index], __ATOMIC_ACQUIRE);
  int64_t waited = waits_for(call, args);
  if (call == FERRY_CALL_graph_launch && aliased_hit && !ferry_is_local(v)) {
    /* its kernels' parameters went with the graph, untranslated */
    aliased_hit = touching = 0;
    ferry_log("device %d: a graph's kernels are given cudaHostRegister'ed memory, which a GPU "
              "outside this process reaches only at another address: not supported by ferry; "
              "returning cudaErrorNotSupported", v->index);
    return cudaErrorNotSupported;
  }
  if (waited >= 0 && shadowed(v)) {
    uint32_t ids[8];
    int n = 0;
    uint64_t at = unseen(v, call, args, waited, ids, &n);
    int rc = at && n ? ferry_shadow_wait_bounded(v, call == FERRY_CALL_event_synchronize, ids, n, at) : 0;
    if (rc) return rc;
  }
  if (!touched || !shadowed(v)) return 0;
  int64_t stream = device_work(call, args);
  if (stream < 0) return 0;
  pthread_mutex_lock(&S.lock);
  int rc = push(v, (uint32_t)stream);
  pthread_mutex_unlock(&S.lock);
  return rc;
}

int ferry_shadow_prefetch(struct ferry_vgpu *v, uint32_t stream) {
  if (!__atomic_load_n(&S.managed[v->index], __ATOMIC_ACQUIRE)) return 0;
  pthread_rwlock_rdlock(&v->gate);
  int rc = 0;
  if (shadowed(v)) {
    pthread_mutex_lock(&S.lock);
    rc = push(v, stream);
    if (!rc) mark_dirty(v->index, stream);
    pthread_mutex_unlock(&S.lock);
  }
  pthread_rwlock_unlock(&v->gate);
  return rc;
}

int ferry_shadow_after(struct ferry_vgpu *v, unsigned call, const void *args, int rc) {
  int touched = touching || __atomic_load_n(&S.managed[v->index], __ATOMIC_ACQUIRE);
  touching = aliased_hit = 0;
  if (rc || !shadowed(v)) return rc;
  int64_t work = touched ? device_work(call, args) : -1, waited = waits_for(call, args);
  if (work < 0 && waited < 0) return rc;
  pthread_mutex_lock(&S.lock);
  int vi = v->index;
  if (work >= 0) mark_dirty(vi, (uint32_t)work);
  if (waited >= 0 && (S.v[vi].ndirty || S.v[vi].dirty_all)) {
    rc = pull(v, 1);
    if (!rc && waited != SOME_STREAM) waited_for(vi, (uint32_t)waited);
    if (!rc) settle_idle(v);
    if (rc && rc != cudaErrorIllegalState) /* that one is said in pull */
      ferry_log("device %d: bringing back pinned host memory its kernels wrote failed (%s)",
                      vi, cudaGetErrorName((cudaError_t)rc));
  }
  pthread_mutex_unlock(&S.lock);
  return rc;
}

void ferry_shadow_forget(const void *p) {
  pthread_mutex_lock(&S.lock);
  for (size_t i = 0; i < S.npending; i++)
    if (S.pending[i].addr == (uint64_t)(uintptr_t)p) {
      drop_pending(i);
      break;
    }
  struct shadow *s = find((uint64_t)(uintptr_t)p);
  if (s) {
    struct ferry_vgpu *v = &ferry.vgpus[s->owner];
    ferry_debug("device %d: pinned memory %p freed (its shadow %s)", s->owner, p,
                s->fresh ? "was not made" : "goes");
    if (!s->fresh) unref_chunks(v, s); /* unmapped at v's next exchange */
    __atomic_sub_fetch(&S.live[s->owner], 1, __ATOMIC_RELEASE);
    if (s->managed) __atomic_sub_fetch(&S.managed[s->owner], 1, __ATOMIC_RELEASE);
    if (s->loose) {
      __atomic_sub_fetch(&S.loose[s->owner], 1, __ATOMIC_RELEASE);
      ferry_alias_give(s->dev);
    }
    free(s->twin);
    free(s->hash);
    *s = S.tab[--S.n];
  }
  pthread_mutex_unlock(&S.lock);
}

int ferry_shadow_settle(struct ferry_vgpu *v) {
  if (!shadowed(v)) return 0;
  pthread_mutex_lock(&S.lock);
  int rc = pull(v, 0);
  if (!rc) waited_for(v->index, WHOLE_DEVICE);
  pthread_mutex_unlock(&S.lock);
  return rc;
}

void ferry_shadow_switched(struct ferry_vgpu *v) {
  pthread_mutex_lock(&S.lock);
  S.v[v->index].n = 0; /* the old server's mappings went with its session */
  waited_for(v->index, WHOLE_DEVICE);
  for (size_t i = 0; i < S.n; i++)
    if (S.tab[i].owner == v->index) S.tab[i].fresh = 1;
  pthread_mutex_unlock(&S.lock);
}

int ferry_shadow_aliased(const struct ferry_vgpu *v) {
  return __atomic_load_n(&S.loose[v->index], __ATOMIC_ACQUIRE) && !ferry_is_local(v);
}

uint64_t ferry_shadow_dev(int vgpu, uint64_t addr) {
  pthread_mutex_lock(&S.lock);
  const struct shadow *s = find(addr);
  uint64_t dev = s && s->loose && s->owner == vgpu ? s->dev + (addr - s->addr) : addr;
  pthread_mutex_unlock(&S.lock);
  return dev;
}

void ferry_shadow_stats(int vgpu, uint64_t *shadows, uint64_t *pushed, uint64_t *pulled,
                        uint64_t *pulls) {
  pthread_mutex_lock(&S.lock);
  *pulls = S.v[vgpu].pulls;
  *shadows = (uint64_t)__atomic_load_n(&S.live[vgpu], __ATOMIC_RELAXED);
  *pushed = S.v[vgpu].pushed;
  *pulled = S.v[vgpu].pulled;
  pthread_mutex_unlock(&S.lock);
}
