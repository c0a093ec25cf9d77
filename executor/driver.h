/*
 * The CUDA driver functions the executor uses, as one ops table. Two
 * implementations fill it: driver_cuda.c loads the real libcuda.so.1 with
 * dlopen, and sim/ implements the same functions on the CPU for CI. The
 * executor only ever calls through this table.
 *
 *   X(member, "exported symbol", (parameters))   all return CUresult
 */
#ifndef FERRY_DRIVER_H
#define FERRY_DRIVER_H

#include <cuda.h>

#define FERRY_DRIVER_FUNCS(X)                                                                  \
  X(Init, "cuInit", (unsigned int flags))                                                      \
  X(DriverGetVersion, "cuDriverGetVersion", (int *version))                                   \
  X(DeviceGetCount, "cuDeviceGetCount", (int *count))                                         \
  X(DeviceGet, "cuDeviceGet", (CUdevice * dev, int ordinal))                                  \
  X(DeviceGetName, "cuDeviceGetName", (char *name, int len, CUdevice dev))                    \
  X(DeviceGetUuid, "cuDeviceGetUuid_v2", (CUuuid * uuid, CUdevice dev))                       \
  X(DeviceTotalMem, "cuDeviceTotalMem_v2", (size_t * bytes, CUdevice dev))                    \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", (int *pi, CUdevice_attribute attrib, CUdevice dev)) \
  X(DeviceCanAccessPeer, "cuDeviceCanAccessPeer", (int *can, CUdevice dev, CUdevice peer))     \
  X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext * ctx, CUdevice dev))      \
  X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice dev))                  \
  X(DevicePrimaryCtxReset, "cuDevicePrimaryCtxReset_v2", (CUdevice dev))                      \
  X(DevicePrimaryCtxSetFlags, "cuDevicePrimaryCtxSetFlags_v2", (CUdevice dev, unsigned int flags)) \
  X(CtxSetCurrent, "cuCtxSetCurrent", (CUcontext ctx))                                        \
  X(CtxSynchronize, "cuCtxSynchronize", (void))                                               \
  X(CtxSetLimit, "cuCtxSetLimit", (CUlimit limit, size_t value))                              \
  X(CtxGetLimit, "cuCtxGetLimit", (size_t * value, CUlimit limit))                            \
  X(CtxSetCacheConfig, "cuCtxSetCacheConfig", (CUfunc_cache config))                          \
  X(CtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", (int *least, int *greatest))    \
  X(MemGetInfo, "cuMemGetInfo_v2", (size_t * free_bytes, size_t * total_bytes))               \
  X(MemGetAllocationGranularity, "cuMemGetAllocationGranularity",                             \
    (size_t * granularity, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags option)) \
  X(MemAddressReserve, "cuMemAddressReserve",                                                 \
    (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags)) \
  X(MemAddressFree, "cuMemAddressFree", (CUdeviceptr ptr, size_t size))                       \
  X(MemCreate, "cuMemCreate",                                                                 \
    (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop,      \
     unsigned long long flags))                                                               \
  X(MemRelease, "cuMemRelease", (CUmemGenericAllocationHandle handle))                        \
  X(MemMap, "cuMemMap",                                                                       \
    (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,         \
     unsigned long long flags))                                                               \
  X(MemUnmap, "cuMemUnmap", (CUdeviceptr ptr, size_t size))                                   \
  X(MemSetAccess, "cuMemSetAccess",                                                           \
    (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count))                \
  X(MemExportToShareableHandle, "cuMemExportToShareableHandle",                             \
    (void *shareable, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type,     \
     unsigned long long flags))                                                               \
  X(MemImportFromShareableHandle, "cuMemImportFromShareableHandle",                           \
    (CUmemGenericAllocationHandle * handle, void *os_handle, CUmemAllocationHandleType type))  \
  X(IpcGetEventHandle, "cuIpcGetEventHandle", (CUipcEventHandle * handle, CUevent event))     \
  X(IpcOpenEventHandle, "cuIpcOpenEventHandle", (CUevent * event, CUipcEventHandle handle))   \
  X(MemHostAlloc, "cuMemHostAlloc", (void **pp, size_t bytesize, unsigned int flags))         \
  X(MemFreeHost, "cuMemFreeHost", (void *p))                                                  \
  X(MemHostRegister, "cuMemHostRegister_v2", (void *p, size_t bytesize, unsigned int flags))   \
  X(MemHostUnregister, "cuMemHostUnregister", (void *p))                                      \
  X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                                  \
    (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))                        \
  X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                                  \
    (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))                              \
  X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                                  \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                        \
  X(Memcpy2DAsync, "cuMemcpy2DAsync_v2", (const CUDA_MEMCPY2D *copy, CUstream stream))        \
  X(MemsetD8Async, "cuMemsetD8Async", (CUdeviceptr dst, unsigned char value, size_t n, CUstream stream)) \
  X(MemsetD2D8Async, "cuMemsetD2D8Async",                                                     \
    (CUdeviceptr dst, size_t pitch, unsigned char value, size_t width, size_t height, CUstream stream)) \
  X(MemsetD2D16Async, "cuMemsetD2D16Async",                                                   \
    (CUdeviceptr dst, size_t pitch, unsigned short value, size_t width, size_t height,         \
     CUstream stream))                                                                        \
  X(MemsetD2D32Async, "cuMemsetD2D32Async",                                                   \
    (CUdeviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height,           \
     CUstream stream))                                                                        \
  X(ModuleLoadData, "cuModuleLoadData", (CUmodule * module, const void *image))               \
  X(ModuleUnload, "cuModuleUnload", (CUmodule module))                                        \
  X(ModuleGetFunction, "cuModuleGetFunction", (CUfunction * fn, CUmodule module, const char *name)) \
  X(ModuleGetGlobal, "cuModuleGetGlobal_v2",                                                  \
    (CUdeviceptr * dptr, size_t * bytes, CUmodule module, const char *name))                  \
  X(ModuleGetFunctionCount, "cuModuleGetFunctionCount", (unsigned int *count, CUmodule module)) \
  X(ModuleEnumerateFunctions, "cuModuleEnumerateFunctions",                                   \
    (CUfunction * fns, unsigned int n, CUmodule module))                                      \
  X(FuncGetName, "cuFuncGetName", (const char **name, CUfunction fn))                         \
  X(FuncGetParamInfo, "cuFuncGetParamInfo",                                                   \
    (CUfunction fn, size_t index, size_t * offset, size_t * size))                            \
  X(FuncGetAttribute, "cuFuncGetAttribute", (int *pi, CUfunction_attribute attrib, CUfunction fn)) \
  X(FuncSetAttribute, "cuFuncSetAttribute", (CUfunction fn, CUfunction_attribute attrib, int value)) \
  X(FuncSetCacheConfig, "cuFuncSetCacheConfig", (CUfunction fn, CUfunc_cache config))         \
  X(LaunchKernel, "cuLaunchKernel",                                                           \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,         \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void **params,     \
     void **extra))                                                                           \
  X(LaunchCooperativeKernel, "cuLaunchCooperativeKernel",                                     \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,         \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void **params))    \
  X(LaunchKernelEx, "cuLaunchKernelEx",                                                       \
    (const CUlaunchConfig *config, CUfunction f, void **params, void **extra))                \
  X(OccupancyMaxActiveBlocksPerMultiprocessorWithFlags,                                       \
    "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",                                   \
    (int *blocks, CUfunction fn, int block_size, size_t dynamic_smem, unsigned int flags))    \
  X(OccupancyAvailableDynamicSMemPerBlock, "cuOccupancyAvailableDynamicSMemPerBlock",             \
    (size_t * bytes, CUfunction fn, int num_blocks, int block_size))                          \
  X(OccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters",                              \
    (int *clusters, CUfunction fn, const CUlaunchConfig *config))                             \
  X(GetExportTable, "cuGetExportTable", (const void **table, const CUuuid *id))               \
  X(StreamCreateWithPriority, "cuStreamCreateWithPriority",                                   \
    (CUstream * stream, unsigned int flags, int priority))                                    \
  X(StreamDestroy, "cuStreamDestroy_v2", (CUstream stream))                                   \
  X(StreamSynchronize, "cuStreamSynchronize", (CUstream stream))                              \
  X(StreamQuery, "cuStreamQuery", (CUstream stream))                                          \
  X(StreamWaitEvent, "cuStreamWaitEvent", (CUstream stream, CUevent event, unsigned int flags)) \
  X(EventCreate, "cuEventCreate", (CUevent * event, unsigned int flags))                      \
  X(EventDestroy, "cuEventDestroy_v2", (CUevent event))                                       \
  X(EventRecord, "cuEventRecord", (CUevent event, CUstream stream))                           \
  X(EventSynchronize, "cuEventSynchronize", (CUevent event))                                  \
  X(EventQuery, "cuEventQuery", (CUevent event))                                              \
  X(EventElapsedTime, "cuEventElapsedTime_v2", (float *ms, CUevent start, CUevent end))       \
  X(ProfilerStart, "cuProfilerStart", (void))                                                 \
  X(ProfilerStop, "cuProfilerStop", (void))                                                 \
  X(Array3DCreate, "cuArray3DCreate_v2", (CUarray * array, const CUDA_ARRAY3D_DESCRIPTOR *desc)) \
  X(ArrayDestroy, "cuArrayDestroy", (CUarray array))                                          \
  X(Memcpy3DAsync, "cuMemcpy3DAsync_v2", (const CUDA_MEMCPY3D *copy, CUstream stream))        \
  X(TexObjectCreate, "cuTexObjectCreate",                                                     \
    (CUtexObject * obj, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex,           \
     const CUDA_RESOURCE_VIEW_DESC *view))                                                    \
  X(TexObjectDestroy, "cuTexObjectDestroy", (CUtexObject obj))                                \
  X(SurfObjectCreate, "cuSurfObjectCreate", (CUsurfObject * obj, const CUDA_RESOURCE_DESC *res)) \
  X(SurfObjectDestroy, "cuSurfObjectDestroy", (CUsurfObject obj))                            \
  X(GraphCreate, "cuGraphCreate", (CUgraph * graph, unsigned int flags))                      \
  X(GraphAddKernelNode, "cuGraphAddKernelNode_v2",                                            \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,                 \
     const CUDA_KERNEL_NODE_PARAMS *params))                                                  \
  X(GraphKernelNodeSetAttribute, "cuGraphKernelNodeSetAttribute",                             \
    (CUgraphNode node, CUkernelNodeAttrID attr, const CUkernelNodeAttrValue *value))          \
  X(GraphAddMemsetNode, "cuGraphAddMemsetNode",                                               \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,                 \
     const CUDA_MEMSET_NODE_PARAMS *params, CUcontext ctx))                                   \
  X(GraphAddMemcpyNode, "cuGraphAddMemcpyNode",                                               \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,                 \
     const CUDA_MEMCPY3D *copy, CUcontext ctx))                                               \
  X(GraphAddEmptyNode, "cuGraphAddEmptyNode",                                                 \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode *deps, size_t ndeps))               \
  X(GraphAddEventRecordNode, "cuGraphAddEventRecordNode",                                     \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode *deps, size_t ndeps, CUevent event)) \
  X(GraphAddEventWaitNode, "cuGraphAddEventWaitNode",                                         \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode *deps, size_t ndeps, CUevent event)) \
  X(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags",                                 \
    (CUgraphExec * exec, CUgraph graph, unsigned long long flags))                            \
  X(GraphExecUpdate, "cuGraphExecUpdate_v2",                                                  \
    (CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo * info))                    \
  X(GraphLaunch, "cuGraphLaunch", (CUgraphExec exec, CUstream stream))                        \
  X(GraphUpload, "cuGraphUpload", (CUgraphExec exec, CUstream stream))                        \
  X(GraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec exec))                               \
  X(GraphDestroy, "cuGraphDestroy", (CUgraph graph))                                        \
  X(TensorMapEncodeTiled, "cuTensorMapEncodeTiled",                                           \
    (CUtensorMap * map, CUtensorMapDataType dtype, cuuint32_t rank, void *addr,               \
     const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,                \
     const cuuint32_t *estrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,  \
     CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob))                                 \
  X(TensorMapEncodeIm2col, "cuTensorMapEncodeIm2col",                                         \
    (CUtensorMap * map, CUtensorMapDataType dtype, cuuint32_t rank, void *addr,               \
     const cuuint64_t *dims, const cuuint64_t *strides, const int *lower, const int *upper,   \
     cuuint32_t channels, cuuint32_t pixels, const cuuint32_t *estrides,                      \
     CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,  \
     CUtensorMapFloatOOBfill oob))                                                            \
  X(TensorMapReplaceAddress, "cuTensorMapReplaceAddress", (CUtensorMap * map, void *addr))   \
  X(LinkCreate, "cuLinkCreate_v2",                                                            \
    (unsigned int n, CUjit_option *options, void **values, CUlinkState *state))               \
  X(LinkAddData, "cuLinkAddData_v2",                                                          \
    (CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,       \
     unsigned int n, CUjit_option *options, void **values))                                   \
  X(LinkComplete, "cuLinkComplete", (CUlinkState state, void **cubin, size_t *size))          \
  X(LinkDestroy, "cuLinkDestroy", (CUlinkState state))

struct ferry_nvlink;

struct ferry_driver {
  const char *name; /* "cuda" or "sim" */
#define FERRY_DRIVER_MEMBER(member, symbol, params) CUresult(*member) params;
  FERRY_DRIVER_FUNCS(FERRY_DRIVER_MEMBER)
#undef FERRY_DRIVER_MEMBER
  /* not CUDA: the NVLinks of dev (at PCI address bus_id) as the machine's
     NVML reports them, at most FERRY_NVLINK_MAX into out; how many (0: no
     NVML, no NVLink) */
  unsigned (*nvlinks)(CUdevice dev, const char *bus_id, struct ferry_nvlink *out);
};

/* NVIDIA's library `name` (libcuda.so.1, libnvidia-ml.so.1), never ferry's
   front end of the same name, which exports `ferry_marker`: by name, then
   in the directories drivers live in. NULL when there is none */
void *ferry_open_nvidia_library(const char *name, const char *ferry_marker);

/* the real driver; NULL with a reason when libcuda.so.1 or a symbol is missing */
const struct ferry_driver *ferry_driver_cuda(char *err, size_t errlen);

/* the CPU simulation; twins_path names a shared object with CPU twins of the
   test kernels (may be NULL: launches then fail with CUDA_ERROR_NOT_FOUND) */
const struct ferry_driver *ferry_driver_sim(const char *twins_path, char *err, size_t errlen);

#endif
