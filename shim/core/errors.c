/* Error names and messages (cudaGetErrorName/String), answered locally in the
 * shim because a program asks for them without a server, often after the
 * connection is gone. The table holds every cudaError value of the CUDA 13
 * headers (driver_types.h); it was produced once from the enum by a small
 * awk script and is kept here as plain C. Names are the enum names; the
 * messages are ferry's own short wording. */
#include "shim/core/errors.h"

#include <stdio.h>

#define FERRY_API __attribute__((visibility("default")))

struct error_entry {
    cudaError_t code;
    const char *name;
    const char *text;
};

#define E(code, text) { code, #code, text }
/* Ascending by code. */
static const struct error_entry error_table[] = {
    E(cudaSuccess, "no error"),
    E(cudaErrorInvalidValue, "invalid argument"),
    E(cudaErrorMemoryAllocation, "out of memory"),
    E(cudaErrorInitializationError, "initialization error"),
    E(cudaErrorCudartUnloading, "CUDA runtime is shutting down"),
    E(cudaErrorProfilerDisabled, "profiler disabled for this run"),
    E(cudaErrorProfilerNotInitialized, "profiler not initialized"),
    E(cudaErrorProfilerAlreadyStarted, "profiler already started"),
    E(cudaErrorProfilerAlreadyStopped, "profiler already stopped"),
    E(cudaErrorInvalidConfiguration, "invalid launch configuration"),
    E(cudaErrorInvalidPitchValue, "invalid pitch value"),
    E(cudaErrorInvalidSymbol, "invalid device symbol"),
    E(cudaErrorInvalidHostPointer, "invalid host pointer"),
    E(cudaErrorInvalidDevicePointer, "invalid device pointer"),
    E(cudaErrorInvalidTexture, "invalid texture"),
    E(cudaErrorInvalidTextureBinding, "invalid texture binding"),
    E(cudaErrorInvalidChannelDescriptor, "invalid channel descriptor"),
    E(cudaErrorInvalidMemcpyDirection, "invalid copy direction"),
    E(cudaErrorAddressOfConstant, "address of a constant variable taken"),
    E(cudaErrorTextureFetchFailed, "texture fetch failed"),
    E(cudaErrorTextureNotBound, "texture not bound"),
    E(cudaErrorSynchronizationError, "synchronization error"),
    E(cudaErrorInvalidFilterSetting, "invalid texture filter setting"),
    E(cudaErrorInvalidNormSetting, "invalid texture normalization setting"),
    E(cudaErrorMixedDeviceExecution, "mixing device and device-emulation code"),
    E(cudaErrorNotYetImplemented, "feature not yet implemented"),
    E(cudaErrorMemoryValueTooLarge, "memory size or pointer too large"),
    E(cudaErrorStubLibrary, "stub driver library loaded instead of the real driver"),
    E(cudaErrorInsufficientDriver, "installed driver is older than the CUDA runtime"),
    E(cudaErrorCallRequiresNewerDriver, "call requires a newer driver"),
    E(cudaErrorInvalidSurface, "invalid surface"),
    E(cudaErrorDuplicateVariableName, "duplicate global variable name"),
    E(cudaErrorDuplicateTextureName, "duplicate texture name"),
    E(cudaErrorDuplicateSurfaceName, "duplicate surface name"),
    E(cudaErrorDevicesUnavailable, "all devices busy or unavailable"),
    E(cudaErrorIncompatibleDriverContext, "driver context incompatible with the runtime"),
    E(cudaErrorMissingConfiguration, "launch configuration missing"),
    E(cudaErrorPriorLaunchFailure, "an earlier launch failed"),
    E(cudaErrorLaunchMaxDepthExceeded, "device-side launch nesting too deep"),
    E(cudaErrorLaunchFileScopedTex, "file-scoped texture used in a device-side launch"),
    E(cudaErrorLaunchFileScopedSurf, "file-scoped surface used in a device-side launch"),
    E(cudaErrorSyncDepthExceeded, "device-side synchronize nesting too deep"),
    E(cudaErrorLaunchPendingCountExceeded, "too many pending device-side launches"),
    E(cudaErrorInvalidDeviceFunction, "invalid device function"),
    E(cudaErrorNoDevice, "no CUDA-capable device found"),
    E(cudaErrorInvalidDevice, "invalid device ordinal"),
    E(cudaErrorDeviceNotLicensed, "device not licensed for this use"),
    E(cudaErrorSoftwareValidityNotEstablished, "software integrity check failed"),
    E(cudaErrorStartupFailure, "CUDA runtime startup failed"),
    E(cudaErrorInvalidKernelImage, "invalid device kernel image"),
    E(cudaErrorDeviceUninitialized, "invalid or uninitialized device context"),
    E(cudaErrorMapBufferObjectFailed, "mapping of buffer object failed"),
    E(cudaErrorUnmapBufferObjectFailed, "unmapping of buffer object failed"),
    E(cudaErrorArrayIsMapped, "array is mapped"),
    E(cudaErrorAlreadyMapped, "resource already mapped"),
    E(cudaErrorNoKernelImageForDevice, "no kernel image for this device"),
    E(cudaErrorAlreadyAcquired, "resource already acquired"),
    E(cudaErrorNotMapped, "resource not mapped"),
    E(cudaErrorNotMappedAsArray, "resource not mapped as an array"),
    E(cudaErrorNotMappedAsPointer, "resource not mapped as a pointer"),
    E(cudaErrorECCUncorrectable, "uncorrectable ECC error"),
    E(cudaErrorUnsupportedLimit, "limit not supported on this device"),
    E(cudaErrorDeviceAlreadyInUse, "device already in use by another thread"),
    E(cudaErrorPeerAccessUnsupported, "peer access not supported between these devices"),
    E(cudaErrorInvalidPtx, "PTX compilation failed"),
    E(cudaErrorInvalidGraphicsContext, "invalid graphics context"),
    E(cudaErrorNvlinkUncorrectable, "uncorrectable NVLink error"),
    E(cudaErrorJitCompilerNotFound, "PTX JIT compiler not found"),
    E(cudaErrorUnsupportedPtxVersion, "PTX version not supported by this driver"),
    E(cudaErrorJitCompilationDisabled, "PTX JIT compilation disabled"),
    E(cudaErrorUnsupportedExecAffinity, "execution affinity not supported"),
    E(cudaErrorUnsupportedDevSideSync, "device-side synchronize not supported"),
    E(cudaErrorContained, "error contained by the device"),
    E(cudaErrorInvalidSource, "invalid kernel source"),
    E(cudaErrorFileNotFound, "file not found"),
    E(cudaErrorSharedObjectSymbolNotFound, "shared object symbol not found"),
    E(cudaErrorSharedObjectInitFailed, "shared object initialization failed"),
    E(cudaErrorOperatingSystem, "operating system call failed"),
    E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    E(cudaErrorIllegalState, "operation not valid in the current state"),
    E(cudaErrorLossyQuery, "query result would lose information"),
    E(cudaErrorSymbolNotFound, "named symbol not found"),
    E(cudaErrorNotReady, "device not ready"),
    E(cudaErrorIllegalAddress, "illegal memory access"),
    E(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    E(cudaErrorLaunchTimeout, "kernel launch timed out"),
    E(cudaErrorLaunchIncompatibleTexturing, "launch uses incompatible texturing mode"),
    E(cudaErrorPeerAccessAlreadyEnabled, "peer access already enabled"),
    E(cudaErrorPeerAccessNotEnabled, "peer access not enabled"),
    E(cudaErrorSetOnActiveProcess, "cannot change settings once the device is active"),
    E(cudaErrorContextIsDestroyed, "context destroyed"),
    E(cudaErrorAssert, "device-side assert triggered"),
    E(cudaErrorTooManyPeers, "too many peer mappings"),
    E(cudaErrorHostMemoryAlreadyRegistered, "host memory already registered"),
    E(cudaErrorHostMemoryNotRegistered, "host memory not registered"),
    E(cudaErrorHardwareStackError, "device hardware stack error"),
    E(cudaErrorIllegalInstruction, "illegal instruction"),
    E(cudaErrorMisalignedAddress, "misaligned address"),
    E(cudaErrorInvalidAddressSpace, "operation on the wrong address space"),
    E(cudaErrorInvalidPc, "invalid program counter"),
    E(cudaErrorLaunchFailure, "unspecified launch failure"),
    E(cudaErrorCooperativeLaunchTooLarge, "too many blocks for a cooperative launch"),
    E(cudaErrorTensorMemoryLeak, "tensor memory not freed by the kernel"),
    E(cudaErrorNotPermitted, "operation not permitted"),
    E(cudaErrorNotSupported, "operation not supported"),
    E(cudaErrorSystemNotReady, "system not ready"),
    E(cudaErrorSystemDriverMismatch, "driver and kernel module versions differ"),
    E(cudaErrorCompatNotSupportedOnDevice, "forward compatibility not supported on this device"),
    E(cudaErrorMpsConnectionFailed, "cannot connect to the MPS server"),
    E(cudaErrorMpsRpcFailure, "MPS remote call failed"),
    E(cudaErrorMpsServerNotReady, "MPS server not ready"),
    E(cudaErrorMpsMaxClientsReached, "MPS client limit reached"),
    E(cudaErrorMpsMaxConnectionsReached, "MPS connection limit reached"),
    E(cudaErrorMpsClientTerminated, "MPS client terminated"),
    E(cudaErrorCdpNotSupported, "device-side launch not supported"),
    E(cudaErrorCdpVersionMismatch, "device-side launch version mismatch"),
    E(cudaErrorStreamCaptureUnsupported, "operation not allowed while capturing a stream"),
    E(cudaErrorStreamCaptureInvalidated, "stream capture invalidated by an earlier error"),
    E(cudaErrorStreamCaptureMerge, "cannot merge two separate captures"),
    E(cudaErrorStreamCaptureUnmatched, "capture was not started on this stream"),
    E(cudaErrorStreamCaptureUnjoined, "forked capture not joined back to its origin stream"),
    E(cudaErrorStreamCaptureIsolation, "dependency would cross a capture boundary"),
    E(cudaErrorStreamCaptureImplicit, "implicit dependency on a capturing stream"),
    E(cudaErrorCapturedEvent, "operation not allowed on an event from a capture"),
    E(cudaErrorStreamCaptureWrongThread, "capture ended from a different thread"),
    E(cudaErrorTimeout, "wait timed out"),
    E(cudaErrorGraphExecUpdateFailure, "graph update not possible"),
    E(cudaErrorExternalDevice, "error in an external device"),
    E(cudaErrorInvalidClusterSize, "invalid cluster size"),
    E(cudaErrorFunctionNotLoaded, "function not loaded"),
    E(cudaErrorInvalidResourceType, "invalid resource type"),
    E(cudaErrorInvalidResourceConfiguration, "invalid resource configuration"),
    E(cudaErrorUnknown, "unknown error"),
    E(cudaErrorApiFailureBase, "API call failure base code"),
};
#undef E

#define TABLE_LEN (sizeof(error_table) / sizeof(error_table[0]))

/* CUDA answers this for a value that is no cudaError; so do we. */
static const char unrecognized[] = "unrecognized error code";

static const struct error_entry *find_error(cudaError_t code)
{
    /* Binary search: the table is sorted by code (checked by the unit test). */
    size_t lo = 0, hi = TABLE_LEN;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((int)error_table[mid].code == (int)code)
            return &error_table[mid];
        if ((int)error_table[mid].code < (int)code)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

FERRY_API const char *cudaGetErrorName(cudaError_t error)
{
    const struct error_entry *e = find_error(error);
    return e ? e->name : unrecognized;
}

FERRY_API const char *cudaGetErrorString(cudaError_t error)
{
    const struct error_entry *e = find_error(error);
    return e ? e->text : unrecognized;
}

unsigned ferry_error_count(void)
{
    return (unsigned)TABLE_LEN;
}

cudaError_t ferry_error_code_at(unsigned i)
{
    return i < TABLE_LEN ? error_table[i].code : cudaErrorUnknown;
}

int ferry_unsupported_call(int *warned, const char *name)
{
    /* The exchange makes exactly one caller see 0, even under a race, so the
     * warning is printed once per call name however many threads hit it. */
    if (warned == NULL || __atomic_exchange_n(warned, 1, __ATOMIC_RELAXED) == 0)
        fprintf(stderr, "ferry: %s is not supported by ferry; returning cudaErrorNotSupported\n",
                name ? name : "(unnamed call)");
    return (int)cudaErrorNotSupported;
}
