/*
 * State of one executor session, shared by the executor's source files.
 * Client ids (streams, events, modules) index growable tables; device
 * memory mappings are kept sorted by address so unmap and close can find
 * their handles.
 */
#ifndef FERRY_EXEC_INTERNAL_H
#define FERRY_EXEC_INTERNAL_H

#include "executor/exec.h"

/* bulk copies move through two pinned buffers of this size */
#define EXEC_CHUNK (4u << 20)
/* a copy is cut into about four chunks, but none smaller than this (each
   chunk costs an event record and wait), so the network transfer of one
   chunk overlaps the DMA of the other even for copies well below EXEC_CHUNK */
#define EXEC_MIN_CHUNK (64u << 10)
/* bounds on client-chosen ids, so a hostile id cannot make tables huge */
#define EXEC_MAX_STREAM_ID (1u << 22)
#define EXEC_MAX_EVENT_ID (1u << 22)
#define EXEC_MAX_MODULE_ID 0xffffu /* func = module << 16 | index */
#define EXEC_MAX_ARRAY_ID (1u << 22)
#define EXEC_MAX_GRAPH_ID (1u << 22)
/* deferred copies a session may have queued at once, data or not: each is
   an event and a list entry until the client's next synchronizing call */
#define EXEC_MAX_PENDING (1u << 20)

/* cudaError_t values the executor produces itself */
enum {
  EXEC_OK = 0,
  EXEC_INVALID_VALUE = 1,        /* cudaErrorInvalidValue */
  EXEC_MEMORY_ALLOCATION = 2,    /* cudaErrorMemoryAllocation */
  EXEC_INVALID_PITCH = 12,       /* cudaErrorInvalidPitchValue */
  EXEC_INVALID_DEVICE_FUNC = 98, /* cudaErrorInvalidDeviceFunction */
  EXEC_INVALID_HANDLE = 400,     /* cudaErrorInvalidResourceHandle */
  EXEC_UNKNOWN = 999,            /* cudaErrorUnknown: e.g. the connection broke */
};

struct exec_mapping {
  uint64_t addr, size;
  CUmemGenericAllocationHandle handle;
};

struct exec_func {
  char *name;    /* so that module_function finds a name it has resolved */
  CUfunction fn; /* NULL: the module has no such function */
  uint32_t nparams;
  uint32_t *layout; /* nparams pairs (offset, size) */
  uint32_t need;    /* bytes of the packed parameter buffer */
};

struct exec_module {
  CUmodule mod; /* NULL: slot unused */
  void *image;  /* kept while loaded */
  uint32_t nfuncs;
  struct exec_func *funcs;
};

struct exec_pending {
  struct exec_pending *next;
  uint64_t token;
  void *buf; /* pinned; NULL for a failed (or empty) copy, delivered with no data */
  size_t size;
  uint64_t charge; /* what buf counts against max_deferred (whole pages) */
  CUevent ev;
  int refused; /* over max_deferred: delivered with refused_why */
};

struct ferry_exec {
  const struct ferry_driver *d;
  unsigned gpu;
  CUdevice dev;
  CUcontext ctx;
  int ctx_held; /* we hold one retain of the primary context */
  uint64_t arena_base, arena_size;
  int arena_ok;
  int window_ok; /* the host window is reserved for shadows (exec_shadow.c) */
  int alias_ok;  /* and the alias window, for shadows of registered memory */
  size_t gran;

  struct exec_mapping *maps;
  size_t nmaps, cmaps;

  CUstream *streams; /* by id; NULL = unused */
  uint32_t nstreams;
  CUevent *events;
  uint32_t nevents;
  struct exec_module *mods;
  uint32_t nmods;

  void *stage[2];
  CUevent stage_ev[2];
  int stage_busy[2];

  struct exec_pending *pend_head, *pend_tail;
  size_t npend;
  int latched;

  /* ferry_exec_set_limits; 0 means no limit. The *_logged flags keep the
     log to one line per session for each. */
  uint64_t max_deferred, pend_bytes; /* pinned bytes held for deferred copies */
  char refused_why[200];             /* the last copy refused over max_deferred: why */
  uint64_t max_mem, mapped;          /* device memory mapped with mem_map */
  int deferred_logged, mem_logged;

  void **ctx_objects; /* by client id: the driver's private per-context objects (exec_private.c) */
  uint32_t nctx_objects;

  CUarray *arrays; /* by client id; NULL = unused (exec_array.c) */
  uint32_t narrays;
  /* texture and surface objects this session created (values are the
     driver's own, which the client hands to kernels) */
  uint64_t *texobjs;
  size_t ntexobjs, ctexobjs;
  uint64_t *surfobjs;
  size_t nsurfobjs, csurfobjs;

  /* host memory the peer shares at the same addresses (ferry_exec_allow_host):
     [host_lo, host_hi); empty for a server, which never touches host
     addresses a client names */
  uint64_t host_lo, host_hi;
  struct exec_host_reg {
    uint64_t addr, size;
  } *host_regs; /* page-locked with host_register */
  size_t nhost_regs, chost_regs;

  /* a handle the client never created: a broken client, which the server
     disconnects (ferry_exec_violation) */
  char violation[160];

  /* mem_hash (exec_hash.c): ferry's own kernel, loaded on first use, and
     pinned host memory mapped for it (piece descriptors, then hashes) */
  CUmodule hash_mod;
  CUfunction hash_fn;
  void *hash_buf;

  CUgraphExec *gexecs; /* by client exec id; NULL = unused (exec_graph.c) */
  uint32_t ngexecs;

  /* CUDA IPC (exec_ipc.c): the broker (NULL: none), whether mappings are
     made exportable as file descriptors, this session's exports (memory
     ranges and events, each under its broker key) and imported memory */
  const struct ferry_ipc_broker *broker;
  int ipc_fd;
  struct exec_ipc_export *exports;
  size_t nexports, cexports;
  struct exec_ipc_import *imports;
  size_t nimports, cimports;
  uint32_t peer_arenas; /* bit k: vGPU arena k is reserved here for a peer's memory */

  void *ret_buf[2]; /* blobs of the last reply, freed on the next call */
  void *param_buf;
  void **param_ptrs;
  size_t param_cap, ptrs_cap;
};

#define CU(x) ferry_cuda_error_from_cu(x)

/* records a bad handle (kind: "stream", ...) and returns EXEC_INVALID_HANDLE */
int exec_bad_handle(struct ferry_exec *ex, const char *kind, uint32_t id);

/* one handler per call, generated from calls.def */
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  int ferry_x_##name(struct ferry_exec *ex, const struct ferry_##name##_args *a,             \
                     struct ferry_##name##_rets *r, struct ferry_io *io);
#include "protocol/calls.def"
#undef FERRY_CALL

/* stream id -> CUstream; 0 legacy (NULL), 1 CU_STREAM_LEGACY, 2 per-thread */
int exec_stream(struct ferry_exec *ex, uint32_t id, CUstream *out);
int exec_event(struct ferry_exec *ex, uint32_t id, CUevent *out);
/* module << 16 | index -> function; EXEC_INVALID_HANDLE / EXEC_INVALID_DEVICE_FUNC */
int exec_func(struct ferry_exec *ex, uint32_t func, struct exec_func **out);

/* a launch's params blob as the driver's void ** for f (exec_module.c):
   aligned copies that live until the next call */
int exec_pack_params(struct ferry_exec *ex, const struct exec_func *f, ferry_blob params,
                     void ***out);
/* a launch attribute whose value is plain data, which may travel */
int exec_attr_is_plain(CUlaunchAttributeID id);

/* frees what the session holds; with driver_ok == 0 only our own records
   (after a sticky error, when a reset frees the rest) */
void exec_free_memory(struct ferry_exec *ex, int driver_ok);
/* fresh device memory at a checked, granularity-aligned range; its removal;
   whether exactly that range is mapped */
int exec_map_at(struct ferry_exec *ex, uint64_t addr, uint64_t size);
int exec_unmap_at(struct ferry_exec *ex, uint64_t addr, uint64_t size);
int exec_mapped_at(const struct ferry_exec *ex, uint64_t addr, uint64_t size);
/* the reservations of shadows outside the host window (after their mappings are gone) */
void exec_free_windows(struct ferry_exec *ex, int driver_ok);
void exec_free_modules(struct ferry_exec *ex, int driver_ok);
void exec_free_streams_events(struct ferry_exec *ex, int driver_ok);
void exec_free_staging(struct ferry_exec *ex, int driver_ok);
/* pending deferred copies lose their data but still get delivered (empty) */
void exec_fail_pending(struct ferry_exec *ex, int driver_ok);
int exec_reserve_arena(struct ferry_exec *ex, char *err, size_t errlen);

/* a buffer that lives until the next call (reply blobs) */
void *exec_ret_alloc(struct ferry_exec *ex, int slot, size_t n);

/* drains n bytes of bulk input that will not be used; -1 if the link broke */
int exec_drain(struct ferry_bulk_in *in, uint64_t n);

/* A bulk copy between packed host bytes and the device, through the pinned
   staging buffers. Without span: rows of `width` bytes at dev, `pitch`
   apart (a 1D copy is one row). With span: it enqueues the copy of packed
   bytes [off, off + n) from or to buf itself (arrays, 3D boxes). */
struct exec_xfer {
  uint64_t dev, pitch, width;
  CUstream s;
  int to_device;
  int (*span)(struct ferry_exec *ex, const struct exec_xfer *x, uint64_t off, char *buf, size_t n);
  const void *ctx; /* for span */
};
/* host -> device: reads every byte of `in`; `err` is an error found
   before any copy (the bytes are then only drained) */
int exec_pull(struct ferry_exec *ex, struct exec_xfer *x, struct ferry_bulk_in *in, int err);
/* device -> host: len bytes to out (see exec_mem.c) */
int exec_push(struct ferry_exec *ex, struct exec_xfer *x, uint64_t len, struct ferry_bulk_out *out);

/* unregisters what host_register page-locked (exec_host.c) */
void exec_free_host(struct ferry_exec *ex, int driver_ok);

/* grows a NULL-initialised table of pointers to hold index id; -1: no memory */
int exec_grow(void ***table, uint32_t *n, uint32_t id);

/* forgets the driver's private per-context objects (exec_private.c) */
void exec_free_ctx_objects(struct ferry_exec *ex);

/* destroys the executable graphs (exec_graph.c) */
void exec_free_graphs(struct ferry_exec *ex, int driver_ok);

/* destroys texture/surface objects and arrays (exec_array.c) */
void exec_free_arrays(struct ferry_exec *ex, int driver_ok);

/* CUDA IPC (exec_ipc.c): [addr, addr + size) was unmapped, so exports of
   it end; an event id was destroyed, so its export ends; everything IPC
   held goes (before the mappings and the arena) */
void exec_ipc_unmapped(struct ferry_exec *ex, uint64_t addr, uint64_t size);
void exec_ipc_event_gone(struct ferry_exec *ex, uint32_t event);
void exec_ipc_free(struct ferry_exec *ex, int driver_ok);
/* the first mapping that ends after addr (exec_mem.c), nmaps when none */
size_t exec_map_after(const struct ferry_exec *ex, uint64_t addr);
/* whether [addr, addr + size) overlaps a mapping (exec_mem.c) */
int exec_map_overlaps(const struct ferry_exec *ex, uint64_t addr, uint64_t size);

/* unloads mem_hash's kernel and frees its buffer (exec_hash.c) */
/* whether [addr, addr + size) lies in this session's mappings, which may
   be several adjacent ones (exec_mem.c) */
int exec_mapped_range(const struct ferry_exec *ex, uint64_t addr, uint64_t size);
void exec_free_hash(struct ferry_exec *ex, int driver_ok);

#endif
