/*
 * The executor's session: opening (primary context, the client's arena at
 * its exact address), closing, the hello facts, and the dispatch table
 * that runs one decoded call and latches the errors of ASYNC calls.
 */
#include "executor/exec_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* CUresult values that have a cudaError_t of the same number and meaning */
static const int same_code[] = {
    0,   1,   2,   3,   4,   5,   6,   7,   8,   34,  36,  46,  100, 101, 102, 200, 201, 205,
    206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223,
    224, 225, 226, 300, 301, 302, 303, 304, 400, 401, 402, 500, 600, 700, 701, 702, 703, 704,
    705, 708, 709, 710, 711, 712, 713, 714, 715, 716, 717, 718, 719, 720, 721, 800, 801, 802,
    803, 804, 805, 806, 807, 808, 809, 810, 811, 812, 900, 901, 902, 903, 904, 905, 906, 907,
    908, 909, 910, 911, 912, 913, 914, 915, 999};

int ferry_cuda_error_from_cu(int cu_result) {
  switch (cu_result) {
  /* no runtime counterpart: the nearest meaning */
  case CUDA_ERROR_CONTEXT_ALREADY_CURRENT: return EXEC_INVALID_VALUE;
  case CUDA_ERROR_KEY_ROTATION: return EXEC_UNKNOWN;
  default: break;
  }
  for (size_t i = 0; i < sizeof same_code / sizeof same_code[0]; i++)
    if (same_code[i] == cu_result)
      return cu_result;
  return EXEC_UNKNOWN;
}

void *exec_ret_alloc(struct ferry_exec *ex, int slot, size_t n) {
  free(ex->ret_buf[slot]);
  ex->ret_buf[slot] = malloc(n ? n : 1);
  return ex->ret_buf[slot];
}

int exec_reserve_arena(struct ferry_exec *ex, char *err, size_t errlen) {
  CUdeviceptr got = 0;
  CUresult r = ex->d->MemAddressReserve(&got, ex->arena_size, 0, ex->arena_base, 0);
  if (r != CUDA_SUCCESS) {
    snprintf(err, errlen, "cannot reserve the device arena at 0x%llx (%llu bytes): CUresult %d",
             (unsigned long long)ex->arena_base, (unsigned long long)ex->arena_size, (int)r);
    return -1;
  }
  if (got != ex->arena_base) {
    /* device pointers must equal the client's: never relocate */
    ex->d->MemAddressFree(got, ex->arena_size);
    snprintf(err, errlen,
             "cannot reserve the device arena at 0x%llx (%llu bytes): the driver placed it at "
             "0x%llx, so that range is already in use in this process",
             (unsigned long long)ex->arena_base, (unsigned long long)ex->arena_size,
             (unsigned long long)got);
    return -1;
  }
  ex->arena_ok = 1;
  return 0;
}

struct ferry_exec *ferry_exec_open(const struct ferry_driver *drv, unsigned gpu,
                                   uint64_t arena_base, uint64_t arena_size, char *err,
                                   size_t errlen) {
  return ferry_exec_open_local(drv, gpu, arena_base, arena_size, NULL, NULL, err, errlen);
}

const struct ferry_driver *ferry_exec_driver(const struct ferry_exec *ex) { return ex->d; }
CUcontext ferry_exec_context(const struct ferry_exec *ex) { return ex->ctx; }
int ferry_exec_stream(struct ferry_exec *ex, uint32_t id, CUstream *out) {
  return exec_stream(ex, id, out);
}

struct ferry_exec *ferry_exec_open_local(const struct ferry_driver *drv, unsigned gpu,
                                         uint64_t arena_base, uint64_t arena_size,
                                         void (*before_reserve)(void *ctx), void *ctx, char *err,
                                         size_t errlen) {
  CUresult r;
  int count = 0;
  /* measured on driver 580: a host mapping over the range while the driver
     initialises and creates the context makes the later hint fail even
     after the mapping is gone, so the placeholder goes first */
  if (before_reserve)
    before_reserve(ctx);
  if ((r = drv->Init(0)) != CUDA_SUCCESS) {
    snprintf(err, errlen, "cuInit failed (%d): no usable GPU driver", (int)r);
    return NULL;
  }
  if ((r = drv->DeviceGetCount(&count)) != CUDA_SUCCESS) {
    snprintf(err, errlen, "cuDeviceGetCount failed (%d)", (int)r);
    return NULL;
  }
  if (gpu >= (unsigned)count) {
    snprintf(err, errlen, "GPU %u out of range: this %s has %d GPU(s)", gpu,
             before_reserve ? "machine" : "server", count);
    return NULL;
  }
  struct ferry_exec *ex = calloc(1, sizeof *ex);
  if (!ex) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  ex->d = drv;
  ex->gpu = gpu;
  ex->arena_base = arena_base;
  ex->arena_size = arena_size;
  if ((r = drv->DeviceGet(&ex->dev, (int)gpu)) != CUDA_SUCCESS ||
      (r = drv->DevicePrimaryCtxRetain(&ex->ctx, ex->dev)) != CUDA_SUCCESS) {
    snprintf(err, errlen, "cannot open GPU %u (%d)", gpu, (int)r);
    free(ex);
    return NULL;
  }
  ex->ctx_held = 1;
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = ex->dev}};
  if ((r = drv->CtxSetCurrent(ex->ctx)) != CUDA_SUCCESS ||
      (r = drv->MemGetAllocationGranularity(&ex->gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) !=
          CUDA_SUCCESS) {
    snprintf(err, errlen, "GPU %u: no virtual memory management support (%d)", gpu, (int)r);
    goto fail;
  }
  if (arena_size == 0 || arena_base % ex->gran || arena_size % ex->gran ||
      arena_base + arena_size < arena_base) {
    snprintf(err, errlen, "arena 0x%llx + %llu bytes is not aligned to the GPU's %zu-byte granularity",
             (unsigned long long)arena_base, (unsigned long long)arena_size, ex->gran);
    goto fail;
  }
  if (exec_reserve_arena(ex, err, errlen))
    goto fail;
  return ex;
fail:
  drv->DevicePrimaryCtxRelease(ex->dev);
  free(ex);
  return NULL;
}

static void free_all(struct ferry_exec *ex, int driver_ok) {
  exec_fail_pending(ex, driver_ok);
  exec_free_host(ex, driver_ok);
  exec_free_graphs(ex, driver_ok); /* before the functions and events they use */
  exec_free_staging(ex, driver_ok);
  exec_free_modules(ex, driver_ok);
  exec_free_hash(ex, driver_ok);
  exec_free_streams_events(ex, driver_ok);
  exec_free_arrays(ex, driver_ok);
  exec_free_memory(ex, driver_ok);
  exec_free_ctx_objects(ex);
}

void ferry_exec_close(struct ferry_exec *ex) {
  if (!ex)
    return;
  const struct ferry_driver *d = ex->d;
  d->CtxSetCurrent(ex->ctx);
  /* after a sticky error nothing can be freed one by one: reset instead */
  int ok = d->CtxSynchronize() == CUDA_SUCCESS;
  free_all(ex, ok);
  while (ex->pend_head) { /* nobody will collect them now */
    struct exec_pending *p = ex->pend_head;
    ex->pend_head = p->next;
    free(p);
  }
  ex->npend = 0;
  if (!ok)
    d->DevicePrimaryCtxReset(ex->dev);
  if (ex->ctx_held)
    d->DevicePrimaryCtxRelease(ex->dev);
  d->CtxSetCurrent(NULL);
  free(ex->ret_buf[0]);
  free(ex->ret_buf[1]);
  free(ex->param_buf);
  free(ex->param_ptrs);
  free(ex->maps);
  free(ex->streams);
  free(ex->events);
  free(ex->mods);
  free(ex->host_regs);
  free(ex->ctx_objects);
  free(ex->gexecs);
  free(ex);
}

int ferry_exec_describe(struct ferry_exec *ex, struct ferry_hello_rets *r, char *name_buf,
                        size_t name_len, int32_t *attrs, unsigned nattrs, uint8_t uuid[16]) {
  const struct ferry_driver *d = ex->d;
  CUresult res;
  size_t total = 0;
  int version = 0;
  CUuuid id;
  memset(r, 0, sizeof *r);
  if (name_len == 0)
    return EXEC_INVALID_VALUE;
  name_buf[0] = '\0';
  if ((res = d->DeviceGetName(name_buf, (int)(name_len > 0x7fffffff ? 0x7fffffff : name_len),
                              ex->dev)) ||
      (res = d->DeviceTotalMem(&total, ex->dev)) || (res = d->DriverGetVersion(&version)) ||
      (res = d->DeviceGetUuid(&id, ex->dev)))
    return CU(res);
  memcpy(uuid, id.bytes, 16);
  for (unsigned i = 0; i < nattrs; i++) {
    int v = 0;
    if (i == 0 || d->DeviceGetAttribute(&v, (CUdevice_attribute)i, ex->dev) != CUDA_SUCCESS)
      v = 0;
    attrs[i] = v;
  }
  r->name = name_buf;
  r->total_mem = total;
  r->granularity = ex->gran;
  r->driver_version = version;
  r->uuid = (ferry_blob){uuid, 16};
  r->attrs = (ferry_blob){attrs, nattrs * (uint32_t)sizeof(int32_t)};
  return EXEC_OK;
}

int ferry_x_hello(struct ferry_exec *ex, const struct ferry_hello_args *a,
                  struct ferry_hello_rets *r, struct ferry_io *io) {
  (void)ex, (void)a, (void)r, (void)io;
  return EXEC_INVALID_VALUE; /* the server answers hello with ferry_exec_describe */
}

/* data connections are the session's (server/stripe.c); a peer without a
   session (local mode) has none */
int ferry_x_stripe_open(struct ferry_exec *ex, const struct ferry_stripe_open_args *a,
                        struct ferry_stripe_open_rets *r, struct ferry_io *io) {
  (void)ex, (void)a, (void)r, (void)io;
  return EXEC_INVALID_VALUE;
}

int ferry_x_stripe_attach(struct ferry_exec *ex, const struct ferry_stripe_attach_args *a,
                          struct ferry_stripe_attach_rets *r, struct ferry_io *io) {
  (void)ex, (void)a, (void)r, (void)io;
  return EXEC_INVALID_VALUE;
}

/* calling through the exact type: one thunk per call */
typedef int (*exec_handler)(struct ferry_exec *, const void *, void *, struct ferry_io *);
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  static int thunk_##name(struct ferry_exec *ex, const void *a, void *r, struct ferry_io *io) { \
    return ferry_x_##name(ex, a, r, io);                                                       \
  }
#include "protocol/calls.def"
#undef FERRY_CALL

static const exec_handler handlers[FERRY_CALL_LIMIT] = {
#define FERRY_CALL(id, name, flags, args, rets) [FERRY_CALL_##name] = thunk_##name,
#include "protocol/calls.def"
#undef FERRY_CALL
};

int exec_bad_handle(struct ferry_exec *ex, const char *kind, uint32_t id) {
  if (!ex->violation[0])
    snprintf(ex->violation, sizeof ex->violation, "%s id %" PRIu32 " was never created", kind, id);
  return EXEC_INVALID_HANDLE;
}

const char *ferry_exec_violation(const struct ferry_exec *ex) {
  return ex->violation[0] ? ex->violation : NULL;
}

int ferry_exec_call(struct ferry_exec *ex, unsigned call, const void *args, void *rets,
                    struct ferry_io *io) {
  if (!ferry_call_valid(call))
    return EXEC_INVALID_VALUE;
  free(ex->ret_buf[0]);
  free(ex->ret_buf[1]);
  ex->ret_buf[0] = ex->ret_buf[1] = NULL;
  ex->violation[0] = '\0';
  static struct ferry_io no_io;
  int rc = handlers[call](ex, args, rets, io ? io : &no_io);
  if ((ferry_calls[call].flags & ASYNC) && rc != EXEC_OK && ex->latched == EXEC_OK)
    ex->latched = rc;
  if (rc != EXEC_OK && ferry_debug_enabled())
    ferry_debug("%s failed with cudaError %d", ferry_calls[call].name, rc);
  return rc;
}

/* bulk adapters: bytes come from and go to plain memory */
struct mem_in {
  const char *p;
  uint64_t left;
};
static int mem_read(void *ctx, void *dst, size_t n) {
  struct mem_in *m = ctx;
  if (n > m->left)
    return -1;
  memcpy(dst, m->p, n);
  m->p += n;
  m->left -= n;
  return 0;
}
struct mem_out {
  char *p;
  uint64_t cap, len;
};
static int mem_begin(void *ctx, uint64_t len) {
  struct mem_out *m = ctx;
  return len > m->cap ? -1 : 0;
}
static int mem_write(void *ctx, const void *p, size_t n) {
  struct mem_out *m = ctx;
  if (m->len + n > m->cap)
    return -1;
  memcpy(m->p + m->len, p, n);
  m->len += n;
  return 0;
}

int ferry_exec_call_mem(struct ferry_exec *ex, unsigned call, const void *args, void *rets,
                        const struct ferry_bulk *bulk) {
  if (!ferry_call_valid(call))
    return EXEC_INVALID_VALUE;
  unsigned flags = ferry_calls[call].flags;
  struct mem_in in = {bulk ? bulk->in : NULL, bulk ? bulk->in_len : 0};
  struct mem_out out = {bulk ? bulk->out : NULL, bulk ? bulk->out_len : 0, 0};
  struct ferry_bulk_in bin = {in.left, mem_read, &in};
  struct ferry_bulk_out bout = {mem_begin, mem_write, &out};
  struct ferry_io io = {(flags & BULK_IN) ? &bin : NULL, (flags & BULK_OUT) ? &bout : NULL};
  return ferry_exec_call(ex, call, args, rets, &io);
}

int ferry_exec_take_async_error(struct ferry_exec *ex) {
  int rc = ex->latched;
  ex->latched = EXEC_OK;
  return rc;
}

/* ---- device-wide calls ---- */

int ferry_x_device_reset(struct ferry_exec *ex, const struct ferry_device_reset_args *a,
                         struct ferry_device_reset_rets *r, struct ferry_io *io) {
  (void)a, (void)r, (void)io;
  const struct ferry_driver *d = ex->d;
  free_all(ex, d->CtxSynchronize() == CUDA_SUCCESS);
  CUresult res = d->DevicePrimaryCtxReset(ex->dev);
  if (res != CUDA_SUCCESS)
    return CU(res);
  /* like cudaDeviceReset: errors of earlier work are gone with it */
  ex->latched = EXEC_OK;
  d->DevicePrimaryCtxRelease(ex->dev);
  ex->ctx_held = 0;
  if ((res = d->DevicePrimaryCtxRetain(&ex->ctx, ex->dev)) != CUDA_SUCCESS) {
    /* measured on driver 580: after a kernel fault no reset brings CUDA
       back in this process; the client has to end the session */
    if (res == CUDA_ERROR_ILLEGAL_ADDRESS)
      ferry_log("GPU %u: a kernel fault left CUDA unusable in this session; reconnect to go on",
                ex->gpu);
    else
      ferry_log("GPU %u: cannot re-open the primary context after a reset (%d)", ex->gpu, (int)res);
    return CU(res);
  }
  ex->ctx_held = 1;
  if ((res = d->CtxSetCurrent(ex->ctx)) != CUDA_SUCCESS)
    return CU(res);
  char err[256];
  if (exec_reserve_arena(ex, err, sizeof err)) {
    ferry_log("GPU %u after reset: %s", ex->gpu, err);
    return EXEC_MEMORY_ALLOCATION;
  }
  return EXEC_OK;
}

int ferry_x_set_device_flags(struct ferry_exec *ex, const struct ferry_set_device_flags_args *a,
                             struct ferry_set_device_flags_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return CU(ex->d->DevicePrimaryCtxSetFlags(ex->dev, a->flags));
}

int ferry_x_device_set_limit(struct ferry_exec *ex, const struct ferry_device_set_limit_args *a,
                             struct ferry_device_set_limit_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return CU(ex->d->CtxSetLimit((CUlimit)a->limit, a->value));
}

int ferry_x_device_get_limit(struct ferry_exec *ex, const struct ferry_device_get_limit_args *a,
                             struct ferry_device_get_limit_rets *r, struct ferry_io *io) {
  (void)io;
  size_t v = 0;
  int rc = CU(ex->d->CtxGetLimit(&v, (CUlimit)a->limit));
  r->value = v;
  return rc;
}

int ferry_x_device_set_cache_config(struct ferry_exec *ex,
                                    const struct ferry_device_set_cache_config_args *a,
                                    struct ferry_device_set_cache_config_rets *r,
                                    struct ferry_io *io) {
  (void)r, (void)io;
  return CU(ex->d->CtxSetCacheConfig((CUfunc_cache)a->config));
}

int ferry_x_mem_get_info(struct ferry_exec *ex, const struct ferry_mem_get_info_args *a,
                         struct ferry_mem_get_info_rets *r, struct ferry_io *io) {
  (void)a, (void)io;
  size_t f = 0, t = 0;
  int rc = CU(ex->d->MemGetInfo(&f, &t));
  r->free_bytes = f;
  r->total_bytes = t;
  return rc;
}

int ferry_x_stream_priority_range(struct ferry_exec *ex,
                                  const struct ferry_stream_priority_range_args *a,
                                  struct ferry_stream_priority_range_rets *r, struct ferry_io *io) {
  (void)a, (void)io;
  int least = 0, greatest = 0;
  int rc = CU(ex->d->CtxGetStreamPriorityRange(&least, &greatest));
  r->least = least;
  r->greatest = greatest;
  return rc;
}

int ferry_x_profiler(struct ferry_exec *ex, const struct ferry_profiler_args *a,
                     struct ferry_profiler_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return CU(a->start ? ex->d->ProfilerStart() : ex->d->ProfilerStop());
}
