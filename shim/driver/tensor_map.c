/*
 * TMA descriptors (CUtensorMap) for Hopper kernels (Triton's and XLA's):
 * 128 bytes in the driver's own format, so the vGPU's driver encodes them
 * (tensor_map_encode, an answer the client keeps, as the encoding is a
 * pure function of the arguments). The program then passes the map to its
 * kernels by value, and the address inside is the same on every GPU the
 * vGPU runs on, except a module variable's (XLA's constants): the driver
 * places those on each GPU, so a map of one is encoded where it lives now.
 */
#include <string.h>

#include "shim/driver/cu.h"

/* the vGPU of the tensor's memory, else the current context's */
static CUresult vgpu_for(const void *addr, struct ferry_vgpu **v) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  *v = ferry_vgpu_of(addr);
  int err = 0;
  if (!*v && !(*v = ferry_current(&err))) return ferry_cu_result(err);
  return ferry_dead(*v) ? CUDA_ERROR_DEVICE_UNAVAILABLE : CUDA_SUCCESS;
}

static CUresult encode(CUtensorMap *map, struct ferry_vgpu *v, struct ferry_tensor_map_encode_args *a) {
  struct ferry_tensor_map_encode_rets r;
  a->addr = ferry_global_now(v->index, a->addr);
  CUresult rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_tensor_map_encode, a, &r, NULL));
  if (rc) return rc;
  if (r.map.len != sizeof *map) return CUDA_ERROR_UNKNOWN;
  memcpy(map, r.map.ptr, sizeof *map);
  return CUDA_SUCCESS;
}

CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank,
                                void *addr, const cuuint64_t *dims, const cuuint64_t *strides,
                                const cuuint32_t *box, const cuuint32_t *estrides,
                                CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  if (!map || rank < 1 || rank > 5 || !dims || (rank > 1 && !strides) || !box || !estrides)
    return CUDA_ERROR_INVALID_VALUE;
  struct ferry_vgpu *v;
  CUresult rc = vgpu_for(addr, &v);
  if (rc) return rc;
  struct ferry_tensor_map_encode_args a = {
      .kind = 0, .dtype = (uint32_t)dtype, .rank = rank, .addr = (uint64_t)(uintptr_t)addr,
      .dims = {dims, rank * 8}, .strides = {strides, (rank - 1) * 8}, .box = {box, rank * 4},
      .estrides = {estrides, rank * 4}, .interleave = (uint32_t)interleave,
      .swizzle = (uint32_t)swizzle, .l2 = (uint32_t)l2, .oob = (uint32_t)oob};
  return encode(map, v, &a);
}

CUresult cuTensorMapEncodeIm2col(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank,
                                 void *addr, const cuuint64_t *dims, const cuuint64_t *strides,
                                 const int *lower, const int *upper, cuuint32_t channels,
                                 cuuint32_t pixels, const cuuint32_t *estrides,
                                 CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                 CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  if (!map || rank < 3 || rank > 5 || !dims || !strides || !lower || !upper || !estrides)
    return CUDA_ERROR_INVALID_VALUE;
  struct ferry_vgpu *v;
  CUresult rc = vgpu_for(addr, &v);
  if (rc) return rc;
  int corners[6];
  memcpy(corners, lower, (rank - 2) * sizeof(int));
  memcpy(corners + (rank - 2), upper, (rank - 2) * sizeof(int));
  struct ferry_tensor_map_encode_args a = {
      .kind = 1, .dtype = (uint32_t)dtype, .rank = rank, .addr = (uint64_t)(uintptr_t)addr,
      .dims = {dims, rank * 8}, .strides = {strides, (rank - 1) * 8},
      .corners = {corners, 2 * (rank - 2) * 4}, .channels = channels, .pixels = pixels,
      .estrides = {estrides, rank * 4}, .interleave = (uint32_t)interleave,
      .swizzle = (uint32_t)swizzle, .l2 = (uint32_t)l2, .oob = (uint32_t)oob};
  return encode(map, v, &a);
}

CUresult cuTensorMapReplaceAddress(CUtensorMap *map, void *addr) {
  if (!map) return CUDA_ERROR_INVALID_VALUE;
  struct ferry_vgpu *v;
  CUresult rc = vgpu_for(addr, &v);
  if (rc) return rc;
  struct ferry_tensor_map_replace_args a = {.map = {map, sizeof *map},
                                            .addr = ferry_global_now(v->index, (uint64_t)(uintptr_t)addr)};
  struct ferry_tensor_map_replace_rets r;
  rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_tensor_map_replace, &a, &r, NULL));
  if (rc) return rc;
  if (r.map.len != sizeof *map) return CUDA_ERROR_UNKNOWN;
  memcpy(map, r.map.ptr, sizeof *map);
  return CUDA_SUCCESS;
}
