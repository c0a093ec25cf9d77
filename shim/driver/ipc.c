/*
 * The driver API's CUDA IPC (cuIpc*): the runtime front end's code
 * (runtime/ipc.c, runtime/stream.c), as the handles are the same 64 bytes
 * and a CUdeviceptr is an arena address. Served between programs whose
 * devices are on one ferry-server (docs/multigpu.md, "CUDA IPC").
 */
#include "shim/driver/cu.h"

_Static_assert(sizeof(CUipcMemHandle) == sizeof(cudaIpcMemHandle_t), "one handle layout");
_Static_assert(sizeof(CUipcEventHandle) == sizeof(cudaIpcEventHandle_t), "one handle layout");

CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
  return READY_THEN(cudaIpcGetMemHandle((cudaIpcMemHandle_t *)(void *)handle,
                                        (void *)(uintptr_t)dptr));
}

static CUresult open_mem(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags) {
  if (!pdptr) return CUDA_ERROR_INVALID_VALUE;
  cudaIpcMemHandle_t h;
  memcpy(&h, &handle, sizeof h);
  void *p = NULL;
  CUresult rc = CURRENT_THEN(cudaIpcOpenMemHandle(&p, h, flags));
  if (!rc) *pdptr = (CUdeviceptr)(uintptr_t)p;
  return rc;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags) {
  return open_mem(pdptr, handle, flags);
}
#undef cuIpcOpenMemHandle /* the first version has the same form */
CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags) {
  return open_mem(pdptr, handle, flags);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  return READY_THEN(cudaIpcCloseMemHandle((void *)(uintptr_t)dptr));
}

CUresult cuIpcGetEventHandle(CUipcEventHandle *handle, CUevent event) {
  return READY_THEN(cudaIpcGetEventHandle((cudaIpcEventHandle_t *)(void *)handle,
                                          (cudaEvent_t)event));
}

CUresult cuIpcOpenEventHandle(CUevent *event, CUipcEventHandle handle) {
  if (!event) return CUDA_ERROR_INVALID_VALUE;
  cudaIpcEventHandle_t h;
  memcpy(&h, &handle, sizeof h);
  cudaEvent_t e = NULL;
  CUresult rc = CURRENT_THEN(cudaIpcOpenEventHandle(&e, h));
  if (!rc) *event = (CUevent)e;
  return rc;
}
