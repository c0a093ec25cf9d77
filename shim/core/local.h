/* Local execution: a vGPU that runs on a GPU of this process, through the
   executor on the real driver (or the simulation). */
#ifndef FERRY_CORE_LOCAL_H
#define FERRY_CORE_LOCAL_H

#include "executor/driver.h"
#include "shim/core/vgpu.h"

/* ---- local execution (local.c) ---- */
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
