/*
 * TMA descriptors (CUtensorMap): the client's cuTensorMapEncode* and
 * cuTensorMapReplaceAddress are encoded by this GPU's driver, since the
 * 128 bytes are the driver's own format. Nothing is kept: the program holds
 * the map and passes it to kernels by value.
 */
#include "executor/exec_internal.h"

#include <string.h>

#define MAP_BYTES sizeof(CUtensorMap)

/* the blob holds exactly n elements of size elem, suitably aligned */
static const void *array_of(ferry_blob b, uint32_t n, size_t elem) {
  if (b.len != n * elem) return NULL;
  return b.ptr ? b.ptr : (const void *)"";
}

int ferry_x_tensor_map_encode(struct ferry_exec *ex, const struct ferry_tensor_map_encode_args *a,
                              struct ferry_tensor_map_encode_rets *r, struct ferry_io *io) {
  (void)io;
  if (a->rank < 1 || a->rank > 5 || a->kind > 1 || (a->kind == 1 && a->rank < 3))
    return EXEC_INVALID_VALUE;
  /* copies: the decoded blobs need not be aligned for u64 reads */
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], estrides[5];
  int corners[6];
  const void *d = array_of(a->dims, a->rank, 8), *s = array_of(a->strides, a->rank - 1, 8);
  const void *e = array_of(a->estrides, a->rank, 4);
  if (!d || !s || !e) return EXEC_INVALID_VALUE;
  memcpy(dims, d, a->dims.len);
  if (a->strides.len) memcpy(strides, s, a->strides.len);
  memcpy(estrides, e, a->estrides.len);
  CUtensorMap *map = exec_ret_alloc(ex, 0, MAP_BYTES);
  if (!map) return EXEC_MEMORY_ALLOCATION;
  memset(map, 0, MAP_BYTES);
  CUresult res;
  void *addr = (void *)(uintptr_t)a->addr;
  if (a->kind == 0) {
    const void *b = array_of(a->box, a->rank, 4);
    if (!b || a->corners.len) return EXEC_INVALID_VALUE;
    memcpy(box, b, a->box.len);
    res = ex->d->TensorMapEncodeTiled(map, (CUtensorMapDataType)a->dtype, a->rank, addr, dims, strides,
                                      box, estrides, (CUtensorMapInterleave)a->interleave,
                                      (CUtensorMapSwizzle)a->swizzle, (CUtensorMapL2promotion)a->l2,
                                      (CUtensorMapFloatOOBfill)a->oob);
  } else {
    const void *c = array_of(a->corners, 2 * (a->rank - 2), 4);
    if (!c || a->box.len) return EXEC_INVALID_VALUE;
    memcpy(corners, c, a->corners.len);
    res = ex->d->TensorMapEncodeIm2col(map, (CUtensorMapDataType)a->dtype, a->rank, addr, dims, strides,
                                       corners, corners + (a->rank - 2), a->channels, a->pixels,
                                       estrides, (CUtensorMapInterleave)a->interleave,
                                       (CUtensorMapSwizzle)a->swizzle, (CUtensorMapL2promotion)a->l2,
                                       (CUtensorMapFloatOOBfill)a->oob);
  }
  if (res != CUDA_SUCCESS) return CU(res);
  r->map = (ferry_blob){map, (uint32_t)MAP_BYTES};
  return EXEC_OK;
}

int ferry_x_tensor_map_replace(struct ferry_exec *ex, const struct ferry_tensor_map_replace_args *a,
                               struct ferry_tensor_map_replace_rets *r, struct ferry_io *io) {
  (void)io;
  if (a->map.len != MAP_BYTES) return EXEC_INVALID_VALUE;
  CUtensorMap *map = exec_ret_alloc(ex, 0, MAP_BYTES);
  if (!map) return EXEC_MEMORY_ALLOCATION;
  memcpy(map, a->map.ptr, MAP_BYTES);
  CUresult res = ex->d->TensorMapReplaceAddress(map, (void *)(uintptr_t)a->addr);
  if (res != CUDA_SUCCESS) return CU(res);
  r->map = (ferry_blob){map, (uint32_t)MAP_BYTES};
  return EXEC_OK;
}
