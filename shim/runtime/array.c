/*
 * CUDA arrays, texture objects and surface objects. A cudaArray_t is a
 * ferry handle mapped to a wire id on its vGPU, and its facts stay here,
 * so cudaArrayGetInfo costs nothing. Texture and surface object values
 * are the server driver's own: programs pass them to kernels, so they
 * cannot be translated. The runtime's descriptors become the driver's
 * here, once (channel desc -> CUarray_format + channels, read mode and
 * coordinates -> flags). Copies of 2D/3D boxes follow memory.c's rules:
 * host-to-device is pipelined, device-to-host waits for its bytes.
 */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "shim/core/link.h"
#include "shim/runtime/graph.h"

static pthread_once_t arrays_once = PTHREAD_ONCE_INIT;
static void arrays_init(void) { ferry_handles_init(&ferry.arrays); }
static struct ferry_handles *arrays(void) {
  pthread_once(&arrays_once, arrays_init);
  return &ferry.arrays;
}

static void refuse_once(int *warned, const char *what) {
  if (!__atomic_exchange_n(warned, 1, __ATOMIC_RELAXED))
    ferry_log("%s is not supported by ferry; returning cudaErrorNotSupported", what);
}

/* ---- channel descriptors ---- */

/* the driver's format and channel count for a runtime channel desc */
static int channel_format(const struct cudaChannelFormatDesc *d, unsigned *fmt, unsigned *nch,
                          uint64_t *elem) {
  static const struct {
    enum cudaChannelFormatKind kind;
    CUarray_format fmt;
    unsigned n, bytes;
  } normalized[] = {
      {cudaChannelFormatKindUnsignedNormalized8X1, CU_AD_FORMAT_UNORM_INT8X1, 1, 1},
      {cudaChannelFormatKindUnsignedNormalized8X2, CU_AD_FORMAT_UNORM_INT8X2, 2, 2},
      {cudaChannelFormatKindUnsignedNormalized8X4, CU_AD_FORMAT_UNORM_INT8X4, 4, 4},
      {cudaChannelFormatKindUnsignedNormalized16X1, CU_AD_FORMAT_UNORM_INT16X1, 1, 2},
      {cudaChannelFormatKindUnsignedNormalized16X2, CU_AD_FORMAT_UNORM_INT16X2, 2, 4},
      {cudaChannelFormatKindUnsignedNormalized16X4, CU_AD_FORMAT_UNORM_INT16X4, 4, 8},
      {cudaChannelFormatKindSignedNormalized8X1, CU_AD_FORMAT_SNORM_INT8X1, 1, 1},
      {cudaChannelFormatKindSignedNormalized8X2, CU_AD_FORMAT_SNORM_INT8X2, 2, 2},
      {cudaChannelFormatKindSignedNormalized8X4, CU_AD_FORMAT_SNORM_INT8X4, 4, 4},
      {cudaChannelFormatKindSignedNormalized16X1, CU_AD_FORMAT_SNORM_INT16X1, 1, 2},
      {cudaChannelFormatKindSignedNormalized16X2, CU_AD_FORMAT_SNORM_INT16X2, 2, 4},
      {cudaChannelFormatKindSignedNormalized16X4, CU_AD_FORMAT_SNORM_INT16X4, 4, 8},
  };
  for (size_t i = 0; i < sizeof normalized / sizeof normalized[0]; i++)
    if (normalized[i].kind == d->f) {
      *fmt = normalized[i].fmt;
      *nch = normalized[i].n;
      *elem = normalized[i].bytes;
      return 0;
    }
  if (d->f != cudaChannelFormatKindSigned && d->f != cudaChannelFormatKindUnsigned &&
      d->f != cudaChannelFormatKindFloat) {
    static int warned;
    if (d->f == cudaChannelFormatKindNone) return cudaErrorInvalidChannelDescriptor;
    refuse_once(&warned, "a CUDA array of this channel format (block-compressed or video)");
    return cudaErrorNotSupported;
  }
  /* channels are x, y, z, w in that order, all of the same size */
  int bits[4] = {d->x, d->y, d->z, d->w};
  unsigned n = 0;
  while (n < 4 && bits[n]) n++;
  for (unsigned i = n; i < 4; i++)
    if (bits[i]) return cudaErrorInvalidChannelDescriptor;
  for (unsigned i = 1; i < n; i++)
    if (bits[i] != bits[0]) return cudaErrorInvalidChannelDescriptor;
  if (n != 1 && n != 2 && n != 4) return cudaErrorInvalidChannelDescriptor;
  CUarray_format f;
  int sign = d->f == cudaChannelFormatKindSigned;
  switch (d->f == cudaChannelFormatKindFloat ? -bits[0] : bits[0]) {
  case 8: f = sign ? CU_AD_FORMAT_SIGNED_INT8 : CU_AD_FORMAT_UNSIGNED_INT8; break;
  case 16: f = sign ? CU_AD_FORMAT_SIGNED_INT16 : CU_AD_FORMAT_UNSIGNED_INT16; break;
  case 32: f = sign ? CU_AD_FORMAT_SIGNED_INT32 : CU_AD_FORMAT_UNSIGNED_INT32; break;
  case -16: f = CU_AD_FORMAT_HALF; break;
  case -32: f = CU_AD_FORMAT_FLOAT; break;
  default: return cudaErrorInvalidChannelDescriptor;
  }
  *fmt = f;
  *nch = n;
  *elem = (uint64_t)n * (unsigned)bits[0] / 8;
  return 0;
}

/* ---- arrays ---- */

static int array_of(cudaArray_const_t a, struct ferry_array **out) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  *out = ferry_handle_get(arrays(), (uintptr_t)a);
  if (!*out) return cudaErrorInvalidResourceHandle;
  return ferry_dead(&ferry.vgpus[(*out)->vgpu]) ? cudaErrorDevicesUnavailable : 0;
}

static int array_create(cudaArray_t *out, const struct cudaChannelFormatDesc *desc,
                        struct cudaExtent e, unsigned flags) {
  if (!out || !desc) return cudaErrorInvalidValue;
  unsigned known = cudaArrayLayered | cudaArraySurfaceLoadStore | cudaArrayCubemap |
                   cudaArrayTextureGather;
  if (flags & (cudaArraySparse | cudaArrayDeferredMapping)) {
    static int warned;
    refuse_once(&warned, "a sparse or deferred-mapping CUDA array");
    return cudaErrorNotSupported;
  }
  if (flags & ~known) return cudaErrorInvalidValue;
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return err;
  unsigned fmt, nch;
  uint64_t elem;
  if ((err = channel_format(desc, &fmt, &nch, &elem))) return err;
  struct ferry_array *a = calloc(1, sizeof *a);
  if (!a) return cudaErrorMemoryAllocation;
  uint64_t h = ferry_handle_add(arrays(), a);
  if (!h) {
    free(a);
    return cudaErrorMemoryAllocation;
  }
  *a = (struct ferry_array){.vgpu = v->index, .id = ferry_handle_id(h), .desc = *desc,
                            .extent = e, .flags = flags, .elem = elem,
                            .row_bytes = (uint64_t)e.width * elem,
                            .rows = e.height ? e.height : 1, .slices = e.depth ? e.depth : 1};
  struct ferry_array_create_args args = {a->id, e.width, e.height, e.depth, fmt, nch, flags};
  int rc = ferry_call(v, FERRY_CALL_array_create, &args, NULL, NULL);
  if (rc) {
    free(ferry_handle_remove(arrays(), h));
    return rc;
  }
  *out = (cudaArray_t)(uintptr_t)h;
  return 0;
}

cudaError_t cudaMallocArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
                            size_t width, size_t height, unsigned int flags) {
  /* layers and cube maps need cudaMalloc3DArray */
  if (flags & (cudaArrayLayered | cudaArrayCubemap)) return ferry_ret(cudaErrorInvalidValue);
  return ferry_ret(array_create(array, desc, (struct cudaExtent){width, height, 0}, flags));
}

cudaError_t cudaMalloc3DArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
                              struct cudaExtent extent, unsigned int flags) {
  return ferry_ret(array_create(array, desc, extent, flags));
}

cudaError_t cudaFreeArray(cudaArray_t array) {
  int rc = ferry_ensure_init();
  if (rc) return ferry_ret(rc);
  if (!array) return cudaSuccess;
  struct ferry_array *a = ferry_handle_take(arrays(), (uintptr_t)array);
  if (!a) return ferry_ret(cudaErrorInvalidResourceHandle);
  struct ferry_array_destroy_args args = {a->id};
  rc = ferry_call(&ferry.vgpus[a->vgpu], FERRY_CALL_array_destroy, &args, NULL, NULL);
  ferry_handle_release(arrays(), (uintptr_t)array); /* its id is free once the server forgot it */
  free(a);
  return ferry_ret(rc);
}

cudaError_t cudaArrayGetInfo(struct cudaChannelFormatDesc *desc, struct cudaExtent *extent,
                             unsigned int *flags, cudaArray_t array) {
  struct ferry_array *a;
  int rc = array_of(array, &a);
  if (rc) return ferry_ret(rc);
  if (desc) *desc = a->desc;
  if (extent) *extent = a->extent;
  if (flags) *flags = a->flags;
  return cudaSuccess;
}

cudaError_t cudaGetChannelDesc(struct cudaChannelFormatDesc *desc, cudaArray_const_t array) {
  if (!desc) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_array *a;
  int rc = array_of(array, &a);
  if (!rc) *desc = a->desc;
  return ferry_ret(rc);
}

/* ---- copies of boxes: width bytes x height rows x depth slices ---- */

enum { END_HOST, END_DEVICE, END_ARRAY };

/* one end of a copy; x in bytes. Host and device ends: pitch bytes per
   row, rows per slice. */
struct end {
  int kind;
  void *host;
  uint64_t dev;
  struct ferry_array *arr;
  uint64_t pitch, rows, x, y, z;
};

static struct end host_end(const void *p, uint64_t pitch, uint64_t rows) {
  return (struct end){.kind = END_HOST, .host = (void *)p, .pitch = pitch, .rows = rows};
}
static struct end ptr_end(const void *p, int on_device, uint64_t pitch, uint64_t rows) {
  struct end e = host_end(p, pitch, rows);
  if (on_device) e.kind = END_DEVICE, e.dev = (uint64_t)(uintptr_t)p, e.host = NULL;
  return e;
}
static struct end array_end(struct ferry_array *a, uint64_t x, uint64_t y, uint64_t z) {
  return (struct end){.kind = END_ARRAY, .arr = a, .x = x, .y = y, .z = z};
}

/* the vGPU an end lives on (NULL for host memory) after checking that the
   box fits in it */
static int end_check(const struct end *e, uint64_t w, uint64_t h, uint64_t d,
                     struct ferry_vgpu **v) {
  *v = NULL;
  if (e->kind == END_ARRAY) {
    const struct ferry_array *a = e->arr;
    if (e->x > a->row_bytes || w > a->row_bytes - e->x || e->y > a->rows ||
        h > a->rows - e->y || e->z > a->slices || d > a->slices - e->z)
      return cudaErrorInvalidValue;
    *v = &ferry.vgpus[a->vgpu];
    return ferry_dead(*v) ? cudaErrorDevicesUnavailable : 0;
  }
  if (!e->host && !e->dev) return cudaErrorInvalidValue;
  if ((h > 1 || d > 1) && e->pitch < w) return cudaErrorInvalidPitchValue;
  if (d > 1 && e->rows < h) return cudaErrorInvalidValue;
  if (e->kind == END_HOST) return 0;
  uint64_t slice = e->pitch * e->rows;
  uint64_t start = e->dev + e->z * slice + e->y * e->pitch + e->x;
  uint64_t span = (d - 1) * slice + (h - 1) * e->pitch + w;
  int err;
  *v = ferry_vgpu_of((void *)(uintptr_t)start);
  if (!*v) { /* module globals live outside the arena: the server checks them */
    *v = ferry_current(&err);
    return *v ? 0 : err;
  }
  if (ferry_dead(*v)) return cudaErrorDevicesUnavailable;
  pthread_mutex_lock(&(*v)->arena_lock);
  const struct ferry_region *r = ferry_arena_find(&(*v)->arena, start);
  int ok = r && start + span <= r->addr + r->size;
  pthread_mutex_unlock(&(*v)->arena_lock);
  return ok ? 0 : cudaErrorInvalidValue;
}

/* the first byte of row (y, z) of a host end */
static char *host_row(const struct end *e, uint64_t y, uint64_t z) {
  return (char *)e->host + (e->z + z) * e->pitch * e->rows + (e->y + y) * e->pitch + e->x;
}
/* whether a host end's box is one packed run of bytes */
static int host_packed(const struct end *e, uint64_t w, uint64_t h, uint64_t d) {
  return (h == 1 || e->pitch == w) && (d == 1 || e->rows == h);
}

/* the wire description of a device-side end: kind, addr, pitch, rows, x, y, z */
#define WIRE_END(e)                                                                         \
  (uint32_t)((e)->kind == END_ARRAY), (e)->kind == END_ARRAY ? (uint64_t)(e)->arr->id : (e)->dev, \
      (e)->pitch, (e)->rows, (e)->x, (e)->y, (e)->z

static int copy_box(const struct end *dst, const struct end *src, uint64_t w, uint64_t h,
                    uint64_t d, cudaStream_t stream, int per_thread, int async) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (!w || !h || !d) return 0;
  struct ferry_vgpu *dv, *sv, *v, *stream_v;
  if (h > UINT64_MAX / w || d > UINT64_MAX / (w * h)) return cudaErrorInvalidValue;
  if ((rc = end_check(dst, w, h, d, &dv)) || (rc = end_check(src, w, h, d, &sv))) return rc;
  uint64_t bytes = w * h * d;
  if (!dv && !sv) { /* host to host */
    for (uint64_t z = 0; z < d; z++)
      for (uint64_t y = 0; y < h; y++) memmove(host_row(dst, y, z), host_row(src, y, z), w);
    return 0;
  }
  if (dv && sv && dv != sv) {
    ferry_log("copies of CUDA arrays between two remote devices are not supported");
    return cudaErrorNotSupported;
  }
  v = dv ? dv : sv;
  uint32_t sid;
  if ((rc = ferry_stream_resolve(stream, per_thread, &stream_v, &sid))) return rc;
  if (stream_v != v) return cudaErrorInvalidResourceHandle;
  if ((rc = ferry_capture_refuse(v, sid, "a copy to or from a CUDA array"))) return rc;
  if (!sv) { /* host to device: pipelined, like memory.c's copies into the arena */
    char *tmp = NULL;
    const void *packed = host_row(src, 0, 0);
    if (!host_packed(src, w, h, d)) {
      if (!(tmp = malloc(bytes))) return cudaErrorMemoryAllocation;
      for (uint64_t z = 0; z < d; z++)
        for (uint64_t y = 0; y < h; y++) memcpy(tmp + (z * h + y) * w, host_row(src, y, z), w);
      packed = tmp;
    }
    struct ferry_memcpy3d_htod_args a = {WIRE_END(dst), w, h, d, sid, (uint32_t)async};
    struct ferry_bulk bulk = {.in = packed, .in_len = bytes};
    rc = ferry_call(v, FERRY_CALL_memcpy3d_htod, &a, NULL, &bulk);
    free(tmp);
    return rc;
  }
  if (!dv) { /* device to host: the bytes are here when this returns */
    char *tmp = NULL;
    void *packed = host_row(dst, 0, 0);
    if (!host_packed(dst, w, h, d)) {
      if (!(tmp = malloc(bytes))) return cudaErrorMemoryAllocation;
      packed = tmp;
    }
    struct ferry_memcpy3d_dtoh_args a = {WIRE_END(src), w, h, d, sid};
    struct ferry_bulk bulk = {.out = packed, .out_len = bytes};
    rc = ferry_call(v, FERRY_CALL_memcpy3d_dtoh, &a, NULL, &bulk);
    if (!rc && tmp)
      for (uint64_t z = 0; z < d; z++)
        for (uint64_t y = 0; y < h; y++) memcpy(host_row(dst, y, z), tmp + (z * h + y) * w, w);
    free(tmp);
    return rc;
  }
  struct ferry_memcpy3d_dtod_args a = {WIRE_END(dst), WIRE_END(src), w, h, d, sid};
  rc = ferry_call(v, FERRY_CALL_memcpy3d_dtod, &a, NULL, NULL);
  if (!rc && !async) {
    struct ferry_stream_synchronize_args s = {sid};
    rc = ferry_call(v, FERRY_CALL_stream_synchronize, &s, NULL, NULL);
  }
  return rc;
}

/* the non-array end of an array copy: is it device memory? to_array: p is
   the source */
static int other_on_device(const void *p, enum cudaMemcpyKind kind, int to_array, int *dev) {
  switch (kind) {
  case cudaMemcpyDefault: *dev = ferry_vgpu_of(p) != NULL; return 0;
  case cudaMemcpyDeviceToDevice: *dev = 1; return 0;
  case cudaMemcpyHostToDevice: *dev = 0; return to_array ? 0 : cudaErrorInvalidMemcpyDirection;
  case cudaMemcpyDeviceToHost: *dev = 0; return to_array ? cudaErrorInvalidMemcpyDirection : 0;
  default: return cudaErrorInvalidMemcpyDirection;
  }
}

static int to_array_2d(cudaArray_t dst, size_t wo, size_t ho, const void *src, size_t spitch,
                       size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream,
                       int per_thread, int async) {
  struct ferry_array *a;
  int on_dev, rc = array_of(dst, &a);
  if (rc) return rc;
  if ((rc = other_on_device(src, kind, 1, &on_dev))) return rc;
  if (width && height && width > spitch) return cudaErrorInvalidPitchValue;
  struct end de = array_end(a, wo, ho, 0), se = ptr_end(src, on_dev, spitch, height);
  return copy_box(&de, &se, width, height, 1, stream, per_thread, async);
}

static int from_array_2d(void *dst, size_t dpitch, cudaArray_const_t src, size_t wo, size_t ho,
                         size_t width, size_t height, enum cudaMemcpyKind kind,
                         cudaStream_t stream, int per_thread, int async) {
  struct ferry_array *a;
  int on_dev, rc = array_of(src, &a);
  if (rc) return rc;
  if ((rc = other_on_device(dst, kind, 0, &on_dev))) return rc;
  if (width && height && width > dpitch) return cudaErrorInvalidPitchValue;
  struct end se = array_end(a, wo, ho, 0), de = ptr_end(dst, on_dev, dpitch, height);
  return copy_box(&de, &se, width, height, 1, stream, per_thread, async);
}

cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                size_t spitch, size_t width, size_t height,
                                enum cudaMemcpyKind kind) {
  return ferry_ret(to_array_2d(dst, wOffset, hOffset, src, spitch, width, height, kind, NULL, 0, 0));
}
cudaError_t cudaMemcpy2DToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                     const void *src, size_t spitch, size_t width, size_t height,
                                     enum cudaMemcpyKind kind) {
  return ferry_ret(to_array_2d(dst, wOffset, hOffset, src, spitch, width, height, kind, NULL, 1, 0));
}
cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                     const void *src, size_t spitch, size_t width, size_t height,
                                     enum cudaMemcpyKind kind, cudaStream_t stream) {
  return ferry_ret(
      to_array_2d(dst, wOffset, hOffset, src, spitch, width, height, kind, stream, 0, 1));
}
cudaError_t cudaMemcpy2DToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                          const void *src, size_t spitch, size_t width,
                                          size_t height, enum cudaMemcpyKind kind,
                                          cudaStream_t stream) {
  return ferry_ret(
      to_array_2d(dst, wOffset, hOffset, src, spitch, width, height, kind, stream, 1, 1));
}
cudaError_t cudaMemcpy2DFromArray(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                  size_t hOffset, size_t width, size_t height,
                                  enum cudaMemcpyKind kind) {
  return ferry_ret(
      from_array_2d(dst, dpitch, src, wOffset, hOffset, width, height, kind, NULL, 0, 0));
}
cudaError_t cudaMemcpy2DFromArray_ptds(void *dst, size_t dpitch, cudaArray_const_t src,
                                       size_t wOffset, size_t hOffset, size_t width,
                                       size_t height, enum cudaMemcpyKind kind) {
  return ferry_ret(
      from_array_2d(dst, dpitch, src, wOffset, hOffset, width, height, kind, NULL, 1, 0));
}
cudaError_t cudaMemcpy2DFromArrayAsync(void *dst, size_t dpitch, cudaArray_const_t src,
                                       size_t wOffset, size_t hOffset, size_t width,
                                       size_t height, enum cudaMemcpyKind kind,
                                       cudaStream_t stream) {
  return ferry_ret(
      from_array_2d(dst, dpitch, src, wOffset, hOffset, width, height, kind, stream, 0, 1));
}
cudaError_t cudaMemcpy2DFromArrayAsync_ptsz(void *dst, size_t dpitch, cudaArray_const_t src,
                                            size_t wOffset, size_t hOffset, size_t width,
                                            size_t height, enum cudaMemcpyKind kind,
                                            cudaStream_t stream) {
  return ferry_ret(
      from_array_2d(dst, dpitch, src, wOffset, hOffset, width, height, kind, stream, 1, 1));
}

/* The deprecated 1D forms copy `count` bytes from (wOffset, hOffset) on,
   running on into the next rows: at most a partial row, whole rows and a
   partial row. */
static int linear_array(struct ferry_array *a, size_t wo, size_t ho, char *p, size_t count,
                        int to_array, int on_dev, cudaStream_t stream, int per_thread,
                        int async) {
  if (wo > a->row_bytes || ho > a->rows) return cudaErrorInvalidValue;
  uint64_t start = (uint64_t)ho * a->row_bytes + wo;
  if (count > a->row_bytes * a->rows - start) return cudaErrorInvalidValue;
  while (count) {
    uint64_t y = start / a->row_bytes, x = start % a->row_bytes, w, h = 1;
    if (x || count < a->row_bytes) {
      w = a->row_bytes - x < count ? a->row_bytes - x : count;
    } else {
      w = a->row_bytes;
      h = count / a->row_bytes;
    }
    struct end ae = array_end(a, x, y, 0), pe = ptr_end(p, on_dev, w, h);
    int rc = to_array ? copy_box(&ae, &pe, w, h, 1, stream, per_thread, async)
                      : copy_box(&pe, &ae, w, h, 1, stream, per_thread, async);
    if (rc) return rc;
    start += w * h, p += w * h, count -= w * h;
  }
  return 0;
}

static int to_array_1d(cudaArray_t dst, size_t wo, size_t ho, const void *src, size_t count,
                       enum cudaMemcpyKind kind, cudaStream_t stream, int per_thread, int async) {
  struct ferry_array *a;
  int on_dev, rc = array_of(dst, &a);
  if (!rc) rc = other_on_device(src, kind, 1, &on_dev);
  return rc ? rc
            : linear_array(a, wo, ho, (char *)src, count, 1, on_dev, stream, per_thread, async);
}

static int from_array_1d(void *dst, cudaArray_const_t src, size_t wo, size_t ho, size_t count,
                         enum cudaMemcpyKind kind, cudaStream_t stream, int per_thread,
                         int async) {
  struct ferry_array *a;
  int on_dev, rc = array_of(src, &a);
  if (!rc) rc = other_on_device(dst, kind, 0, &on_dev);
  return rc ? rc : linear_array(a, wo, ho, dst, count, 0, on_dev, stream, per_thread, async);
}

cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                              size_t count, enum cudaMemcpyKind kind) {
  return ferry_ret(to_array_1d(dst, wOffset, hOffset, src, count, kind, NULL, 0, 0));
}
cudaError_t cudaMemcpyToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                   const void *src, size_t count, enum cudaMemcpyKind kind) {
  return ferry_ret(to_array_1d(dst, wOffset, hOffset, src, count, kind, NULL, 1, 0));
}
cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                   const void *src, size_t count, enum cudaMemcpyKind kind,
                                   cudaStream_t stream) {
  return ferry_ret(to_array_1d(dst, wOffset, hOffset, src, count, kind, stream, 0, 1));
}
cudaError_t cudaMemcpyToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                        const void *src, size_t count, enum cudaMemcpyKind kind,
                                        cudaStream_t stream) {
  return ferry_ret(to_array_1d(dst, wOffset, hOffset, src, count, kind, stream, 1, 1));
}
cudaError_t cudaMemcpyFromArray(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                size_t count, enum cudaMemcpyKind kind) {
  return ferry_ret(from_array_1d(dst, src, wOffset, hOffset, count, kind, NULL, 0, 0));
}
cudaError_t cudaMemcpyFromArray_ptds(void *dst, cudaArray_const_t src, size_t wOffset,
                                     size_t hOffset, size_t count, enum cudaMemcpyKind kind) {
  return ferry_ret(from_array_1d(dst, src, wOffset, hOffset, count, kind, NULL, 1, 0));
}
cudaError_t cudaMemcpyFromArrayAsync(void *dst, cudaArray_const_t src, size_t wOffset,
                                     size_t hOffset, size_t count, enum cudaMemcpyKind kind,
                                     cudaStream_t stream) {
  return ferry_ret(from_array_1d(dst, src, wOffset, hOffset, count, kind, stream, 0, 1));
}
cudaError_t cudaMemcpyFromArrayAsync_ptsz(void *dst, cudaArray_const_t src, size_t wOffset,
                                          size_t hOffset, size_t count, enum cudaMemcpyKind kind,
                                          cudaStream_t stream) {
  return ferry_ret(from_array_1d(dst, src, wOffset, hOffset, count, kind, stream, 1, 1));
}

static int array_to_array_2d(cudaArray_t dst, size_t wd, size_t hd, cudaArray_const_t src,
                             size_t ws, size_t hs, size_t width, size_t height,
                             enum cudaMemcpyKind kind) {
  struct ferry_array *da, *sa;
  int rc = array_of(dst, &da);
  if (!rc) rc = array_of(src, &sa);
  if (rc) return rc;
  if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  struct end de = array_end(da, wd, hd, 0), se = array_end(sa, ws, hs, 0);
  return copy_box(&de, &se, width, height, 1, NULL, 0, 0);
}

cudaError_t cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                     cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                                     size_t width, size_t height, enum cudaMemcpyKind kind) {
  return ferry_ret(array_to_array_2d(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc,
                                     width, height, kind));
}
cudaError_t cudaMemcpy2DArrayToArray_ptds(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                          cudaArray_const_t src, size_t wOffsetSrc,
                                          size_t hOffsetSrc, size_t width, size_t height,
                                          enum cudaMemcpyKind kind) {
  return ferry_ret(array_to_array_2d(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc,
                                     width, height, kind));
}

/* cudaMemcpy3D: positions and the extent's width count elements of the
   array involved, bytes for pitched pointers */
static int copy3d_parms(const struct cudaMemcpy3DParms *p, cudaStream_t stream, int per_thread,
                        int async) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (!p) return cudaErrorInvalidValue;
  /* exactly one of array and pointer names each end */
  if (!p->srcArray == !p->srcPtr.ptr || !p->dstArray == !p->dstPtr.ptr) return cudaErrorInvalidValue;
  if ((unsigned)p->kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  struct ferry_array *sa = NULL, *da = NULL;
  if (p->srcArray && (rc = array_of(p->srcArray, &sa))) return rc;
  if (p->dstArray && (rc = array_of(p->dstArray, &da))) return rc;
  uint64_t unit = da ? da->elem : sa ? sa->elem : 1;
  uint64_t w = (uint64_t)p->extent.width * unit;
  struct end se, de;
  if (sa) {
    se = array_end(sa, p->srcPos.x * sa->elem, p->srcPos.y, p->srcPos.z);
  } else {
    int on_dev;
    if (p->kind == cudaMemcpyDefault) on_dev = ferry_vgpu_of(p->srcPtr.ptr) != NULL;
    else on_dev = p->kind == cudaMemcpyDeviceToDevice || p->kind == cudaMemcpyDeviceToHost;
    se = ptr_end(p->srcPtr.ptr, on_dev, p->srcPtr.pitch, p->srcPtr.ysize);
    se.x = p->srcPos.x, se.y = p->srcPos.y, se.z = p->srcPos.z;
  }
  if (da) {
    de = array_end(da, p->dstPos.x * da->elem, p->dstPos.y, p->dstPos.z);
  } else {
    int on_dev;
    if (p->kind == cudaMemcpyDefault) on_dev = ferry_vgpu_of(p->dstPtr.ptr) != NULL;
    else on_dev = p->kind == cudaMemcpyDeviceToDevice || p->kind == cudaMemcpyHostToDevice;
    de = ptr_end(p->dstPtr.ptr, on_dev, p->dstPtr.pitch, p->dstPtr.ysize);
    de.x = p->dstPos.x, de.y = p->dstPos.y, de.z = p->dstPos.z;
  }
  /* an array end is on the device whatever the kind says about it */
  return copy_box(&de, &se, w, p->extent.height, p->extent.depth, stream, per_thread, async);
}

cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *p) {
  return ferry_ret(copy3d_parms(p, NULL, 0, 0));
}
cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p) {
  return ferry_ret(copy3d_parms(p, NULL, 1, 0));
}
cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t stream) {
  return ferry_ret(copy3d_parms(p, stream, 0, 1));
}
cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms *p, cudaStream_t stream) {
  return ferry_ret(copy3d_parms(p, stream, 1, 1));
}

/* pitched 3D memory: rows padded as cudaMallocPitch pads them, slices of
   `height` rows back to back */
cudaError_t cudaMalloc3D(struct cudaPitchedPtr *p, struct cudaExtent e) {
  if (!p) return ferry_ret(cudaErrorInvalidValue);
  if (e.height && e.depth > SIZE_MAX / e.height) return ferry_ret(cudaErrorMemoryAllocation);
  void *ptr = NULL;
  size_t pitch = 0;
  cudaError_t rc = cudaMallocPitch(&ptr, &pitch, e.width, e.height * e.depth);
  if (!rc) *p = (struct cudaPitchedPtr){ptr, pitch, e.width, e.height};
  return rc;
}

/* ---- texture and surface objects ---- */

struct texobj {
  int vgpu;
  int surface;
  uint64_t value; /* the server driver's */
  struct cudaResourceDesc res;
  struct cudaTextureDesc tex;
  struct cudaResourceViewDesc view;
  int has_view;
};
static pthread_mutex_t tex_lock = PTHREAD_MUTEX_INITIALIZER;
static struct texobj *texobjs;
static size_t ntex, tex_cap;

static int tex_add(const struct texobj *t) {
  pthread_mutex_lock(&tex_lock);
  if (ntex == tex_cap) {
    size_t cap = tex_cap ? tex_cap * 2 : 16;
    struct texobj *p = realloc(texobjs, cap * sizeof *p);
    if (!p) {
      pthread_mutex_unlock(&tex_lock);
      return cudaErrorMemoryAllocation;
    }
    texobjs = p;
    tex_cap = cap;
  }
  texobjs[ntex++] = *t;
  pthread_mutex_unlock(&tex_lock);
  return 0;
}

/* finds (and with take, removes) an object; two servers may hand out the
   same value, so the current device's wins */
static int tex_find(uint64_t value, int surface, int take, struct texobj *out) {
  int dev = ferry_thread()->device, found = -1;
  pthread_mutex_lock(&tex_lock);
  for (size_t i = 0; i < ntex; i++)
    if (texobjs[i].value == value && texobjs[i].surface == surface &&
        (found < 0 || texobjs[i].vgpu == dev))
      found = (int)i;
  if (found >= 0) {
    *out = texobjs[found];
    if (take) texobjs[found] = texobjs[--ntex];
  }
  pthread_mutex_unlock(&tex_lock);
  return found >= 0;
}

static int on_vgpu(void *obj, void *ctx) {
  return ((struct ferry_array *)obj)->vgpu == *(int *)ctx;
}

void ferry_arrays_forget(int vgpu) {
  pthread_mutex_lock(&tex_lock);
  for (size_t i = 0; i < ntex;)
    if (texobjs[i].vgpu == vgpu) texobjs[i] = texobjs[--ntex];
    else i++;
  pthread_mutex_unlock(&tex_lock);
  ferry_handles_remove_if(arrays(), on_vgpu, &vgpu, free);
}

/* device memory a linear or pitch2D texture reads: a live arena range */
static int tex_memory(const void *p, uint64_t span, struct ferry_vgpu **v) {
  *v = ferry_vgpu_of(p);
  if (!*v || !span) return cudaErrorInvalidValue;
  if (ferry_dead(*v)) return cudaErrorDevicesUnavailable;
  uint64_t a = (uint64_t)(uintptr_t)p;
  pthread_mutex_lock(&(*v)->arena_lock);
  /* only the start must be allocated: CUDA does not check the end, and
     programs reach past their allocation (convolutionFFT2D's spectrum
     texture spans more than its buffer); the bytes there are the
     program's business, as natively */
  int ok = ferry_arena_find(&(*v)->arena, a) != NULL && span < (1ull << 48);
  pthread_mutex_unlock(&(*v)->arena_lock);
  return ok ? 0 : cudaErrorInvalidValue;
}

/* the resource of a texture or surface as tex_create's fields */
static int resource(const struct cudaResourceDesc *res, struct ferry_tex_create_args *a,
                    struct ferry_vgpu **v) {
  static int warned_mipmap;
  uint64_t elem;
  int rc;
  if (res->flags) return cudaErrorInvalidValue;
  a->res_type = res->resType;
  switch (res->resType) {
  case cudaResourceTypeArray: {
    struct ferry_array *arr;
    if ((rc = array_of(res->res.array.array, &arr))) return rc;
    a->array = arr->id;
    *v = &ferry.vgpus[arr->vgpu];
    return 0;
  }
  case cudaResourceTypeLinear:
    if ((rc = channel_format(&res->res.linear.desc, &a->format, &a->channels, &elem))) return rc;
    a->dev = (uint64_t)(uintptr_t)res->res.linear.devPtr;
    a->width = res->res.linear.sizeInBytes;
    return tex_memory(res->res.linear.devPtr, a->width, v);
  case cudaResourceTypePitch2D:
    if ((rc = channel_format(&res->res.pitch2D.desc, &a->format, &a->channels, &elem))) return rc;
    a->dev = (uint64_t)(uintptr_t)res->res.pitch2D.devPtr;
    a->width = res->res.pitch2D.width;
    a->height = res->res.pitch2D.height;
    a->pitch = res->res.pitch2D.pitchInBytes;
    if (!a->width || !a->height || a->pitch < a->width * elem) return cudaErrorInvalidValue;
    return tex_memory(res->res.pitch2D.devPtr, a->pitch * (a->height - 1) + a->width * elem, v);
  case cudaResourceTypeMipmappedArray:
    refuse_once(&warned_mipmap, "a texture over a mipmapped array");
    return cudaErrorNotSupported;
  default:
    return cudaErrorInvalidValue;
  }
}

/* read mode, coordinates and the rest become the driver's flags */
static CUDA_TEXTURE_DESC driver_tex_desc(const struct cudaTextureDesc *t, unsigned format) {
  CUDA_TEXTURE_DESC d;
  memset(&d, 0, sizeof d);
  for (int i = 0; i < 3; i++) d.addressMode[i] = (CUaddress_mode)t->addressMode[i];
  d.filterMode = (CUfilter_mode)t->filterMode;
  int is_float = format == CU_AD_FORMAT_FLOAT || format == CU_AD_FORMAT_HALF;
  if (t->readMode == cudaReadModeElementType && !is_float) d.flags |= CU_TRSF_READ_AS_INTEGER;
  if (t->normalizedCoords) d.flags |= CU_TRSF_NORMALIZED_COORDINATES;
  if (t->sRGB) d.flags |= CU_TRSF_SRGB;
  if (t->disableTrilinearOptimization) d.flags |= CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION;
  if (t->seamlessCubemap) d.flags |= CU_TRSF_SEAMLESS_CUBEMAP;
  d.maxAnisotropy = t->maxAnisotropy;
  d.mipmapFilterMode = (CUfilter_mode)t->mipmapFilterMode;
  d.mipmapLevelBias = t->mipmapLevelBias;
  d.minMipmapLevelClamp = t->minMipmapLevelClamp;
  d.maxMipmapLevelClamp = t->maxMipmapLevelClamp;
  memcpy(d.borderColor, t->borderColor, sizeof d.borderColor);
  return d;
}

static CUDA_RESOURCE_VIEW_DESC driver_view_desc(const struct cudaResourceViewDesc *r) {
  CUDA_RESOURCE_VIEW_DESC d;
  memset(&d, 0, sizeof d);
  d.format = (CUresourceViewFormat)r->format; /* the same numbering */
  d.width = r->width;
  d.height = r->height;
  d.depth = r->depth;
  d.firstMipmapLevel = r->firstMipmapLevel;
  d.lastMipmapLevel = r->lastMipmapLevel;
  d.firstLayer = r->firstLayer;
  d.lastLayer = r->lastLayer;
  return d;
}

static int create_texture(cudaTextureObject_t *out, const struct cudaResourceDesc *res,
                          const struct cudaTextureDesc *tex,
                          const struct cudaResourceViewDesc *view) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (!out || !res || !tex) return cudaErrorInvalidValue;
  struct ferry_tex_create_args a;
  memset(&a, 0, sizeof a);
  struct ferry_vgpu *v;
  if ((rc = resource(res, &a, &v))) return rc;
  if (res->resType == cudaResourceTypeArray) { /* the array's format decides the read mode */
    struct ferry_array *arr = NULL;
    uint64_t elem;
    if ((rc = array_of(res->res.array.array, &arr))) return rc;
    channel_format(&arr->desc, &a.format, &a.channels, &elem);
  }
  CUDA_TEXTURE_DESC td = driver_tex_desc(tex, a.format);
  CUDA_RESOURCE_VIEW_DESC vd;
  if (res->resType == cudaResourceTypeArray) a.format = a.channels = 0; /* unused on the wire */
  a.tex = (ferry_blob){&td, sizeof td};
  a.view = (ferry_blob){NULL, 0};
  if (view) {
    vd = driver_view_desc(view);
    a.view = (ferry_blob){&vd, sizeof vd};
  }
  struct ferry_tex_create_rets r;
  if ((rc = ferry_call(v, FERRY_CALL_tex_create, &a, &r, NULL))) return rc;
  struct texobj t = {.vgpu = v->index, .value = r.object, .res = *res, .tex = *tex};
  if (view) t.view = *view, t.has_view = 1;
  if ((rc = tex_add(&t))) {
    struct ferry_tex_destroy_args d = {r.object};
    ferry_call(v, FERRY_CALL_tex_destroy, &d, NULL, NULL);
    return rc;
  }
  *out = r.object;
  return 0;
}

cudaError_t cudaCreateTextureObject(cudaTextureObject_t *pTexObject,
                                    const struct cudaResourceDesc *pResDesc,
                                    const struct cudaTextureDesc *pTexDesc,
                                    const struct cudaResourceViewDesc *pResViewDesc) {
  return ferry_ret(create_texture(pTexObject, pResDesc, pTexDesc, pResViewDesc));
}

static int destroy_object(uint64_t value, int surface) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (!value) return 0;
  struct texobj t;
  if (!tex_find(value, surface, 1, &t)) return cudaErrorInvalidValue;
  if (surface) {
    struct ferry_surf_destroy_args a = {value};
    return ferry_call(&ferry.vgpus[t.vgpu], FERRY_CALL_surf_destroy, &a, NULL, NULL);
  }
  struct ferry_tex_destroy_args a = {value};
  return ferry_call(&ferry.vgpus[t.vgpu], FERRY_CALL_tex_destroy, &a, NULL, NULL);
}

cudaError_t cudaDestroyTextureObject(cudaTextureObject_t texObject) {
  return ferry_ret(destroy_object(texObject, 0));
}

static int lookup_object(uint64_t value, int surface, struct texobj *t) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  return tex_find(value, surface, 0, t) ? 0 : cudaErrorInvalidValue;
}

cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc *pResDesc,
                                             cudaTextureObject_t texObject) {
  struct texobj t;
  if (!pResDesc) return ferry_ret(cudaErrorInvalidValue);
  int rc = lookup_object(texObject, 0, &t);
  if (!rc) *pResDesc = t.res;
  return ferry_ret(rc);
}

cudaError_t cudaGetTextureObjectTextureDesc(struct cudaTextureDesc *pTexDesc,
                                            cudaTextureObject_t texObject) {
  struct texobj t;
  if (!pTexDesc) return ferry_ret(cudaErrorInvalidValue);
  int rc = lookup_object(texObject, 0, &t);
  if (!rc) *pTexDesc = t.tex;
  return ferry_ret(rc);
}

cudaError_t cudaGetTextureObjectResourceViewDesc(struct cudaResourceViewDesc *pResViewDesc,
                                                 cudaTextureObject_t texObject) {
  struct texobj t;
  if (!pResViewDesc) return ferry_ret(cudaErrorInvalidValue);
  int rc = lookup_object(texObject, 0, &t);
  if (!rc && !t.has_view) rc = cudaErrorInvalidValue;
  if (!rc) *pResViewDesc = t.view;
  return ferry_ret(rc);
}

static int create_surface(cudaSurfaceObject_t *out, const struct cudaResourceDesc *res) {
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (!out || !res || res->resType != cudaResourceTypeArray || res->flags)
    return cudaErrorInvalidValue;
  struct ferry_array *arr;
  if ((rc = array_of(res->res.array.array, &arr))) return rc;
  struct ferry_vgpu *v = &ferry.vgpus[arr->vgpu];
  struct ferry_surf_create_args a = {arr->id};
  struct ferry_surf_create_rets r;
  if ((rc = ferry_call(v, FERRY_CALL_surf_create, &a, &r, NULL))) return rc;
  struct texobj t = {.vgpu = v->index, .surface = 1, .value = r.object, .res = *res};
  if ((rc = tex_add(&t))) {
    struct ferry_surf_destroy_args d = {r.object};
    ferry_call(v, FERRY_CALL_surf_destroy, &d, NULL, NULL);
    return rc;
  }
  *out = r.object;
  return 0;
}

cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t *pSurfObject,
                                    const struct cudaResourceDesc *pResDesc) {
  return ferry_ret(create_surface(pSurfObject, pResDesc));
}

cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t surfObject) {
  return ferry_ret(destroy_object(surfObject, 1));
}

cudaError_t cudaGetSurfaceObjectResourceDesc(struct cudaResourceDesc *pResDesc,
                                             cudaSurfaceObject_t surfObject) {
  struct texobj t;
  if (!pResDesc) return ferry_ret(cudaErrorInvalidValue);
  int rc = lookup_object(surfObject, 1, &t);
  if (!rc) *pResDesc = t.res;
  return ferry_ret(rc);
}
