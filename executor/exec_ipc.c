/*
 * CUDA IPC between sessions of one ferry-server (docs/multigpu.md, "CUDA
 * IPC"). Sessions are sibling processes; what one exports travels to
 * another through the server's broker (server/broker.c) as file
 * descriptors of the driver's memory handles (POSIX_FILE_DESCRIPTOR),
 * beside a small description (the pieces and where they go), or as the
 * driver's own IPC event handle. The importer maps the pieces at a range
 * of its own arena the client reserved: two programs' arenas lie at the
 * same addresses, so the exporter's addresses cannot be used.
 *
 * An allocation may span several mappings, and small allocations share
 * granules: the client exports the granule-aligned range around one
 * allocation, each piece of it a part of one mapping's handle.
 *
 * Peer access between two vGPUs of one program uses the same pair: the
 * peer's memory is mapped at its own addresses, in the peer's arena, which
 * this session reserves whole, as the peer's session reserves it (the
 * H200's driver did not grant a small range there), at the first import
 * into it (peer_access asks whether the GPUs can).
 */
#include "executor/exec_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/log.h"
#include "protocol/ipc.h"

/* pieces of one export: their descriptors travel in one broker message */
#define IPC_MAX_PIECES 32
/* a session's exports at once (each holds descriptors in the broker) */
#define IPC_MAX_EXPORTS 1024
#define IPC_MAX_IMPORTS 1024

enum { META_MEM = 1, META_EVENT = 2 };

/* what the broker keeps beside the descriptors, host byte order (the
   sessions are processes of one machine) */
struct ipc_piece {
  uint64_t at;    /* where in the exported range it starts */
  uint64_t len;   /* its bytes */
  uint64_t hoff;  /* where in its handle's memory */
  uint64_t hsize; /* the handle's bytes */
};
struct ipc_meta {
  uint32_t kind, npieces;
  uint64_t range; /* memory: the exported range's bytes */
  union {
    struct ipc_piece p[IPC_MAX_PIECES];
    CUipcEventHandle event;
  } u;
};

struct exec_ipc_export {
  int event;           /* an event's export (id), else memory's */
  uint64_t addr, size; /* memory: the range; event: size is the id */
  uint8_t key[FERRY_IPC_KEY_LEN];
};

struct exec_ipc_import {
  uint64_t addr, size;
  unsigned n;
  struct ipc_piece p[IPC_MAX_PIECES];
  CUmemGenericAllocationHandle h[IPC_MAX_PIECES];
};

void ferry_exec_set_broker(struct ferry_exec *ex, const struct ferry_ipc_broker *b) {
  ex->broker = b;
  int fd_ok = 0;
  /* asked once: later mappings are made exportable only where they can be */
  if (b && ex->d->DeviceGetAttribute(&fd_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                     ex->dev) != CUDA_SUCCESS)
    fd_ok = 0;
  ex->ipc_fd = fd_ok != 0;
}

static void close_fds(int *fds, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

/* the key blob of the reply, which lives until the next call */
static int reply_key(struct ferry_exec *ex, const uint8_t *key, ferry_blob *out) {
  void *p = exec_ret_alloc(ex, 0, FERRY_IPC_KEY_LEN);
  if (!p)
    return EXEC_MEMORY_ALLOCATION;
  memcpy(p, key, FERRY_IPC_KEY_LEN);
  *out = (ferry_blob){p, FERRY_IPC_KEY_LEN};
  return EXEC_OK;
}

static int add_export(struct ferry_exec *ex, const struct exec_ipc_export *e) {
  if (ferry_grow((void **)&ex->exports, &ex->cexports, ex->nexports + 1, sizeof *ex->exports))
    return -1;
  ex->exports[ex->nexports++] = *e;
  return 0;
}

static void drop_export(struct ferry_exec *ex, size_t i) {
  if (ex->broker)
    ex->broker->drop(ex->broker->ctx, ex->exports[i].key);
  ex->exports[i] = ex->exports[--ex->nexports];
}

/* a key blob of the right length, or NULL */
static const uint8_t *key_of(ferry_blob b) {
  return b.ptr && b.len == FERRY_IPC_KEY_LEN ? b.ptr : NULL;
}

/* The refusals every handler makes first: a session without a broker
   (no socketpair at its fork) has no IPC; a handle of another server
   instance names nothing here. Each is an answer (EXEC_OK with the
   refusal set), which the client turns into its one line. */
static int refused_without_broker(const struct ferry_exec *ex, uint32_t *refusal) {
  if (ex->broker)
    return 0;
  *refusal = FERRY_IPC_NO_BROKER;
  return 1;
}
static int refused_other_server(const struct ferry_exec *ex, uint64_t instance, uint32_t *refusal) {
  if (instance == ex->broker->instance)
    return 0;
  *refusal = FERRY_IPC_OTHER_SERVER;
  return 1;
}

/* ---- memory ---- */

int ferry_x_ipc_mem_export(struct ferry_exec *ex, const struct ferry_ipc_mem_export_args *a,
                           struct ferry_ipc_mem_export_rets *r, struct ferry_io *io) {
  (void)io;
  if (refused_without_broker(ex, &r->refusal))
    return EXEC_OK;
  uint64_t end = a->addr + a->size;
  if (!ex->arena_ok || a->size == 0 || a->addr % ex->gran || a->size % ex->gran || end < a->addr ||
      a->addr < ex->arena_base || end > ex->arena_base + ex->arena_size ||
      !exec_mapped_range(ex, a->addr, a->size))
    return EXEC_INVALID_VALUE;
  r->instance = ex->broker->instance;
  /* whole mappings: CUDA maps an imported handle only from its start
     (cuMemMap's offset must be 0; the H200 said CUDA_ERROR_NOT_SUPPORTED) */
  size_t first = exec_map_after(ex, a->addr), last = first;
  while (last + 1 < ex->nmaps && ex->maps[last + 1].addr < end)
    last++;
  uint64_t lo = ex->maps[first].addr, hi = ex->maps[last].addr + ex->maps[last].size;
  r->at = lo;
  r->span = hi - lo;
  for (size_t i = 0; i < ex->nexports; i++) /* the same range: the same key */
    if (!ex->exports[i].event && ex->exports[i].addr == lo && ex->exports[i].size == hi - lo)
      return reply_key(ex, ex->exports[i].key, &r->key);
  if (!ex->ipc_fd) {
    r->refusal = FERRY_IPC_UNSHAREABLE;
    return EXEC_OK;
  }
  if (ex->nexports >= IPC_MAX_EXPORTS) {
    r->refusal = FERRY_IPC_TOO_MANY;
    return EXEC_OK;
  }
  struct ipc_meta m = {.kind = META_MEM, .range = hi - lo};
  int fds[IPC_MAX_PIECES];
  int rc = EXEC_OK;
  for (size_t i = first; i <= last; i++) {
    const struct exec_mapping *mp = &ex->maps[i];
    if (m.npieces == IPC_MAX_PIECES) {
      r->refusal = FERRY_IPC_TOO_MANY;
      break;
    }
    struct ipc_piece *p = &m.u.p[m.npieces];
    *p = (struct ipc_piece){mp->addr - lo, mp->size, 0, mp->size};
    int fd = -1;
    CUresult res = ex->d->MemExportToShareableHandle(&fd, mp->handle,
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (res != CUDA_SUCCESS) {
      rc = CU(res);
      break;
    }
    fds[m.npieces++] = fd;
  }
  struct exec_ipc_export e = {.addr = lo, .size = hi - lo};
  if (!rc && !r->refusal) {
    int got = ex->broker->put(ex->broker->ctx, &m, sizeof m, fds, m.npieces, e.key);
    if (got < 0)
      rc = EXEC_UNKNOWN;
    else
      r->refusal = (uint32_t)got;
  }
  close_fds(fds, m.npieces); /* the broker holds its own copies */
  if (rc || r->refusal)
    return rc;
  if (add_export(ex, &e)) {
    ex->broker->drop(ex->broker->ctx, e.key);
    return EXEC_MEMORY_ALLOCATION;
  }
  return reply_key(ex, e.key, &r->key);
}

/* the meta a broker gave back describes exactly `range` bytes in pieces
   that tile it, one descriptor each */
static int meta_ok(const struct ferry_exec *ex, const struct ipc_meta *m, size_t len,
                   unsigned nfds, uint64_t range) {
  if (len != sizeof *m || m->kind != META_MEM || m->npieces == 0 || m->npieces > IPC_MAX_PIECES ||
      m->npieces != nfds || m->range != range)
    return 0;
  uint64_t at = 0;
  for (unsigned i = 0; i < m->npieces; i++) {
    const struct ipc_piece *p = &m->u.p[i];
    if (p->at != at || p->len == 0 || p->len % ex->gran || p->hoff != 0 || p->hsize != p->len ||
        p->len > range - at)
      return 0;
    at += p->len;
  }
  return at == range;
}

static void unmap_import(struct ferry_exec *ex, const struct exec_ipc_import *im, unsigned n,
                         int driver_ok) {
  for (unsigned i = 0; i < n && driver_ok; i++) {
    ex->d->MemUnmap(im->addr + im->p[i].at, im->p[i].len);
    ex->d->MemRelease(im->h[i]);
  }
}

/* vGPU arena k is reserved in this process, for a peer's memory */
static int reserve_peer_arena(struct ferry_exec *ex, unsigned k) {
  if (ex->peer_arenas & (1u << k))
    return EXEC_OK;
  uint64_t want = FERRY_ARENA_BASE + (uint64_t)k * FERRY_ARENA_STRIDE;
  CUdeviceptr got = 0;
  CUresult res = ex->d->MemAddressReserve(&got, FERRY_ARENA_STRIDE, 0, want, 0);
  if (res == CUDA_SUCCESS && got != want) {
    ex->d->MemAddressFree(got, FERRY_ARENA_STRIDE);
    res = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (res != CUDA_SUCCESS) {
    ferry_log("peer access: the arena of the program's device %u (0x%llx, %llu GiB) cannot be "
              "reserved in this session to map its memory (CUresult %d, placed at 0x%llx)", k,
              (unsigned long long)want, (unsigned long long)(FERRY_ARENA_STRIDE >> 30), (int)res,
              (unsigned long long)got);
    return CU(res);
  }
  ex->peer_arenas |= 1u << k;
  return EXEC_OK;
}

/* [addr, end) lies in this session's arena (0), or inside one other vGPU
   arena of the program (1: a peer's memory, at the peer's addresses); -1:
   neither */
static int import_place(const struct ferry_exec *ex, uint64_t addr, uint64_t end) {
  if (addr >= ex->arena_base && end <= ex->arena_base + ex->arena_size)
    return 0;
  uint64_t zone_end = FERRY_ARENA_BASE + (uint64_t)FERRY_ARENAS * FERRY_ARENA_STRIDE;
  if (addr < FERRY_ARENA_BASE || end > zone_end ||
      (addr - FERRY_ARENA_BASE) / FERRY_ARENA_STRIDE != (end - 1 - FERRY_ARENA_BASE) / FERRY_ARENA_STRIDE ||
      (addr < ex->arena_base + ex->arena_size && ex->arena_base < end))
    return -1;
  return 1;
}

int ferry_x_peer_access(struct ferry_exec *ex, const struct ferry_peer_access_args *a,
                        struct ferry_peer_access_rets *r, struct ferry_io *io) {
  (void)io;
  int count = 0, can = 0;
  CUdevice peer;
  r->can = 0;
  if (ex->d->DeviceGetCount(&count) != CUDA_SUCCESS || a->peer >= (uint32_t)count ||
      ex->d->DeviceGet(&peer, (int)a->peer) != CUDA_SUCCESS || peer == ex->dev)
    return EXEC_OK;
  if (ex->d->DeviceCanAccessPeer(&can, ex->dev, peer) == CUDA_SUCCESS)
    r->can = can != 0;
  return EXEC_OK;
}

int ferry_x_ipc_mem_import(struct ferry_exec *ex, const struct ferry_ipc_mem_import_args *a,
                           struct ferry_ipc_mem_import_rets *r, struct ferry_io *io) {
  (void)io;
  if (refused_without_broker(ex, &r->refusal))
    return EXEC_OK;
  const uint8_t *key = key_of(a->key);
  uint64_t end = a->addr + a->size;
  int place = end < a->addr ? -1 : import_place(ex, a->addr, end);
  if (!key || !ex->arena_ok || a->size == 0 || a->addr % ex->gran || a->size % ex->gran ||
      place < 0 || exec_map_overlaps(ex, a->addr, a->size))
    return EXEC_INVALID_VALUE;
  for (size_t i = 0; i < ex->nimports; i++)
    if (ex->imports[i].addr < end && a->addr < ex->imports[i].addr + ex->imports[i].size)
      return EXEC_INVALID_VALUE;
  if (refused_other_server(ex, a->instance, &r->refusal))
    return EXEC_OK;
  if (ex->nimports >= IPC_MAX_IMPORTS) {
    r->refusal = FERRY_IPC_TOO_MANY;
    return EXEC_OK;
  }
  if (ferry_grow((void **)&ex->imports, &ex->cimports, ex->nimports + 1, sizeof *ex->imports))
    return EXEC_MEMORY_ALLOCATION;
  struct ipc_meta m;
  size_t len = sizeof m;
  int fds[IPC_MAX_PIECES];
  unsigned nfds = IPC_MAX_PIECES;
  int got = ex->broker->get(ex->broker->ctx, key, &m, &len, fds, &nfds);
  if (got) {
    if (got < 0)
      return EXEC_UNKNOWN;
    r->refusal = (uint32_t)got;
    return EXEC_OK;
  }
  /* a handle whose size was altered, or an event's key: no such memory */
  if (!meta_ok(ex, &m, len, nfds, a->size)) {
    close_fds(fds, nfds);
    return EXEC_INVALID_VALUE;
  }
  struct exec_ipc_import *im = &ex->imports[ex->nimports];
  im->addr = a->addr;
  im->size = a->size;
  im->n = m.npieces;
  if (place == 1) {
    int rc = reserve_peer_arena(ex, (unsigned)((a->addr - FERRY_ARENA_BASE) / FERRY_ARENA_STRIDE));
    if (rc) {
      close_fds(fds, nfds);
      return rc;
    }
  }
  CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = ex->dev},
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CUresult res = CUDA_SUCCESS;
  unsigned done = 0;
  for (; done < m.npieces; done++) {
    const struct ipc_piece *p = &m.u.p[done];
    im->p[done] = *p;
    res = ex->d->MemImportFromShareableHandle(&im->h[done], (void *)(intptr_t)fds[done],
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (res != CUDA_SUCCESS)
      break;
    res = ex->d->MemMap(a->addr + p->at, p->len, p->hoff, im->h[done], 0);
    if (res == CUDA_SUCCESS)
      res = ex->d->MemSetAccess(a->addr + p->at, p->len, &access, 1);
    if (res != CUDA_SUCCESS) {
      ex->d->MemUnmap(a->addr + p->at, p->len); /* refused when nothing was mapped */
      ex->d->MemRelease(im->h[done]);
      break;
    }
  }
  close_fds(fds, nfds);
  if (res != CUDA_SUCCESS) {
    ferry_log("%s: mapping piece %u of %u (%llu bytes at 0x%llx) failed: CUresult %d",
              place ? "peer access" : "CUDA IPC", done, m.npieces, (unsigned long long)m.u.p[done].len,
              (unsigned long long)(a->addr + m.u.p[done].at), (int)res);
    unmap_import(ex, im, done, 1);
    return CU(res);
  }
  ex->nimports++;
  return EXEC_OK;
}

int ferry_x_ipc_mem_close(struct ferry_exec *ex, const struct ferry_ipc_mem_close_args *a,
                          struct ferry_ipc_mem_close_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  for (size_t i = 0; i < ex->nimports; i++) {
    if (ex->imports[i].addr != a->addr)
      continue;
    unmap_import(ex, &ex->imports[i], ex->imports[i].n, 1);
    ex->imports[i] = ex->imports[--ex->nimports];
    return EXEC_OK;
  }
  return EXEC_INVALID_VALUE;
}

void exec_ipc_unmapped(struct ferry_exec *ex, uint64_t addr, uint64_t size) {
  for (size_t i = 0; i < ex->nexports;) {
    const struct exec_ipc_export *e = &ex->exports[i];
    if (!e->event && e->addr < addr + size && addr < e->addr + e->size)
      drop_export(ex, i);
    else
      i++;
  }
}

/* ---- events ---- */

int ferry_x_ipc_event_export(struct ferry_exec *ex, const struct ferry_ipc_event_export_args *a,
                             struct ferry_ipc_event_export_rets *r, struct ferry_io *io) {
  (void)io;
  if (refused_without_broker(ex, &r->refusal))
    return EXEC_OK;
  CUevent ev;
  int rc = exec_event(ex, a->event, &ev);
  if (rc)
    return rc;
  r->instance = ex->broker->instance;
  for (size_t i = 0; i < ex->nexports; i++)
    if (ex->exports[i].event && ex->exports[i].size == a->event)
      return reply_key(ex, ex->exports[i].key, &r->key);
  if (ex->nexports >= IPC_MAX_EXPORTS) {
    r->refusal = FERRY_IPC_TOO_MANY;
    return EXEC_OK;
  }
  struct ipc_meta m = {.kind = META_EVENT};
  CUresult res = ex->d->IpcGetEventHandle(&m.u.event, ev);
  if (res != CUDA_SUCCESS)
    return CU(res);
  struct exec_ipc_export e = {.event = 1, .size = a->event};
  int got = ex->broker->put(ex->broker->ctx, &m, sizeof m, NULL, 0, e.key);
  if (got) {
    if (got < 0)
      return EXEC_UNKNOWN;
    r->refusal = (uint32_t)got;
    return EXEC_OK;
  }
  if (add_export(ex, &e)) {
    ex->broker->drop(ex->broker->ctx, e.key);
    return EXEC_MEMORY_ALLOCATION;
  }
  return reply_key(ex, e.key, &r->key);
}

int ferry_x_ipc_event_import(struct ferry_exec *ex, const struct ferry_ipc_event_import_args *a,
                             struct ferry_ipc_event_import_rets *r, struct ferry_io *io) {
  (void)io;
  if (refused_without_broker(ex, &r->refusal))
    return EXEC_OK;
  const uint8_t *key = key_of(a->key);
  if (!key || a->event >= EXEC_MAX_EVENT_ID)
    return EXEC_INVALID_VALUE;
  if (exec_grow((void ***)&ex->events, &ex->nevents, a->event))
    return EXEC_MEMORY_ALLOCATION;
  if (ex->events[a->event])
    return EXEC_INVALID_VALUE;
  if (refused_other_server(ex, a->instance, &r->refusal))
    return EXEC_OK;
  struct ipc_meta m;
  size_t len = sizeof m;
  int fds[1];
  unsigned nfds = 1;
  int got = ex->broker->get(ex->broker->ctx, key, &m, &len, fds, &nfds);
  if (got) {
    if (got < 0)
      return EXEC_UNKNOWN;
    r->refusal = (uint32_t)got;
    return EXEC_OK;
  }
  close_fds(fds, nfds);
  if (len != sizeof m || m.kind != META_EVENT || nfds)
    return EXEC_INVALID_VALUE; /* a memory handle's key */
  CUevent ev;
  CUresult res = ex->d->IpcOpenEventHandle(&ev, m.u.event);
  if (res != CUDA_SUCCESS)
    return CU(res);
  ex->events[a->event] = ev;
  return EXEC_OK;
}

void exec_ipc_event_gone(struct ferry_exec *ex, uint32_t event) {
  for (size_t i = 0; i < ex->nexports; i++)
    if (ex->exports[i].event && ex->exports[i].size == event) {
      drop_export(ex, i);
      return;
    }
}

void exec_ipc_free(struct ferry_exec *ex, int driver_ok) {
  for (size_t i = 0; i < ex->nimports; i++)
    unmap_import(ex, &ex->imports[i], ex->imports[i].n, driver_ok);
  ex->nimports = 0;
  while (ex->nexports)
    drop_export(ex, ex->nexports - 1);
  for (unsigned k = 0; k < FERRY_ARENAS; k++)
    if ((ex->peer_arenas & (1u << k)) && driver_ok)
      ex->d->MemAddressFree(FERRY_ARENA_BASE + (uint64_t)k * FERRY_ARENA_STRIDE, FERRY_ARENA_STRIDE);
  ex->peer_arenas = 0;
  free(ex->imports);
  free(ex->exports);
  ex->imports = NULL;
  ex->exports = NULL;
  ex->cimports = ex->cexports = 0;
}
