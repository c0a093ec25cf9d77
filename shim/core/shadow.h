/* Pinned host memory that kernels use (mapped, zero-copy): shadows on a
   remote vGPU, kept coherent at CUDA's synchronization points (shadow.c). */
#ifndef FERRY_CORE_SHADOW_H
#define FERRY_CORE_SHADOW_H

#include "shim/core/vgpu.h"

/* v's device may use the pinned block holding addr: on a server it gets a
   shadow. 1 when addr is no pinned memory; 0; or a cudaError_t, said in one
   line, where ferry cannot make one (cudaHostRegister'ed memory on a
   server, a block two vGPUs use) */
int ferry_shadow_expose(struct ferry_vgpu *v, uint64_t addr);
/* managed memory at [addr, addr + size) (a block of the shared arena) is
   v's: every work of v may use it; 0 or a cudaError_t */
int ferry_shadow_manage(struct ferry_vgpu *v, uint64_t addr, uint64_t size);
/* exposes every pinned block a launch's packed parameters point into:
   FERRY_SHADOW_HIT when there is one (this thread's next call then counts
   as work on mapped memory), 0 when none, or a cudaError_t */
#define FERRY_SHADOW_HIT (-1)
int ferry_shadow_scan(struct ferry_vgpu *v, const void *params, size_t len);
/* this thread's next call is work on mapped memory (a graph whose kernels
   are given some) */
void ferry_shadow_touch(void);
/* p is a block the program asked for mapped (cudaHostAllocMapped,
   CU_MEMHOSTALLOC_DEVICEMAP) with device vgpu current: a kernel may find
   it through a structure (NCCL's abort flag and work FIFO), so it gets its
   shadow at that vGPU's next launch even when no parameter names it */
void ferry_shadow_mapped_alloc(const void *p, int vgpu);
/* the block at p was freed or unregistered */
void ferry_shadow_forget(const void *p);
/* around a call on v, v's gate held (remote.c): before device work, the
   host's changes go out; after a wait, the device's changes come back */
int ferry_shadow_before(struct ferry_vgpu *v, unsigned call, const void *args);
int ferry_shadow_after(struct ferry_vgpu *v, unsigned call, const void *args, int rc);
/* cudaMemPrefetchAsync to v's device: the host's changes to managed
   memory go out now, in `stream`, not with the next work (gate taken) */
int ferry_shadow_prefetch(struct ferry_vgpu *v, uint32_t stream);
/* a blocking wait that may never end (shadow_wait.c): polls the event
   (`event`) or the streams in ids until done, or FERRY_MAPPED_WAIT_S
   passes: 0, or cudaErrorLaunchTimeout, said naming addr */
int ferry_shadow_wait_bounded(struct ferry_vgpu *v, int event, const uint32_t *ids, int n,
                              uint64_t addr);
/* a migration, gate held: the source's pages come home after the drain;
   after the switch the target has no shadows yet */
int ferry_shadow_settle(struct ferry_vgpu *v);
void ferry_shadow_switched(struct ferry_vgpu *v);
/* ---- aliases (shadow_alias.c): registered memory's shadows are made at
   addresses of the alias window, which calls to a server or a helper carry
   in place of the program's ---- */
/* an alias for the `span` bytes at page-aligned `addr`: 0 when the window
   is full */
uint64_t ferry_alias_take(uint64_t addr, uint64_t span);
void ferry_alias_give(uint64_t alias);
/* some shadow of v's is aliased where v runs (cheap: the fast path) */
int ferry_shadow_aliased(const struct ferry_vgpu *v);
/* where addr is on v's server: its alias inside an aliased shadow, else addr */
uint64_t ferry_shadow_dev(int vgpu, uint64_t addr);
/* the call's arguments as v's server must see them: `args`, or a copy in
   `scratch` (FERRY_ALIAS_SCRATCH bytes) with the addresses translated */
#define FERRY_ALIAS_SCRATCH 256
const void *ferry_shadow_translate(struct ferry_vgpu *v, unsigned call, const void *args,
                                   void *scratch);
/* FERRY_STATS: live shadows, the bytes exchanged, the checks after waits */
void ferry_shadow_stats(int vgpu, uint64_t *shadows, uint64_t *pushed, uint64_t *pulled,
                        uint64_t *pulls);

#endif
