/*
 * The call path: how a vGPU's calls leave (its link to a ferry-server or a
 * ferry-mhelper, or the GPU in this process), pipelined and synchronous
 * calls, deferred copies, and the helpers a vGPU may run on.
 */
#ifndef FERRY_CORE_LINK_H
#define FERRY_CORE_LINK_H

#include "shim/core/vgpu.h"

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
/* the same with v as a void *, for protocol/mem_batch.h's batched requests */
int ferry_source_call_ctx(void *v, unsigned call, const void *args, void *rets,
                          const struct ferry_bulk *bulk);
/* ---- links (remote.c): the same for a vGPU's own link and for a
   migration's target link, which nobody else sees yet ---- */
void ferry_link_init(struct ferry_link *l, int vgpu, const char *name);
/* FERRY_CONNECT_TIMEOUT (seconds, default 10) in milliseconds */
int ferry_connect_timeout_ms(void);
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
   cudaError_t, the peer's reason logged (a quiet link's in l->goodbye or
   l->lost). deadline_ms > 0: the whole exchange must end by then (a server:
   FERRY_CONNECT_TIMEOUT), where the transport can tell; 0: the call
   timeout, as for any call (a helper, which opens its GPU first) */
int ferry_link_hello(struct ferry_link *l, uint32_t gpu, uint64_t arena_base,
                     struct ferry_hello_rets *r, int deadline_ms);
/* ends the session (the peer frees what it held) and frees the link's
   connection; l itself stays usable as a dead link */
void ferry_link_close(struct ferry_link *l);
/* the vGPU's own link takes over from's connection (its old one closed);
   from is left empty. Callers hold the vGPU's gate exclusively. */
void ferry_link_adopt(struct ferry_link *own, struct ferry_link *from);
/* a link of a vGPU that is not in-process: the vGPU's own */
static inline struct ferry_link *ferry_link_of(struct ferry_vgpu *v) { return &v->link; }
/* Work that looked something up for v before its call (a module variable's
   address) declares the generation it looked at; a call that finds v moved
   since returns FERRY_STALE instead of running, and the caller looks again */
#define FERRY_STALE (-2)
void ferry_expect_generation(struct ferry_vgpu *v, uint64_t gen); /* v NULL: stop */
int ferry_stale(struct ferry_vgpu *v);

/* ---- FERRY_STREAMS (stripe.c) ---- */
/* after l's hello (and once its answer is read: this makes calls on l):
   opens its data connections when FERRY_STREAMS or the URL asks for them
   and l is a tcp link; failing, one line, and l keeps its one connection */
void ferry_link_stripes_open(struct ferry_link *l);
/* whether a copy of n bytes goes striped on l */
int ferry_link_striped(const struct ferry_link *l, uint64_t n);
/* one whole striped transfer of n bytes (receiving into NULL drops them);
   0, or -1 with errno: the data connections are then cut */
int ferry_link_stripe_move(struct ferry_link *l, int send, void *buf, uint64_t n);

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

#endif
