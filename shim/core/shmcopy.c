/*
 * Copies between the program and a vGPU served by a ferry-mhelper. The
 * helper maps the program's shared host arena (hostmem.c) at the same
 * address, so a copy names host memory instead of carrying it: pinned
 * buffers (cudaMallocHost) go straight to the GPU with no host copy, and
 * pageable memory takes one copy, through two staging buffers in the arena
 * that alternate so the memcpy of one piece overlaps the DMA of the other,
 * on several cores for large pieces.
 * Small pageable copies still travel on the channel: one round trip costs
 * less than the staging's events.
 */
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/setting.h"
#include "shim/core/host.h"
#include "shim/core/link.h"
#include "shim/core/thread.h"

#define STAGING_BYTES (8u << 20)   /* each of the two buffers */
#define STAGING_MIN (256u << 10)   /* pageable copies from here on use them */

/* ---- memcpy on several cores ----
   One core's memcpy moved 7-10 GB/s on the GPU machines measured here, well
   under what the DMA moves and under the driver's own pageable copies, so
   large pieces are split across a few threads: as many as the CPUs this
   process may run on allow (its affinity: a batch system's binding), at
   most four. */
#define PAR_MIN (1u << 20) /* smaller pieces: one memcpy, no hand-off */
#define PAR_MAX 4
static struct {
  pthread_once_t once;
  pthread_mutex_t use;  /* one split copy at a time */
  pthread_mutex_t lock; /* the fields below */
  pthread_cond_t go, done;
  unsigned gen, pending, workers;
  struct part {
    char *d;
    const char *s;
    size_t n;
  } part[PAR_MAX];
} team = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, {{0}}};

static void *copy_worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg, seen = 0;
  pthread_mutex_lock(&team.lock);
  for (;;) {
    while (team.gen == seen) pthread_cond_wait(&team.go, &team.lock);
    seen = team.gen;
    struct part p = team.part[id];
    pthread_mutex_unlock(&team.lock);
    memcpy(p.d, p.s, p.n);
    pthread_mutex_lock(&team.lock);
    if (--team.pending == 0) pthread_cond_signal(&team.done);
  }
  return NULL;
}

/* FERRY_COPY_THREADS=N (0..3) sets the helper threads; else by the CPUs */
static void team_start(void) {
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  unsigned want = cpus >= 8 ? PAR_MAX - 1 : cpus >= 4 ? 1 : 0;
  char range[32], fallback[48];
  snprintf(range, sizeof range, "0 to %d", PAR_MAX - 1);
  snprintf(fallback, sizeof fallback, "%u (by the CPUs)", want);
  uint64_t v;
  if (ferry_env_uint("FERRY_COPY_THREADS", 0, PAR_MAX - 1, &v, range, fallback)) want = (unsigned)v;
  for (unsigned i = 1; i <= want; i++)
    if (ferry_start_thread(copy_worker, (void *)(uintptr_t)i) == 0) team.workers = i;
}

static void copy_wide(void *dst, const void *src, size_t n) {
  pthread_once(&team.once, team_start);
  if (n < PAR_MIN || !team.workers || pthread_mutex_trylock(&team.use)) {
    memcpy(dst, src, n);
    return;
  }
  unsigned k = team.workers + 1;
  size_t part = (n / k + 63) & ~(size_t)63;
  pthread_mutex_lock(&team.lock);
  for (unsigned i = 1; i < k; i++) {
    size_t off = part * i < n ? part * i : n;
    size_t len = off + part <= n && i + 1 < k ? part : n - off;
    team.part[i] = (struct part){(char *)dst + off, (const char *)src + off, len};
  }
  team.pending = team.workers;
  team.gen++;
  pthread_cond_broadcast(&team.go);
  pthread_mutex_unlock(&team.lock);
  memcpy(dst, src, part < n ? part : n);
  pthread_mutex_lock(&team.lock);
  while (team.pending) pthread_cond_wait(&team.done, &team.lock);
  pthread_mutex_unlock(&team.lock);
  pthread_mutex_unlock(&team.use);
}

struct ferry_staging {
  pthread_mutex_t lock; /* one copy at a time uses the buffers */
  char *buf[2];
  int busy[2]; /* a DMA may still read (or write) buffer i: wait for event i */
};

static uint32_t event_of(int i) { return FERRY_WIRE_STAGING_EVENT0 + (uint32_t)i; }

void ferry_staging_free(struct ferry_staging *st) {
  if (!st) return;
  for (int i = 0; i < 2; i++)
    if (st->buf[i]) ferry_host_shared_free(st->buf[i]);
  pthread_mutex_destroy(&st->lock);
  free(st);
}

int ferry_staging_open(struct ferry_link *l, char *err, size_t errlen) {
  struct ferry_staging *st = calloc(1, sizeof *st);
  if (!st) {
    snprintf(err, errlen, "out of memory");
    return cudaErrorMemoryAllocation;
  }
  pthread_mutex_init(&st->lock, NULL);
  int rc = 0;
  for (int i = 0; i < 2 && !rc; i++) {
    st->buf[i] = ferry_host_shared_alloc(STAGING_BYTES);
    if (!st->buf[i]) {
      snprintf(err, errlen, "no shared host memory for the helper's staging buffers");
      rc = cudaErrorMemoryAllocation;
      break;
    }
    struct ferry_host_register_args r = {(uint64_t)(uintptr_t)st->buf[i], STAGING_BYTES};
    struct ferry_event_create_args e = {event_of(i), cudaEventDisableTiming};
    if ((rc = ferry_link_call(l, FERRY_CALL_host_register, &r, NULL, NULL)) ||
        (rc = ferry_link_call(l, FERRY_CALL_event_create, &e, NULL, NULL)))
      snprintf(err, errlen, "setting up the helper's staging buffers failed: %s",
               cudaGetErrorName((cudaError_t)rc));
  }
  if (rc) {
    ferry_staging_free(st);
    return rc;
  }
  l->staging = st;
  return 0;
}

/* waits until the DMA that last used buffer i is done */
static int drained(struct ferry_vgpu *v, struct ferry_staging *st, int i) {
  if (!st->busy[i]) return 0;
  st->busy[i] = 0;
  struct ferry_event_synchronize_args a = {event_of(i)};
  return ferry_link_call_held(v, FERRY_CALL_event_synchronize, &a, NULL, NULL);
}

/* the DMA between buffer i (or a shared pinned buffer) and the device,
   then, for a staging buffer, its event */
static int dma(struct ferry_vgpu *v, struct ferry_staging *st, int i, uint64_t dev,
               const void *host, uint64_t n, uint32_t stream, int to_device) {
  int rc;
  if (to_device) {
    struct ferry_memcpy_htod_host_args a = {dev, (uint64_t)(uintptr_t)host, n, stream};
    rc = ferry_link_call_held(v, FERRY_CALL_memcpy_htod_host, &a, NULL, NULL);
  } else {
    struct ferry_memcpy_dtoh_host_args a = {dev, (uint64_t)(uintptr_t)host, n, stream};
    rc = ferry_link_call_held(v, FERRY_CALL_memcpy_dtoh_host, &a, NULL, NULL);
  }
  if (rc || i < 0) return rc;
  struct ferry_event_record_args e = {event_of(i), stream};
  rc = ferry_link_call_held(v, FERRY_CALL_event_record, &e, NULL, NULL);
  st->busy[i] = rc == 0;
  return rc;
}

/* the piece one buffer carries: about a quarter of the copy, so that the
   memcpy of one piece overlaps the DMA of the other even for copies of a
   few MiB, but not so small that the events' round trips show */
static uint64_t piece_of(uint64_t n) {
  uint64_t k = ((n + 3) / 4 + 65535) & ~(uint64_t)65535;
  return k < STAGING_MIN ? STAGING_MIN : k > STAGING_BYTES ? STAGING_BYTES : k;
}

static int staged_htod(struct ferry_vgpu *v, struct ferry_staging *st, uint64_t dst,
                       const char *src, uint64_t n, uint32_t stream) {
  int rc = 0;
  uint64_t piece = piece_of(n);
  for (uint64_t off = 0, k = 0; off < n && !rc; off += piece, k++) {
    int i = (int)(k & 1);
    uint64_t len = n - off < piece ? n - off : piece;
    if ((rc = drained(v, st, i))) break;
    copy_wide(st->buf[i], src + off, len);
    rc = dma(v, st, i, dst + off, st->buf[i], len, stream, 1);
  }
  /* like CUDA's pageable copies: done once the bytes are staged */
  return rc;
}

static int staged_dtoh(struct ferry_vgpu *v, struct ferry_staging *st, char *dst, uint64_t src,
                       uint64_t n, uint32_t stream) {
  uint64_t piece = piece_of(n), pieces = (n + piece - 1) / piece;
  int rc = 0;
  for (uint64_t k = 0; k < pieces && k < 2 && !rc; k++) {
    int i = (int)k;
    uint64_t off = k * piece, len = n - off < piece ? n - off : piece;
    if (!(rc = drained(v, st, i))) rc = dma(v, st, i, src + off, st->buf[i], len, stream, 0);
  }
  for (uint64_t k = 0; k < pieces && !rc; k++) {
    int i = (int)(k & 1);
    uint64_t off = k * piece, len = n - off < piece ? n - off : piece;
    if ((rc = drained(v, st, i))) break;
    copy_wide(dst + off, st->buf[i], len);
    uint64_t next = off + 2 * piece;
    if (next < n) rc = dma(v, st, i, src + next, st->buf[i], n - next < piece ? n - next : piece, stream, 0);
  }
  /* an error leaves a DMA in flight: wait for both before the buffers are reused */
  if (rc) {
    drained(v, st, 0);
    drained(v, st, 1);
  }
  return rc;
}

/* under the gate, held for the whole copy: a migration that moves the vGPU
   off its helper (and frees the staging buffers) waits for it, and a copy
   that finds the vGPU moved takes the caller's other path */
static int shared_copy_held(struct ferry_vgpu *v, void *dst, const void *src, uint64_t n,
                            int to_device, uint32_t stream, int async) {
  struct ferry_staging *st = v->link.staging;
  if (ferry_is_local(v) || !v->link.helper_pid || !st) return FERRY_NOT_HELPER;
  const void *host = to_device ? src : dst;
  uint64_t dev = (uint64_t)(uintptr_t)(to_device ? dst : src);
  if (ferry_host_is_shared(host, n)) {
    /* the program's pinned buffer itself: no copy at all; synchronous
       copies return once the DMA is done, as CUDA's do */
    int rc = dma(v, st, -1, dev, host, n, stream, to_device);
    if (!rc && !async) {
      struct ferry_stream_synchronize_args a = {stream};
      rc = ferry_link_call_held(v, FERRY_CALL_stream_synchronize, &a, NULL, NULL);
    }
    return rc;
  }
  if (n < STAGING_MIN) return FERRY_NOT_HELPER;
  pthread_mutex_lock(&st->lock);
  int rc = to_device ? staged_htod(v, st, dev, src, n, stream)
                     : staged_dtoh(v, st, dst, dev, n, stream);
  pthread_mutex_unlock(&st->lock);
  return rc;
}

int ferry_shared_copy(struct ferry_vgpu *v, void *dst, const void *src, uint64_t n, int to_device,
                      uint32_t stream, int async) {
  if (!__atomic_load_n(&v->link.helper_pid, __ATOMIC_RELAXED)) return FERRY_NOT_HELPER; /* the usual case */
  pthread_rwlock_rdlock(&v->gate);
  int rc = ferry_stale(v) ? FERRY_STALE
                          : shared_copy_held(v, dst, src, n, to_device, stream, async);
  pthread_rwlock_unlock(&v->gate);
  return rc;
}
