/*
 * Driver API: streams and events. They are the runtime front end's
 * handles (a CUstream is a cudaStream_t, a CUevent a cudaEvent_t), and
 * CU_STREAM_LEGACY / CU_STREAM_PER_THREAD are cudaStreamLegacy /
 * cudaStreamPerThread, so either front end can use what the other made.
 */
#include <cuda_profiler_api.h>

#include "shim/driver/cu.h"

#define S(s) ((cudaStream_t)(s))
#define E(e) ((cudaEvent_t)(e))

/* CU_STREAM_NON_BLOCKING is cudaStreamNonBlocking */
CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
  return CURRENT_THEN(cudaStreamCreateWithFlags((cudaStream_t *)s, flags));
}
CUresult cuStreamCreateWithPriority(CUstream *s, unsigned int flags, int priority) {
  return CURRENT_THEN(cudaStreamCreateWithPriority((cudaStream_t *)s, flags, priority));
}
CUresult cuStreamDestroy(CUstream s) { return READY_THEN(cudaStreamDestroy(S(s))); }
CUresult cuStreamSynchronize(CUstream s) { return READY_THEN(cudaStreamSynchronize(S(s))); }
CUresult cuStreamSynchronize_ptsz(CUstream s) { return READY_THEN(cudaStreamSynchronize_ptsz(S(s))); }
CUresult cuStreamQuery(CUstream s) { return READY_THEN(cudaStreamQuery(S(s))); }
CUresult cuStreamQuery_ptsz(CUstream s) { return READY_THEN(cudaStreamQuery_ptsz(S(s))); }
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  return READY_THEN(cudaStreamWaitEvent(S(s), E(e), flags));
}
CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags) {
  return READY_THEN(cudaStreamWaitEvent_ptsz(S(s), E(e), flags));
}
CUresult cuStreamGetFlags(CUstream s, unsigned int *flags) {
  return READY_THEN(cudaStreamGetFlags(S(s), flags));
}
CUresult cuStreamGetFlags_ptsz(CUstream s, unsigned int *flags) {
  return READY_THEN(cudaStreamGetFlags_ptsz(S(s), flags));
}
CUresult cuStreamGetPriority(CUstream s, int *priority) {
  return READY_THEN(cudaStreamGetPriority(S(s), priority));
}
CUresult cuStreamGetPriority_ptsz(CUstream s, int *priority) {
  return READY_THEN(cudaStreamGetPriority_ptsz(S(s), priority));
}

static CUresult stream_ctx(CUstream s, CUcontext *ctx, int per_thread) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  struct ferry_vgpu *v;
  uint32_t id;
  CUresult rc = ferry_cu_ready();
  if (!rc) rc = FERRY_CU_RT(ferry_stream_resolve(S(s), per_thread, &v, &id));
  if (!rc) *ctx = ferry_cu_primary(v->index);
  return rc;
}
CUresult cuStreamGetCtx(CUstream s, CUcontext *ctx) { return stream_ctx(s, ctx, 0); }
CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext *ctx) { return stream_ctx(s, ctx, 1); }

/* CUstreamCallback and cudaStreamCallback_t differ only in their handle types */
CUresult cuStreamAddCallback(CUstream s, CUstreamCallback cb, void *user, unsigned int flags) {
  return READY_THEN(cudaStreamAddCallback(S(s), (cudaStreamCallback_t)(void (*)(void))cb, user, flags));
}
CUresult cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void *user, unsigned int flags) {
  return READY_THEN(cudaStreamAddCallback_ptsz(S(s), (cudaStreamCallback_t)(void (*)(void))cb, user, flags));
}
CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *user) {
  return READY_THEN(cudaLaunchHostFunc(S(s), fn, user));
}
CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *user) {
  return READY_THEN(cudaLaunchHostFunc_ptsz(S(s), fn, user));
}

/* CU_EVENT_* flags are the cudaEvent* flags */
CUresult cuEventCreate(CUevent *e, unsigned int flags) {
  return CURRENT_THEN(cudaEventCreateWithFlags((cudaEvent_t *)e, flags));
}
CUresult cuEventDestroy(CUevent e) { return READY_THEN(cudaEventDestroy(E(e))); }
CUresult cuEventRecord(CUevent e, CUstream s) { return READY_THEN(cudaEventRecord(E(e), S(s))); }
CUresult cuEventRecord_ptsz(CUevent e, CUstream s) {
  return READY_THEN(cudaEventRecord_ptsz(E(e), S(s)));
}
/* CU_EVENT_RECORD_EXTERNAL is cudaEventRecordExternal: it matters while capturing */
CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags) {
  return READY_THEN(cudaEventRecordWithFlags(E(e), S(s), flags));
}
CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int flags) {
  return READY_THEN(cudaEventRecordWithFlags_ptsz(E(e), S(s), flags));
}
CUresult cuEventSynchronize(CUevent e) { return READY_THEN(cudaEventSynchronize(E(e))); }
CUresult cuEventQuery(CUevent e) { return READY_THEN(cudaEventQuery(E(e))); }
CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
  return READY_THEN(cudaEventElapsedTime(ms, E(start), E(end)));
}

/* the first version has the same form */
#undef cuEventElapsedTime
CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
  return cuEventElapsedTime_v2(ms, start, end);
}

/* stream capture: graph.c */

/* a stream's id (its handle: unique while it lives) and device */
static CUresult stream_id(CUstream s, int per_thread, unsigned long long *out, CUdevice *dev) {
  struct ferry_vgpu *v;
  uint32_t id;
  CUresult rc = ferry_cu_ready();
  if (!rc) rc = FERRY_CU_RT(ferry_stream_resolve(S(s), per_thread, &v, &id));
  if (rc) return rc;
  if (out) *out = (uintptr_t)s > 2 ? (unsigned long long)(uintptr_t)s : ((unsigned long long)v->index << 8 | id);
  if (dev) *dev = v->index;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetId(CUstream s, unsigned long long *id) {
  return id ? stream_id(s, 0, id, NULL) : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuStreamGetId_ptsz(CUstream s, unsigned long long *id) {
  return id ? stream_id(s, 1, id, NULL) : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuStreamGetDevice(CUstream s, CUdevice *dev) {
  return dev ? stream_id(s, 0, NULL, dev) : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuStreamGetDevice_ptsz(CUstream s, CUdevice *dev) {
  return dev ? stream_id(s, 1, NULL, dev) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuProfilerStart(void) { return READY_THEN(cudaProfilerStart()); }
CUresult cuProfilerStop(void) { return READY_THEN(cudaProfilerStop()); }
