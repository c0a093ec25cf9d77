/*
 * Stream-ordered memory pools' bookkeeping (cudaMallocAsync, cudaMemPool*):
 * plain data and rules, no CUDA and no locking, so it is easy to test.
 *
 * A pool hands out blocks and keeps those the program freed with
 * cudaFreeAsync, still allocated, for reuse. A block freed on stream S may
 * be reused at once by an allocation on S (S orders the two); on another
 * stream only once its free is known complete. The clock says what is
 * complete: each free gets a sequence number, and a synchronization that
 * began after it (of its stream, of the device, of an event recorded on its
 * stream after it) marks it done. Events waited for by a stream also order
 * that stream after the event's stream (cudaMemPoolReuseFollowEventDependencies).
 * Not thread-safe: callers hold their own lock.
 */
#ifndef FERRY_POOL_H
#define FERRY_POOL_H

#include <stddef.h>
#include <stdint.h>

#define FERRY_POOL_ALIGN 512u        /* blocks are rounded to this (the arena's alignment) */
#define FERRY_POOL_NO_STREAM UINT32_MAX /* freed on a stream since destroyed: device syncs only */

/* what the clock knows per stream: done (every free up to it is
   complete) and, per other stream, how far its work is ordered before
   this one's next work (events waited for) */
struct ferry_pool_dep {
  uint32_t from;
  uint64_t seq;
};
struct ferry_pool_stream {
  uint32_t stream;
  uint64_t done;
  struct ferry_pool_dep *deps;
  size_t ndeps, deps_cap;
};
struct ferry_pool_event {
  uint32_t event, stream;
  uint64_t seq; /* the clock when it was recorded */
};
struct ferry_pool_clock {
  uint64_t seq;         /* the last free's number */
  uint64_t device_done; /* every free up to it is complete */
  struct ferry_pool_stream *streams;
  size_t nstreams, streams_cap;
  struct ferry_pool_event *events;
  size_t nevents, events_cap;
};

/* a block: live (handed out) or pooled (freed on `stream` as free number `seq`) */
struct ferry_pool_block {
  uint64_t addr, size;
  uint32_t stream;
  uint64_t seq;
};

struct ferry_pool {
  struct ferry_pool_block *live; /* sorted by addr */
  size_t nlive, live_cap;
  struct ferry_pool_block *pooled; /* in the order they were freed */
  size_t npooled, pooled_cap;
  uint64_t threshold; /* cudaMemPoolAttrReleaseThreshold */
  int follow_events, opportunistic, internal_deps; /* reuse attributes (CUDA: all on) */
  uint64_t reserved, reserved_high, used, used_high;
};

/* new blocks come from, and unused ones go back to, the vGPU's arena */
struct ferry_pool_backend {
  int (*alloc)(void *ctx, uint64_t size, uint64_t *addr); /* 0 or a cudaError_t */
  int (*release)(void *ctx, uint64_t addr);
  void *ctx;
};

void ferry_pool_clock_init(struct ferry_pool_clock *c);
void ferry_pool_clock_destroy(struct ferry_pool_clock *c);
/* the clock before a synchronization: frees up to it are covered by it */
static inline uint64_t ferry_pool_clock_now(const struct ferry_pool_clock *c) { return c->seq; }
/* a synchronization that began at `at` ended: of stream, or of the device */
void ferry_pool_stream_synced(struct ferry_pool_clock *c, uint32_t stream, uint64_t at);
void ferry_pool_device_synced(struct ferry_pool_clock *c, uint64_t at);
/* events: recorded on stream; waited for by stream (its later work runs
   after the event's stream's work up to the record); synchronized */
int ferry_pool_event_recorded(struct ferry_pool_clock *c, uint32_t event, uint32_t stream);
int ferry_pool_event_waited(struct ferry_pool_clock *c, uint32_t stream, uint32_t event);
void ferry_pool_event_synced(struct ferry_pool_clock *c, uint32_t event);
void ferry_pool_event_forget(struct ferry_pool_clock *c, uint32_t event);
/* a stream is destroyed (its id may come back for another): the pools'
   blocks freed on it whose frees are not known complete wait for a device
   sync (orphan each pool first), then what the clock knew of it goes */
void ferry_pool_orphan(struct ferry_pool *p, const struct ferry_pool_clock *c, uint32_t stream);
void ferry_pool_stream_forget(struct ferry_pool_clock *c, uint32_t stream);
/* the free (stream, seq) is complete */
int ferry_pool_complete(const struct ferry_pool_clock *c, uint32_t stream, uint64_t seq);

void ferry_pool_init(struct ferry_pool *p);
/* forgets every block without releasing it (the device was reset) */
void ferry_pool_destroy(struct ferry_pool *p);

/* a block of size bytes for work on stream: a pooled one it may reuse, else
   a new one from the backend (after giving back the pool's completed
   unused blocks, when the backend is out of memory); 0 or a cudaError_t */
int ferry_pool_alloc(struct ferry_pool *p, const struct ferry_pool_clock *c, uint64_t size,
                     uint32_t stream, const struct ferry_pool_backend *be, uint64_t *addr);
/* addr, live in p, freed on stream: pooled. 0, or -1 when p does not hold it live */
int ferry_pool_free(struct ferry_pool *p, struct ferry_pool_clock *c, uint64_t addr, uint32_t stream);
/* an allocation made elsewhere (cudaMalloc), freed with cudaFreeAsync:
   pooled as if p had made it, to be released once its free is complete */
int ferry_pool_adopt(struct ferry_pool *p, struct ferry_pool_clock *c, uint64_t addr, uint64_t size,
                     uint32_t stream);
/* the live block at addr, or NULL; pooled(): 1 when addr starts a pooled block */
const struct ferry_pool_block *ferry_pool_live(const struct ferry_pool *p, uint64_t addr);
int ferry_pool_pooled(const struct ferry_pool *p, uint64_t addr);
/* a live block freed outside the pool (cudaFree): it leaves the pool's counts */
int ferry_pool_forget(struct ferry_pool *p, uint64_t addr);

/* gives back completed unused blocks, largest first, until the pool
   reserves at most keep bytes; returns the first backend error */
int ferry_pool_trim(struct ferry_pool *p, const struct ferry_pool_clock *c, uint64_t keep,
                    const struct ferry_pool_backend *be);
/* at a synchronization: trims to the release threshold */
static inline int ferry_pool_settle(struct ferry_pool *p, const struct ferry_pool_clock *c,
                                    const struct ferry_pool_backend *be) {
  return p->reserved > p->threshold ? ferry_pool_trim(p, c, p->threshold, be) : 0;
}

/* cudaMemPoolAttr values (as CUDA numbers them); 0 or cudaErrorInvalidValue */
int ferry_pool_get_attr(const struct ferry_pool *p, int attr, void *value);
int ferry_pool_set_attr(struct ferry_pool *p, int attr, const void *value);

#endif
