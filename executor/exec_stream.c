/*
 * Streams and events under client-chosen ids. Ids 0, 1 and 2 name the
 * default streams (legacy NULL, CU_STREAM_LEGACY, per-thread), as the
 * runtime's cudaStream_t values 0, 0x1 and 0x2 do.
 */
#include "executor/exec_internal.h"

#include <stdlib.h>
#include <string.h>

int exec_grow(void ***table, uint32_t *n, uint32_t id) {
  if (id < *n)
    return 0;
  uint32_t cap = *n ? *n : 16;
  while (cap <= id)
    cap *= 2;
  void **p = realloc(*table, cap * sizeof *p);
  if (!p)
    return -1;
  memset(p + *n, 0, (cap - *n) * sizeof *p);
  *table = p;
  *n = cap;
  return 0;
}

int exec_stream(struct ferry_exec *ex, uint32_t id, CUstream *out) {
  switch (id) {
  case 0: *out = NULL; return EXEC_OK;
  case 1: *out = CU_STREAM_LEGACY; return EXEC_OK;
  case 2: *out = CU_STREAM_PER_THREAD; return EXEC_OK;
  default: break;
  }
  if (id >= ex->nstreams || !ex->streams[id]) {
    exec_bad_handle(ex, "stream", id);
    return EXEC_INVALID_HANDLE;
  }
  *out = ex->streams[id];
  return EXEC_OK;
}

int exec_event(struct ferry_exec *ex, uint32_t id, CUevent *out) {
  if (id >= ex->nevents || !ex->events[id]) {
    exec_bad_handle(ex, "event", id);
    return EXEC_INVALID_HANDLE;
  }
  *out = ex->events[id];
  return EXEC_OK;
}

void exec_free_streams_events(struct ferry_exec *ex, int driver_ok) {
  for (uint32_t i = 0; i < ex->nstreams; i++) {
    if (ex->streams[i] && driver_ok)
      ex->d->StreamDestroy(ex->streams[i]);
    ex->streams[i] = NULL;
  }
  for (uint32_t i = 0; i < ex->nevents; i++) {
    if (ex->events[i] && driver_ok)
      ex->d->EventDestroy(ex->events[i]);
    ex->events[i] = NULL;
  }
}

int ferry_x_stream_create(struct ferry_exec *ex, const struct ferry_stream_create_args *a,
                          struct ferry_stream_create_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (a->stream <= 2 || a->stream >= EXEC_MAX_STREAM_ID)
    return EXEC_INVALID_VALUE;
  if (exec_grow((void ***)&ex->streams, &ex->nstreams, a->stream))
    return EXEC_MEMORY_ALLOCATION;
  if (ex->streams[a->stream])
    return EXEC_INVALID_VALUE; /* the client reused a live id */
  CUstream s;
  CUresult res = ex->d->StreamCreateWithPriority(&s, a->flags, a->priority);
  if (res != CUDA_SUCCESS)
    return CU(res);
  ex->streams[a->stream] = s;
  return EXEC_OK;
}

int ferry_x_stream_destroy(struct ferry_exec *ex, const struct ferry_stream_destroy_args *a,
                           struct ferry_stream_destroy_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  CUstream s;
  if (a->stream <= 2) {
    exec_bad_handle(ex, "stream (a default one, destroyed)", a->stream);
    return EXEC_INVALID_HANDLE;
  }
  if (exec_stream(ex, a->stream, &s))
    return EXEC_INVALID_HANDLE;
  CUresult res = ex->d->StreamDestroy(s);
  ex->streams[a->stream] = NULL;
  return CU(res);
}

int ferry_x_stream_wait_event(struct ferry_exec *ex, const struct ferry_stream_wait_event_args *a,
                              struct ferry_stream_wait_event_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  CUstream s;
  CUevent e;
  int rc = exec_stream(ex, a->stream, &s);
  if (!rc)
    rc = exec_event(ex, a->event, &e);
  return rc ? rc : CU(ex->d->StreamWaitEvent(s, e, a->flags));
}

int ferry_x_event_create(struct ferry_exec *ex, const struct ferry_event_create_args *a,
                         struct ferry_event_create_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (a->event >= EXEC_MAX_EVENT_ID)
    return EXEC_INVALID_VALUE;
  if (exec_grow((void ***)&ex->events, &ex->nevents, a->event))
    return EXEC_MEMORY_ALLOCATION;
  if (ex->events[a->event])
    return EXEC_INVALID_VALUE;
  CUevent e;
  CUresult res = ex->d->EventCreate(&e, a->flags);
  if (res != CUDA_SUCCESS)
    return CU(res);
  ex->events[a->event] = e;
  return EXEC_OK;
}

int ferry_x_event_destroy(struct ferry_exec *ex, const struct ferry_event_destroy_args *a,
                          struct ferry_event_destroy_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  CUevent e;
  int rc = exec_event(ex, a->event, &e);
  if (rc)
    return rc;
  exec_ipc_event_gone(ex, a->event);
  CUresult res = ex->d->EventDestroy(e);
  ex->events[a->event] = NULL;
  return CU(res);
}

int ferry_x_event_record(struct ferry_exec *ex, const struct ferry_event_record_args *a,
                         struct ferry_event_record_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  CUstream s;
  CUevent e;
  int rc = exec_event(ex, a->event, &e);
  if (!rc)
    rc = exec_stream(ex, a->stream, &s);
  return rc ? rc : CU(ex->d->EventRecord(e, s));
}

int ferry_x_event_elapsed(struct ferry_exec *ex, const struct ferry_event_elapsed_args *a,
                          struct ferry_event_elapsed_rets *r, struct ferry_io *io) {
  (void)io;
  CUevent s, e;
  float ms = 0;
  int rc = exec_event(ex, a->start, &s);
  if (!rc)
    rc = exec_event(ex, a->end, &e);
  if (!rc)
    rc = CU(ex->d->EventElapsedTime(&ms, s, e));
  r->ms = ms;
  return rc;
}
