/*
 * The CUDA 13 launch path. `<<<>>>` pushes a configuration, fetches a
 * cached kernel handle once, pops the configuration and launches. Push and
 * pop are thread-local and never touch the network; the launch itself is
 * pipelined (see remote.c). cudaLaunchKernelExC (launch attributes) goes
 * the same way, with its attributes beside the launch.
 */
#include <cuda.h>
#include <stddef.h>
#include <string.h>

#include "common/log.h"
#include "shim/core/link.h"
#include "shim/runtime/runtime.h"

#define CONFIG_DEPTH 16

struct call_config {
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
};
static __thread struct call_config config_stack[CONFIG_DEPTH];
static __thread int config_depth;

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, struct CUstream_st *stream) {
  if (config_depth == CONFIG_DEPTH) return 1;
  config_stack[config_depth++] = (struct call_config){grid, block, shmem, stream};
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream) {
  if (config_depth == 0) return ferry_ret(cudaErrorMissingConfiguration);
  struct call_config *c = &config_stack[--config_depth];
  *grid = c->grid;
  *block = c->block;
  *shmem = c->shmem;
  *(cudaStream_t *)stream = c->stream;
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func) {
  struct ferry_kernel *k;
  int rc = ferry_kernel_lookup(func, &k);
  if (!rc) *kernel = (cudaKernel_t)k;
  return ferry_ret(rc);
}

/* a cudaFunction_t is a CUfunction: the driver front end launches ferry's
   kernel objects as they are */
cudaError_t cudaGetFuncBySymbol(cudaFunction_t *fn, const void *symbol) {
  if (!fn) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_kernel *k;
  int rc = ferry_kernel_lookup(symbol, &k);
  if (!rc) *fn = (cudaFunction_t)k;
  return ferry_ret(rc ? cudaErrorInvalidDeviceFunction : 0);
}

cudaError_t cudaGetKernel(cudaKernel_t *kernel, const void *func) {
  if (!kernel) return ferry_ret(cudaErrorInvalidValue);
  return __cudaGetKernel(kernel, func);
}

static const ferry_blob no_attrs = {NULL, 0};

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                               size_t shmem, cudaStream_t stream) {
  return ferry_ret(ferry_launch((struct ferry_kernel *)kernel, grid, block, args, shmem, stream, 0,
                                no_attrs));
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                                    size_t shmem, cudaStream_t stream) {
  return ferry_ret(ferry_launch((struct ferry_kernel *)kernel, grid, block, args, shmem, stream,
                                FERRY_LAUNCH_PER_THREAD, no_attrs));
}

static cudaError_t launch_by_func(const void *func, dim3 grid, dim3 block, void **args,
                                  size_t shmem, cudaStream_t stream, unsigned flags,
                                  ferry_blob attrs) {
  struct ferry_kernel *k;
  int rc = ferry_kernel_lookup(func, &k);
  if (!rc) rc = ferry_launch(k, grid, block, args, shmem, stream, flags, attrs);
  return ferry_ret(rc);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                             cudaStream_t stream) {
  return launch_by_func(func, grid, block, args, shmem, stream, 0, no_attrs);
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                  size_t shmem, cudaStream_t stream) {
  return launch_by_func(func, grid, block, args, shmem, stream, FERRY_LAUNCH_PER_THREAD, no_attrs);
}

cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block, void **args,
                                        size_t shmem, cudaStream_t stream) {
  return launch_by_func(func, grid, block, args, shmem, stream, FERRY_LAUNCH_COOPERATIVE, no_attrs);
}

cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                             size_t shmem, cudaStream_t stream) {
  return launch_by_func(func, grid, block, args, shmem, stream,
                        FERRY_LAUNCH_COOPERATIVE | FERRY_LAUNCH_PER_THREAD, no_attrs);
}

/* ---- cudaLaunchKernelExC: launches with attributes (CUB and Thrust) ----
 * The runtime's cudaLaunchAttribute has the driver's CUlaunchAttribute
 * layout and ids, so attributes whose values are plain data are forwarded
 * as they are and the server hands them to cuLaunchKernelEx. Checked here
 * against the CUDA headers this library is built with: */
_Static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute), "attribute size");
_Static_assert(sizeof(cudaLaunchAttributeID) == sizeof(CUlaunchAttributeID), "attribute id size");
_Static_assert(offsetof(cudaLaunchAttribute, id) == offsetof(CUlaunchAttribute, id), "id offset");
_Static_assert(offsetof(cudaLaunchAttribute, val) == offsetof(CUlaunchAttribute, value),
               "value offset");
_Static_assert(sizeof(cudaLaunchAttributeValue) == sizeof(CUlaunchAttributeValue), "value size");
/* the values with structure: access policy window, memory sync domain map */
_Static_assert(sizeof(struct cudaAccessPolicyWindow) == sizeof(CUaccessPolicyWindow), "window");
_Static_assert(offsetof(struct cudaAccessPolicyWindow, num_bytes) ==
                   offsetof(CUaccessPolicyWindow, num_bytes), "window bytes");
_Static_assert(offsetof(struct cudaAccessPolicyWindow, hitRatio) ==
                   offsetof(CUaccessPolicyWindow, hitRatio), "window hit ratio");
_Static_assert(offsetof(struct cudaAccessPolicyWindow, hitProp) ==
                   offsetof(CUaccessPolicyWindow, hitProp), "window hit property");
_Static_assert(offsetof(struct cudaAccessPolicyWindow, missProp) ==
                   offsetof(CUaccessPolicyWindow, missProp), "window miss property");
_Static_assert(sizeof(cudaLaunchMemSyncDomainMap) == sizeof(CUlaunchMemSyncDomainMap), "map");
_Static_assert(offsetof(cudaLaunchMemSyncDomainMap, remote) ==
                   offsetof(CUlaunchMemSyncDomainMap, remote), "map remote");
#define SAME_VALUE(rt, drv) _Static_assert((int)(rt) == (int)(drv), #rt " differs from " #drv);
SAME_VALUE(cudaLaunchAttributeIgnore, CU_LAUNCH_ATTRIBUTE_IGNORE)
SAME_VALUE(cudaLaunchAttributeAccessPolicyWindow, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW)
SAME_VALUE(cudaLaunchAttributeCooperative, CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
SAME_VALUE(cudaLaunchAttributeSynchronizationPolicy, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY)
SAME_VALUE(cudaLaunchAttributeClusterDimension, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
SAME_VALUE(cudaLaunchAttributeClusterSchedulingPolicyPreference,
           CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE)
SAME_VALUE(cudaLaunchAttributeProgrammaticStreamSerialization,
           CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
SAME_VALUE(cudaLaunchAttributeProgrammaticEvent, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT)
SAME_VALUE(cudaLaunchAttributePriority, CU_LAUNCH_ATTRIBUTE_PRIORITY)
SAME_VALUE(cudaLaunchAttributeMemSyncDomainMap, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP)
SAME_VALUE(cudaLaunchAttributeMemSyncDomain, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN)
SAME_VALUE(cudaLaunchAttributePreferredClusterDimension,
           CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION)
SAME_VALUE(cudaLaunchAttributeLaunchCompletionEvent, CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT)
SAME_VALUE(cudaLaunchAttributeDeviceUpdatableKernelNode,
           CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE)
SAME_VALUE(cudaLaunchAttributePreferredSharedMemoryCarveout,
           CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT)
SAME_VALUE(cudaLaunchAttributeNvlinkUtilCentricScheduling,
           CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING)
SAME_VALUE(cudaAccessPropertyNormal, CU_ACCESS_PROPERTY_NORMAL)
SAME_VALUE(cudaAccessPropertyStreaming, CU_ACCESS_PROPERTY_STREAMING)
SAME_VALUE(cudaAccessPropertyPersisting, CU_ACCESS_PROPERTY_PERSISTING)
SAME_VALUE(cudaSyncPolicyAuto, CU_SYNC_POLICY_AUTO)
SAME_VALUE(cudaSyncPolicyBlockingSync, CU_SYNC_POLICY_BLOCKING_SYNC)
SAME_VALUE(cudaClusterSchedulingPolicyDefault, CU_CLUSTER_SCHEDULING_POLICY_DEFAULT)
SAME_VALUE(cudaClusterSchedulingPolicySpread, CU_CLUSTER_SCHEDULING_POLICY_SPREAD)
SAME_VALUE(cudaClusterSchedulingPolicyLoadBalancing, CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING)
SAME_VALUE(cudaLaunchMemSyncDomainDefault, CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT)
SAME_VALUE(cudaLaunchMemSyncDomainRemote, CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE)
#undef SAME_VALUE

/* what happens to each attribute; an id missing here is unknown to ferry */
enum attr_use {
  ATTR_UNKNOWN = 0, /* refused: its value might hold a handle */
  ATTR_SKIP,        /* cudaLaunchAttributeIgnore */
  ATTR_PLAIN,       /* plain values (a device pointer at most): forwarded */
  ATTR_COOPERATIVE, /* becomes a cooperative launch */
  ATTR_HANDLE,      /* holds a client-side handle ferry does not translate: refused */
};
static const struct {
  const char *name;
  enum attr_use use;
} attr_table[] = {
#define A(id, use) [id] = {#id, use}
    A(cudaLaunchAttributeIgnore, ATTR_SKIP),
    A(cudaLaunchAttributeAccessPolicyWindow, ATTR_PLAIN), /* base_ptr: same on the server */
    A(cudaLaunchAttributeCooperative, ATTR_COOPERATIVE),
    A(cudaLaunchAttributeSynchronizationPolicy, ATTR_PLAIN),
    A(cudaLaunchAttributeClusterDimension, ATTR_PLAIN),
    A(cudaLaunchAttributeClusterSchedulingPolicyPreference, ATTR_PLAIN),
    A(cudaLaunchAttributeProgrammaticStreamSerialization, ATTR_PLAIN),
    A(cudaLaunchAttributeProgrammaticEvent, ATTR_HANDLE),
    A(cudaLaunchAttributePriority, ATTR_PLAIN),
    A(cudaLaunchAttributeMemSyncDomainMap, ATTR_PLAIN),
    A(cudaLaunchAttributeMemSyncDomain, ATTR_PLAIN),
    A(cudaLaunchAttributePreferredClusterDimension, ATTR_PLAIN),
    A(cudaLaunchAttributeLaunchCompletionEvent, ATTR_HANDLE),
    A(cudaLaunchAttributeDeviceUpdatableKernelNode, ATTR_HANDLE),
    A(cudaLaunchAttributePreferredSharedMemoryCarveout, ATTR_PLAIN),
    A(cudaLaunchAttributeNvlinkUtilCentricScheduling, ATTR_PLAIN),
#undef A
};
#define ATTR_IDS (sizeof attr_table / sizeof attr_table[0])

/* one warning per attribute id (all unknown ids beyond the table share one) */
static int attr_warned[ATTR_IDS + 1];

static int refuse_attr(unsigned id) {
  unsigned slot = id < ATTR_IDS ? id : ATTR_IDS;
  if (__atomic_exchange_n(&attr_warned[slot], 1, __ATOMIC_RELAXED) == 0) {
    if (id < ATTR_IDS && attr_table[id].name)
      ferry_log("cudaLaunchKernelEx with %s is not supported: its value holds a handle of this "
                "process that ferry does not translate for the remote GPU; returning "
                "cudaErrorNotSupported",
                attr_table[id].name);
    else
      ferry_log("cudaLaunchKernelEx with launch attribute id %u is not supported: ferry does "
                "not know what its value holds; returning cudaErrorNotSupported",
                id);
  }
  return cudaErrorNotSupported;
}

int ferry_launch_attrs(const void *attrs, unsigned num, CUlaunchAttribute *out, uint32_t *n,
                       unsigned *flags) {
  *n = 0;
  if (num && !attrs) return cudaErrorInvalidValue;
  for (unsigned i = 0; i < num; i++) {
    const cudaLaunchAttribute *at = &((const cudaLaunchAttribute *)attrs)[i];
    unsigned id = (unsigned)at->id;
    switch (id < ATTR_IDS ? attr_table[id].use : ATTR_UNKNOWN) {
    case ATTR_SKIP: break;
    case ATTR_COOPERATIVE:
      if (at->val.cooperative) *flags |= FERRY_LAUNCH_COOPERATIVE;
      else *flags &= ~FERRY_LAUNCH_COOPERATIVE; /* of repeated entries, the last counts */
      break;
    case ATTR_PLAIN:
      if (*n == FERRY_MAX_LAUNCH_ATTRS) return cudaErrorInvalidValue;
      memcpy(&out[(*n)++], at, sizeof *at);
      break;
    default: return refuse_attr(id);
    }
  }
  return 0;
}

static cudaError_t launch_ex(const cudaLaunchConfig_t *config, const void *func, void **args,
                             unsigned flags) {
  if (!config) return ferry_ret(cudaErrorInvalidValue);
  CUlaunchAttribute attrs[FERRY_MAX_LAUNCH_ATTRS];
  uint32_t n;
  int rc = ferry_launch_attrs(config->attrs, config->numAttrs, attrs, &n, &flags);
  if (rc) return ferry_ret(rc);
  ferry_blob blob = {n ? attrs : NULL, n * (uint32_t)sizeof *attrs};
  return launch_by_func(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes,
                        config->stream, flags, blob);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args) {
  return launch_ex(config, func, args, 0);
}

cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
                                     void **args) {
  return launch_ex(config, func, args, FERRY_LAUNCH_PER_THREAD);
}

/* resolves func on the current device */
static int current_func(const void *func, struct ferry_vgpu **v, uint32_t *id) {
  int err;
  *v = ferry_current(&err);
  if (!*v) return err;
  struct ferry_kernel *k;
  if ((err = ferry_kernel_lookup(func, &k))) return err;
  return ferry_kernel_func_id(k, *v, id);
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func) {
  if (!attr) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v;
  struct ferry_func_get_attributes_args a;
  int rc = current_func(func, &v, &a.func);
  struct ferry_func_get_attributes_rets r;
  if (!rc) rc = ferry_call(v, FERRY_CALL_func_get_attributes, &a, &r, NULL);
  if (rc) return ferry_ret(rc);
  int32_t at[16] = {0};
  memcpy(at, r.attrs.ptr, r.attrs.len < sizeof at ? r.attrs.len : sizeof at);
  memset(attr, 0, sizeof *attr);
  attr->maxThreadsPerBlock = at[0];
  attr->sharedSizeBytes = (size_t)at[1];
  attr->constSizeBytes = (size_t)at[2];
  attr->localSizeBytes = (size_t)at[3];
  attr->numRegs = at[4];
  attr->ptxVersion = at[5];
  attr->binaryVersion = at[6];
  attr->cacheModeCA = at[7];
  attr->maxDynamicSharedSizeBytes = at[8];
  attr->preferredShmemCarveout = at[9];
  attr->clusterDimMustBeSet = at[10];
  attr->requiredClusterWidth = at[11];
  attr->requiredClusterHeight = at[12];
  attr->requiredClusterDepth = at[13];
  attr->nonPortableClusterSizeAllowed = at[14];
  attr->clusterSchedulingPolicyPreference = at[15];
  return cudaSuccess;
}

/* Setting an attribute to the value it has costs no call: cuDNN and flash
   attention set a kernel's dynamic shared memory before each launch, and
   each forwarded set is a round trip that also drops the query cache
   (INVALIDATES), so the next attribute query is one more. The settable
   attributes have the same numbers in both APIs and index the answer. */
int ferry_func_attr_unchanged(struct ferry_vgpu *v, uint32_t func, uint32_t attr, int value) {
  struct ferry_func_get_attributes_args a = {func};
  struct ferry_func_get_attributes_rets r;
  if (ferry_call(v, FERRY_CALL_func_get_attributes, &a, &r, NULL)) return 0;
  int32_t x;
  if ((uint64_t)(attr + 1) * 4 > r.attrs.len) return 0;
  memcpy(&x, (const char *)r.attrs.ptr + (size_t)attr * 4, 4);
  return x == value;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
  struct ferry_vgpu *v;
  struct ferry_func_set_attribute_args a = {.attr = (uint32_t)attr, .value = value};
  int rc = current_func(func, &v, &a.func);
  if (!rc && !ferry_func_attr_unchanged(v, a.func, a.attr, value))
    rc = ferry_call(v, FERRY_CALL_func_set_attribute, &a, NULL, NULL);
  return ferry_ret(rc);
}

cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache config) {
  struct ferry_vgpu *v;
  struct ferry_func_set_cache_config_args a = {.config = (uint32_t)config};
  int rc = current_func(func, &v, &a.func);
  if (!rc) rc = ferry_call(v, FERRY_CALL_func_set_cache_config, &a, NULL, NULL);
  return ferry_ret(rc);
}

cudaError_t cudaFuncSetSharedMemConfig(const void *func, enum cudaSharedMemConfig config) {
  struct ferry_vgpu *v;
  uint32_t id;
  if (config != cudaSharedMemBankSizeDefault && config != cudaSharedMemBankSizeFourByte &&
      config != cudaSharedMemBankSizeEightByte)
    return ferry_ret(cudaErrorInvalidValue);
  return ferry_ret(current_func(func, &v, &id)); /* fixed bank size: nothing to set */
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *blocks, const void *func,
                                                                   int block_size,
                                                                   size_t dynamic_smem,
                                                                   unsigned int flags) {
  if (!blocks) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v;
  struct ferry_occupancy_args a = {
      .block_size = block_size, .dynamic_smem = dynamic_smem, .flags = flags};
  int rc = current_func(func, &v, &a.func);
  struct ferry_occupancy_rets r;
  if (!rc) rc = ferry_call(v, FERRY_CALL_occupancy, &a, &r, NULL);
  if (!rc) *blocks = r.blocks;
  return ferry_ret(rc);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const void *func,
                                                          int block_size, size_t dynamic_smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, func, block_size,
                                                                dynamic_smem, 0);
}

cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t *bytes, const void *func, int num_blocks,
                                                      int block_size) {
  if (!bytes) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v;
  struct ferry_occupancy_smem_args a = {.num_blocks = num_blocks, .block_size = block_size};
  int rc = current_func(func, &v, &a.func);
  struct ferry_occupancy_smem_rets r;
  if (!rc) rc = ferry_call(v, FERRY_CALL_occupancy_smem, &a, &r, NULL);
  if (!rc) *bytes = (size_t)r.bytes;
  return ferry_ret(rc);
}

int ferry_occupancy_clusters(struct ferry_vgpu *v, uint32_t func, dim3 grid, dim3 block,
                             size_t smem, const void *attrs, unsigned nattrs, int *clusters) {
  if (!clusters || smem > UINT32_MAX) return cudaErrorInvalidValue;
  CUlaunchAttribute plain[FERRY_MAX_LAUNCH_ATTRS];
  uint32_t n;
  unsigned flags = 0; /* cooperative or not, the count is the same */
  int rc = ferry_launch_attrs(attrs, nattrs, plain, &n, &flags);
  if (rc) return rc;
  struct ferry_occupancy_clusters_args a = {
      .func = func, .gx = grid.x, .gy = grid.y, .gz = grid.z, .bx = block.x, .by = block.y,
      .bz = block.z, .shmem = (uint32_t)smem, .attrs = {n ? plain : NULL, n * (uint32_t)sizeof *plain}};
  struct ferry_occupancy_clusters_rets r;
  rc = ferry_call(v, FERRY_CALL_occupancy_clusters, &a, &r, NULL);
  if (!rc) *clusters = r.clusters;
  return rc;
}

cudaError_t cudaOccupancyMaxActiveClusters(int *clusters, const void *func,
                                           const cudaLaunchConfig_t *config) {
  if (!config) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v;
  uint32_t id;
  int rc = current_func(func, &v, &id);
  if (!rc)
    rc = ferry_occupancy_clusters(v, id, config->gridDim, config->blockDim,
                                  config->dynamicSmemBytes, config->attrs, config->numAttrs, clusters);
  return ferry_ret(rc);
}
