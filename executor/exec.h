/*
 * The executor runs decoded calls against a CUDA driver (real or simulated).
 * It is shared by ferry-server, ferry-mhelper and the client's local mode
 * (a vGPU in the program's own process), so it knows nothing about sockets: bulk bytes come and go
 * through small callback structs.
 */
#ifndef FERRY_EXEC_H
#define FERRY_EXEC_H

#include <stdint.h>
#include <stddef.h>

#include "driver.h"
#include "protocol/codec.h"

/* BULK_IN: the executor pulls exactly `len` bytes, in chunks of its choosing */
struct ferry_bulk_in {
  uint64_t len;
  int (*read)(void *ctx, void *dst, size_t n); /* 0, or -1: the connection broke */
  void *ctx;
};

/* BULK_OUT: begin() once with the total, then write() chunks adding up to it.
   If begin() was never called the reply carries no bulk bytes. */
struct ferry_bulk_out {
  int (*begin)(void *ctx, uint64_t len);
  int (*write)(void *ctx, const void *p, size_t n);
  void *ctx;
};

/* data of finished memcpy_dtoh_async calls, handed over by ferry_exec_flush;
   a copy that failed has none (n 0). refused: NULL, or why the executor
   would not hold the copy's data at all (over its max_deferred), for the
   program to hear; the error itself is latched as any copy's */
typedef int (*ferry_deferred_fn)(void *ctx, uint64_t token, const void *p, size_t n,
                                 const char *refused);

struct ferry_io {
  struct ferry_bulk_in *in;   /* set for BULK_IN calls */
  struct ferry_bulk_out *out; /* set for BULK_OUT calls */
};

struct ferry_exec;

/* Retains the primary context of `gpu` and reserves [arena_base,
   arena_base + arena_size) at exactly that address. NULL with a reason
   (GPU index out of range, address taken, ...). */
struct ferry_exec *ferry_exec_open(const struct ferry_driver *drv, unsigned gpu,
                                   uint64_t arena_base, uint64_t arena_size, char *err,
                                   size_t errlen);
/* The same, for a GPU in the application's own process (migration): the
   arena range is still held by the shim's placeholder, which
   before_reserve(ctx) releases first (before the driver initialises). */
struct ferry_exec *ferry_exec_open_local(const struct ferry_driver *drv, unsigned gpu,
                                         uint64_t arena_base, uint64_t arena_size,
                                         void (*before_reserve)(void *ctx), void *ctx, char *err,
                                         size_t errlen);
/* what the shim's local mode calls directly for copies and host memory */
const struct ferry_driver *ferry_exec_driver(const struct ferry_exec *ex);
CUcontext ferry_exec_context(const struct ferry_exec *ex);
/* a client stream id -> CUstream; 0 or a cudaError_t */
int ferry_exec_stream(struct ferry_exec *ex, uint32_t id, CUstream *out);

/* The calls flagged WAITS in calls.def (synchronize or query the device, a
   stream, an event) in two steps, for callers whose threads share one
   executor under a lock (local mode): ferry_exec_wait_of, under the lock,
   resolves the call's handle into a wait; ferry_exec_wait, without it,
   waits, so that one thread's wait never stalls another's calls. Both
   return a cudaError_t; wait_of refuses other calls (cudaErrorInvalidValue). */
struct ferry_wait {
  const struct ferry_driver *d;
  enum { FERRY_WAIT_DEVICE, FERRY_WAIT_STREAM, FERRY_WAIT_EVENT } on;
  int query; /* only ask: cudaErrorNotReady while work is pending */
  CUstream stream;
  CUevent event;
};
int ferry_exec_wait_of(struct ferry_exec *ex, unsigned call, const void *args, struct ferry_wait *w);
int ferry_exec_wait(const struct ferry_wait *w);

/* Host memory at [base, base + size) is shared with the peer at the same
   addresses (ferry-mhelper: the program's shared host arena; the executor
   inside the program: all of it). Until this is called the host_* calls are
   refused as a protocol violation, as a server must. */
void ferry_exec_allow_host(struct ferry_exec *ex, uint64_t base, uint64_t size);

/* Limits for a server's session, 0 meaning none (the default):
   max_deferred bounds the pinned host bytes that memcpy_dtoh_async
   requests hold until the client's next synchronizing call collects them
   (one copy may exceed it when nothing else is waiting, up to the device
   memory the session has mapped); max_mem bounds the device memory mem_map
   maps. Beyond either the call fails with cudaErrorMemoryAllocation, and
   the first time in a session it is logged. */
void ferry_exec_set_limits(struct ferry_exec *ex, uint64_t max_deferred, uint64_t max_mem);

/* CUDA IPC's broker (in ferry-server's parent, server/broker.c): it keeps
   what a session exports under a random key and hands it to another
   session of the same server that presents the key. Each returns 0, a
   FERRY_IPC_* refusal (protocol/ipc.h), or -1 when the broker did not
   answer. Without one (ferry-mhelper, a GPU in the program's process) the
   ipc_* calls are refused with FERRY_IPC_NO_BROKER. */
struct ferry_ipc_broker {
  uint64_t instance; /* the server's random id, which handles carry */
  /* keeps meta and copies of the fds under a new key (16 bytes, to key) */
  int (*put)(void *ctx, const void *meta, size_t meta_len, const int *fds, unsigned nfds,
             uint8_t *key);
  /* what key names: meta (*meta_len: room in, length out) and fds (*nfds:
     room in, count out; the caller closes them); FERRY_IPC_OWN when the
     asker put it */
  int (*get)(void *ctx, const uint8_t *key, void *meta, size_t *meta_len, int *fds,
             unsigned *nfds);
  void (*drop)(void *ctx, const uint8_t *key);
  void *ctx;
};
/* set once, before the first call (b must outlive the executor) */
void ferry_exec_set_broker(struct ferry_exec *ex, const struct ferry_ipc_broker *b);

/* device memory mapped with mem_map now, in bytes (ferry-server --metrics) */
uint64_t ferry_exec_mapped(const struct ferry_exec *ex);

/* frees every mapping, module, stream and event the session held */
void ferry_exec_close(struct ferry_exec *ex);

/* device facts for the hello reply */
int ferry_exec_describe(struct ferry_exec *ex, struct ferry_hello_rets *r, char *name_buf,
                        size_t name_len, int32_t *attrs, unsigned nattrs, uint8_t uuid[16]);

/* Runs one call. Returns a cudaError_t. The errors of ASYNC calls are also
   latched, first one wins, until ferry_exec_take_async_error reads them. */
int ferry_exec_call(struct ferry_exec *ex, unsigned call, const void *args, void *rets,
                    struct ferry_io *io);
int ferry_exec_take_async_error(struct ferry_exec *ex);
/* the same with the call's bulk bytes in memory (bulk may be NULL): for
   callers in the program's own process, where nothing travels */
int ferry_exec_call_mem(struct ferry_exec *ex, unsigned call, const void *args, void *rets,
                        const struct ferry_bulk *bulk);
/* after a call: why the client broke the protocol (a handle it never
   created), or NULL. Ferry's shim checks handles itself, so only a broken
   or hostile client gets here, and the server ends its session. */
const char *ferry_exec_violation(const struct ferry_exec *ex);

/* hands finished deferred copies to fn; the server calls it before each reply */
int ferry_exec_flush_deferred(struct ferry_exec *ex, ferry_deferred_fn fn, void *ctx);

/* CUresult -> cudaError_t */
int ferry_cuda_error_from_cu(int cu_result);

/* the number of device attributes carried in hello (CUdevice_attribute 1..N-1) */
#define FERRY_NATTRS 160

#endif
