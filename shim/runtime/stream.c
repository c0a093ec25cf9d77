/*
 * Streams and events. The program holds ferry handles; each maps to a
 * wire id on the vGPU that created it. The default streams map to fixed
 * ids (0: legacy, 2: per-thread).
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "protocol/ipc.h"
#include "shim/core/link.h"
#include "shim/core/local.h"
#include "shim/migrate/migrate.h"
#include "shim/runtime/graph.h"

#define STREAM_LEGACY_ID 0u
#define STREAM_PER_THREAD_ID 2u

struct ferry_event {
  int vgpu;
  uint32_t id;
  unsigned flags;
  int ipc; /* exported or opened through CUDA IPC: counted in its vGPU's ipc_open */
};

int ferry_stream_resolve(cudaStream_t s, int per_thread, struct ferry_vgpu **v, uint32_t *id) {
  int err;
  uintptr_t raw = (uintptr_t)s;
  if (raw == 0 || raw == (uintptr_t)cudaStreamLegacy || raw == (uintptr_t)cudaStreamPerThread) {
    *v = ferry_current(&err);
    if (!*v) return err;
    int pt = raw == (uintptr_t)cudaStreamPerThread || (raw == 0 && per_thread);
    *id = pt ? STREAM_PER_THREAD_ID : STREAM_LEGACY_ID;
    return 0;
  }
  if ((err = ferry_ensure_init())) return err;
  struct ferry_stream *st = ferry_handle_get(&ferry.streams, raw);
  if (!st) return cudaErrorInvalidResourceHandle;
  *v = &ferry.vgpus[st->vgpu];
  *id = st->id;
  return ferry_dead(*v) ? cudaErrorDevicesUnavailable : 0;
}

int ferry_priority_range(struct ferry_vgpu *v, int *least, int *greatest) {
  if (!__atomic_load_n(&v->priority_known, __ATOMIC_ACQUIRE)) {
    struct ferry_stream_priority_range_args a = {0};
    struct ferry_stream_priority_range_rets r;
    int rc = ferry_call(v, FERRY_CALL_stream_priority_range, &a, &r, NULL);
    if (rc) return rc;
    v->priority_least = r.least;
    v->priority_greatest = r.greatest;
    __atomic_store_n(&v->priority_known, 1, __ATOMIC_RELEASE);
  }
  *least = v->priority_least;
  *greatest = v->priority_greatest;
  return 0;
}

static cudaError_t stream_create(cudaStream_t *out, unsigned flags, int priority) {
  if (!out) return ferry_ret(cudaErrorInvalidValue);
  if (flags & ~(unsigned)cudaStreamNonBlocking) return ferry_ret(cudaErrorInvalidValue);
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  struct ferry_stream *st = calloc(1, sizeof *st);
  if (!st) return ferry_ret(cudaErrorMemoryAllocation);
  uint64_t h = ferry_handle_add(&ferry.streams, st);
  if (!h) {
    free(st);
    return ferry_ret(cudaErrorMemoryAllocation);
  }
  /* CUDA clamps priorities into the device's range */
  int least = 0, greatest = 0;
  ferry_priority_range(v, &least, &greatest);
  if (priority > least) priority = least;
  if (priority < greatest) priority = greatest;
  *st = (struct ferry_stream){v->index, ferry_handle_id(h), flags, priority};
  struct ferry_stream_create_args a = {st->id, flags, priority};
  int rc = ferry_call(v, FERRY_CALL_stream_create, &a, NULL, NULL);
  if (rc) {
    free(ferry_handle_remove(&ferry.streams, h));
    return ferry_ret(rc);
  }
  *out = (cudaStream_t)(uintptr_t)h;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return stream_create(s, 0, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
  return stream_create(s, flags, 0);
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority) {
  return stream_create(s, flags, priority);
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  int err;
  if ((err = ferry_ensure_init())) return ferry_ret(err);
  struct ferry_stream *st = ferry_handle_take(&ferry.streams, (uintptr_t)s);
  if (!st) return ferry_ret(cudaErrorInvalidResourceHandle);
  struct ferry_stream_destroy_args a = {st->id};
  ferry_capture_stream_gone(&ferry.vgpus[st->vgpu], st->id);
  int rc = ferry_call(&ferry.vgpus[st->vgpu], FERRY_CALL_stream_destroy, &a, NULL, NULL);
  ferry_mempool_stream_forget(&ferry.vgpus[st->vgpu], st->id);
  ferry_handle_release(&ferry.streams, (uintptr_t)s); /* its id is free once the server forgot it */
  free(st);
  return ferry_ret(rc);
}

static cudaError_t stream_sync(cudaStream_t s, int per_thread) {
  struct ferry_vgpu *v;
  struct ferry_stream_synchronize_args a;
  int rc = ferry_stream_resolve(s, per_thread, &v, &a.stream);
  if (!rc) rc = ferry_capture_sync(v, a.stream);
  if (rc) return ferry_ret(rc);
  uint64_t at = ferry_mempool_clock(v); /* the frees this synchronization completes */
  rc = ferry_call(v, FERRY_CALL_stream_synchronize, &a, NULL, NULL);
  if (!rc) ferry_mempool_stream_synced(v, a.stream, at);
  return ferry_ret(rc);
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return stream_sync(s, 0); }
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) { return stream_sync(s, 1); }

static cudaError_t stream_query(cudaStream_t s, int per_thread) {
  struct ferry_vgpu *v;
  struct ferry_stream_query_args a;
  int rc = ferry_stream_resolve(s, per_thread, &v, &a.stream);
  if (!rc) rc = ferry_capture_sync(v, a.stream);
  if (!rc) rc = ferry_call(v, FERRY_CALL_stream_query, &a, NULL, NULL);
  /* "not ready" is an answer, not an error: it does not become the last error */
  return rc == cudaErrorNotReady ? cudaErrorNotReady : ferry_ret(rc);
}
cudaError_t cudaStreamQuery(cudaStream_t s) { return stream_query(s, 0); }
cudaError_t cudaStreamQuery_ptsz(cudaStream_t s) { return stream_query(s, 1); }

static cudaError_t stream_info(cudaStream_t s, unsigned *flags, int *priority) {
  uintptr_t raw = (uintptr_t)s;
  int err;
  if ((err = ferry_ensure_init())) return ferry_ret(err);
  if (raw == 0 || raw == (uintptr_t)cudaStreamLegacy || raw == (uintptr_t)cudaStreamPerThread) {
    if (flags) *flags = 0;
    if (priority) *priority = 0;
    return cudaSuccess;
  }
  struct ferry_stream *st = ferry_handle_get(&ferry.streams, raw);
  if (!st) return ferry_ret(cudaErrorInvalidResourceHandle);
  if (flags) *flags = st->flags;
  if (priority) *priority = st->priority;
  return cudaSuccess;
}
cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int *flags) {
  if (!flags) return ferry_ret(cudaErrorInvalidValue);
  return stream_info(s, flags, NULL);
}
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t s, unsigned int *flags) {
  return cudaStreamGetFlags(s, flags);
}
cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority) {
  if (!priority) return ferry_ret(cudaErrorInvalidValue);
  return stream_info(s, NULL, priority);
}
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t s, int *priority) {
  return cudaStreamGetPriority(s, priority);
}

static cudaError_t stream_wait_event(cudaStream_t s, cudaEvent_t e, unsigned flags, int per_thread) {
  struct ferry_vgpu *v;
  struct ferry_stream_wait_event_args a = {.flags = flags};
  int rc = ferry_stream_resolve(s, per_thread, &v, &a.stream);
  if (rc) return ferry_ret(rc);
  struct ferry_event *ev = ferry_handle_get(&ferry.events, (uintptr_t)e);
  if (!ev) return ferry_ret(cudaErrorInvalidResourceHandle);
  if (ev->vgpu == v->index) {
    unsigned sflags = 0;
    stream_info(s, &sflags, NULL);
    rc = ferry_capture_wait(v, a.stream, !(sflags & cudaStreamNonBlocking), e, ev->id, flags);
    if (rc) return ferry_ret(FERRY_CAPTURE_DONE(rc));
  }
  if (ev->vgpu != v->index) {
    /* two vGPUs share no queue: this thread waits for the event, so the
       stream's later work starts after it, as CUDA orders it */
    struct ferry_event_synchronize_args w = {ev->id};
    rc = ferry_call(&ferry.vgpus[ev->vgpu], FERRY_CALL_event_synchronize, &w, NULL, NULL);
    if (!rc) ferry_mempool_event_synced(&ferry.vgpus[ev->vgpu], ev->id);
    return ferry_ret(rc);
  }
  a.event = ev->id;
  rc = ferry_call(v, FERRY_CALL_stream_wait_event, &a, NULL, NULL);
  if (!rc) ferry_mempool_event_waited(v, a.stream, ev->id);
  return ferry_ret(rc);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  return stream_wait_event(s, e, flags, 0);
}
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  return stream_wait_event(s, e, flags, 1);
}

/* ---- events ---- */
static cudaError_t event_create(cudaEvent_t *out, unsigned flags) {
  if (!out) return ferry_ret(cudaErrorInvalidValue);
  unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (flags & ~known) return ferry_ret(cudaErrorInvalidValue);
  /* as CUDA: an interprocess event records no time */
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))
    return ferry_ret(cudaErrorInvalidValue);
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  struct ferry_event *ev = calloc(1, sizeof *ev);
  if (!ev) return ferry_ret(cudaErrorMemoryAllocation);
  uint64_t h = ferry_handle_add(&ferry.events, ev);
  if (!h) {
    free(ev);
    return ferry_ret(cudaErrorMemoryAllocation);
  }
  *ev = (struct ferry_event){v->index, ferry_handle_id(h), flags, 0};
  struct ferry_event_create_args a = {ev->id, flags};
  int rc = ferry_call(v, FERRY_CALL_event_create, &a, NULL, NULL);
  if (rc) {
    free(ferry_handle_remove(&ferry.events, h));
    return ferry_ret(rc);
  }
  *out = (cudaEvent_t)(uintptr_t)h;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return event_create(e, 0); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
  return event_create(e, flags);
}

static int event_of(cudaEvent_t e, struct ferry_event **ev) {
  int err = ferry_ensure_init();
  if (err) return err;
  *ev = ferry_handle_get(&ferry.events, (uintptr_t)e);
  if (!*ev) return cudaErrorInvalidResourceHandle;
  return ferry_dead(&ferry.vgpus[(*ev)->vgpu]) ? cudaErrorDevicesUnavailable : 0;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  int err;
  if ((err = ferry_ensure_init())) return ferry_ret(err);
  struct ferry_event *ev = ferry_handle_take(&ferry.events, (uintptr_t)e);
  if (!ev) return ferry_ret(cudaErrorInvalidResourceHandle);
  struct ferry_event_destroy_args a = {ev->id};
  int rc = ferry_call(&ferry.vgpus[ev->vgpu], FERRY_CALL_event_destroy, &a, NULL, NULL);
  ferry_pre_forget(&ferry.vgpus[ev->vgpu], ev->id);
  ferry_mempool_event_forget(&ferry.vgpus[ev->vgpu], ev->id);
  if (ev->ipc) ferry_ipc_release(&ferry.vgpus[ev->vgpu], 0);
  ferry_handle_release(&ferry.events, (uintptr_t)e); /* its id is free once the server forgot it */
  free(ev);
  return ferry_ret(rc);
}

static cudaError_t event_record(cudaEvent_t e, cudaStream_t s, int per_thread, unsigned flags) {
  struct ferry_event *ev;
  int rc = event_of(e, &ev);
  if (rc) return ferry_ret(rc);
  if (flags & ~(unsigned)cudaEventRecordExternal) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v;
  struct ferry_event_record_args a = {.event = ev->id};
  if ((rc = ferry_stream_resolve(s, per_thread, &v, &a.stream))) return ferry_ret(rc);
  if (v->index != ev->vgpu) return ferry_ret(cudaErrorInvalidResourceHandle);
  /* on a capturing stream: a point of the capture (or, external, a node) */
  if ((rc = ferry_capture_record(v, a.stream, e, ev->id, flags))) return ferry_ret(FERRY_CAPTURE_DONE(rc));
  rc = ferry_call(v, FERRY_CALL_event_record, &a, NULL, NULL);
  if (!rc) ferry_pre_forget(v, ev->id);
  if (!rc) ferry_mempool_event_recorded(v, ev->id, a.stream);
  return ferry_ret(rc);
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { return event_record(e, s, 0, 0); }
cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s) { return event_record(e, s, 1, 0); }
/* cudaEventRecordExternal matters only on a capturing stream */
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int flags) {
  return event_record(e, s, 0, flags);
}
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned int flags) {
  return event_record(e, s, 1, flags);
}

int ferry_event_find(void *e, int *vgpu, uint32_t *id) {
  struct ferry_event *ev;
  int rc = event_of((cudaEvent_t)e, &ev);
  if (rc) return rc;
  *vgpu = ev->vgpu;
  *id = ev->id;
  return 0;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  struct ferry_event *ev;
  int rc = event_of(e, &ev);
  if (!rc) rc = ferry_capture_event_busy(ev->vgpu, ev->id);
  if (rc) return ferry_ret(rc);
  struct ferry_event_synchronize_args a = {ev->id};
  rc = ferry_call(&ferry.vgpus[ev->vgpu], FERRY_CALL_event_synchronize, &a, NULL, NULL);
  if (!rc) ferry_mempool_event_synced(&ferry.vgpus[ev->vgpu], ev->id);
  return ferry_ret(rc);
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  struct ferry_event *ev;
  int rc = event_of(e, &ev);
  if (!rc) rc = ferry_capture_event_busy(ev->vgpu, ev->id);
  if (rc) return ferry_ret(rc);
  struct ferry_event_query_args a = {ev->id};
  rc = ferry_call(&ferry.vgpus[ev->vgpu], FERRY_CALL_event_query, &a, NULL, NULL);
  return rc == cudaErrorNotReady ? cudaErrorNotReady : ferry_ret(rc);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_event *a_ev, *b_ev;
  int rc = event_of(start, &a_ev);
  if (!rc) rc = event_of(end, &b_ev);
  if (rc) return ferry_ret(rc);
  if (a_ev->vgpu != b_ev->vgpu) return ferry_ret(cudaErrorInvalidResourceHandle);
  struct ferry_vgpu *v = &ferry.vgpus[a_ev->vgpu];
  if (ferry_pre_elapsed(v, a_ev->id, b_ev->id, ms, &rc)) return rc ? ferry_ret(rc) : cudaSuccess;
  struct ferry_event_elapsed_args a = {a_ev->id, b_ev->id};
  struct ferry_event_elapsed_rets r;
  rc = ferry_call(v, FERRY_CALL_event_elapsed, &a, &r, NULL);
  if (!rc) *ms = r.ms;
  return rc == cudaErrorNotReady ? cudaErrorNotReady : ferry_ret(rc);
}

/* after cudaDeviceReset: the device's streams and events are gone */
static int on_vgpu(void *obj, void *ctx) { return *(int *)obj == *(int *)ctx; }
void ferry_streams_forget(int vgpu) {
  ferry_handles_remove_if(&ferry.streams, on_vgpu, &vgpu, free);
  ferry_handles_remove_if(&ferry.events, on_vgpu, &vgpu, free);
}

/* ---- host callbacks ----
   A callback runs once the work before it on its stream is done, and the
   work after it waits for it. Waiting for the stream here and then calling
   it in this thread keeps both guarantees; callbacks may not call CUDA, so
   running them in the caller's thread cannot deadlock. */
static cudaError_t add_callback(cudaStream_t s, cudaStreamCallback_t cb, void *user,
                                unsigned flags, int per_thread) {
  if (!cb || flags) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v;
  uint32_t sid;
  int rc = ferry_stream_resolve(s, per_thread, &v, &sid);
  /* CUDA does not capture callbacks either (cudaLaunchHostFunc it does) */
  if (!rc) rc = ferry_capture_refuse(v, sid, "cudaStreamAddCallback / cuStreamAddCallback (as in CUDA; "
                                             "cudaLaunchHostFunc is captured)");
  if (rc) return ferry_ret(rc);
  cudaError_t status = stream_sync(s, per_thread);
  if (status == cudaErrorInvalidResourceHandle || status == cudaErrorDevicesUnavailable ||
      status == cudaErrorNoDevice)
    return status;
  cb(s, status, user);
  return cudaSuccess;
}
cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void *user,
                                  unsigned int flags) {
  return add_callback(s, cb, user, flags, 0);
}
cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb, void *user,
                                       unsigned int flags) {
  return add_callback(s, cb, user, flags, 1);
}

static cudaError_t launch_host_func(cudaStream_t s, cudaHostFn_t fn, void *user, int per_thread) {
  if (!fn) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v;
  uint32_t sid;
  int rc = ferry_stream_resolve(s, per_thread, &v, &sid);
  /* a capturing stream's host function becomes a host node (graph_unroll.c plays it) */
  if (!rc) rc = ferry_capture_host(v, sid, fn, user);
  if (rc) return ferry_ret(FERRY_CAPTURE_DONE(rc));
  cudaError_t status = stream_sync(s, per_thread);
  if (status) return status; /* after an error the function is not called */
  fn(user);
  return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *user) {
  return launch_host_func(s, fn, user, 0);
}
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *user) {
  return launch_host_func(s, fn, user, 1);
}

/* ---- CUDA IPC of events (the memory's is ipc.c): a handle names the
   server's export of the driver's own IPC event handle, so the other
   program's session opens the very event this one records ---- */
cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t e) {
  if (!handle) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_event *ev;
  int rc = event_of(e, &ev);
  if (rc) return ferry_ret(rc);
  if ((ev->flags & (cudaEventInterprocess | cudaEventDisableTiming)) !=
      (cudaEventInterprocess | cudaEventDisableTiming))
    return ferry_ret(cudaErrorInvalidResourceHandle);
  struct ferry_vgpu *v = &ferry.vgpus[ev->vgpu];
  if ((rc = ferry_ipc_local_refused("cudaIpcGetEventHandle", v))) return ferry_ret(rc);
  struct ferry_ipc_event_export_args a = {ev->id};
  struct ferry_ipc_event_export_rets x;
  rc = ferry_call(v, FERRY_CALL_ipc_event_export, &a, &x, NULL);
  if (!rc && x.refusal) rc = ferry_ipc_refusal("cudaIpcGetEventHandle", v, x.refusal);
  if (!rc && (!x.key.ptr || x.key.len != FERRY_IPC_KEY_LEN)) rc = cudaErrorUnknown;
  if (rc) return ferry_ret(rc);
  struct ferry_ipc_handle h = {.magic = FERRY_IPC_EVENT_MAGIC, .instance = x.instance};
  memcpy(h.key, x.key.ptr, FERRY_IPC_KEY_LEN);
  if (!__atomic_exchange_n(&ev->ipc, 1, __ATOMIC_ACQ_REL))
    __atomic_add_fetch(&v->ipc_open, 1, __ATOMIC_ACQ_REL);
  memset(handle, 0, sizeof *handle);
  memcpy(handle, &h, sizeof h);
  return cudaSuccess;
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *out, cudaIpcEventHandle_t handle) {
  if (!out) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_ipc_handle h;
  memcpy(&h, &handle, sizeof h);
  if (h.magic != FERRY_IPC_EVENT_MAGIC) {
    ferry_log("cudaIpcOpenEventHandle: not an event handle that cudaIpcGetEventHandle made "
              "through ferry; returning cudaErrorInvalidValue");
    return ferry_ret(cudaErrorInvalidValue);
  }
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  int rc = ferry_ipc_local_refused("cudaIpcOpenEventHandle", v);
  if (rc) return ferry_ret(rc);
  struct ferry_event *ev = calloc(1, sizeof *ev);
  if (!ev) return ferry_ret(cudaErrorMemoryAllocation);
  uint64_t hv = ferry_handle_add(&ferry.events, ev);
  if (!hv) {
    free(ev);
    return ferry_ret(cudaErrorMemoryAllocation);
  }
  *ev = (struct ferry_event){v->index, ferry_handle_id(hv),
                             cudaEventInterprocess | cudaEventDisableTiming, 1};
  struct ferry_ipc_event_import_args a = {.event = ev->id, .instance = h.instance,
                                          .key = {h.key, FERRY_IPC_KEY_LEN}};
  struct ferry_ipc_event_import_rets x;
  rc = ferry_call(v, FERRY_CALL_ipc_event_import, &a, &x, NULL);
  if (!rc && x.refusal) rc = ferry_ipc_refusal("cudaIpcOpenEventHandle", v, x.refusal);
  if (rc) {
    free(ferry_handle_remove(&ferry.events, hv));
    return ferry_ret(rc);
  }
  __atomic_add_fetch(&v->ipc_open, 1, __ATOMIC_ACQ_REL);
  *out = (cudaEvent_t)(uintptr_t)hv;
  return cudaSuccess;
}
