/*
 * Mem-sync (see memsync.h): planning the ranges, then the pipelined copy
 * through the caller's page-locked buffers on a stream of the target's.
 */
#include "replay/memsync.h"

#include <pthread.h>
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
   ids that ferry keeps for itself (protocol/wire.h). When the bytes travel
   with the copies (bulk), a buffer is free again once its copies are sent:
   a thread sends each filled buffer while the source fills the next one, so
   reading the source and sending to the target overlap. */
struct engine {
  const struct ferry_target *t;
  unsigned nbuf;
  int bulk; /* copies carry their bytes */
  int stream, events; /* created: the stream, and this many events */
  int busy[MAX_BUFFERS];
  /* bulk: the sender thread and the buffers it has to send, in order */
  pthread_t sender;
  int sender_on, quit, send_rc;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct send_job {
    const char *buf;
    const uint64_t *pieces;
    size_t n;
  } job[MAX_BUFFERS];
  int queued[MAX_BUFFERS];
  unsigned next;
};

static int tcall(struct engine *e, unsigned call, const void *args) {
  return e->t->call(e->t->ctx, call, args, NULL, NULL);
}

static int send_pieces(struct engine *e, const struct send_job *j) {
  const char *buf = j->buf;
  int rc = 0;
  for (size_t k = 0; k < j->n && !rc; k++) {
    struct ferry_memcpy_htod_async_args a = {j->pieces[2 * k], FERRY_WIRE_MEMSYNC_STREAM};
    struct ferry_bulk b = {.in = buf, .in_len = j->pieces[2 * k + 1]};
    rc = e->t->call(e->t->ctx, FERRY_CALL_memcpy_htod_async, &a, NULL, &b);
    buf += j->pieces[2 * k + 1];
  }
  return rc;
}

static void *sender_main(void *arg) {
  struct engine *e = arg;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    while (!e->queued[e->next] && !e->quit) pthread_cond_wait(&e->cv, &e->mu);
    if (!e->queued[e->next]) break;
    struct send_job j = e->job[e->next];
    int failed = e->send_rc;
    pthread_mutex_unlock(&e->mu);
    int rc = failed ? 0 : send_pieces(e, &j); /* after a failure nothing more is sent */
    pthread_mutex_lock(&e->mu);
    if (rc && !e->send_rc) e->send_rc = rc;
    e->queued[e->next] = 0;
    e->next = (e->next + 1) % e->nbuf;
    pthread_cond_broadcast(&e->cv);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

static int engine_open(struct engine *e) {
  struct ferry_stream_create_args sc = {FERRY_WIRE_MEMSYNC_STREAM, 1 /* non-blocking */, 0};
  int rc = tcall(e, FERRY_CALL_stream_create, &sc);
  if (rc) return rc;
  e->stream = 1;
  if (e->bulk) { /* no events: the sender says when a buffer is free */
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->sender_on = !pthread_create(&e->sender, NULL, sender_main, e);
    if (!e->sender_on) {
      pthread_mutex_destroy(&e->mu);
      pthread_cond_destroy(&e->cv);
    }
    return 0;
  }
  for (unsigned i = 0; i < e->nbuf; i++) {
    struct ferry_event_create_args ec = {FERRY_WIRE_MEMSYNC_EVENT0 + i, 2 /* no timing */};
    if ((rc = tcall(e, FERRY_CALL_event_create, &ec))) return rc;
    e->events++;
  }
  return 0;
}

/* waits until the copies out of buffer i are done (bulk: sent) */
static int engine_wait(struct engine *e, unsigned i) {
  if (e->sender_on) {
    pthread_mutex_lock(&e->mu);
    while (e->queued[i]) pthread_cond_wait(&e->cv, &e->mu);
    int rc = e->send_rc;
    pthread_mutex_unlock(&e->mu);
    return rc;
  }
  if (!e->busy[i]) return 0;
  e->busy[i] = 0;
  struct ferry_event_synchronize_args a = {FERRY_WIRE_MEMSYNC_EVENT0 + i};
  return tcall(e, FERRY_CALL_event_synchronize, &a);
}

static void engine_close(struct engine *e) {
  for (unsigned i = 0; i < e->nbuf; i++) engine_wait(e, i);
  if (e->sender_on) {
    pthread_mutex_lock(&e->mu);
    e->quit = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->sender, NULL);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    e->sender_on = 0;
  }
  for (int i = 0; i < e->events; i++) {
    struct ferry_event_destroy_args a = {FERRY_WIRE_MEMSYNC_EVENT0 + (uint32_t)i};
    tcall(e, FERRY_CALL_event_destroy, &a);
  }
  if (e->stream) {
    struct ferry_stream_destroy_args a = {FERRY_WIRE_MEMSYNC_STREAM};
    tcall(e, FERRY_CALL_stream_destroy, &a);
  }
}

/* the copies out of buffer i, then its event (bulk: handed to the sender) */
static int engine_put(struct engine *e, unsigned i, const char *buf, const uint64_t *pieces,
                      size_t n) {
  if (e->sender_on) {
    pthread_mutex_lock(&e->mu);
    e->job[i] = (struct send_job){buf, pieces, n};
    e->queued[i] = 1;
    pthread_cond_broadcast(&e->cv);
    int rc = e->send_rc;
    pthread_mutex_unlock(&e->mu);
    return rc;
  }
  if (e->bulk) return send_pieces(e, &(struct send_job){buf, pieces, n});
  int rc = 0;
  for (size_t j = 0; j < n && !rc; j++) {
    struct ferry_memcpy_htod_host_args a = {pieces[2 * j], (uint64_t)(uintptr_t)buf,
                                            pieces[2 * j + 1], FERRY_WIRE_MEMSYNC_STREAM};
    rc = tcall(e, FERRY_CALL_memcpy_htod_host, &a);
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
  for (unsigned i = 0; i < nbuf && !rc && !r && e.sender_on; i++) r = engine_wait(&e, i);
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
