/* Fills cudaDeviceProp (CUDA 13 layout, 1008 bytes) from device attributes.
 * The runtime struct mirrors driver attributes one field per attribute, so the
 * shim can answer cudaGetDeviceProperties from the attribute array it fetched
 * at start-up. Attributes are indexed by driver (CUdevice_attribute) number;
 * the static asserts below check that each runtime cudaDeviceAttr used has the
 * same number, so a header change that split them would fail to compile. */
#include "shim/core/props.h"

#include <cuda.h>
#include <string.h>

_Static_assert(sizeof(struct cudaDeviceProp) == 1008, "cudaDeviceProp layout is not CUDA 13's");

/* The runtime enum names some driver attributes "Reserved<N>" or leaves them
 * out; those are read by their driver name only. */
#define SAME(rt, drv) _Static_assert((int)(rt) == (int)(drv), #rt " differs from " #drv)
SAME(cudaDevAttrMaxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
SAME(cudaDevAttrMaxBlockDimX, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
SAME(cudaDevAttrMaxGridDimX, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
SAME(cudaDevAttrMaxSharedMemoryPerBlock, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
SAME(cudaDevAttrTotalConstantMemory, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
SAME(cudaDevAttrWarpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
SAME(cudaDevAttrMaxPitch, CU_DEVICE_ATTRIBUTE_MAX_PITCH);
SAME(cudaDevAttrMaxRegistersPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
SAME(cudaDevAttrClockRate, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
SAME(cudaDevAttrTextureAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
SAME(cudaDevAttrMultiProcessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME(cudaDevAttrComputeMode, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE);
SAME(cudaDevAttrMaxTexture2DLayeredLayers, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS);
SAME(cudaDevAttrPciDomainId, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
SAME(cudaDevAttrMaxSurfaceCubemapLayeredLayers, CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS);
SAME(cudaDevAttrComputeCapabilityMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
SAME(cudaDevAttrMaxTexture1DMipmappedWidth, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH);
SAME(cudaDevAttrCanUseHostPointerForRegisteredMem, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
SAME(cudaDevAttrCooperativeLaunch, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH);
SAME(cudaDevAttrMaxSharedMemoryPerBlockOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
SAME(cudaDevAttrMaxBlocksPerMultiprocessor, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
SAME(cudaDevAttrMaxPersistingL2CacheSize, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE);
SAME(cudaDevAttrReservedSharedMemoryPerBlock, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
SAME(cudaDevAttrHostRegisterReadOnlySupported, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED);
SAME(cudaDevAttrMemoryPoolSupportedHandleTypes, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES);
SAME(cudaDevAttrIpcEventSupport, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED);
SAME(cudaDevAttrReserved129, CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS);
SAME(cudaDevAttrNumaConfig, CU_DEVICE_ATTRIBUTE_NUMA_CONFIG);
SAME(cudaDevAttrHostNumaId, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
SAME(cudaDevAttrGpuPciSubsystemId, CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID);
SAME(cudaDevAttrHostNumaMultinodeIpcSupported, CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED);
SAME(cudaDevAttrOnlyPartialHostNativeAtomicSupported, CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED);
SAME(cudaDevAttrMax, CU_DEVICE_ATTRIBUTE_MAX);
#undef SAME

/* Attribute value, or 0 when the server sent fewer attributes than this one. */
static int32_t at(const int32_t *attrs, unsigned nattrs, int attr)
{
    return (attrs != NULL && attr >= 0 && (unsigned)attr < nattrs) ? attrs[attr] : 0;
}

/* Sizes are non-negative ints in the driver; a negative one would be a bad
 * reply, and is read as 0 rather than as a huge size_t. */
static size_t at_size(const int32_t *attrs, unsigned nattrs, int attr)
{
    int32_t v = at(attrs, nattrs, attr);
    return v > 0 ? (size_t)v : 0;
}

void ferry_props_build(struct cudaDeviceProp *p, const char *name, const unsigned char uuid[16],
                       size_t total_mem, const int32_t *attrs, unsigned nattrs)
{
    if (p == NULL)
        return;
    memset(p, 0, sizeof(*p));
    if (name != NULL) {
        strncpy(p->name, name, sizeof(p->name) - 1);
        p->name[sizeof(p->name) - 1] = '\0';
    }
    if (uuid != NULL)
        memcpy(p->uuid.bytes, uuid, sizeof(p->uuid.bytes));
    /* luid and luidDeviceNodeMask exist on Windows only: left 0. */
    p->totalGlobalMem = total_mem;

#define I(field, attr) (p->field = at(attrs, nattrs, CU_DEVICE_ATTRIBUTE_##attr))
#define U(field, attr) (p->field = (unsigned int)at(attrs, nattrs, CU_DEVICE_ATTRIBUTE_##attr))
#define Z(field, attr) (p->field = at_size(attrs, nattrs, CU_DEVICE_ATTRIBUTE_##attr))
    Z(sharedMemPerBlock, MAX_SHARED_MEMORY_PER_BLOCK);
    I(regsPerBlock, MAX_REGISTERS_PER_BLOCK);
    I(warpSize, WARP_SIZE);
    Z(memPitch, MAX_PITCH);
    I(maxThreadsPerBlock, MAX_THREADS_PER_BLOCK);
    I(maxThreadsDim[0], MAX_BLOCK_DIM_X);
    I(maxThreadsDim[1], MAX_BLOCK_DIM_Y);
    I(maxThreadsDim[2], MAX_BLOCK_DIM_Z);
    I(maxGridSize[0], MAX_GRID_DIM_X);
    I(maxGridSize[1], MAX_GRID_DIM_Y);
    I(maxGridSize[2], MAX_GRID_DIM_Z);
    Z(totalConstMem, TOTAL_CONSTANT_MEMORY);
    I(major, COMPUTE_CAPABILITY_MAJOR);
    I(minor, COMPUTE_CAPABILITY_MINOR);
    Z(textureAlignment, TEXTURE_ALIGNMENT);
    Z(texturePitchAlignment, TEXTURE_PITCH_ALIGNMENT);
    I(multiProcessorCount, MULTIPROCESSOR_COUNT);
    I(integrated, INTEGRATED);
    I(canMapHostMemory, CAN_MAP_HOST_MEMORY);
    I(maxTexture1D, MAXIMUM_TEXTURE1D_WIDTH);
    I(maxTexture1DMipmap, MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH);
    I(maxTexture2D[0], MAXIMUM_TEXTURE2D_WIDTH);
    I(maxTexture2D[1], MAXIMUM_TEXTURE2D_HEIGHT);
    I(maxTexture2DMipmap[0], MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH);
    I(maxTexture2DMipmap[1], MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT);
    I(maxTexture2DLinear[0], MAXIMUM_TEXTURE2D_LINEAR_WIDTH);
    I(maxTexture2DLinear[1], MAXIMUM_TEXTURE2D_LINEAR_HEIGHT);
    I(maxTexture2DLinear[2], MAXIMUM_TEXTURE2D_LINEAR_PITCH);
    I(maxTexture2DGather[0], MAXIMUM_TEXTURE2D_GATHER_WIDTH);
    I(maxTexture2DGather[1], MAXIMUM_TEXTURE2D_GATHER_HEIGHT);
    I(maxTexture3D[0], MAXIMUM_TEXTURE3D_WIDTH);
    I(maxTexture3D[1], MAXIMUM_TEXTURE3D_HEIGHT);
    I(maxTexture3D[2], MAXIMUM_TEXTURE3D_DEPTH);
    I(maxTexture3DAlt[0], MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE);
    I(maxTexture3DAlt[1], MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE);
    I(maxTexture3DAlt[2], MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE);
    I(maxTextureCubemap, MAXIMUM_TEXTURECUBEMAP_WIDTH);
    I(maxTexture1DLayered[0], MAXIMUM_TEXTURE1D_LAYERED_WIDTH);
    I(maxTexture1DLayered[1], MAXIMUM_TEXTURE1D_LAYERED_LAYERS);
    I(maxTexture2DLayered[0], MAXIMUM_TEXTURE2D_LAYERED_WIDTH);
    I(maxTexture2DLayered[1], MAXIMUM_TEXTURE2D_LAYERED_HEIGHT);
    I(maxTexture2DLayered[2], MAXIMUM_TEXTURE2D_LAYERED_LAYERS);
    I(maxTextureCubemapLayered[0], MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH);
    I(maxTextureCubemapLayered[1], MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS);
    I(maxSurface1D, MAXIMUM_SURFACE1D_WIDTH);
    I(maxSurface2D[0], MAXIMUM_SURFACE2D_WIDTH);
    I(maxSurface2D[1], MAXIMUM_SURFACE2D_HEIGHT);
    I(maxSurface3D[0], MAXIMUM_SURFACE3D_WIDTH);
    I(maxSurface3D[1], MAXIMUM_SURFACE3D_HEIGHT);
    I(maxSurface3D[2], MAXIMUM_SURFACE3D_DEPTH);
    I(maxSurface1DLayered[0], MAXIMUM_SURFACE1D_LAYERED_WIDTH);
    I(maxSurface1DLayered[1], MAXIMUM_SURFACE1D_LAYERED_LAYERS);
    I(maxSurface2DLayered[0], MAXIMUM_SURFACE2D_LAYERED_WIDTH);
    I(maxSurface2DLayered[1], MAXIMUM_SURFACE2D_LAYERED_HEIGHT);
    I(maxSurface2DLayered[2], MAXIMUM_SURFACE2D_LAYERED_LAYERS);
    I(maxSurfaceCubemap, MAXIMUM_SURFACECUBEMAP_WIDTH);
    I(maxSurfaceCubemapLayered[0], MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH);
    I(maxSurfaceCubemapLayered[1], MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS);
    Z(surfaceAlignment, SURFACE_ALIGNMENT);
    I(concurrentKernels, CONCURRENT_KERNELS);
    I(ECCEnabled, ECC_ENABLED);
    I(pciBusID, PCI_BUS_ID);
    I(pciDeviceID, PCI_DEVICE_ID);
    I(pciDomainID, PCI_DOMAIN_ID);
    I(tccDriver, TCC_DRIVER);
    I(asyncEngineCount, ASYNC_ENGINE_COUNT);
    I(unifiedAddressing, UNIFIED_ADDRESSING);
    I(memoryBusWidth, GLOBAL_MEMORY_BUS_WIDTH);
    I(l2CacheSize, L2_CACHE_SIZE);
    I(persistingL2CacheMaxSize, MAX_PERSISTING_L2_CACHE_SIZE);
    I(maxThreadsPerMultiProcessor, MAX_THREADS_PER_MULTIPROCESSOR);
    I(streamPrioritiesSupported, STREAM_PRIORITIES_SUPPORTED);
    I(globalL1CacheSupported, GLOBAL_L1_CACHE_SUPPORTED);
    I(localL1CacheSupported, LOCAL_L1_CACHE_SUPPORTED);
    Z(sharedMemPerMultiprocessor, MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    I(regsPerMultiprocessor, MAX_REGISTERS_PER_MULTIPROCESSOR);
    I(managedMemory, MANAGED_MEMORY);
    I(isMultiGpuBoard, MULTI_GPU_BOARD);
    I(multiGpuBoardGroupID, MULTI_GPU_BOARD_GROUP_ID);
    I(hostNativeAtomicSupported, HOST_NATIVE_ATOMIC_SUPPORTED);
    I(pageableMemoryAccess, PAGEABLE_MEMORY_ACCESS);
    I(concurrentManagedAccess, CONCURRENT_MANAGED_ACCESS);
    I(computePreemptionSupported, COMPUTE_PREEMPTION_SUPPORTED);
    I(canUseHostPointerForRegisteredMem, CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
    I(cooperativeLaunch, COOPERATIVE_LAUNCH);
    Z(sharedMemPerBlockOptin, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    I(pageableMemoryAccessUsesHostPageTables, PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES);
    I(directManagedMemAccessFromHost, DIRECT_MANAGED_MEM_ACCESS_FROM_HOST);
    I(maxBlocksPerMultiProcessor, MAX_BLOCKS_PER_MULTIPROCESSOR);
    I(accessPolicyMaxWindowSize, MAX_ACCESS_POLICY_WINDOW_SIZE);
    Z(reservedSharedMemPerBlock, RESERVED_SHARED_MEMORY_PER_BLOCK);
    I(hostRegisterSupported, HOST_REGISTER_SUPPORTED);
    I(sparseCudaArraySupported, SPARSE_CUDA_ARRAY_SUPPORTED);
    I(hostRegisterReadOnlySupported, READ_ONLY_HOST_REGISTER_SUPPORTED);
    I(timelineSemaphoreInteropSupported, TIMELINE_SEMAPHORE_INTEROP_SUPPORTED);
    I(memoryPoolsSupported, MEMORY_POOLS_SUPPORTED);
    I(gpuDirectRDMASupported, GPU_DIRECT_RDMA_SUPPORTED);
    U(gpuDirectRDMAFlushWritesOptions, GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS);
    I(gpuDirectRDMAWritesOrdering, GPU_DIRECT_RDMA_WRITES_ORDERING);
    U(memoryPoolSupportedHandleTypes, MEMPOOL_SUPPORTED_HANDLE_TYPES);
    I(deferredMappingCudaArraySupported, DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED);
    I(ipcEventSupported, IPC_EVENT_SUPPORTED);
    I(clusterLaunch, CLUSTER_LAUNCH);
    I(unifiedFunctionPointers, UNIFIED_FUNCTION_POINTERS);
    I(deviceNumaConfig, NUMA_CONFIG);
    I(deviceNumaId, NUMA_ID);
    I(mpsEnabled, MPS_ENABLED);
    I(hostNumaId, HOST_NUMA_ID);
    U(gpuPciDeviceID, GPU_PCI_DEVICE_ID);
    U(gpuPciSubsystemID, GPU_PCI_SUBSYSTEM_ID);
    I(hostNumaMultinodeIpcSupported, HOST_NUMA_MULTINODE_IPC_SUPPORTED);
#undef I
#undef U
#undef Z
}

int ferry_props_attr(const int32_t *attrs, unsigned nattrs, int attr, int *value)
{
    if (attrs == NULL || value == NULL || attr < 0 || (unsigned)attr >= nattrs)
        return (int)cudaErrorInvalidValue;
    *value = attrs[attr];
    return (int)cudaSuccess;
}
