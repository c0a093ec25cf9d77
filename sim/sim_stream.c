/*
 * Streams and events. Work runs at enqueue time, so every stream is always
 * idle; events still carry timestamps so that elapsed times are real.
 * Streams belong to the context current at creation. Events too, but as in
 * the driver's documentation a stream may wait on another context's event,
 * and querying, synchronising or destroying an event needs no context.
 */
#include "sim/sim.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

CUresult sim_StreamCreateWithPriority(CUstream *stream, unsigned int flags, int priority) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!stream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_stream *s = calloc(1, sizeof *s);
  if (!s)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  s->obj.kind = SIM_STREAM;
  s->flags = flags;
  /* like CUDA, out-of-range priorities are clamped to [greatest, least] */
  s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
  if (sim_register(s)) {
    free(s);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  *stream = (CUstream)s;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_StreamDestroy(CUstream stream) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_stream *s = sim_lookup(stream, SIM_STREAM);
  if (!s)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  sim_unregister(s);
  free(s);
  return sim_leave(CUDA_SUCCESS);
}

static CUresult stream_noop(CUstream stream) {
  CUresult r = sim_enter();
  if (r)
    return r;
  return sim_leave(sim_stream_ok(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

CUresult sim_StreamSynchronize(CUstream stream) { return stream_noop(stream); }
CUresult sim_StreamQuery(CUstream stream) { return stream_noop(stream); }

CUresult sim_StreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!sim_stream_ok(stream) || !sim_lookup_any(event, SIM_EVENT))
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_EventCreate(CUevent *event, unsigned int flags) {
  CUresult r = sim_enter();
  if (r)
    return r;
  const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (!event || (flags & ~known) ||
      ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_event *e = calloc(1, sizeof *e);
  if (!e)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  e->obj.kind = SIM_EVENT;
  e->flags = flags;
  if (sim_register(e)) {
    free(e);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  *event = (CUevent)e;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_EventDestroy(CUevent event) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_event *e = sim_lookup_any(event, SIM_EVENT);
  if (!e)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  sim_unregister(e);
  free(e);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_EventRecord(CUevent event, CUstream stream) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_event *e = sim_lookup(event, SIM_EVENT); /* the stream's context */
  if (!e || !sim_stream_ok(stream))
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  e->recorded = 1;
  e->ns = sim_now_ns();
  return sim_leave(CUDA_SUCCESS);
}

static CUresult event_noop(CUevent event) {
  CUresult r = sim_enter();
  if (r)
    return r;
  return sim_leave(sim_lookup_any(event, SIM_EVENT) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

CUresult sim_EventSynchronize(CUevent event) { return event_noop(event); }
CUresult sim_EventQuery(CUevent event) { return event_noop(event); }

CUresult sim_EventElapsedTime(float *ms, CUevent start, CUevent end) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_event *a = sim_lookup_any(start, SIM_EVENT), *b = sim_lookup_any(end, SIM_EVENT);
  if (!ms)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  /* as documented in cuda.h: never recorded or timing disabled is an
     invalid handle; so are events of two contexts */
  if (!a || !b || a->obj.dev != b->obj.dev || !a->recorded || !b->recorded ||
      (a->flags & CU_EVENT_DISABLE_TIMING) || (b->flags & CU_EVENT_DISABLE_TIMING))
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  *ms = (float)((double)((int64_t)(b->ns - a->ns)) / 1e6);
  return sim_leave(CUDA_SUCCESS);
}

/* Interprocess events. The simulation runs work when it is enqueued, so an
   event in another process is complete whenever it is looked at: the
   opened event is a fresh one of this process. The handle names the
   exporter (its pid and event), so that a handle that is not one is
   refused, and one opened in its own process is refused as CUDA does. */
#define SIM_IPC_EVENT_MAGIC "ferry-sim-event"

struct sim_ipc_event {
  char magic[16];
  int64_t pid;
  uint64_t event;
};
_Static_assert(sizeof(struct sim_ipc_event) <= sizeof(CUipcEventHandle), "fits a CUipcEventHandle");

CUresult sim_IpcGetEventHandle(CUipcEventHandle *handle, CUevent event) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_event *e = sim_lookup_any(event, SIM_EVENT);
  if (!e)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!handle || !(e->flags & CU_EVENT_INTERPROCESS))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_ipc_event x = {.magic = SIM_IPC_EVENT_MAGIC, .pid = getpid(),
                            .event = (uint64_t)(uintptr_t)e};
  memset(handle, 0, sizeof *handle);
  memcpy(handle->reserved, &x, sizeof x);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_IpcOpenEventHandle(CUevent *event, CUipcEventHandle handle) {
  struct sim_ipc_event x;
  memcpy(&x, handle.reserved, sizeof x);
  if (!event || memcmp(x.magic, SIM_IPC_EVENT_MAGIC, sizeof x.magic))
    return CUDA_ERROR_INVALID_VALUE;
  if (x.pid == getpid())
    return CUDA_ERROR_INVALID_CONTEXT;
  return sim_EventCreate(event, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
}
