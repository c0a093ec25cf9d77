/*
 * What the runtime front end's files share, and what the driver front end
 * (written over it) calls: streams, kernels and modules, CUDA arrays, and
 * device memory by address.
 */
#ifndef FERRY_RUNTIME_H
#define FERRY_RUNTIME_H

#include "shim/core/vgpu.h"

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

/* (v, stream) is part of a stream capture, valid or invalidated (answered
   here, no round trip; capture.c) */
int ferry_stream_capturing(struct ferry_vgpu *v, uint32_t stream);

/* the device's stream priority range, asked once */
int ferry_priority_range(struct ferry_vgpu *v, int *least, int *greatest);
/* forget the streams and events of a vGPU (after cudaDeviceReset) */
void ferry_streams_forget(int vgpu);

/* ---- CUDA IPC (ipc.c; events in stream.c) ---- */
/* where v runs when that is not a server ("on a local GPU ..."), else NULL */
const char *ferry_ipc_where(const struct ferry_vgpu *v);
/* a server's FERRY_IPC_* refusal of call as the program's error, said in one line */
int ferry_ipc_refusal(const char *call, const struct ferry_vgpu *v, unsigned refusal);
/* the same refusal for a vGPU in this process, which has no broker; else 0 */
int ferry_ipc_local_refused(const char *call, struct ferry_vgpu *v);
/* an arena backend whose map imports the export `key` names on v's server
   (ipc_mem_import) and whose unmap closes it; refusal: the server's */
struct ferry_ipc_import {
  struct ferry_vgpu *v;
  uint64_t instance;
  const uint8_t *key;
  uint32_t refusal;
};
struct ferry_arena_backend ferry_ipc_import_backend(struct ferry_ipc_import *c);
/* CUDA IPC of an allocation, without the front end's handle types: export
   (out: its handle), open on v (dev_ptr: where it is mapped) and close; 0 or
   a cudaError_t, each refusal said in one line naming `call` */
struct ferry_ipc_handle;
int ferry_ipc_export_mem(void *dev_ptr, struct ferry_ipc_handle *out, const char *call);
int ferry_ipc_open_mem(struct ferry_vgpu *v, const struct ferry_ipc_handle *h, void **dev_ptr,
                       const char *call);
int ferry_ipc_close_mem(void *dev_ptr);
/* the allocation at addr was freed (its export ended) */
void ferry_ipc_released(struct ferry_vgpu *v, uint64_t addr);
/* after cudaDeviceReset: every export and import of vgpu is gone */
void ferry_ipc_forget(int vgpu);

/* ---- memory pool IPC (mempool_ipc.c; the tokens: mempool.c) ---- */
/* *token: the pool's (0: not shareable); cudaErrorInvalidValue: no such pool */
int ferry_mempool_token(cudaMemPool_t pool, uint64_t *token);
/* the token of the shareable pool whose live block starts at addr, else 0 */
uint64_t ferry_mempool_block_token(struct ferry_vgpu *v, uint64_t addr);
/* pool is an imported one: 1 and the device that imported it */
int ferry_mempool_imported(cudaMemPool_t pool, int *vgpu);
/* destroys an imported pool: 0, cudaErrorInvalidValue while pointers of it
   are imported, -1 when pool is not an imported one */
int ferry_mempool_imported_destroy(cudaMemPool_t pool);
/* ptr is a pointer imported into a pool (cudaMemPoolImportPointer) */
int ferry_mempool_import_has(const void *ptr);
/* frees (closes) an imported pool pointer: 0 or a cudaError_t; -1 when ptr
   is not one */
int ferry_mempool_import_free(void *ptr);

/* the program's device `device` (device.c): 0, or why not (ensure_init's
   error, cudaErrorInvalidDevice) */
int ferry_vgpu_at(int device, struct ferry_vgpu **v);

/* ---- peer access between vGPUs of one server (peer.c) ---- */
/* why a device maps another's memory */
#define FERRY_PEER_DEVICE 1u /* cudaDeviceEnablePeerAccess */
#define FERRY_PEER_POOL 2u   /* cudaMemPoolSetAccess on one of the other's pools */
/* d maps (no longer maps) p's memory for `why`: 0 or a cudaError_t
   (grant: cudaErrorPeerAccessAlreadyEnabled for FERRY_PEER_DEVICE given
   twice); revoke: 1 when it was not given */
int ferry_peer_grant(struct ferry_vgpu *d, struct ferry_vgpu *p, unsigned why, const char *call);
int ferry_peer_revoke(struct ferry_vgpu *d, struct ferry_vgpu *p, unsigned why);
int ferry_peer_has(const struct ferry_vgpu *d, const struct ferry_vgpu *p, unsigned why);
/* p mapped (is about to unmap) [addr, addr + size) on its server: the
   devices with peer access to p map it too (let go of it); p's arena_lock held */
int ferry_peer_mapped(struct ferry_vgpu *p, uint64_t addr, uint64_t size);
void ferry_peer_unmapping(struct ferry_vgpu *p, uint64_t addr, uint64_t size);
/* a copy between two vGPUs with peer access on, made on their server: 0 or
   an error; -1 when they have none (the caller copies through this host) */
int ferry_peer_copy(void *dst, const void *src, size_t count);
/* the same, asynchronous, in v's stream: when v maps the other's memory */
int ferry_peer_copy_async(void *dst, const void *src, size_t count, struct ferry_vgpu *v,
                          uint32_t stream);
/* after cudaDeviceReset of vgpu */
void ferry_peer_forget(int vgpu);

/* ---- kernels and modules (module.c) ---- */
struct ferry_kernel;
int ferry_kernel_lookup(const void *func, struct ferry_kernel **k);
#define FERRY_LAUNCH_PER_THREAD 1u /* the _ptsz variant: NULL means the per-thread stream */
#define FERRY_LAUNCH_COOPERATIVE 2u
/* attrs: CUlaunchAttribute array of plain-valued attributes (see
   protocol/calls.def), {NULL, 0} for a plain launch */
struct ferry_layout;
/* A module variable's address the driver front end handed out, where the
   variable lives on vgpu now (a migration moves it: the driver picks it on
   each GPU); any other address as it is */
uint64_t ferry_variable_now(int vgpu, uint64_t addr);
/* params, packed by l, with its pointer-sized parameters that name such
   variables where they are now: params itself when none moved, else buf
   (len bytes; it may be params) holding the translated copy */
const unsigned char *ferry_params_now(const struct ferry_layout *l, int vgpu,
                                      const unsigned char *params, uint32_t len, unsigned char *buf);
int ferry_launch(struct ferry_kernel *k, dim3 grid, dim3 block, void **args, size_t shmem,
                 cudaStream_t stream, unsigned flags, ferry_blob attrs);
int ferry_kernel_func_id(struct ferry_kernel *k, struct ferry_vgpu *v, uint32_t *func);
/* sorts num launch attributes (cudaLaunchAttribute or CUlaunchAttribute:
   one layout) into out, the forwarded ones (at most FERRY_MAX_LAUNCH_ATTRS),
   and *flags (cooperative); unsupported ones are said and refused (launch.c) */
int ferry_launch_attrs(const void *attrs, unsigned num, CUlaunchAttribute *out, uint32_t *n,
                       unsigned *flags);

/* cudaOccupancyMaxActiveClusters / cuOccupancyMaxActiveClusters on v */
int ferry_occupancy_clusters(struct ferry_vgpu *v, uint32_t func, dim3 grid, dim3 block,
                             size_t smem, const void *attrs, unsigned nattrs, int *clusters);
/* CUDA's checks of a launch configuration against v's limits */
/* 1 when func's attribute attr already has value (a set would change nothing) */
int ferry_func_attr_unchanged(struct ferry_vgpu *v, uint32_t func, uint32_t attr, int value);
int ferry_launch_check(const struct ferry_vgpu *v, dim3 grid, dim3 block);
/* a fresh module id (fat binaries and driver modules share one space) */
uint32_t ferry_module_id_new(void);
/* device address and size of a __device__/__constant__ variable on v */
int ferry_symbol_lookup(const void *symbol, struct ferry_vgpu *v, uint64_t *addr, uint64_t *size);
/* forget which modules v has loaded (after cudaDeviceReset) */
void ferry_modules_forget(int vgpu);

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

/* ---- memory (memory.c) ---- */
/* the vGPU whose arena holds p, or NULL (host memory) */
struct ferry_vgpu *ferry_vgpu_of(const void *p);
/* 16- and 32-bit sets (the driver front end's cuMemsetD16/D32) */
int ferry_memset_wide(void *dst, size_t pitch, uint32_t value, unsigned elem, size_t width,
                      size_t height, cudaStream_t stream, int per_thread);
/* a new allocation in v's arena (0 or a cudaError_t); a release frees
   one without waiting: the caller knows no queued work uses it */
/* v's arena mapped on its GPU with the recorded mem_map / mem_unmap */
struct ferry_arena_backend ferry_device_backend(struct ferry_vgpu *v);
int ferry_device_alloc(struct ferry_vgpu *v, uint64_t size, void **out);
int ferry_device_release(struct ferry_vgpu *v, uint64_t addr);

/* ---- stream-ordered memory and pools (mempool.c) ---- */
/* allocation and free in stream sid's order (sid UINT32_MAX in the free:
   a stream of another vGPU); pool NULL: v's current pool */
int ferry_mempool_malloc(struct ferry_vgpu *v, uint32_t sid, cudaMemPool_t pool, size_t size,
                         void **ptr);
int ferry_mempool_free(struct ferry_vgpu *v, uint32_t sid, void *ptr);
/* cudaFree of addr: refused for a block a pool keeps, else it leaves its pool */
int ferry_mempool_on_free(struct ferry_vgpu *v, uint64_t addr);
/* the pool that handed addr out, or NULL */
cudaMemPool_t ferry_mempool_of(struct ferry_vgpu *v, uint64_t addr);
/* what completes frees: take the clock before a synchronization, and say
   which one ended once it did; events recorded, waited for, synchronized,
   destroyed; streams destroyed; the device reset */
uint64_t ferry_mempool_clock(struct ferry_vgpu *v);
void ferry_mempool_stream_synced(struct ferry_vgpu *v, uint32_t sid, uint64_t at);
void ferry_mempool_device_synced(struct ferry_vgpu *v, uint64_t at);
void ferry_mempool_event_recorded(struct ferry_vgpu *v, uint32_t event, uint32_t sid);
void ferry_mempool_event_waited(struct ferry_vgpu *v, uint32_t sid, uint32_t event);
void ferry_mempool_event_synced(struct ferry_vgpu *v, uint32_t event);
void ferry_mempool_event_forget(struct ferry_vgpu *v, uint32_t event);
void ferry_mempool_stream_forget(struct ferry_vgpu *v, uint32_t sid);
void ferry_mempool_reset(struct ferry_vgpu *v);
/* declared by cuda_runtime_api.h only under --default-stream per-thread */
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);
cudaError_t cudaMemPrefetchAsync_ptsz(const void *p, size_t count, struct cudaMemLocation to,
                                      unsigned int flags, cudaStream_t stream);
cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void *p, size_t length,
                                          unsigned int flags);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                         cudaStream_t stream);

/* managed memory's advice and prefetch locations, for
   cudaMemRangeGetAttribute (managed_advice.c) */
void ferry_managed_advise(const void *p, size_t count, enum cudaMemoryAdvise advice,
                          struct cudaMemLocation where);
void ferry_managed_prefetched(const void *p, size_t count, struct cudaMemLocation to);
void ferry_managed_advice_forget(const void *base);

#endif
