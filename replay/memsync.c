/*
 * Mem-sync (see memsync.h): planning the ranges, then the pipelined copy
 * through the caller's page-locked buffers on a stream of the target's.
 */
#include "replay/memsync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define MAX_BUFFERS 8

void ferry_memsync_defaults(struct ferry_memsync_opts *o) {
  memset(o, 0, sizeof *o);
  o->batch_bytes = 16u << 20;
  o->max_ranges = 4096;
  o->merge_gap = 64u << 10;
  o->buffers = 2;
}

int ferry_memsync_mapped(const struct ferry_mapping *maps, size_t nmaps, size_t *m, uint64_t a,
                         uint64_t b) {
  while (*m < nmaps && maps[*m].addr + maps[*m].size <= a) (*m)++;
  uint64_t cur = a;
  for (size_t k = *m; k < nmaps && cur < b; k++) {
    if (maps[k].addr > cur) return 0;
    cur = maps[k].addr + maps[k].size;
  }
  return cur >= b;
}

long ferry_memsync_plan(const struct ferry_region *regions, size_t nregions,
                        const struct ferry_mapping *maps, size_t nmaps, uint64_t merge_gap,
                        uint64_t **pairs) {
  uint64_t *p = malloc((nregions ? nregions : 1) * 2 * sizeof *p);
  if (!p) return -1;
  long n = 0;
  size_t m = 0;
  for (size_t i = 0; i < nregions; i++) {
    uint64_t a = regions[i].addr, b = a + regions[i].size;
    if (a == b) continue;
    if (n) {
      uint64_t end = p[2 * (n - 1)] + p[2 * (n - 1) + 1];
      if (a >= end && a - end <= merge_gap && ferry_memsync_mapped(maps, nmaps, &m, end, a)) {
        p[2 * (n - 1) + 1] = b - p[2 * (n - 1)];
        continue;
      }
    }
    p[2 * n] = a;
    p[2 * n + 1] = b - a;
    n++;
  }
  *pairs = p;
  return n;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* one request: ranges [first, first+n) of the pieces list */
struct batch {
  size_t first, n;
  uint64_t bytes;
};

/* the target's side: a stream of its own and an event per buffer, under
   ids that ferry keeps for itself (protocol/wire.h) */
struct engine {
  const struct ferry_target *t;
  unsigned nbuf;
  int bulk; /* copies carry their bytes */
  int stream, events; /* created: the stream, and this many events */
  int busy[MAX_BUFFERS];
};

static int tcall(struct engine *e, unsigned call, const void *args) {
  return e->t->call(e->t->ctx, call, args, NULL, NULL);
}

static int engine_open(struct engine *e) {
  struct ferry_stream_create_args sc = {FERRY_WIRE_MEMSYNC_STREAM, 1 /* non-blocking */, 0};
  int rc = tcall(e, FERRY_CALL_stream_create, &sc);
  if (rc) return rc;
  e->stream = 1;
  for (unsigned i = 0; i < e->nbuf; i++) {
    struct ferry_event_create_args ec = {FERRY_WIRE_MEMSYNC_EVENT0 + i, 2 /* no timing */};
    if ((rc = tcall(e, FERRY_CALL_event_create, &ec))) return rc;
    e->events++;
  }
  return 0;
}

/* waits until the copies out of buffer i are done */
static int engine_wait(struct engine *e, unsigned i) {
  if (!e->busy[i]) return 0;
  e->busy[i] = 0;
  struct ferry_event_synchronize_args a = {FERRY_WIRE_MEMSYNC_EVENT0 + i};
  return tcall(e, FERRY_CALL_event_synchronize, &a);
}

static void engine_close(struct engine *e) {
  for (unsigned i = 0; i < e->nbuf; i++) engine_wait(e, i);
  for (int i = 0; i < e->events; i++) {
    struct ferry_event_destroy_args a = {FERRY_WIRE_MEMSYNC_EVENT0 + (uint32_t)i};
    tcall(e, FERRY_CALL_event_destroy, &a);
  }
  if (e->stream) {
    struct ferry_stream_destroy_args a = {FERRY_WIRE_MEMSYNC_STREAM};
    tcall(e, FERRY_CALL_stream_destroy, &a);
  }
}

/* the copies out of buffer i, then its event */
static int engine_put(struct engine *e, unsigned i, const char *buf, const uint64_t *pieces,
                      size_t n) {
  int rc = 0;
  for (size_t j = 0; j < n && !rc; j++) {
    if (e->bulk) {
      struct ferry_memcpy_htod_async_args a = {pieces[2 * j], FERRY_WIRE_MEMSYNC_STREAM};
      struct ferry_bulk b = {.in = buf, .in_len = pieces[2 * j + 1]};
      rc = e->t->call(e->t->ctx, FERRY_CALL_memcpy_htod_async, &a, NULL, &b);
    } else {
      struct ferry_memcpy_htod_host_args a = {pieces[2 * j], (uint64_t)(uintptr_t)buf,
                                              pieces[2 * j + 1], FERRY_WIRE_MEMSYNC_STREAM};
      rc = tcall(e, FERRY_CALL_memcpy_htod_host, &a);
    }
    buf += pieces[2 * j + 1];
  }
  struct ferry_event_record_args r = {FERRY_WIRE_MEMSYNC_EVENT0 + i, FERRY_WIRE_MEMSYNC_STREAM};
  if (!rc) rc = tcall(e, FERRY_CALL_event_record, &r);
  e->busy[i] = !rc;
  return rc;
}

int ferry_memsync_run(const struct ferry_target *t, const uint64_t *pairs, size_t npairs,
                      const struct ferry_memsync_source *src, const struct ferry_memsync_opts *o,
                      struct ferry_memsync_stats *st, char *err, size_t errlen) {
  double t0 = now_ms();
  memset(st, 0, sizeof *st);
  uint64_t batch_bytes = o->batch_bytes ? o->batch_bytes : 16u << 20;
  uint32_t max_ranges = o->max_ranges ? o->max_ranges : 4096;
  unsigned nbuf = o->buffers < 2 ? 2 : o->buffers > MAX_BUFFERS ? MAX_BUFFERS : o->buffers;

  /* cut the ranges into pieces of at most batch_bytes, then group them */
  size_t npieces = 0;
  uint64_t total = 0;
  for (size_t i = 0; i < npairs; i++) {
    npieces += (pairs[2 * i + 1] + batch_bytes - 1) / batch_bytes;
    total += pairs[2 * i + 1];
  }
  uint64_t *pieces = malloc((npieces ? npieces : 1) * 2 * sizeof *pieces);
  struct batch *batches = malloc((npieces ? npieces : 1) * sizeof *batches);
  struct engine e = {.t = t, .nbuf = nbuf, .bulk = o->bulk};
  int rc = 0;
  if (!pieces || !batches) {
    snprintf(err, errlen, "out of memory planning mem-sync");
    rc = 2;
    goto out;
  }
  size_t k = 0, nb = 0;
  for (size_t i = 0; i < npairs; i++)
    for (uint64_t off = 0; off < pairs[2 * i + 1]; off += batch_bytes) {
      uint64_t left = pairs[2 * i + 1] - off;
      pieces[2 * k] = pairs[2 * i] + off;
      pieces[2 * k + 1] = left < batch_bytes ? left : batch_bytes;
      k++;
    }
  for (size_t i = 0; i < npieces; i++) {
    if (!nb || batches[nb - 1].n == max_ranges || batches[nb - 1].bytes + pieces[2 * i + 1] > batch_bytes)
      batches[nb++] = (struct batch){i, 0, 0};
    batches[nb - 1].n++;
    batches[nb - 1].bytes += pieces[2 * i + 1];
  }
  st->ranges = npairs;
  st->requests = nb;
  if (!nb) goto out;
  for (unsigned i = 0; i < nbuf; i++)
    if (!o->bufs || !o->bufs[i]) {
      snprintf(err, errlen, "mem-sync has no buffer %u", i);
      rc = 1;
      goto out;
    }

  int r = engine_open(&e);
  if (r) {
    snprintf(err, errlen, "cannot set up mem-sync on the target GPU (cudaError %d)", r);
    rc = r;
    goto out;
  }
  /* keep nbuf requests ahead; the source answers in order */
  size_t sent = 0, got = 0;
  uint64_t done = 0;
  int broken = 0;
  for (size_t b = 0; b < nb && !rc && !r; b++) {
    while (sent < nb && sent < b + nbuf) {
      if (src->request(src->ctx, &pieces[2 * batches[sent].first], (uint32_t)batches[sent].n)) {
        snprintf(err, errlen, "mem-sync request %zu of %zu could not be sent: the source GPU is "
                 "unreachable", sent + 1, nb);
        rc = 999;
        broken = 1;
        break;
      }
      sent++;
    }
    if (rc) break;
    unsigned i = (unsigned)(b % nbuf);
    if ((r = engine_wait(&e, i))) break;
    int got_rc = src->receive(src->ctx, o->bufs[i], batches[b].bytes);
    got++;
    if (got_rc) {
      snprintf(err, errlen, "mem-sync transfer %zu of %zu failed after %llu of %llu bytes%s", b + 1,
               nb, (unsigned long long)done, (unsigned long long)total,
               got_rc < 0 ? ": the connection broke" : "");
      rc = 999;
      broken = got_rc < 0;
      break;
    }
    if ((r = engine_put(&e, i, o->bufs[i], &pieces[2 * batches[b].first], batches[b].n))) break;
    done += batches[b].bytes;
    if (o->progress) o->progress(o->progress_ctx, done, total);
  }
  if (!rc && !r) {
    struct ferry_stream_synchronize_args a = {FERRY_WIRE_MEMSYNC_STREAM};
    r = tcall(&e, FERRY_CALL_stream_synchronize, &a);
  }
  if (!rc && r) {
    snprintf(err, errlen, "mem-sync: copying to the target GPU failed (cudaError %d)", r);
    rc = r;
  }
  /* answers still on their way would leave the connection out of step:
     read and drop them, so the program can go on where it was */
  if (!broken && got < sent) {
    void *scratch = malloc(batch_bytes);
    for (; got < sent; got++)
      if (!scratch || src->receive(src->ctx, scratch, batches[got].bytes) < 0) break;
    free(scratch);
  }
  if (!rc) st->bytes = done;
out:
  engine_close(&e);
  free(pieces);
  free(batches);
  st->ms = now_ms() - t0;
  return rc;
}
