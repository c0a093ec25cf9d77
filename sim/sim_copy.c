/*
 * Copies and memsets. They run at enqueue time; device-side ranges must be
 * mapped with the needed access, and host-side faults become
 * CUDA_ERROR_INVALID_VALUE rather than a crash of the server.
 */
#include "sim/sim.h"

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

/* one side of a 2D copy: its first byte, and whether it is device memory */
static int side(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t y,
                size_t pitch, uint64_t *base, int *is_dev) {
  uint64_t b;
  switch (type) {
  case CU_MEMORYTYPE_HOST: b = (uintptr_t)host; *is_dev = 0; break;
  case CU_MEMORYTYPE_DEVICE: b = dev; *is_dev = 1; break;
  case CU_MEMORYTYPE_UNIFIED: /* unified addressing: a mapped range is device memory */
    b = dev;
    *is_dev = sim_range_ok(dev, 1, PROT_NONE);
    break;
  default: return -1; /* arrays are not simulated */
  }
  if (!b)
    return -1;
  *base = b + y * pitch + x;
  return 0;
}

CUresult sim_Memcpy2DAsync(const CUDA_MEMCPY2D *c, CUstream stream) {
  CUresult r = enter_stream(stream);
  if (r)
    return r;
  if (!c)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  size_t w = c->WidthInBytes, h = c->Height;
  if (w == 0 || h == 0)
    return sim_leave(CUDA_SUCCESS);
  uint64_t s, d;
  int sdev, ddev;
  if (side(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, c->srcPitch, &s,
           &sdev) ||
      side(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, c->dstPitch, &d,
           &ddev))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if (h > 1 && (c->srcPitch < w || c->dstPitch < w))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if (c->srcPitch > 2147483647u || c->dstPitch > 2147483647u)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if ((sdev && !rows_ok(s, c->srcPitch, w, h, PROT_READ)) ||
      (ddev && !rows_ok(d, c->dstPitch, w, h, PROT_WRITE)))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct rows rw = {(char *)(uintptr_t)d, (const char *)(uintptr_t)s, c->dstPitch, c->srcPitch, w,
                    h, 0};
  return sim_leave(run_rows(&rw));
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
