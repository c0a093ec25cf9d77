/*
 * Device selection and queries. Properties and attributes come from the
 * facts each server sent at hello, so they cost no round trip.
 */
#include <string.h>

#include "common/log.h"
#include "shim/core/props.h"
#include "shim/core/link.h"
#include "shim/core/local.h"
#include "shim/core/hooks.h"
#include "shim/runtime/graph.h"

cudaError_t cudaGetDeviceCount(int *count) {
  if (!count) return ferry_ret(cudaErrorInvalidValue);
  int rc = ferry_ensure_init();
  *count = rc ? 0 : ferry.count;
  return ferry_ret(rc);
}

cudaError_t cudaSetDevice(int device) {
  int rc = ferry_ensure_init();
  if (rc) return ferry_ret(rc);
  if (device < 0 || device >= ferry.count) return ferry_ret(cudaErrorInvalidDevice);
  struct ferry_thread *t = ferry_thread();
  t->device = device;
  t->ctx = NULL; /* the device's primary context becomes current (and active), as in CUDA */
  t->ctx_none = 0;
  __atomic_store_n(&ferry.vgpus[device].primary_active, 1, __ATOMIC_RELAXED);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  if (!device) return ferry_ret(cudaErrorInvalidValue);
  int rc = ferry_ensure_init();
  if (rc) return ferry_ret(rc);
  *device = ferry_thread()->device;
  return cudaSuccess;
}

int ferry_vgpu_at(int device, struct ferry_vgpu **v) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (device < 0 || device >= ferry.count) return cudaErrorInvalidDevice;
  *v = &ferry.vgpus[device];
  return 0;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  if (!prop) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v;
  int rc = ferry_vgpu_at(device, &v);
  if (rc) return ferry_ret(rc);
  *prop = v->props;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
  if (!value) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v;
  int rc = ferry_vgpu_at(device, &v);
  if (!rc) rc = ferry_props_attr(v->attrs, FERRY_NATTRS_CLIENT, (int)attr, value);
  return ferry_ret(rc);
}

/* runs one call on this thread's current device */
static int on_current(unsigned call, const void *args, void *rets) {
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  return v ? ferry_call(v, call, args, rets, NULL) : err;
}

cudaError_t cudaDeviceSynchronize(void) {
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  uint64_t at = ferry_mempool_clock(v); /* the frees this synchronization completes */
  struct ferry_device_synchronize_args a = {0};
  int rc = ferry_capture_unsafe(); /* it would wait for capturing streams */
  if (!rc) rc = ferry_call(v, FERRY_CALL_device_synchronize, &a, NULL, NULL);
  if (!rc) ferry_mempool_device_synced(v, at);
  return ferry_ret(rc);
}
cudaError_t cudaProfilerStart(void) {
  struct ferry_profiler_args a = {1};
  return ferry_ret(on_current(FERRY_CALL_profiler, &a, NULL));
}
cudaError_t cudaProfilerStop(void) {
  struct ferry_profiler_args a = {0};
  return ferry_ret(on_current(FERRY_CALL_profiler, &a, NULL));
}

cudaError_t cudaDeviceReset(void) {
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  struct ferry_device_reset_args a = {0};
  int rc = ferry_call(v, FERRY_CALL_device_reset, &a, NULL, NULL);
  if (rc) return ferry_ret(rc);
  /* the server dropped all of this device's memory, modules, streams and events */
  pthread_mutex_lock(&v->arena_lock);
  ferry_arena_reset(&v->arena);
  pthread_mutex_unlock(&v->arena_lock);
  ferry_mempool_reset(v); /* its pools too, as CUDA's */
  ferry_modules_forget(v->index);
  if (ferry_hooks.device_reset) ferry_hooks.device_reset(v->index);
  ferry_streams_forget(v->index);
  ferry_peer_forget(v->index);
  ferry_ipc_forget(v->index); /* after the events, which it counts too */
  ferry_arrays_forget(v->index);
  ferry_gexecs_forget(v->index);
  v->device_flags = 0;
  ferry_thread()->last_error = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  unsigned known = cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax |
                   cudaDeviceSyncMemops;
  if (flags & ~known) return ferry_ret(cudaErrorInvalidValue);
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  struct ferry_set_device_flags_args a = {flags & ~(unsigned)cudaDeviceMapHost};
  int rc = ferry_call(v, FERRY_CALL_set_device_flags, &a, NULL, NULL);
  if (!rc) v->device_flags = flags;
  return ferry_ret(rc);
}

cudaError_t cudaGetDeviceFlags(unsigned int *flags) {
  if (!flags) return ferry_ret(cudaErrorInvalidValue);
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  *flags = v->device_flags;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
  int err, lo, hi;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  if ((err = ferry_priority_range(v, &lo, &hi))) return ferry_ret(err);
  if (least) *least = lo;
  if (greatest) *greatest = hi;
  return cudaSuccess;
}

cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value) {
  struct ferry_device_set_limit_args a = {(uint32_t)limit, value};
  return ferry_ret(on_current(FERRY_CALL_device_set_limit, &a, NULL));
}

cudaError_t cudaDeviceGetLimit(size_t *value, enum cudaLimit limit) {
  if (!value) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_device_get_limit_args a = {(uint32_t)limit};
  struct ferry_device_get_limit_rets r;
  int rc = on_current(FERRY_CALL_device_get_limit, &a, &r);
  if (!rc) *value = r.value;
  return ferry_ret(rc);
}

cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache config) {
  struct ferry_device_set_cache_config_args a = {(uint32_t)config};
  return ferry_ret(on_current(FERRY_CALL_device_set_cache_config, &a, NULL));
}

/* shared memory bank sizes are fixed since Volta: the calls only report it,
   as the driver front end's cuCtx*SharedMemConfig do (miniFE sets 8 bytes) */
cudaError_t cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig config) {
  int err;
  if (config != cudaSharedMemBankSizeDefault && config != cudaSharedMemBankSizeFourByte &&
      config != cudaSharedMemBankSizeEightByte)
    return ferry_ret(cudaErrorInvalidValue);
  return ferry_current(&err) ? cudaSuccess : ferry_ret(err);
}
cudaError_t cudaDeviceGetSharedMemConfig(enum cudaSharedMemConfig *config) {
  int err;
  if (!config) return ferry_ret(cudaErrorInvalidValue);
  if (!ferry_current(&err)) return ferry_ret(err);
  *config = cudaSharedMemBankSizeFourByte;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  struct ferry_mem_get_info_args a = {0};
  struct ferry_mem_get_info_rets r;
  int rc = on_current(FERRY_CALL_mem_get_info, &a, &r);
  if (rc) return ferry_ret(rc);
  if (free_bytes) *free_bytes = r.free_bytes;
  if (total_bytes) *total_bytes = r.total_bytes;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version) {
  if (!version) return ferry_ret(cudaErrorInvalidValue);
  /* like CUDA: 0 when no driver (here: no server) can be reached */
  *version = ferry_ensure_init() ? 0 : ferry.vgpus[0].driver_version;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version) {
  if (!version) return ferry_ret(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  struct ferry_thread *t = ferry_thread();
  cudaError_t e = t->last_error;
  t->last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return ferry_thread()->last_error; }

struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w,
                                                   enum cudaChannelFormatKind f) {
  struct cudaChannelFormatDesc d = {x, y, z, w, f};
  return d;
}
