/*
 * cudaEventElapsedTime across a migration. The timestamps of events
 * recorded before it stay on the GPU it left; replay records them again on
 * the new one (so they are complete there). The offsets between them are
 * read during the drain, so elapsed times among them are the ones the
 * program measured, and a time across the move adds the source's time to
 * the drain, the migration's own duration and the target's time.
 */
#include <stdlib.h>

#include "shim/core/link.h"

struct ev_scan {
  uint32_t *ids;
  size_t n, cap;
};
static int timing_of(void *ctx, const struct ferry_record *rec) {
  const uint32_t *id = ctx;
  if (rec->call != FERRY_CALL_event_create) return 0;
  const struct ferry_event_create_args *a = (const void *)rec->args;
  if (a->event != *id) return 0;
  return a->flags & cudaEventDisableTiming ? 1 : 2;
}
static int recorded_event(void *ctx, const struct ferry_record *rec) {
  struct ev_scan *e = ctx;
  if (rec->call != FERRY_CALL_event_record) return 0;
  if (e->n == e->cap) {
    size_t cap = e->cap ? e->cap * 2 : 16;
    uint32_t *p = realloc(e->ids, cap * sizeof *p);
    if (!p) return 1;
    e->ids = p;
    e->cap = cap;
  }
  e->ids[e->n++] = ((const struct ferry_event_record_args *)(const void *)rec->args)->event;
  return 0;
}

/* Their timestamps stay on the GPU the vGPU leaves; the offsets between them are
   read now, so cudaEventElapsedTime keeps giving the times the program
   measured (replay records them again locally, so they are complete). */
int ferry_pre_capture(struct ferry_vgpu *v) {
  struct ev_scan scan = {NULL, 0, 0};
  if (ferry_recorder_foreach(&v->log, recorded_event, &scan)) {
    free(scan.ids);
    return -1;
  }
  struct ferry_pre_event *pre = malloc((scan.n ? scan.n : 1) * sizeof *pre);
  size_t n = 0;
  float last = 0;
  for (size_t i = 0; pre && i < scan.n; i++) {
    if (ferry_recorder_foreach(&v->log, timing_of, &scan.ids[i]) != 2) continue;
    float off = 0;
    if (n) {
      struct ferry_event_elapsed_args a = {pre[0].id, scan.ids[i]};
      struct ferry_event_elapsed_rets r;
      if (ferry_source_call(v, FERRY_CALL_event_elapsed, &a, &r, NULL)) continue;
      off = r.ms;
    }
    pre[n++] = (struct ferry_pre_event){scan.ids[i], off};
    if (off > last) last = off;
  }
  free(scan.ids);
  if (!pre) return -1;
  pthread_mutex_lock(&v->pre_lock);
  free(v->pre_events);
  v->pre_events = pre;
  v->npre = n;
  v->pre_last_ms = last;
  pthread_mutex_unlock(&v->pre_lock);
  return 0;
}

static long pre_find(struct ferry_vgpu *v, uint32_t id) {
  for (size_t i = 0; i < v->npre; i++)
    if (v->pre_events[i].id == id) return (long)i;
  return -1;
}

void ferry_pre_forget(struct ferry_vgpu *v, uint32_t id) {
  if (!__atomic_load_n(&v->generation, __ATOMIC_ACQUIRE) || !__atomic_load_n(&v->npre, __ATOMIC_RELAXED))
    return; /* the usual case: nothing to forget, no lock on the event path */
  pthread_mutex_lock(&v->pre_lock);
  long i = pre_find(v, id);
  if (i >= 0) v->pre_events[i] = v->pre_events[--v->npre];
  pthread_mutex_unlock(&v->pre_lock);
}

int ferry_pre_elapsed(struct ferry_vgpu *v, uint32_t a, uint32_t b, float *ms, int *rc) {
  if (!__atomic_load_n(&v->generation, __ATOMIC_ACQUIRE) || !__atomic_load_n(&v->npre, __ATOMIC_RELAXED))
    return 0;
  pthread_mutex_lock(&v->pre_lock);
  long ia = pre_find(v, a), ib = pre_find(v, b);
  float oa = ia >= 0 ? v->pre_events[ia].off_ms : 0, ob = ib >= 0 ? v->pre_events[ib].off_ms : 0;
  float last = v->pre_last_ms;
  double bridge = v->bridge_ms;
  pthread_mutex_unlock(&v->pre_lock);
  if (ia < 0 && ib < 0) return 0;
  *rc = 0;
  if (ia >= 0 && ib >= 0) { /* both on the remote GPU: exactly as measured there */
    *ms = ob - oa;
    return 1;
  }
  /* one on each side: remote time to the drain, the migration, local time
     from the re-recording (a's or b's local twin marks the switch) */
  uint32_t pre_id = ia >= 0 ? a : b, post_id = ia >= 0 ? b : a;
  struct ferry_event_elapsed_args e = {pre_id, post_id};
  struct ferry_event_elapsed_rets r;
  *rc = ferry_call(v, FERRY_CALL_event_elapsed, &e, &r, NULL);
  if (*rc) return 1;
  double span = (last - (ia >= 0 ? oa : ob)) + bridge + r.ms;
  *ms = (float)(ia >= 0 ? span : -span);
  return 1;
}
