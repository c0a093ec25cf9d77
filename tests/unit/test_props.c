/* Checks that ferry_props_build puts each device attribute into the right
 * cudaDeviceProp field. Every attribute gets a distinct value, so a field
 * read from the wrong attribute, or two fields swapped, fails. The expected
 * mapping is written with the runtime's cudaDevAttr names, while props.c uses
 * the driver's names, so the two enums are cross-checked too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>

#include "shim/core/props.h"

#define NATTRS ((unsigned)CU_DEVICE_ATTRIBUTE_MAX)

static int32_t attrs[NATTRS];

static int32_t value_of(int attr)
{
    return 1000 + attr * 7;
}

static void fill_attrs(void)
{
    for (unsigned i = 0; i < NATTRS; i++)
        attrs[i] = value_of((int)i);
}

struct int_field {
    const char *what;
    size_t offset;
    int attr;
};

#define F(field, attr) { #field, offsetof(struct cudaDeviceProp, field), (int)(attr) }
/* int-sized fields (int and unsigned int). */
static const struct int_field int_fields[] = {
    F(regsPerBlock, cudaDevAttrMaxRegistersPerBlock),
    F(warpSize, cudaDevAttrWarpSize),
    F(maxThreadsPerBlock, cudaDevAttrMaxThreadsPerBlock),
    F(maxThreadsDim[0], cudaDevAttrMaxBlockDimX),
    F(maxThreadsDim[1], cudaDevAttrMaxBlockDimY),
    F(maxThreadsDim[2], cudaDevAttrMaxBlockDimZ),
    F(maxGridSize[0], cudaDevAttrMaxGridDimX),
    F(maxGridSize[1], cudaDevAttrMaxGridDimY),
    F(maxGridSize[2], cudaDevAttrMaxGridDimZ),
    F(major, cudaDevAttrComputeCapabilityMajor),
    F(minor, cudaDevAttrComputeCapabilityMinor),
    F(multiProcessorCount, cudaDevAttrMultiProcessorCount),
    F(integrated, cudaDevAttrIntegrated),
    F(canMapHostMemory, cudaDevAttrCanMapHostMemory),
    F(maxTexture1D, cudaDevAttrMaxTexture1DWidth),
    F(maxTexture1DMipmap, cudaDevAttrMaxTexture1DMipmappedWidth),
    F(maxTexture2D[0], cudaDevAttrMaxTexture2DWidth),
    F(maxTexture2D[1], cudaDevAttrMaxTexture2DHeight),
    F(maxTexture2DMipmap[0], cudaDevAttrMaxTexture2DMipmappedWidth),
    F(maxTexture2DMipmap[1], cudaDevAttrMaxTexture2DMipmappedHeight),
    F(maxTexture2DLinear[0], cudaDevAttrMaxTexture2DLinearWidth),
    F(maxTexture2DLinear[1], cudaDevAttrMaxTexture2DLinearHeight),
    F(maxTexture2DLinear[2], cudaDevAttrMaxTexture2DLinearPitch),
    F(maxTexture2DGather[0], cudaDevAttrMaxTexture2DGatherWidth),
    F(maxTexture2DGather[1], cudaDevAttrMaxTexture2DGatherHeight),
    F(maxTexture3D[0], cudaDevAttrMaxTexture3DWidth),
    F(maxTexture3D[1], cudaDevAttrMaxTexture3DHeight),
    F(maxTexture3D[2], cudaDevAttrMaxTexture3DDepth),
    F(maxTexture3DAlt[0], cudaDevAttrMaxTexture3DWidthAlt),
    F(maxTexture3DAlt[1], cudaDevAttrMaxTexture3DHeightAlt),
    F(maxTexture3DAlt[2], cudaDevAttrMaxTexture3DDepthAlt),
    F(maxTextureCubemap, cudaDevAttrMaxTextureCubemapWidth),
    F(maxTexture1DLayered[0], cudaDevAttrMaxTexture1DLayeredWidth),
    F(maxTexture1DLayered[1], cudaDevAttrMaxTexture1DLayeredLayers),
    F(maxTexture2DLayered[0], cudaDevAttrMaxTexture2DLayeredWidth),
    F(maxTexture2DLayered[1], cudaDevAttrMaxTexture2DLayeredHeight),
    F(maxTexture2DLayered[2], cudaDevAttrMaxTexture2DLayeredLayers),
    F(maxTextureCubemapLayered[0], cudaDevAttrMaxTextureCubemapLayeredWidth),
    F(maxTextureCubemapLayered[1], cudaDevAttrMaxTextureCubemapLayeredLayers),
    F(maxSurface1D, cudaDevAttrMaxSurface1DWidth),
    F(maxSurface2D[0], cudaDevAttrMaxSurface2DWidth),
    F(maxSurface2D[1], cudaDevAttrMaxSurface2DHeight),
    F(maxSurface3D[0], cudaDevAttrMaxSurface3DWidth),
    F(maxSurface3D[1], cudaDevAttrMaxSurface3DHeight),
    F(maxSurface3D[2], cudaDevAttrMaxSurface3DDepth),
    F(maxSurface1DLayered[0], cudaDevAttrMaxSurface1DLayeredWidth),
    F(maxSurface1DLayered[1], cudaDevAttrMaxSurface1DLayeredLayers),
    F(maxSurface2DLayered[0], cudaDevAttrMaxSurface2DLayeredWidth),
    F(maxSurface2DLayered[1], cudaDevAttrMaxSurface2DLayeredHeight),
    F(maxSurface2DLayered[2], cudaDevAttrMaxSurface2DLayeredLayers),
    F(maxSurfaceCubemap, cudaDevAttrMaxSurfaceCubemapWidth),
    F(maxSurfaceCubemapLayered[0], cudaDevAttrMaxSurfaceCubemapLayeredWidth),
    F(maxSurfaceCubemapLayered[1], cudaDevAttrMaxSurfaceCubemapLayeredLayers),
    F(concurrentKernels, cudaDevAttrConcurrentKernels),
    F(ECCEnabled, cudaDevAttrEccEnabled),
    F(pciBusID, cudaDevAttrPciBusId),
    F(pciDeviceID, cudaDevAttrPciDeviceId),
    F(pciDomainID, cudaDevAttrPciDomainId),
    F(tccDriver, cudaDevAttrTccDriver),
    F(asyncEngineCount, cudaDevAttrAsyncEngineCount),
    F(unifiedAddressing, cudaDevAttrUnifiedAddressing),
    F(memoryBusWidth, cudaDevAttrGlobalMemoryBusWidth),
    F(l2CacheSize, cudaDevAttrL2CacheSize),
    F(persistingL2CacheMaxSize, cudaDevAttrMaxPersistingL2CacheSize),
    F(maxThreadsPerMultiProcessor, cudaDevAttrMaxThreadsPerMultiProcessor),
    F(streamPrioritiesSupported, cudaDevAttrStreamPrioritiesSupported),
    F(globalL1CacheSupported, cudaDevAttrGlobalL1CacheSupported),
    F(localL1CacheSupported, cudaDevAttrLocalL1CacheSupported),
    F(regsPerMultiprocessor, cudaDevAttrMaxRegistersPerMultiprocessor),
    F(managedMemory, cudaDevAttrManagedMemory),
    F(isMultiGpuBoard, cudaDevAttrIsMultiGpuBoard),
    F(multiGpuBoardGroupID, cudaDevAttrMultiGpuBoardGroupID),
    F(hostNativeAtomicSupported, cudaDevAttrHostNativeAtomicSupported),
    F(pageableMemoryAccess, cudaDevAttrPageableMemoryAccess),
    F(concurrentManagedAccess, cudaDevAttrConcurrentManagedAccess),
    F(computePreemptionSupported, cudaDevAttrComputePreemptionSupported),
    F(canUseHostPointerForRegisteredMem, cudaDevAttrCanUseHostPointerForRegisteredMem),
    F(cooperativeLaunch, cudaDevAttrCooperativeLaunch),
    F(pageableMemoryAccessUsesHostPageTables, cudaDevAttrPageableMemoryAccessUsesHostPageTables),
    F(directManagedMemAccessFromHost, cudaDevAttrDirectManagedMemAccessFromHost),
    F(maxBlocksPerMultiProcessor, cudaDevAttrMaxBlocksPerMultiprocessor),
    F(accessPolicyMaxWindowSize, cudaDevAttrMaxAccessPolicyWindowSize),
    F(hostRegisterSupported, cudaDevAttrHostRegisterSupported),
    F(sparseCudaArraySupported, cudaDevAttrSparseCudaArraySupported),
    F(hostRegisterReadOnlySupported, cudaDevAttrHostRegisterReadOnlySupported),
    F(timelineSemaphoreInteropSupported, cudaDevAttrTimelineSemaphoreInteropSupported),
    F(memoryPoolsSupported, cudaDevAttrMemoryPoolsSupported),
    F(gpuDirectRDMASupported, cudaDevAttrGPUDirectRDMASupported),
    F(gpuDirectRDMAFlushWritesOptions, cudaDevAttrGPUDirectRDMAFlushWritesOptions),
    F(gpuDirectRDMAWritesOrdering, cudaDevAttrGPUDirectRDMAWritesOrdering),
    F(memoryPoolSupportedHandleTypes, cudaDevAttrMemoryPoolSupportedHandleTypes),
    F(deferredMappingCudaArraySupported, cudaDevAttrDeferredMappingCudaArraySupported),
    F(ipcEventSupported, cudaDevAttrIpcEventSupport),
    F(clusterLaunch, cudaDevAttrClusterLaunch),
    /* the runtime enum calls 129 cudaDevAttrReserved129 */
    F(unifiedFunctionPointers, CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS),
    F(deviceNumaConfig, cudaDevAttrNumaConfig),
    F(deviceNumaId, cudaDevAttrNumaId),
    F(mpsEnabled, cudaDevAttrMpsEnabled),
    F(hostNumaId, cudaDevAttrHostNumaId),
    F(gpuPciDeviceID, cudaDevAttrGpuPciDeviceId),
    F(gpuPciSubsystemID, cudaDevAttrGpuPciSubsystemId),
    F(hostNumaMultinodeIpcSupported, cudaDevAttrHostNumaMultinodeIpcSupported),
};

/* size_t fields. */
static const struct int_field size_fields[] = {
    F(sharedMemPerBlock, cudaDevAttrMaxSharedMemoryPerBlock),
    F(memPitch, cudaDevAttrMaxPitch),
    F(totalConstMem, cudaDevAttrTotalConstantMemory),
    F(textureAlignment, cudaDevAttrTextureAlignment),
    F(texturePitchAlignment, cudaDevAttrTexturePitchAlignment),
    F(surfaceAlignment, cudaDevAttrSurfaceAlignment),
    F(sharedMemPerMultiprocessor, cudaDevAttrMaxSharedMemoryPerMultiprocessor),
    F(sharedMemPerBlockOptin, cudaDevAttrMaxSharedMemoryPerBlockOptin),
    F(reservedSharedMemPerBlock, cudaDevAttrReservedSharedMemoryPerBlock),
};
#undef F

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const unsigned char test_uuid[16] = {0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87,
                                            0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe, 0x0f};

static int32_t int_at(const struct cudaDeviceProp *p, size_t offset)
{
    int32_t v;
    memcpy(&v, (const char *)p + offset, sizeof(v));
    return v;
}

static size_t size_at(const struct cudaDeviceProp *p, size_t offset)
{
    size_t v;
    memcpy(&v, (const char *)p + offset, sizeof(v));
    return v;
}

static void test_size(void **state)
{
    (void)state;
    assert_int_equal(sizeof(struct cudaDeviceProp), 1008);
}

static void test_fields_map_to_attributes(void **state)
{
    (void)state;
    struct cudaDeviceProp p;
    fill_attrs();
    memset(&p, 0xa5, sizeof(p));
    ferry_props_build(&p, "Ferry Test GPU", test_uuid, (size_t)80 << 30, attrs, NATTRS);

    for (size_t i = 0; i < COUNT(int_fields); i++) {
        int32_t got = int_at(&p, int_fields[i].offset);
        if (got != value_of(int_fields[i].attr))
            fail_msg("%s = %d, want attribute %d's value %d", int_fields[i].what, got,
                     int_fields[i].attr, value_of(int_fields[i].attr));
    }
    for (size_t i = 0; i < COUNT(size_fields); i++) {
        size_t got = size_at(&p, size_fields[i].offset);
        if (got != (size_t)value_of(size_fields[i].attr))
            fail_msg("%s = %zu, want attribute %d's value %d", size_fields[i].what, got,
                     size_fields[i].attr, value_of(size_fields[i].attr));
    }
    assert_string_equal(p.name, "Ferry Test GPU");
    assert_memory_equal(p.uuid.bytes, test_uuid, 16);
    assert_int_equal(p.totalGlobalMem, (size_t)80 << 30);
    /* Fields with no attribute are cleared, not left as they were. */
    for (size_t i = 0; i < sizeof(p.luid); i++)
        assert_int_equal(p.luid[i], 0);
    assert_int_equal(p.luidDeviceNodeMask, 0);
    for (size_t i = 0; i < COUNT(p.reserved); i++)
        assert_int_equal(p.reserved[i], 0);
}

static void test_name_truncated_and_null_inputs(void **state)
{
    (void)state;
    char long_name[400];
    struct cudaDeviceProp p;
    memset(long_name, 'x', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    memset(&p, 0xa5, sizeof(p));
    ferry_props_build(&p, long_name, NULL, 0, attrs, NATTRS);
    assert_int_equal(strlen(p.name), 255);
    for (size_t i = 0; i < 16; i++)
        assert_int_equal((unsigned char)p.uuid.bytes[i], 0);

    memset(&p, 0xa5, sizeof(p));
    ferry_props_build(&p, NULL, NULL, 0, NULL, 0);
    assert_string_equal(p.name, "");
    assert_int_equal(p.warpSize, 0);
    ferry_props_build(NULL, "x", test_uuid, 1, attrs, NATTRS); /* must not crash */
}

static void test_short_attribute_array(void **state)
{
    (void)state;
    struct cudaDeviceProp p;
    fill_attrs();
    /* The server knows fewer attributes: later fields stay 0. */
    ferry_props_build(&p, "old", test_uuid, 1, attrs, (unsigned)cudaDevAttrComputeCapabilityMajor);
    assert_int_equal(p.warpSize, value_of(cudaDevAttrWarpSize));
    assert_int_equal(p.major, 0);
    assert_int_equal(p.minor, 0);
    assert_int_equal(p.clusterLaunch, 0);
}

static void test_negative_size_is_zero(void **state)
{
    (void)state;
    struct cudaDeviceProp p;
    fill_attrs();
    attrs[cudaDevAttrMaxSharedMemoryPerBlock] = -5;
    ferry_props_build(&p, "neg", test_uuid, 1, attrs, NATTRS);
    assert_int_equal(p.sharedMemPerBlock, 0);
}

static void test_attr_lookup(void **state)
{
    (void)state;
    int v = -1;
    fill_attrs();
    assert_int_equal(ferry_props_attr(attrs, NATTRS, cudaDevAttrWarpSize, &v), cudaSuccess);
    assert_int_equal(v, value_of(cudaDevAttrWarpSize));
    assert_int_equal(ferry_props_attr(attrs, NATTRS, (int)NATTRS - 1, &v), cudaSuccess);
    assert_int_equal(v, value_of((int)NATTRS - 1));

    v = 12345;
    assert_int_equal(ferry_props_attr(attrs, NATTRS, (int)NATTRS, &v), cudaErrorInvalidValue);
    assert_int_equal(ferry_props_attr(attrs, NATTRS, -1, &v), cudaErrorInvalidValue);
    assert_int_equal(ferry_props_attr(attrs, NATTRS, 0x7fffffff, &v), cudaErrorInvalidValue);
    assert_int_equal(ferry_props_attr(attrs, NATTRS, 1, NULL), cudaErrorInvalidValue);
    assert_int_equal(ferry_props_attr(NULL, NATTRS, 1, &v), cudaErrorInvalidValue);
    assert_int_equal(v, 12345); /* untouched on error */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_fields_map_to_attributes),
        cmocka_unit_test(test_name_truncated_and_null_inputs),
        cmocka_unit_test(test_short_attribute_array),
        cmocka_unit_test(test_negative_size_is_zero),
        cmocka_unit_test(test_attr_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
