/*
 * TMA descriptors on the CPU: the simulation checks the rules of
 * cuTensorMapEncodeTiled/Im2col that a caller can break (rank, alignment of
 * the address and strides, box and element-stride ranges) and encodes the
 * arguments into the 128 bytes in a fixed, documented-nowhere layout of its
 * own, as the driver does with its format: the address in the first eight
 * bytes (so that cuTensorMapReplaceAddress can change it), then the rest.
 */
#include "sim/sim.h"

#include <string.h>

struct sim_map {
  uint64_t addr;
  uint64_t dims[5], strides[4];
  uint32_t box[5]; /* im2col: the corners, lower << 16 | upper */
  uint16_t channels, pixels;
  uint8_t kind, dtype, rank, interleave, swizzle, l2, oob, estrides[5];
};
_Static_assert(sizeof(struct sim_map) <= sizeof(CUtensorMap), "a sim map fits a CUtensorMap");

static CUresult check(CUtensorMapDataType dtype, cuuint32_t rank, void *addr, const cuuint64_t *dims,
                      const cuuint64_t *strides, const cuuint32_t *estrides,
                      CUtensorMapInterleave interleave) {
  if (rank < 1 || rank > 5 || !dims || (rank > 1 && !strides) || !estrides ||
      (unsigned)dtype > CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t align = interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  if ((uintptr_t)addr % align) return CUDA_ERROR_INVALID_VALUE;
  for (cuuint32_t i = 0; i < rank; i++)
    if (!dims[i] || dims[i] > (1ull << 32) || !estrides[i] || estrides[i] > 8)
      return CUDA_ERROR_INVALID_VALUE;
  for (cuuint32_t i = 0; i + 1 < rank; i++)
    if (strides[i] % 16 || strides[i] >= (1ull << 40)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

static void put(CUtensorMap *map, const struct sim_map *m) {
  memset(map, 0, sizeof *map);
  memcpy(map, m, sizeof *m);
}

CUresult sim_TensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank,
                                  void *addr, const cuuint64_t *dims, const cuuint64_t *strides,
                                  const cuuint32_t *box, const cuuint32_t *estrides,
                                  CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                  CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  if (!map || !box) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = check(dtype, rank, addr, dims, strides, estrides, interleave);
  if (rc) return rc;
  struct sim_map m = {.addr = (uintptr_t)addr, .kind = 0, .dtype = (uint8_t)dtype,
                      .rank = (uint8_t)rank, .interleave = (uint8_t)interleave,
                      .swizzle = (uint8_t)swizzle, .l2 = (uint8_t)l2, .oob = (uint8_t)oob};
  for (cuuint32_t i = 0; i < rank; i++) {
    if (!box[i] || box[i] > 256) return CUDA_ERROR_INVALID_VALUE;
    m.dims[i] = dims[i], m.box[i] = box[i], m.estrides[i] = (uint8_t)estrides[i];
    if (i + 1 < rank) m.strides[i] = strides[i];
  }
  put(map, &m);
  return CUDA_SUCCESS;
}

CUresult sim_TensorMapEncodeIm2col(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank,
                                   void *addr, const cuuint64_t *dims, const cuuint64_t *strides,
                                   const int *lower, const int *upper, cuuint32_t channels,
                                   cuuint32_t pixels, const cuuint32_t *estrides,
                                   CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                   CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  if (!map || !lower || !upper || rank < 3 || !channels || channels > 256 || !pixels ||
      pixels > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = check(dtype, rank, addr, dims, strides, estrides, interleave);
  if (rc) return rc;
  struct sim_map m = {.addr = (uintptr_t)addr, .kind = 1, .dtype = (uint8_t)dtype,
                      .rank = (uint8_t)rank, .interleave = (uint8_t)interleave,
                      .swizzle = (uint8_t)swizzle, .l2 = (uint8_t)l2, .oob = (uint8_t)oob,
                      .channels = (uint16_t)channels, .pixels = (uint16_t)pixels};
  for (cuuint32_t i = 0; i < rank; i++) {
    m.dims[i] = dims[i], m.estrides[i] = (uint8_t)estrides[i];
    if (i + 1 < rank) m.strides[i] = strides[i];
  }
  /* the corners, where the tiled form keeps its box */
  for (cuuint32_t i = 0; i + 2 < rank; i++) m.box[i] = (uint32_t)lower[i] << 16 | (uint16_t)upper[i];
  put(map, &m);
  return CUDA_SUCCESS;
}

CUresult sim_TensorMapReplaceAddress(CUtensorMap *map, void *addr) {
  struct sim_map m;
  if (!map) return CUDA_ERROR_INVALID_VALUE;
  memcpy(&m, map, sizeof m);
  uint64_t align = m.interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  if (m.rank < 1 || m.rank > 5 || (uintptr_t)addr % align) return CUDA_ERROR_INVALID_VALUE;
  m.addr = (uintptr_t)addr;
  memcpy(map, &m, sizeof m);
  return CUDA_SUCCESS;
}
