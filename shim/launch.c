/*
 * The CUDA 13 launch path. `<<<>>>` pushes a configuration, fetches a
 * cached kernel handle once, pops the configuration and launches. Push and
 * pop are thread-local and never touch the network; the launch itself is
 * pipelined (see remote.c).
 */
#include <string.h>

#include "shim.h"

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

cudaError_t cudaGetKernel(cudaKernel_t *kernel, const void *func) {
  if (!kernel) return ferry_ret(cudaErrorInvalidValue);
  return __cudaGetKernel(kernel, func);
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                               size_t shmem, cudaStream_t stream) {
  return ferry_ret(ferry_launch((struct ferry_kernel *)kernel, grid, block, args, shmem, stream, 0));
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                                    size_t shmem, cudaStream_t stream) {
  return ferry_ret(ferry_launch((struct ferry_kernel *)kernel, grid, block, args, shmem, stream,
                                FERRY_LAUNCH_PER_THREAD));
}

static cudaError_t launch_by_func(const void *func, dim3 grid, dim3 block, void **args,
                                  size_t shmem, cudaStream_t stream, unsigned flags) {
  struct ferry_kernel *k;
  int rc = ferry_kernel_lookup(func, &k);
  if (!rc) rc = ferry_launch(k, grid, block, args, shmem, stream, flags);
  return ferry_ret(rc);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                             cudaStream_t stream) {
  return launch_by_func(func, grid, block, args, shmem, stream, 0);
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                  size_t shmem, cudaStream_t stream) {
  return launch_by_func(func, grid, block, args, shmem, stream, FERRY_LAUNCH_PER_THREAD);
}

cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block, void **args,
                                        size_t shmem, cudaStream_t stream) {
  return launch_by_func(func, grid, block, args, shmem, stream, FERRY_LAUNCH_COOPERATIVE);
}

cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                             size_t shmem, cudaStream_t stream) {
  return launch_by_func(func, grid, block, args, shmem, stream,
                        FERRY_LAUNCH_COOPERATIVE | FERRY_LAUNCH_PER_THREAD);
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

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
  struct ferry_vgpu *v;
  struct ferry_func_set_attribute_args a = {.attr = (uint32_t)attr, .value = value};
  int rc = current_func(func, &v, &a.func);
  if (!rc) rc = ferry_call(v, FERRY_CALL_func_set_attribute, &a, NULL, NULL);
  return ferry_ret(rc);
}

cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache config) {
  struct ferry_vgpu *v;
  struct ferry_func_set_cache_config_args a = {.config = (uint32_t)config};
  int rc = current_func(func, &v, &a.func);
  if (!rc) rc = ferry_call(v, FERRY_CALL_func_set_cache_config, &a, NULL, NULL);
  return ferry_ret(rc);
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
