/*
 * Internal state of the shim (ferry's libcudart.so.13): the virtual GPUs the
 * program sees, per-thread CUDA state, and the helpers every API file uses.
 */
#ifndef FERRY_SHIM_H
#define FERRY_SHIM_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/handles.h"
#include "recorder/recorder.h"
#include "shim/migrate.h"
#include "shim/thread.h"
#include "executor/driver.h"
#include "protocol/codec.h"
#include "transport/transport.h"

#define FERRY_MAX_VGPUS 16
#define FERRY_ARENA_BASE 0x200000000000ull
#define FERRY_ARENA_STRIDE 0x40000000000ull /* 4 TiB of address space per vGPU */
/* the shared host arena (hostmem.c): above AddressSanitizer's shadow
   (0x10007fff8000), below the simulation's object slab (0x1f0000000000)
   and the vGPUs' arenas; ASan's own heap starts at 0x600000000000 */
#define FERRY_HOST_ARENA_BASE 0x180000000000ull
#define FERRY_HOST_ARENA_SIZE FERRY_ARENA_STRIDE
#define FERRY_NATTRS_CLIENT 160
#define FERRY_ASYNC_BULK_INLINE (256u * 1024u) /* async H2D up to this is copied and pipelined */

/* a device-to-host copy whose bytes arrive later, in a DEFERRED frame */
struct ferry_deferred {
  uint64_t token;
  void *dst;
  uint64_t size;
};

struct ferry_local;   /* local.c */
struct ferry_staging; /* hostmem.c */

/* One connection to a process that runs a vGPU's calls: its ferry-server,
   or (after a migration) a ferry-mhelper on a local GPU. A vGPU's current
   link is part of it; a migration opens its target's link apart and moves
   it in at the switch (remote.c). */
struct ferry_link {
  int vgpu;        /* the vGPU it serves (messages, the flusher) */
  char name[320];  /* for messages: the server URL, or the helper and its GPU */
  struct ferry_conn *conn;
  struct ferry_reader *reader; /* all receives go through it (under call_lock) */

  /* outgoing frames: ASYNC calls are appended and flushed in batches */
  pthread_mutex_t send_lock; /* protects sendbuf; taken before sock_lock */
  pthread_mutex_t sock_lock; /* serialises writes to conn */
  struct ferry_buf sendbuf;
  int flush_pending;

  pthread_mutex_t call_lock; /* one SYNC request/reply in flight */
  int dead;                  /* connection lost: every call fails */
  char goodbye[256];         /* the reason the peer gave when it ended the session */
  int quiet;                 /* a migration's target: its caller reports refusals */

  /* deferred device-to-host copies waiting for their data (under send_lock) */
  struct ferry_deferred *deferred;
  size_t ndeferred, deferred_cap;
  uint64_t next_token;

  /* a ferry-mhelper: its pid and GPU; it maps this program's shared host
     arena, so copies name host addresses (hostmem.c) */
  int helper_pid;
  int helper_gpu;
  struct ferry_staging *staging; /* pageable copies through shared memory */
};

struct ferry_vgpu {
  int index;
  struct ferry_url url;
  char url_text[300]; /* the server it started on, or "local:N" */
  int start_gpu;      /* FERRY_DEVICES=local:N: starts in a ferry-mhelper on local GPU N; else -1 */
  struct ferry_link link; /* where its calls go while not in-process */

  /* device facts from hello */
  char name[256];
  uint64_t total_mem, granularity;
  int driver_version;
  unsigned char uuid[16];
  int32_t attrs[FERRY_NATTRS_CLIENT];
  struct cudaDeviceProp props;
  unsigned device_flags;
  int priority_least, priority_greatest, priority_known; /* cached range */

  pthread_mutex_t arena_lock;
  struct ferry_arena arena;
  /* atomic: the runtime front end used it, or the driver front end retained
     its primary context (cu/ctx.c): that context is then current by default */
  int primary_active;

  /* migration (migrate.c, local.c). Every call holds `gate` shared while it
     runs; a migration holds it exclusively, so new calls wait while the
     vGPU moves. While `local` is set calls go to the in-process executor
     `lx`, else over `link` (a server, or a ferry-mhelper); both are set and
     cleared under the gate held exclusively (and migrate.c's lock). */
  pthread_rwlock_t gate;
  int local;                 /* atomic */
  int moved;                 /* atomic: it left its server (in-process or helper) */
  int inproc_gpu;            /* the local GPU it runs on (or moves to) in this process, else -1
                                (under migrate.c's lock) */
  struct ferry_local *lx;    /* the local executor, while local */
  struct ferry_recorder log; /* RECORD calls, in every mode */
  int log_broken;            /* a record was lost (out of memory): no migration */
  int carry_error;           /* an async error met while draining, for the next sync call */
  int placeholder;           /* the arena's PROT_NONE placeholder is in place */
  uint64_t launches;         /* for FERRY_MIGRATE_AT */
  uint64_t calls[FERRY_CALL_COUNT]; /* by call, for FERRY_STATS (relaxed atomics) */
  struct ferry_vgpu_status mig; /* last migration (under ferry_mig_lock) */
  uint64_t generation;       /* bumped when the vGPU moves (atomic) */
  /* events last recorded before the migration: their times on the remote
     GPU, relative to the first of them (migrate.c, under pre_lock) */
  pthread_mutex_t pre_lock;
  struct ferry_pre_event {
    uint32_t id;
    float off_ms;
  } *pre_events;
  size_t npre;
  float pre_last_ms; /* the latest of them */
  double bridge_ms;  /* host time from the drain to their local re-recording */
};

struct ferry_state {
  pthread_once_t once;
  int init_error; /* cudaError_t every call returns when init failed */
  int forked;     /* this process is a fork() child of the one that connected */
  int count;
  struct ferry_vgpu vgpus[FERRY_MAX_VGPUS];
  struct ferry_handles streams, events;
  struct ferry_handles arrays; /* cudaArray_t values (array.c initialises it) */
};
extern struct ferry_state ferry;

struct ferry_cuctx; /* cu/ctx.c */
#define FERRY_CTX_STACK 16
struct ferry_thread {
  int device;
  cudaError_t last_error;
  /* the driver front end's current context: NULL means the primary one of
     `device` once that is active; ctx_none: cuCtxSetCurrent(NULL) */
  struct ferry_cuctx *ctx;
  int ctx_none;
  struct ferry_cuctx *ctx_stack[FERRY_CTX_STACK];
  int ctx_depth;
  struct ferry_buf reply; /* body of the latest reply; rets point into it */
  int registered;         /* reply is freed at thread exit */
};
struct ferry_thread *ferry_thread(void);

/* connects to every configured server on first use; 0 or a cudaError_t */
int ferry_ensure_init(void);
/* the current vGPU of this thread, or NULL with the error in *err */
struct ferry_vgpu *ferry_current(int *err);

/* sets the thread's last error (CUDA keeps the latest failure) and returns it */
static inline cudaError_t ferry_ret(int err) {
  if (err) ferry_thread()->last_error = (cudaError_t)err;
  return (cudaError_t)err;
}

/* ---- remote calls (remote.c) ---- */
/* SYNC calls wait for the reply and return its status (or the latched
   async error); rets' str/blob fields stay valid until this thread's next
   call. ASYNC calls return 0 unless the vGPU is dead. */
int ferry_call(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
               const struct ferry_bulk *bulk);
/* ferry_call for calls only a ferry-mhelper takes (host_*): made only
   while v runs on one, else FERRY_NOT_HELPER */
#define FERRY_NOT_HELPER (-3)
int ferry_helper_call(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                      const struct ferry_bulk *bulk);
/* a call over v's link by a caller that holds v's gate shared (an error
   a migration's drain kept goes to it, as to any call) */
int ferry_link_call_held(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                         const struct ferry_bulk *bulk);
/* a migration's call to where v runs now (its link, or the GPU in this
   process): no gate (the migration holds it, or runs beside the program)
   and nothing recorded */
int ferry_source_call(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                      const struct ferry_bulk *bulk);
/* ---- links (remote.c): the same for a vGPU's own link and for a
   migration's target link, which nobody else sees yet ---- */
void ferry_link_init(struct ferry_link *l, int vgpu, const char *name);
/* FERRY_CONNECT_TIMEOUT (seconds, default 10) in milliseconds */
int ferry_connect_timeout_ms(void);
/* where vGPU index's device addresses start, in every process and server */
static inline uint64_t ferry_arena_base(int index) {
  return FERRY_ARENA_BASE + (uint64_t)index * FERRY_ARENA_STRIDE;
}
/* FERRY_CALL_TIMEOUT in ms (default 60 s; 0: never): how long a link may
   say nothing at all, keepalives included, before it counts as lost */
int ferry_call_timeout_ms(void);
/* arms that timeout on l's connection (where its transport can) */
void ferry_link_watch(struct ferry_link *l);
/* a link's call (migration holds the gate); ASYNC frames of a link that is
   not a vGPU's own leave at once (the flusher only knows vGPUs) */
int ferry_link_call(struct ferry_link *l, unsigned call, const void *args, void *rets,
                    const struct ferry_bulk *bulk);
/* a SYNC request sent without waiting, and the reply read later (mem-sync
   pipelines its requests); the caller holds the gate exclusively */
int ferry_link_send(struct ferry_link *l, unsigned call, const void *args);
int ferry_link_reply(struct ferry_link *l, unsigned call, void *rets, const struct ferry_bulk *bulk);
/* hello: the peer opens `gpu` and reserves the vGPU's arena; 0 or a
   cudaError_t, the peer's reason logged */
int ferry_link_hello(struct ferry_link *l, uint32_t gpu, uint64_t arena_base,
                     struct ferry_hello_rets *r);
/* ends the session (the peer frees what it held) and frees the link's
   connection; l itself stays usable as a dead link */
void ferry_link_close(struct ferry_link *l);
/* the vGPU's own link takes over from's connection (its old one closed);
   from is left empty. Callers hold the vGPU's gate exclusively. */
void ferry_link_adopt(struct ferry_link *own, struct ferry_link *from);
/* a link of a vGPU that is not in-process: the vGPU's own */
static inline struct ferry_link *ferry_link_of(struct ferry_vgpu *v) { return &v->link; }
/* its server (or helper) is gone; never for a vGPU in this process, whose
   closed link says nothing */
static inline int ferry_dead(const struct ferry_vgpu *v) {
  return !__atomic_load_n(&v->local, __ATOMIC_ACQUIRE) &&
         __atomic_load_n(&v->link.dead, __ATOMIC_RELAXED);
}
/* Work that looked something up for v before its call (a module variable's
   address) declares the generation it looked at; a call that finds v moved
   since returns FERRY_STALE instead of running, and the caller looks again */
#define FERRY_STALE (-2)
void ferry_expect_generation(struct ferry_vgpu *v, uint64_t gen); /* v NULL: stop */
int ferry_stale(struct ferry_vgpu *v);
/* cudaEventElapsedTime across a migration: 1 and *ms when a or b was last
   recorded before it, else 0 */
int ferry_pre_elapsed(struct ferry_vgpu *v, uint32_t a, uint32_t b, float *ms, int *rc);
/* an event recorded again (or destroyed) after the migration */
void ferry_pre_forget(struct ferry_vgpu *v, uint32_t id);
/* during a migration's drain: the remote times of events recorded so far */
int ferry_pre_capture(struct ferry_vgpu *v);

/* ---- ferry-mhelper processes (helper.c) ---- */
/* starts a ferry-mhelper for v on local GPU gpu, connected to l over a
   shared-memory channel, and opens the GPU there (hello): everything a
   migration onto it needs before the program is held, and the first link
   of a vGPU that starts on a local GPU. 0, or a cudaError_t with the
   reason in err (l is then closed). hello (may be NULL) gets the helper's
   answer, valid until this thread's next call. */
int ferry_helper_start(struct ferry_vgpu *v, int gpu, struct ferry_link *l,
                       struct ferry_hello_rets *hello, char *err, size_t errlen);
/* push buffered ASYNC frames to the connection now */
int ferry_flush(struct ferry_link *l);
/* register a host buffer that a later DEFERRED frame fills */
uint64_t ferry_defer(struct ferry_link *l, void *dst, uint64_t size);
/* cudaMemcpyAsync into pinned memory: the bytes arrive at the next
   synchronization (a.token is filled in) */
int ferry_call_deferred(struct ferry_vgpu *v, void *dst, const struct ferry_memcpy_dtoh_async_args *a);
/* fills (p != NULL) and forgets a deferred buffer; -1 for an unknown token */
int ferry_deferred_complete(struct ferry_link *l, uint64_t token, const void *p, size_t n);
/* deferred copies still waiting for data */
size_t ferry_deferred_pending(struct ferry_link *l);
int ferry_connect_vgpu(struct ferry_vgpu *v);
/* FERRY_TOKEN_FILE's secret, or NULL (init.c) */
const char *ferry_client_token(void);
void ferry_start_flusher(void);

/* ---- streams and events (stream.c) ---- */
struct ferry_stream {
  int vgpu;
  uint32_t id;
  unsigned flags;
  int priority;
};
/* resolves a cudaStream_t; *v is the stream's vGPU (the current one for the
   default streams); per_thread: the API variant uses the per-thread stream */
int ferry_stream_resolve(cudaStream_t s, int per_thread, struct ferry_vgpu **v, uint32_t *id);

/* the device's stream priority range, asked once */
int ferry_priority_range(struct ferry_vgpu *v, int *least, int *greatest);
/* forget the streams and events of a vGPU (after cudaDeviceReset) */
void ferry_streams_forget(int vgpu);

/* ---- kernels and modules (module.c) ---- */
struct ferry_kernel;
int ferry_kernel_lookup(const void *func, struct ferry_kernel **k);
#define FERRY_LAUNCH_PER_THREAD 1u /* the _ptsz variant: NULL means the per-thread stream */
#define FERRY_LAUNCH_COOPERATIVE 2u
/* attrs: CUlaunchAttribute array of plain-valued attributes (see
   protocol/calls.def), {NULL, 0} for a plain launch */
int ferry_launch(struct ferry_kernel *k, dim3 grid, dim3 block, void **args, size_t shmem,
                 cudaStream_t stream, unsigned flags, ferry_blob attrs);
int ferry_kernel_func_id(struct ferry_kernel *k, struct ferry_vgpu *v, uint32_t *func);
/* sorts num launch attributes (cudaLaunchAttribute or CUlaunchAttribute:
   one layout) into out, the forwarded ones (at most FERRY_MAX_LAUNCH_ATTRS),
   and *flags (cooperative); unsupported ones are said and refused (launch.c) */
int ferry_launch_attrs(const void *attrs, unsigned num, CUlaunchAttribute *out, uint32_t *n,
                       unsigned *flags);
/* answers of pure queries, per vGPU (query_cache.c): get fills rets on a
   hit (0) and leaves the encoded key and the epoch for put, which keeps
   an answer unless something changed since; bump after a call that
   invalidates (before and after it) */
int ferry_query_cacheable(unsigned call);
int ferry_query_invalidates(unsigned call);
int ferry_query_cache_get(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                          struct ferry_buf *key, uint64_t *epoch);
void ferry_query_cache_put(struct ferry_vgpu *v, unsigned call, const void *rets,
                           const struct ferry_buf *key, uint64_t epoch_before);
void ferry_query_cache_bump(struct ferry_vgpu *v);
/* cudaOccupancyMaxActiveClusters / cuOccupancyMaxActiveClusters on v */
int ferry_occupancy_clusters(struct ferry_vgpu *v, uint32_t func, dim3 grid, dim3 block,
                             size_t smem, const void *attrs, unsigned nattrs, int *clusters);
/* CUDA's checks of a launch configuration against v's limits */
int ferry_launch_check(const struct ferry_vgpu *v, dim3 grid, dim3 block);
/* a fresh module id (fat binaries and driver modules share one space) */
uint32_t ferry_module_id_new(void);
/* device address and size of a __device__/__constant__ variable on v */
int ferry_symbol_lookup(const void *symbol, struct ferry_vgpu *v, uint64_t *addr, uint64_t *size);
/* a migrated module's variables now live at var_info's addresses */
void ferry_modules_rebind(int vgpu, uint32_t module, ferry_blob var_info);
/* forget which modules v has loaded (after cudaDeviceReset) */
void ferry_modules_forget(int vgpu);

/* ---- module globals the driver front end handed out (cu/module.c) ---- */
/* where a handed-out global address of vgpu lives now (addr itself when it
   is none, or nothing moved) */
uint64_t ferry_global_now(int vgpu, uint64_t addr);
typedef int (*ferry_global_lookup_fn)(void *ctx, uint32_t module, const char *name, uint64_t *addr,
                                      uint64_t *size);
typedef int (*ferry_global_copy_fn)(void *ctx, uint64_t src, uint64_t dst, uint64_t size);
/* a migration of vgpu: looks each handed-out global up on the target and
   asks for its contents to be copied there; 0 or non-zero */
int ferry_globals_prepare(int vgpu, ferry_global_lookup_fn lookup, ferry_global_copy_fn add_copy,
                          void *ctx);
/* the migration switched: the looked-up addresses hold from now on */
void ferry_globals_commit(int vgpu);

/* the driver front end forgets what a cudaDeviceReset dropped on vgpu:
   its modules die, libraries load again when next used, globals are
   looked up again (cu/library.c) */
void ferry_cu_forget(int vgpu);

/* ---- CUDA arrays, texture and surface objects (array.c) ---- */
/* what the program asked for, kept here so cudaArrayGetInfo needs no
   round trip; id is the array's wire id on its vGPU */
struct ferry_array {
  int vgpu;
  uint32_t id;
  struct cudaChannelFormatDesc desc;
  struct cudaExtent extent; /* as given: height 0 for 1D, depth 0 for 2D */
  unsigned flags;
  uint64_t elem;      /* bytes per element */
  uint64_t row_bytes; /* width * elem */
  uint64_t rows, slices; /* at least 1 */
};
/* forget the arrays and texture/surface objects of a vGPU (after cudaDeviceReset) */
void ferry_arrays_forget(int vgpu);

/* ---- host memory (hostmem.c) ---- */
/* the shared host arena's memfd, or -1 with the reason in err */
int ferry_host_arena_fd(char *err, size_t errlen);
/* page-aligned memory in the shared host arena; NULL when there is none */
void *ferry_host_shared_alloc(size_t size);
void ferry_host_shared_free(void *p);
/* p is pinned host memory (cudaMallocHost, cudaHostRegister) */
int ferry_host_pinned(const void *p);
/* [p, p + n) lies in one pinned block of the shared arena */
int ferry_host_is_shared(const void *p, uint64_t n);
/* v now runs on a ferry-mhelper: page-lock every shared pinned block there
   (v's gate held; over its link) and every later one; 0 or a cudaError_t */
int ferry_host_register_helper(struct ferry_vgpu *v);
/* a migration onto a helper was undone, or the helper died */
void ferry_host_forget_helper(int vgpu);
/* page-locks the program's pinned host buffers with a local driver, so that
   its asynchronous copies stay asynchronous after a migration */
void ferry_host_register_local(struct ferry_local *L);
/* L closes: the buffers it page-locked are unlocked, the next local GPU locks them */
void ferry_host_forget_local(struct ferry_local *L);

/* ---- copies through shared memory to a ferry-mhelper (shmcopy.c) ---- */
/* staging buffers for l's pageable copies, page-locked in its helper */
int ferry_staging_open(struct ferry_link *l, char *err, size_t errlen);
void ferry_staging_free(struct ferry_staging *st);
/* a 1D copy between host memory and v's device memory through shared
   memory, when v runs on a helper and it pays; else FERRY_NOT_HELPER */
int ferry_shared_copy(struct ferry_vgpu *v, void *dst, const void *src, uint64_t n, int to_device,
                      uint32_t stream, int async);

/* ---- memory (memory.c) ---- */
/* the vGPU whose arena holds p, or NULL (host memory) */
struct ferry_vgpu *ferry_vgpu_of(const void *p);
/* 16- and 32-bit sets (the driver front end's cuMemsetD16/D32) */
int ferry_memset_wide(void *dst, size_t pitch, uint32_t value, unsigned elem, size_t width,
                      size_t height, cudaStream_t stream, int per_thread);
/* set once the program took a module variable's address: a migration moves them */
extern int ferry_symbol_address_taken;

/* ---- local execution (local.c) ---- */
static inline int ferry_is_local(const struct ferry_vgpu *v) {
  return __atomic_load_n(&v->local, __ATOMIC_ACQUIRE);
}
/* ferry_call for a local vGPU */
int ferry_local_call(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                     const struct ferry_bulk *bulk);
/* 1D copies straight through the driver (no staging); kind: 1 H2D, 2 D2H,
   3 D2D. Under v's gate; FERRY_NOT_LOCAL when v left this process meanwhile
   (the caller takes the remote path) */
#define FERRY_NOT_LOCAL (-4)
int ferry_local_copy(struct ferry_vgpu *v, void *dst, const void *src, uint64_t n, int kind,
                     uint32_t stream, int async);
/* the same, for a caller that holds v's gate and found v local */
int ferry_local_copy_held(struct ferry_vgpu *v, void *dst, const void *src, uint64_t n, int kind,
                          uint32_t stream, int async);
/* opens a local GPU for v (placeholder released just before the arena is
   reserved); NULL with a reason */
struct ferry_local *ferry_local_open(struct ferry_vgpu *v, int gpu, char *err, size_t errlen);
/* closes it: its memory is gone (the caller reserves the placeholder again) */
void ferry_local_close(struct ferry_local *L);
/* page-locks host memory with L's driver; 0 or -1 (copies then stay synchronous) */
int ferry_local_host_lock(struct ferry_local *L, void *p, size_t n);
void ferry_local_host_unlock(struct ferry_local *L, void *p);
struct ferry_exec *ferry_local_exec(struct ferry_local *L);
const char *ferry_local_name(struct ferry_local *L);
int ferry_local_gpu(struct ferry_local *L);
/* the PROT_NONE range that keeps host mappings out of a vGPU's arena */
int ferry_placeholder_reserve(struct ferry_vgpu *v);
void ferry_placeholder_release(struct ferry_vgpu *v);
/* the driver the local GPUs use (FERRY_LOCAL_BACKEND) */
const struct ferry_driver *ferry_local_driver(char *err, size_t errlen);

#endif
