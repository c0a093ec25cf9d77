/*
 * CUDA IPC of device memory (cudaIpcGetMemHandle, cudaIpcOpenMemHandle,
 * cudaIpcCloseMemHandle; the driver's cuIpc* are the same code), served
 * between programs whose vGPUs are sessions of one ferry-server: the
 * server's broker passes the memory between its sessions
 * (executor/exec_ipc.c, server/broker.c). A handle holds the server's id
 * and a random key (protocol/ipc.h), never an address: every program's
 * vGPU 0 arena lies at the same addresses, so the importer maps the memory
 * at a range of its own arena, reserved as program VMM reserves one, and
 * gets a pointer there. An open handle (or an export) keeps its vGPU from
 * migrating (v->ipc_open).
 */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/log.h"
#include "protocol/ipc.h"
#include "shim/core/link.h"
#include "shim/migrate/migrate.h"
#include "shim/runtime/runtime.h"

/* the arena region of an imported range: a tag vmm.c's handles never carry */
#define IPC_REGION_TAG 0xfd00000000000000ull

struct ipc_export {
  int vgpu;
  uint64_t base; /* the allocation */
  uint8_t key[FERRY_IPC_KEY_LEN];
};
struct ipc_import {
  int vgpu;
  uint8_t key[FERRY_IPC_KEY_LEN];
  uint64_t at, range; /* the reserved and mapped range: the pointers the program got lie in it */
  int refs;           /* opens of handles of it (allocations sharing granules share it) */
};

static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ipc_export *exports;
static size_t nexports, cexports;
static struct ipc_import *imports;
static size_t nimports, cimports;
static uint64_t region_seq;


const char *ferry_ipc_where(const struct ferry_vgpu *v) {
  if (ferry_is_local(v)) return "on a local GPU in this process";
  if (v->link.helper_pid) return "on a local GPU in a ferry-mhelper";
  return NULL;
}

int ferry_ipc_refusal(const char *call, const struct ferry_vgpu *v, unsigned refusal) {
  const char *where = ferry_ipc_where(v);
  switch (refusal) {
  case FERRY_IPC_OTHER_SERVER:
    ferry_log("%s: the handle was made on another ferry-server (or before this one restarted): "
              "CUDA IPC works between programs whose devices are on the same server; returning "
              "cudaErrorInvalidValue", call);
    return cudaErrorInvalidValue;
  case FERRY_IPC_NO_EXPORT:
    ferry_log("%s: the handle names nothing on %s: the memory or event was freed, or the program "
              "that exported it ended; returning cudaErrorMapBufferObjectFailed", call, v->url_text);
    return cudaErrorMapBufferObjectFailed;
  case FERRY_IPC_OWN:
    return cudaErrorDeviceUninitialized; /* CUDA's answer in the exporting process */
  case FERRY_IPC_NO_BROKER:
    ferry_log("%s: device %d runs %s, where ferry serves no CUDA IPC (only between devices on a "
              "ferry-server); returning cudaErrorNotSupported", call, v->index,
              where ? where : "without a ferry-server");
    return cudaErrorNotSupported;
  case FERRY_IPC_TOO_MANY:
    ferry_log("%s: the ferry-server holds as many IPC exports as it may; returning "
              "cudaErrorMemoryAllocation", call);
    return cudaErrorMemoryAllocation;
  case FERRY_IPC_UNSHAREABLE:
    ferry_log("%s: the GPU of %s cannot share its memory as file descriptors; returning "
              "cudaErrorNotSupported", call, v->url_text);
    return cudaErrorNotSupported;
  default:
    ferry_log("%s: the server refused it (reason %u); returning cudaErrorNotSupported", call, refusal);
    return cudaErrorNotSupported;
  }
}

int ferry_ipc_local_refused(const char *call, struct ferry_vgpu *v) {
  return ferry_is_local(v) ? ferry_ipc_refusal(call, v, FERRY_IPC_NO_BROKER) : 0;
}

/* ---- export ---- */

int ferry_ipc_export_mem(void *dev_ptr, struct ferry_ipc_handle *out, const char *call) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  struct ferry_vgpu *v = ferry_vgpu_of(dev_ptr);
  if (!v) return cudaErrorInvalidValue;
  if (ferry_dead(v)) return cudaErrorDevicesUnavailable;
  if ((rc = ferry_ipc_local_refused(call, v))) return rc;
  uint64_t g = v->arena.granularity;
  pthread_mutex_lock(&v->arena_lock); /* the allocation stays while it is exported */
  const struct ferry_region *r = ferry_arena_find(&v->arena, (uint64_t)(uintptr_t)dev_ptr);
  if (!r || r->handle) { /* not an allocation (program VMM, an imported range) */
    pthread_mutex_unlock(&v->arena_lock);
    return cudaErrorInvalidValue;
  }
  uint64_t base = r->addr, size = r->size;
  uint64_t lo = base / g * g, hi = (base + size + g - 1) / g * g;
  struct ferry_ipc_mem_export_args a = {lo, hi - lo};
  struct ferry_ipc_mem_export_rets x;
  rc = ferry_call(v, FERRY_CALL_ipc_mem_export, &a, &x, NULL);
  pthread_mutex_unlock(&v->arena_lock);
  if (!rc && x.refusal) rc = ferry_ipc_refusal(call, v, x.refusal);
  if (!rc && (!x.key.ptr || x.key.len != FERRY_IPC_KEY_LEN || x.at > lo || x.span % g ||
              x.span < hi - x.at))
    rc = cudaErrorUnknown;
  if (rc) return rc;
  /* what is shared is the whole server mappings around the allocation */
  struct ferry_ipc_handle h = {.magic = FERRY_IPC_MEM_MAGIC, .instance = x.instance,
                               .offset = base - x.at, .range = x.span, .size = size};
  memcpy(h.key, x.key.ptr, FERRY_IPC_KEY_LEN);
  pthread_mutex_lock(&ipc_lock);
  size_t i = 0;
  /* one entry per allocation (small ones sharing granules share a key) */
  while (i < nexports && (exports[i].base != base || exports[i].vgpu != v->index ||
                          memcmp(exports[i].key, h.key, FERRY_IPC_KEY_LEN)))
    i++;
  if (i == nexports && !ferry_grow((void **)&exports, &cexports, nexports + 1, sizeof *exports)) {
    exports[nexports++] = (struct ipc_export){.vgpu = v->index, .base = base};
    memcpy(exports[i].key, h.key, FERRY_IPC_KEY_LEN);
    __atomic_add_fetch(&v->ipc_open, 1, __ATOMIC_ACQ_REL);
  }
  pthread_mutex_unlock(&ipc_lock);
  *out = h;
  return 0;
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *dev_ptr) {
  if (!handle) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_ipc_handle h;
  int rc = ferry_ipc_export_mem(dev_ptr, &h, "cudaIpcGetMemHandle");
  if (rc) return ferry_ret(rc);
  memset(handle, 0, sizeof *handle);
  memcpy(handle, &h, sizeof h);
  return cudaSuccess;
}

/* the allocation at addr of v was freed: its export ended on the server */
void ferry_ipc_released(struct ferry_vgpu *v, uint64_t addr) {
  if (!__atomic_load_n(&v->ipc_open, __ATOMIC_ACQUIRE)) return;
  int found = 0;
  pthread_mutex_lock(&ipc_lock);
  for (size_t i = 0; i < nexports && !found; i++)
    if (exports[i].vgpu == v->index && exports[i].base == addr) {
      exports[i] = exports[--nexports];
      found = 1;
    }
  pthread_mutex_unlock(&ipc_lock);
  if (found) ferry_ipc_release(v, 0); /* a move waiting for it may start */
}

/* ---- import ---- */

/* the arena's backend for an imported range: map is the import (also
   program VMM's imported handles, driver/vmm.c) */
static int import_map(void *ctx, uint64_t addr, uint64_t size) {
  struct ferry_ipc_import *c = ctx;
  struct ferry_ipc_mem_import_args a = {.instance = c->instance,
                                        .key = {c->key, FERRY_IPC_KEY_LEN},
                                        .addr = addr, .size = size};
  struct ferry_ipc_mem_import_rets r;
  int rc = ferry_call(c->v, FERRY_CALL_ipc_mem_import, &a, &r, NULL);
  if (!rc && r.refusal) {
    c->refusal = r.refusal;
    rc = cudaErrorInvalidValue; /* the arena stays as it was; the refusal says why */
  }
  return rc;
}
static int import_unmap(void *ctx, uint64_t addr, uint64_t size) {
  (void)size;
  struct ferry_ipc_mem_close_args a = {addr};
  return ferry_call(((struct ferry_ipc_import *)ctx)->v, FERRY_CALL_ipc_mem_close, &a, NULL, NULL);
}

struct ferry_arena_backend ferry_ipc_import_backend(struct ferry_ipc_import *c) {
  return (struct ferry_arena_backend){import_map, import_unmap, c};
}

/* a handle cudaIpcGetMemHandle made through ferry, else one line */
static int parse_mem(const cudaIpcMemHandle_t *in, struct ferry_ipc_handle *h) {
  memcpy(h, in, sizeof *h);
  if (h->magic == FERRY_IPC_MEM_MAGIC && h->range && h->size && h->offset < h->range &&
      h->size <= h->range - h->offset)
    return 0;
  ferry_log("cudaIpcOpenMemHandle: not a memory handle that cudaIpcGetMemHandle made through "
            "ferry; returning cudaErrorInvalidValue");
  return cudaErrorInvalidValue;
}

cudaError_t cudaIpcOpenMemHandle(void **dev_ptr, cudaIpcMemHandle_t handle, unsigned int flags) {
  if (!dev_ptr || (flags & ~(unsigned)cudaIpcMemLazyEnablePeerAccess))
    return ferry_ret(cudaErrorInvalidValue);
  struct ferry_ipc_handle h;
  int rc = parse_mem(&handle, &h);
  if (rc) return ferry_ret(rc);
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return ferry_ret(err);
  return ferry_ret(ferry_ipc_open_mem(v, &h, dev_ptr, "cudaIpcOpenMemHandle"));
}

int ferry_ipc_open_mem(struct ferry_vgpu *v, const struct ferry_ipc_handle *hp, void **dev_ptr,
                       const char *call) {
  struct ferry_ipc_handle h = *hp;
  int rc;
  if ((rc = ferry_ipc_local_refused(call, v))) return rc;
  uint64_t g = v->arena.granularity;
  if (h.range % g) return cudaErrorInvalidValue; /* not this server's granules */
  pthread_mutex_lock(&ipc_lock);
  for (size_t i = 0; i < nexports; i++)
    if (!memcmp(exports[i].key, h.key, FERRY_IPC_KEY_LEN)) rc = cudaErrorDeviceUninitialized;
  for (size_t i = 0; !rc && i < nimports; i++)
    if (imports[i].vgpu == v->index && !memcmp(imports[i].key, h.key, FERRY_IPC_KEY_LEN) &&
        imports[i].range == h.range) {
      /* opened again, the same pointer; or another allocation of the same
         granules (their exports share a key), at its own offset */
      imports[i].refs++;
      *dev_ptr = (void *)(uintptr_t)(imports[i].at + h.offset);
      pthread_mutex_unlock(&ipc_lock);
      return cudaSuccess;
    }
  if (!rc && ferry_grow((void **)&imports, &cimports, nimports + 1, sizeof *imports))
    rc = cudaErrorMemoryAllocation;
  pthread_mutex_unlock(&ipc_lock);
  if (rc) return rc;

  uint64_t at = 0;
  struct ferry_ipc_import c = {v, h.instance, h.key, 0};
  struct ferry_arena_backend be = ferry_ipc_import_backend(&c);
  pthread_mutex_lock(&v->arena_lock);
  rc = ferry_arena_reserve(&v->arena, h.range, g, 0, &at);
  uint64_t tag = IPC_REGION_TAG | (__atomic_add_fetch(&region_seq, 1, __ATOMIC_RELAXED) &
                                   0xffffffffffffull);
  if (!rc && (rc = ferry_arena_map_at(&v->arena, at, h.range, tag, &be)))
    ferry_arena_unreserve(&v->arena, at);
  pthread_mutex_unlock(&v->arena_lock);
  if (c.refusal) rc = ferry_ipc_refusal(call, v, c.refusal);
  else if (rc)
    ferry_log("%s: %s could not map the exported memory (%s)", call, v->url_text,
              cudaGetErrorName((cudaError_t)rc));
  if (rc) return rc;
  pthread_mutex_lock(&ipc_lock);
  struct ipc_import *im = &imports[nimports++]; /* room was made above; only this thread adds */
  *im = (struct ipc_import){.vgpu = v->index, .at = at, .range = h.range,
                            .refs = 1};
  memcpy(im->key, h.key, FERRY_IPC_KEY_LEN);
  pthread_mutex_unlock(&ipc_lock);
  __atomic_add_fetch(&v->ipc_open, 1, __ATOMIC_ACQ_REL);
  *dev_ptr = (void *)(uintptr_t)(at + h.offset);
  return 0;
}

cudaError_t cudaIpcCloseMemHandle(void *dev_ptr) { return ferry_ret(ferry_ipc_close_mem(dev_ptr)); }

int ferry_ipc_close_mem(void *dev_ptr) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  pthread_mutex_lock(&ipc_lock);
  size_t i = 0;
  while (i < nimports && (uint64_t)(uintptr_t)dev_ptr - imports[i].at >= imports[i].range) i++;
  if (i == nimports) {
    pthread_mutex_unlock(&ipc_lock);
    return cudaErrorInvalidValue;
  }
  if (--imports[i].refs > 0) {
    pthread_mutex_unlock(&ipc_lock);
    return 0;
  }
  struct ipc_import im = imports[i];
  imports[i] = imports[--nimports];
  pthread_mutex_unlock(&ipc_lock);
  struct ferry_vgpu *v = &ferry.vgpus[im.vgpu];
  struct ferry_ipc_import c = {v, 0, NULL, 0};
  struct ferry_arena_backend be = ferry_ipc_import_backend(&c);
  pthread_mutex_lock(&v->arena_lock);
  rc = ferry_arena_unmap_at(&v->arena, im.at, &be);
  if (!rc) ferry_arena_unreserve(&v->arena, im.at);
  pthread_mutex_unlock(&v->arena_lock);
  if (rc) { /* still mapped: still open */
    pthread_mutex_lock(&ipc_lock);
    if (!ferry_grow((void **)&imports, &cimports, nimports + 1, sizeof *imports)) imports[nimports++] = im;
    pthread_mutex_unlock(&ipc_lock);
    return rc;
  }
  ferry_ipc_release(v, 0);
  return 0;
}

/* after cudaDeviceReset: the server dropped v's exports and imports */
void ferry_ipc_forget(int vgpu) {
  struct ferry_vgpu *v = &ferry.vgpus[vgpu];
  pthread_mutex_lock(&ipc_lock);
  for (size_t i = 0; i < nexports;)
    if (exports[i].vgpu == vgpu) exports[i] = exports[--nexports];
    else i++;
  pthread_mutex_lock(&v->arena_lock);
  for (size_t i = 0; i < nimports;)
    if (imports[i].vgpu == vgpu) {
      ferry_arena_unreserve(&v->arena, imports[i].at); /* the reset forgot its mapping */
      imports[i] = imports[--nimports];
    } else {
      i++;
    }
  pthread_mutex_unlock(&v->arena_lock);
  pthread_mutex_unlock(&ipc_lock);
  ferry_ipc_release(v, 1);
}
