/*
 * The driver front end (ferry's libcuda.so.1): the CUDA driver API over the
 * same vGPUs, arena, handles and replay log as the runtime front end. A
 * driver call is served by the runtime front end's entry points where one
 * fits (a CUstream is a cudaStream_t, a CUdeviceptr an arena address), so
 * both front ends see one state. This header is what the files of cu/ share.
 */
#ifndef FERRY_CU_H
#define FERRY_CU_H

#include <cuda.h>

#include "shim/core/host.h"
#include "shim/core/link.h"
#include "shim/core/hooks.h"
#include "shim/migrate/migrate.h"
#include "shim/runtime/runtime.h"

/* the CUresult for a ferry (runtime) error code */
CUresult ferry_cu_result(int cuda_error);

/* Runs a runtime entry point on the driver's behalf: its result as a
   CUresult. The driver API has no "last error", so the runtime's is left
   as it was. */
#define FERRY_CU_RT(expr)                                                                      \
  __extension__({                                                                              \
    struct ferry_thread *cu_rt_t_ = ferry_thread();                                            \
    cudaError_t cu_rt_keep_ = cu_rt_t_->last_error;                                            \
    int cu_rt_e_ = (int)(expr);                                                                \
    cu_rt_t_->last_error = cu_rt_keep_;                                                        \
    ferry_cu_result(cu_rt_e_);                                                                 \
  })

/* a runtime entry point once the thread has a current context, or once
   the driver is ready (calls that name their memory or object need no
   context) */
#define CURRENT_THEN(expr)                                                                     \
  __extension__({                                                                              \
    struct ferry_vgpu *ct_v_;                                                                  \
    CUresult ct_rc_ = ferry_cu_current(&ct_v_);                                                \
    ct_rc_ ? ct_rc_ : FERRY_CU_RT(expr);                                                       \
  })
#define READY_THEN(expr)                                                                       \
  __extension__({                                                                              \
    CUresult rt_rc_ = ferry_cu_ready();                                                        \
    rt_rc_ ? rt_rc_ : FERRY_CU_RT(expr);                                                       \
  })

/* cuInit has run (CUDA_ERROR_NOT_INITIALIZED otherwise); then connects */
CUresult ferry_cu_ready(void);
/* the calling thread's current context's vGPU (it becomes the runtime's
   device too); CUDA_ERROR_INVALID_CONTEXT without one */
CUresult ferry_cu_current(struct ferry_vgpu **v);
/* the vGPU of a context handle; NULL for a handle ferry did not make */
struct ferry_vgpu *ferry_cu_ctx_vgpu(CUcontext ctx);
/* the primary context of vGPU i (for cuStreamGetCtx and friends) */
CUcontext ferry_cu_primary(int vgpu);
/* 1 when export_name is ferry's code, 0 for a stub that refuses (exported
   for tests and tools) */
int ferry_cu_served(const char *export_name);
/* the export whose function cuGetProcAddress handed out (the core's own
   address, not the thin library's entry), or NULL (tests, tools) */
const char *ferry_cu_export_name(const void *fn);
/* one line naming a driver call or argument ferry does not serve, once per
   name; returns CUDA_ERROR_NOT_SUPPORTED */
CUresult ferry_cu_unsupported(const char *what);

/* a function as a launch needs it on one vGPU: its wire id, parameter
   layout, and the dynamic shared memory it was allowed (cuFuncSetAttribute) */
struct ferry_layout;
struct ferry_cu_fn {
  uint32_t id;
  const struct ferry_layout *layout;
  int *max_dynamic_smem;
};
/* the library API's kernels (library.c): a CUkernel is also a CUfunction */
struct cu_kernel;
struct cu_kernel *ferry_cu_kernel_of(const void *h);
/* resolves k on v, loading its library there first if need be */
CUresult ferry_cu_kernel_on(struct cu_kernel *k, struct ferry_vgpu *v, struct ferry_cu_fn *out);
/* a module variable's address on v (module.c): the address handed out the
   first time, translated after migrations */
CUresult ferry_cu_global(struct ferry_vgpu *v, uint32_t module, const char *name, CUdeviceptr *dptr,
                         size_t *bytes);
/* a 2D copy with a CUDA array on either side (array.c) */
CUresult ferry_cu_copy2d_array(const CUDA_MEMCPY2D *c, CUstream s, int async, int per_thread);
cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p);
cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms *p, cudaStream_t s);
/* after a reset of vgpu: its modules die and its globals are forgotten (module.c) */
void ferry_cu_modules_forget(int vgpu);
/* module globals handed out, followed across migrations (module.c; the
   core's hooks global_now, globals_prepare and globals_commit) */
uint64_t ferry_global_now(int vgpu, uint64_t addr);
/* TOOLS_CONTEXT entries 51 and 39, served by the executor (ctx_objects.c);
   forget: a reset of vgpu freed the driver's objects */
CUresult ferry_cu_ctx_object(CUcontext ctx, CUstream stream, void **out);
CUresult ferry_cu_ctx_object_query(CUcontext ctx, void *object, uint64_t *value);
void ferry_cu_ctx_objects_forget(int vgpu);
/* every function of a module, as its GPU lists them: NUL-terminated names
   back to back (malloc'd, the caller frees), and how many (module.c) */
CUresult ferry_cu_function_names(CUmodule module, char **names, unsigned *count);
/* TOOLS_MODULE entry 7: a module's function handed to cuFFT's callback
   (tools_module.c); returns what the driver did */
int ferry_cu_module_each_function(void *a0, CUmodule module, void *callback, void *user,
                                  CUmodule module2, void *a5);
/* the context is gone: its context-local values are dropped, their
   destructors run (export.c) */
void ferry_cu_cls_drop(CUcontext ctx);
/* program VMM (vmm.c): the handle types a handle was made to be exported
   as; forget: a reset of vgpu dropped its handles' memory */
unsigned ferry_cu_vmm_handle_types(uint64_t handle);
void ferry_cu_vmm_forget(int vgpu);
/* a whole file, NUL-terminated past its end (PTX needs it); NULL on error */
char *ferry_cu_read_file(const char *path, size_t *len);

/* the runtime front end's per-thread-default-stream entry points, which
   cuda_runtime_api.h declares only under --default-stream per-thread */
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);
cudaError_t cudaStreamQuery_ptsz(cudaStream_t s);
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int flags);
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t s, unsigned int *flags);
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t s, int *priority);
cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb, void *user,
                                       unsigned int flags);
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *user);
cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned int flags);
cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t s);
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                 cudaStream_t s);
cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind,
                                   cudaStream_t s);

/* per-thread default stream variants (_ptsz/_ptds) pass 1 */
#define FERRY_CU_LEGACY 0
#define FERRY_CU_PER_THREAD 1

#endif
