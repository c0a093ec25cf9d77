/*
 * The part of a migration that runs before the hold, so that the pause is
 * only the drain and what changed: the log replayed on the target (the
 * recorder's journal keeps what the program does meanwhile) and every live
 * region copied while the program runs. At the pause each range is hashed
 * in pieces on both GPUs (mem_hash, a kernel ferry carries) and only the
 * pieces whose hashes differ travel again: a kernel can write anywhere it
 * reaches, so nothing is skipped on a guess, only on equal hashes.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/setting.h"
#include "protocol/mem_batch.h"
#include "shim/migrate/migrate_int.h"
#include "replay/memsync.h"
#include "replay/replay.h"

#define PRECOPY_QUEUE 8

static void hash_warm(struct mig *m);

/* FERRY_PRECOPY=0: everything is replayed and copied in the pause, as
   before; FERRY_PRECOPY_CHUNK: the hashed piece size (a multiple of 8) */
int mig_precopy_enabled(void) {
  const char *e = getenv("FERRY_PRECOPY");
  return !e || strcmp(e, "0");
}

/* (up to 1 GiB: "-8" once read as 2^64 - 8 overflowed the piece count) */
static uint64_t hash_chunk = 1u << 20;
static pthread_once_t hash_chunk_once = PTHREAD_ONCE_INIT;
static void read_hash_chunk(void) {
  const char *e = getenv("FERRY_PRECOPY_CHUNK");
  uint64_t c;
  if (!e || !*e) return;
  if (!ferry_parse_uint(e, 8, 1u << 30, &c) && c % 8 == 0) hash_chunk = c;
  else ferry_setting_refused("FERRY_PRECOPY_CHUNK", e, "bytes, a multiple of 8 from 8 to 1073741824",
                             "1048576");
}

uint64_t mig_hash_chunk(void) {
  pthread_once(&hash_chunk_once, read_hash_chunk);
  return hash_chunk;
}

/* mem-sync's source that answers each request with one call where the
   vGPU runs (other threads may use it too). While the program runs (live)
   the call is made under the arena lock, so that no range is unmapped
   while it is read, and ranges freed since the plan come back as zeros
   (their hashes will differ or they are no longer live). */
struct queued_src {
  struct ferry_vgpu *v;
  int live;
  const uint64_t *pairs[PRECOPY_QUEUE];
  uint32_t n[PRECOPY_QUEUE];
  unsigned head, count;
  uint64_t *keep; /* scratch for the ranges still mapped */
  size_t keep_cap;
};

static int queued_request(void *ctx, const uint64_t *pairs, uint32_t n) {
  struct queued_src *s = ctx;
  if (s->count == PRECOPY_QUEUE) return -1;
  unsigned i = (s->head + s->count++) % PRECOPY_QUEUE;
  s->pairs[i] = pairs;
  s->n[i] = n;
  return 0;
}

static int queued_receive(void *ctx, void *dst, uint64_t len) {
  struct queued_src *s = ctx;
  if (!s->count) return 1;
  const uint64_t *pairs = s->pairs[s->head];
  uint32_t n = s->n[s->head];
  s->head = (s->head + 1) % PRECOPY_QUEUE;
  s->count--;
  struct ferry_vgpu *v = s->v;
  if (!s->live) { /* paused: every planned range is mapped */
    struct ferry_memcpy_dtoh_gather_args a = {.ranges = {pairs, n * 16}};
    struct ferry_bulk bulk = {.out = dst, .out_len = len};
    int rc = ferry_source_call(v, FERRY_CALL_memcpy_dtoh_gather, &a, NULL, &bulk);
    if (rc) return ferry_dead(v) ? -1 : 1;
    return mig_fault("memsync") ? 1 : 0;
  }
  if (s->keep_cap < n) {
    uint64_t *k = realloc(s->keep, n * 16);
    if (!k) return 1;
    s->keep = k;
    s->keep_cap = n;
  }
  pthread_mutex_lock(&v->arena_lock);
  uint32_t kept = 0;
  uint64_t kept_bytes = 0;
  size_t cursor = 0; /* a batch's ranges come in address order */
  for (uint32_t i = 0; i < n; i++)
    if (ferry_memsync_mapped(v->arena.maps, v->arena.nmaps, &cursor, pairs[2 * i],
                             pairs[2 * i] + pairs[2 * i + 1])) {
      s->keep[2 * kept] = pairs[2 * i];
      s->keep[2 * kept + 1] = pairs[2 * i + 1];
      kept_bytes += pairs[2 * i + 1];
      kept++;
    }
  int rc = 0;
  if (kept) {
    struct ferry_memcpy_dtoh_gather_args a = {.ranges = {s->keep, kept * 16},
                                              .stream = FERRY_WIRE_MEMSYNC_STREAM};
    struct ferry_bulk bulk = {.out = dst, .out_len = kept_bytes};
    rc = ferry_source_call(v, FERRY_CALL_memcpy_dtoh_gather, &a, NULL, &bulk);
  }
  pthread_mutex_unlock(&v->arena_lock);
  if (rc) return ferry_dead(v) ? -1 : 1;
  if (kept == n) return 0;
  /* spread the kept ranges to their places, last first, zeros between */
  uint64_t packed = kept_bytes, end = len;
  uint32_t k = kept;
  for (uint32_t i = n; i-- > 0;) {
    uint64_t size = pairs[2 * i + 1];
    end -= size;
    if (k && s->keep[2 * (k - 1)] == pairs[2 * i]) {
      packed -= size;
      memmove((char *)dst + end, (char *)dst + packed, size);
      k--;
    } else {
      memset((char *)dst + end, 0, size);
    }
  }
  return 0;
}

int mig_queued_source(struct ferry_vgpu *v, int live, struct ferry_memsync_source *out) {
  struct queued_src *s = calloc(1, sizeof *s);
  if (!s) return -1;
  s->v = v;
  s->live = live;
  *out = (struct ferry_memsync_source){queued_request, queued_receive, s};
  return 0;
}

void mig_queued_free(struct ferry_memsync_source *src) {
  struct queued_src *s = src->ctx;
  if (s) free(s->keep);
  free(s);
  src->ctx = NULL;
}

int mig_ahead(struct mig *m) {
  struct ferry_vgpu *v = m->v;
  char why[256] = "";
  double t0 = mig_now_ms();
  struct ferry_replay_hooks hooks = {mig_module_loaded, mig_error_name, m};
  uint64_t *pairs = NULL;
  long n = 0;
  struct ferry_memsync_opts o;
  ferry_memsync_defaults(&o);
  /* the arena lock keeps allocations out while the log is replayed, so
     the plan below matches the mappings the target now has */
  pthread_mutex_lock(&v->arena_lock);
  int rc = ferry_replay_ahead(&v->log, &m->t, &hooks, &m->ahead_stats, why, sizeof why);
  if (!rc)
    n = ferry_memsync_plan(v->arena.regions, v->arena.nregions, v->arena.maps, v->arena.nmaps,
                           o.merge_gap, &pairs);
  pthread_mutex_unlock(&v->arena_lock);
  if (rc) {
    ferry_recorder_journal_stop(&v->log);
    return mig_fail(m, "%s", why);
  }
  m->ahead = 1;
  m->ahead_replay_ms = mig_now_ms() - t0;
  if (n < 0) return 0; /* out of memory: the pause copies everything */
  o.batch_bytes = m->buf_bytes;
  o.buffers = MEMSYNC_BUFFERS;
  o.bufs = m->bufs;
  o.bulk = m->url != NULL;
  struct ferry_memsync_source source;
  if (mig_queued_source(v, 1, &source)) {
    free(pairs);
    return 0; /* out of memory: the pause copies everything */
  }
  struct ferry_memsync_stats ms;
  /* the source reads on a stream of its own that waits for none of the
     program's work (what a kernel writes meanwhile, the hashes catch) */
  struct ferry_stream_create_args sc = {FERRY_WIRE_MEMSYNC_STREAM, 1 /* non-blocking */, 0};
  int stream = !ferry_source_call(v, FERRY_CALL_stream_create, &sc, NULL, NULL);
  if (stream && m->buf_bytes &&
      !ferry_memsync_run(&m->t, pairs, (size_t)n, &source, &o, &ms, why, sizeof why))
    m->precopied = ms.bytes;
  else if (n)
    ferry_debug("device %d: copying ahead stopped (%s); the pause copies everything", v->index,
                stream ? why : "no stream on the source");
  if (stream) {
    struct ferry_stream_destroy_args sd = {FERRY_WIRE_MEMSYNC_STREAM};
    ferry_source_call(v, FERRY_CALL_stream_destroy, &sd, NULL, NULL);
  }
  if (m->precopied && mig_fault("precopy_corrupt")) {
    /* tests: the target's copy of every range goes wrong after the copy;
       the hashes must catch it (the program's results show it if not) */
    for (long i = 0; i < n; i++) {
      uint64_t size = pairs[2 * i + 1] < 4096 ? pairs[2 * i + 1] : 4096;
      struct ferry_memset_args z = {pairs[2 * i], 0xa5, size, 0};
      mig_tcall(m, FERRY_CALL_memset, &z, NULL);
    }
    struct ferry_device_synchronize_args sync = {0};
    mig_tcall(m, FERRY_CALL_device_synchronize, &sync, NULL);
  }
  mig_queued_free(&source);
  free(pairs);
  m->precopy_ms = mig_now_ms() - t0 - m->ahead_replay_ms;
  double t1 = mig_now_ms();
  if (m->precopied) hash_warm(m);
  m->warm_ms = mig_now_ms() - t1;
  /* tests: the program runs on (and changes what was copied) before the hold */
  if (mig_fault("precopy_stall")) nanosleep(&(struct timespec){1, 0}, NULL);
  return 0;
}


/* hashes of pairs[0..n) in pieces of chunk on one side, into h (pieces
   long); 0 or an error */
static int hash_side(struct mig *m, int source, const uint64_t *pairs, size_t n, uint64_t chunk,
                     uint64_t *h) {
  return source ? ferry_mem_hash_batched(ferry_source_call_ctx, m->v, pairs, n, chunk, h)
                : ferry_mem_hash_batched(m->t.call, m->t.ctx, pairs, n, chunk, h);
}

/* the hashing kernel is loaded (and JIT-compiled: 140-170 ms measured on an
   H100) by its first call: made here, before the hold, on both sides */
static void hash_warm(struct mig *m) {
  struct ferry_mem_hash_args a = {.ranges = {NULL, 0}, .chunk = 8};
  struct ferry_mem_hash_rets r;
  if (ferry_source_call(m->v, FERRY_CALL_mem_hash, &a, &r, NULL) ||
      m->t.call(m->t.ctx, FERRY_CALL_mem_hash, &a, &r, NULL))
    ferry_debug("device %d: the hashing kernel did not load ahead", m->v->index);
}

long mig_changed(struct mig *m, const uint64_t *pairs, size_t n, uint64_t **out,
                 uint64_t *unchanged) {
  double t0 = mig_now_ms();
  uint64_t chunk = mig_hash_chunk();
  size_t pieces = 0;
  for (size_t i = 0; i < n; i++) pieces += (pairs[2 * i + 1] + chunk - 1) / chunk;
  *unchanged = 0;
  *out = malloc((pieces ? pieces : 1) * 16);
  uint64_t *src = malloc((pieces ? pieces : 1) * 8), *dst = malloc((pieces ? pieces : 1) * 8);
  if (!*out || !src || !dst) {
    free(*out), free(src), free(dst);
    return -1;
  }
  int same_ok = !hash_side(m, 1, pairs, n, chunk, src) && !hash_side(m, 0, pairs, n, chunk, dst);
  if (!same_ok) ferry_debug("device %d: hashing failed; every range is copied", m->v->index);
  long k = 0;
  size_t p = 0;
  for (size_t i = 0; i < n; i++)
    for (uint64_t off = 0; off < pairs[2 * i + 1]; off += chunk, p++) {
      uint64_t addr = pairs[2 * i] + off, left = pairs[2 * i + 1] - off;
      uint64_t size = left < chunk ? left : chunk;
      if (same_ok && src[p] == dst[p]) {
        *unchanged += size;
        continue;
      }
      if (k && (*out)[2 * (k - 1)] + (*out)[2 * (k - 1) + 1] == addr)
        (*out)[2 * (k - 1) + 1] += size;
      else
        (*out)[2 * k] = addr, (*out)[2 * k + 1] = size, k++;
    }
  free(src);
  free(dst);
  m->hash_ms = mig_now_ms() - t0;
  return k;
}
