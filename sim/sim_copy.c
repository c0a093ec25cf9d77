/*
 * Copies and memsets. They run at enqueue time; device-side ranges must be
 * mapped with the needed access, and host-side faults become
 * CUDA_ERROR_INVALID_VALUE rather than a crash of the server. 2D copies
 * are 3D copies of depth one, so both take arrays (sim_array.c) as sides.
 */
#include "sim/sim.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

struct rows {
  char *dst;
  const char *src; /* NULL: memset with value */
  size_t dpitch, spitch, width, height;
  unsigned char value;
};

static void do_rows(void *arg) {
  struct rows *r = arg;
  for (size_t y = 0; y < r->height; y++) {
    if (r->src)
      memmove(r->dst + y * r->dpitch, r->src + y * r->spitch, r->width);
    else
      memset(r->dst + y * r->dpitch, r->value, r->width);
  }
}

static int rows_ok(uint64_t base, size_t pitch, size_t width, size_t height, int prot) {
  for (size_t y = 0; y < height; y++)
    if (!sim_range_ok(base + y * pitch, width, prot))
      return 0;
  return 1;
}

static CUresult run_rows(struct rows *r) {
  if (r->width == 0 || r->height == 0)
    return CUDA_SUCCESS;
  return sim_guarded(do_rows, r) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* enter with a stream check; CUDA_SUCCESS means the lock is held */
static CUresult enter_stream(CUstream stream) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!sim_stream_ok(stream))
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  return CUDA_SUCCESS;
}

CUresult sim_MemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream) {
  CUresult r = enter_stream(stream);
  if (r)
    return r;
  if ((!src && bytes) || !sim_range_ok(dst, bytes, PROT_WRITE))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct rows rw = {(char *)(uintptr_t)dst, src, 0, 0, bytes, 1, 0};
  return sim_leave(run_rows(&rw));
}

CUresult sim_MemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  CUresult r = enter_stream(stream);
  if (r)
    return r;
  if ((!dst && bytes) || !sim_range_ok(src, bytes, PROT_READ))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct rows rw = {dst, (const char *)(uintptr_t)src, 0, 0, bytes, 1, 0};
  return sim_leave(run_rows(&rw));
}

CUresult sim_MemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  CUresult r = enter_stream(stream);
  if (r)
    return r;
  if (!sim_range_ok(dst, bytes, PROT_WRITE) || !sim_range_ok(src, bytes, PROT_READ))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct rows rw = {(char *)(uintptr_t)dst, (const char *)(uintptr_t)src, 0, 0, bytes, 1, 0};
  return sim_leave(run_rows(&rw));
}

/* one side of a 2D or 3D copy, resolved: the first byte and the strides */
struct side3 {
  unsigned char *base;
  size_t pitch, slice;
  int dev; /* device memory: every row is checked against the mapped ranges */
};

static CUresult resolve_side(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray arr,
                             const void *reserved, size_t lod, size_t x, size_t y, size_t z,
                             size_t pitch, size_t height, const CUDA_MEMCPY3D *c, int prot,
                             struct side3 *out) {
  size_t w = c->WidthInBytes, h = c->Height, d = c->Depth;
  uint64_t b;
  if (reserved || lod)
    return CUDA_ERROR_INVALID_VALUE;
  switch (type) {
  case CU_MEMORYTYPE_HOST: b = (uintptr_t)host; out->dev = 0; break;
  case CU_MEMORYTYPE_DEVICE: b = dev; out->dev = 1; break;
  case CU_MEMORYTYPE_UNIFIED: /* unified addressing: a mapped range is device memory */
    b = dev;
    out->dev = sim_range_ok(dev, 1, PROT_NONE);
    break;
  case CU_MEMORYTYPE_ARRAY: {
    struct sim_array *a = sim_lookup(arr, SIM_ARRAY);
    if (!a && sim_lookup_any(arr, SIM_ARRAY))
      return CUDA_ERROR_INVALID_HANDLE; /* another context's array */
    if (!a || x > a->row_bytes || w > a->row_bytes - x || y > a->rows || h > a->rows - y ||
        z > a->slices || d > a->slices - z)
      return CUDA_ERROR_INVALID_VALUE;
    out->pitch = a->row_bytes;
    out->slice = a->row_bytes * a->rows;
    out->base = a->mem + z * out->slice + y * out->pitch + x;
    out->dev = 0; /* the array's own memory */
    return CUDA_SUCCESS;
  }
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  if (!b || ((h > 1 || d > 1) && pitch < w) || (d > 1 && height < h) || pitch > 2147483647u)
    return CUDA_ERROR_INVALID_VALUE;
  out->pitch = pitch;
  out->slice = pitch * height;
  out->base = (unsigned char *)(uintptr_t)(b + z * out->slice + y * pitch + x);
  if (out->dev)
    for (size_t k = 0; k < d; k++)
      if (!rows_ok((uintptr_t)out->base + k * out->slice, pitch, w, h, prot))
        return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

struct box {
  struct side3 s, d;
  size_t width, height, depth;
};

static void do_box(void *arg) {
  struct box *b = arg;
  for (size_t z = 0; z < b->depth; z++)
    for (size_t y = 0; y < b->height; y++)
      memmove(b->d.base + z * b->d.slice + y * b->d.pitch,
              b->s.base + z * b->s.slice + y * b->s.pitch, b->width);
}

CUresult sim_copy3d(const CUDA_MEMCPY3D *c) {
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  if (c->WidthInBytes == 0 || c->Height == 0 || c->Depth == 0)
    return CUDA_SUCCESS;
  struct box b = {.width = c->WidthInBytes, .height = c->Height, .depth = c->Depth};
  CUresult r = resolve_side(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->reserved0,
                            c->srcLOD, c->srcXInBytes, c->srcY, c->srcZ, c->srcPitch,
                            c->srcHeight, c, PROT_READ, &b.s);
  if (!r)
    r = resolve_side(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->reserved1,
                     c->dstLOD, c->dstXInBytes, c->dstY, c->dstZ, c->dstPitch, c->dstHeight, c,
                     PROT_WRITE, &b.d);
  if (r)
    return r;
  return sim_guarded(do_box, &b) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult sim_Memcpy3DAsync(const CUDA_MEMCPY3D *c, CUstream stream) {
  CUresult r = enter_stream(stream);
  return r ? r : sim_leave(sim_copy3d(c));
}

/* a 2D copy is a 3D copy of depth 1 */
CUresult sim_Memcpy2DAsync(const CUDA_MEMCPY2D *c, CUstream stream) {
  CUresult r = enter_stream(stream);
  if (r)
    return r;
  if (!c)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY3D c3 = {
      .srcXInBytes = c->srcXInBytes, .srcY = c->srcY, .srcMemoryType = c->srcMemoryType,
      .srcHost = c->srcHost, .srcDevice = c->srcDevice, .srcArray = c->srcArray,
      .srcPitch = c->srcPitch, .srcHeight = c->Height,
      .dstXInBytes = c->dstXInBytes, .dstY = c->dstY, .dstMemoryType = c->dstMemoryType,
      .dstHost = c->dstHost, .dstDevice = c->dstDevice, .dstArray = c->dstArray,
      .dstPitch = c->dstPitch, .dstHeight = c->Height,
      .WidthInBytes = c->WidthInBytes, .Height = c->Height, .Depth = 1};
  return sim_leave(sim_copy3d(&c3));
}

CUresult sim_MemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream) {
  CUresult r = enter_stream(stream);
  if (r)
    return r;
  if (!sim_range_ok(dst, n, PROT_WRITE))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct rows rw = {(char *)(uintptr_t)dst, NULL, 0, 0, n, 1, value};
  return sim_leave(run_rows(&rw));
}

CUresult sim_MemsetD2D8Async(CUdeviceptr dst, size_t pitch, unsigned char value, size_t width,
                             size_t height, CUstream stream) {
  CUresult r = enter_stream(stream);
  if (r)
    return r;
  if ((height > 1 && pitch < width) || pitch > 2147483647u ||
      !rows_ok(dst, pitch, width, height, PROT_WRITE))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct rows rw = {(char *)(uintptr_t)dst, NULL, pitch, 0, width, height, value};
  return sim_leave(run_rows(&rw));
}

/* cuMemsetD2D16/32: rows of `width` values of elem bytes, `pitch` bytes apart */
struct fill {
  unsigned char *dst;
  size_t pitch, width, height, elem;
  unsigned char pattern[4]; /* one value in device (little endian) order */
};

static void do_fill(void *arg) {
  struct fill *f = arg;
  for (size_t y = 0; y < f->height; y++)
    for (size_t x = 0; x < f->width; x++)
      memcpy(f->dst + y * f->pitch + x * f->elem, f->pattern, f->elem);
}

/* the D2D8 checks in bytes, plus the driver's alignment rule: dst (and the
   pitch of a set of several rows) a multiple of the element size */
CUresult sim_memset(CUdeviceptr dst, size_t pitch, const void *value, size_t elem, size_t width,
                    size_t height) {
  if (width > SIZE_MAX / elem || dst % elem || (height > 1 && pitch % elem))
    return CUDA_ERROR_INVALID_VALUE;
  size_t bytes = width * elem;
  if ((height > 1 && pitch < bytes) || pitch > 2147483647u ||
      !rows_ok(dst, pitch, bytes, height, PROT_WRITE))
    return CUDA_ERROR_INVALID_VALUE;
  if (width == 0 || height == 0)
    return CUDA_SUCCESS;
  struct fill f = {(unsigned char *)(uintptr_t)dst, pitch, width, height, elem, {0}};
  memcpy(f.pattern, value, elem);
  return sim_guarded(do_fill, &f) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult sim_MemsetD2D16Async(CUdeviceptr dst, size_t pitch, unsigned short value, size_t width,
                              size_t height, CUstream stream) {
  CUresult r = enter_stream(stream);
  return r ? r : sim_leave(sim_memset(dst, pitch, &value, sizeof value, width, height));
}

CUresult sim_MemsetD2D32Async(CUdeviceptr dst, size_t pitch, unsigned int value, size_t width,
                              size_t height, CUstream stream) {
  CUresult r = enter_stream(stream);
  return r ? r : sim_leave(sim_memset(dst, pitch, &value, sizeof value, width, height));
}
