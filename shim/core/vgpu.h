/*
 * The client core's state: the virtual GPUs the program sees, the link each
 * one's calls leave by, and per-thread CUDA state. Every room of the client
 * (front ends, migration, core) reads it; only the core and migration change
 * where a vGPU runs.
 */
#ifndef FERRY_CORE_VGPU_H
#define FERRY_CORE_VGPU_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/handles.h"
#include "recorder/recorder.h"
#include "shim/core/status.h"
#include "protocol/codec.h"
#include "transport/transport.h"

#define FERRY_MAX_VGPUS 16
_Static_assert(FERRY_MAX_VGPUS <= FERRY_ARENAS, "each vGPU has its arena (protocol/wire.h)");
/* the shared host arena (hostmem.c): above AddressSanitizer's shadow
   (0x10007fff8000), below the simulation's object slab (0x1f0000000000)
   and the vGPUs' arenas; ASan's own heap starts at 0x600000000000 */
#define FERRY_HOST_ARENA_BASE FERRY_HOST_WINDOW_BASE
#define FERRY_HOST_ARENA_SIZE FERRY_HOST_WINDOW_SIZE
#define FERRY_NATTRS_CLIENT 160
#define FERRY_ASYNC_BULK_INLINE (256u * 1024u) /* async H2D up to this is copied and pipelined */

/* a device-to-host copy whose bytes arrive later, in a DEFERRED frame */
struct ferry_deferred {
  uint64_t token;
  void *dst;
  uint64_t size;
};

struct ferry_local;   /* local.c */
struct ferry_stripes; /* protocol/stripe.h */
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
  char lost[256];            /* why this end gave the connection up (a quiet link's caller says it) */
  int quiet;                 /* a migration's target: its caller reports refusals and losses */
  int hello_ms;              /* while the hello runs under its deadline: that deadline */
  int refusal_said;          /* an asynchronous copy refused over --max-deferred was said */

  /* deferred device-to-host copies waiting for their data (under send_lock) */
  struct ferry_deferred *deferred;
  size_t ndeferred, deferred_cap;
  uint64_t next_token;

  /* a ferry-mhelper: its pid and GPU; it maps this program's shared host
     arena, so copies name host addresses (hostmem.c) */
  int helper_pid;
  int helper_gpu;
  struct ferry_staging *staging; /* pageable copies through shared memory */

  /* FERRY_STREAMS: data connections for large copies (stripe.c); NULL:
     every byte goes over conn. Sends use them under sock_lock, receives
     under call_lock. striped: bytes moved over them, sent and received */
  struct ferry_stripes *stripes;
  uint64_t striped[2];
  int streams; /* its URL's ?streams=N, else 0 (FERRY_STREAMS decides) */
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
  int ipc_open;              /* atomic: CUDA IPC exports and imports open (runtime/ipc.c,
                                stream.c); while any is, the vGPU does not move */
  int carry_error;           /* an async error met while draining, for the next sync call */
  int placeholder;           /* the arena's PROT_NONE placeholder is in place */
  uint64_t launches;         /* for FERRY_MIGRATE_AT */
  uint64_t calls[FERRY_CALL_LIMIT]; /* by call, for FERRY_STATS (relaxed atomics) */
  /* FERRY_STATS: calls that waited for a server's or helper's answer
     (query-cache hits and asynchronous calls do not), and how long */
  uint64_t trips[FERRY_CALL_LIMIT], trip_ns[FERRY_CALL_LIMIT];
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
  int stats;      /* FERRY_STATS is set: round trips are timed */
  int count;
  struct ferry_vgpu vgpus[FERRY_MAX_VGPUS];
  struct ferry_handles streams, events;
  struct ferry_handles arrays; /* cudaArray_t values (array.c initialises it) */
};
extern struct ferry_state ferry;

struct ferry_cuctx; /* the driver front end's contexts (driver/ctx.c) */
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
/* how many vGPUs FERRY_DEVICES (or the rCUDA variables) names, 0 when it is
   unset or wrong; reads the environment only, connects to nothing */
int ferry_configured_devices(void);
/* the current vGPU of this thread, or NULL with the error in *err */
struct ferry_vgpu *ferry_current(int *err);

/* sets the thread's last error (CUDA keeps the latest failure) and returns it */
static inline cudaError_t ferry_ret(int err) {
  if (err) ferry_thread()->last_error = (cudaError_t)err;
  return (cudaError_t)err;
}

/* where vGPU index's device addresses start, in every process and server */
static inline uint64_t ferry_arena_base(int index) {
  return FERRY_ARENA_BASE + (uint64_t)index * FERRY_ARENA_STRIDE;
}
/* it runs in this process (after a migration, or local mode) */
static inline int ferry_is_local(const struct ferry_vgpu *v) {
  return __atomic_load_n(&v->local, __ATOMIC_ACQUIRE);
}
/* its server (or helper) is gone; never for a vGPU in this process, whose
   closed link says nothing */
static inline int ferry_dead(const struct ferry_vgpu *v) {
  return !__atomic_load_n(&v->local, __ATOMIC_ACQUIRE) &&
         __atomic_load_n(&v->link.dead, __ATOMIC_RELAXED);
}

#endif
