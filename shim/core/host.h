/* Host memory the program and its ferry-mhelpers share (hostmem.c), and
   copies through it (shmcopy.c). */
#ifndef FERRY_CORE_HOST_H
#define FERRY_CORE_HOST_H

#include "shim/core/vgpu.h"

/* ---- host memory (hostmem.c) ---- */
/* the shared host arena's memfd, or -1 with the reason in err */
int ferry_host_arena_fd(char *err, size_t errlen);
/* page-aligned memory in the shared host arena; NULL when there is none */
void *ferry_host_shared_alloc(size_t size);
void ferry_host_shared_free(void *p);
/* p is pinned host memory (cudaMallocHost, cudaHostRegister) */
int ferry_host_pinned(const void *p);
/* the pinned block holding p: its start and size, and whether it lies in
   the shared arena; 0 when p is no pinned memory */
int ferry_host_block(const void *p, uint64_t *base, uint64_t *size, int *shared);
/* the program registered some host memory (cudaHostRegister) */
int ferry_host_any_registered(void);
/* managed memory (cudaMallocManaged): a block of the shared arena, NULL
   when there is none; the managed block holding p; its release (p its
   start: 0 or cudaErrorInvalidValue) */
void *ferry_host_managed_alloc(size_t size, unsigned flags);
int ferry_host_managed(const void *p, uint64_t *base, uint64_t *size);
int ferry_host_managed_free(void *p);
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

#endif
