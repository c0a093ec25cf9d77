/*
 * Driver API: CUDA arrays, their copies, and texture and surface objects.
 * A CUarray is the runtime front end's cudaArray_t; the driver's
 * descriptors are turned into the runtime's and served by shim/runtime/array.c, so
 * both front ends share arrays, objects and their replay.
 */
#include <string.h>

#include "shim/driver/cu.h"

#define RT(a) ((cudaArray_t)(a))
#define DEV(p) ((void *)(uintptr_t)(p))

/* CUarray_format and a channel count as the runtime's channel descriptor */
static CUresult channel_desc(CUarray_format f, unsigned nch, struct cudaChannelFormatDesc *d) {
  int bits;
  enum cudaChannelFormatKind kind;
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT8: bits = 8, kind = cudaChannelFormatKindUnsigned; break;
  case CU_AD_FORMAT_UNSIGNED_INT16: bits = 16, kind = cudaChannelFormatKindUnsigned; break;
  case CU_AD_FORMAT_UNSIGNED_INT32: bits = 32, kind = cudaChannelFormatKindUnsigned; break;
  case CU_AD_FORMAT_SIGNED_INT8: bits = 8, kind = cudaChannelFormatKindSigned; break;
  case CU_AD_FORMAT_SIGNED_INT16: bits = 16, kind = cudaChannelFormatKindSigned; break;
  case CU_AD_FORMAT_SIGNED_INT32: bits = 32, kind = cudaChannelFormatKindSigned; break;
  case CU_AD_FORMAT_HALF: bits = 16, kind = cudaChannelFormatKindFloat; break;
  case CU_AD_FORMAT_FLOAT: bits = 32, kind = cudaChannelFormatKindFloat; break;
  default: return ferry_cu_unsupported("a CUDA array format other than 8/16/32-bit integers, half and float");
  }
  if (nch != 1 && nch != 2 && nch != 4) return CUDA_ERROR_INVALID_VALUE;
  *d = (struct cudaChannelFormatDesc){bits, nch > 1 ? bits : 0, nch > 2 ? bits : 0, nch > 3 ? bits : 0, kind};
  return CUDA_SUCCESS;
}

static CUarray_format array_format(const struct cudaChannelFormatDesc *d, unsigned *nch) {
  *nch = 1 + (d->y != 0) + (d->z != 0) + (d->w != 0);
  if (d->f == cudaChannelFormatKindFloat) return d->x == 16 ? CU_AD_FORMAT_HALF : CU_AD_FORMAT_FLOAT;
  int s = d->f == cudaChannelFormatKindSigned;
  return d->x == 8    ? (s ? CU_AD_FORMAT_SIGNED_INT8 : CU_AD_FORMAT_UNSIGNED_INT8)
         : d->x == 16 ? (s ? CU_AD_FORMAT_SIGNED_INT16 : CU_AD_FORMAT_UNSIGNED_INT16)
                      : (s ? CU_AD_FORMAT_SIGNED_INT32 : CU_AD_FORMAT_UNSIGNED_INT32);
}

/* CUDA_ARRAY3D_* flags are the cudaArray* flags */
CUresult cuArray3DCreate(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  struct cudaChannelFormatDesc cd;
  if (!out || !d) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = channel_desc(d->Format, d->NumChannels, &cd);
  if (rc) return rc;
  struct ferry_vgpu *v;
  if ((rc = ferry_cu_current(&v))) return rc;
  return FERRY_CU_RT(cudaMalloc3DArray((cudaArray_t *)out, &cd,
                                       (struct cudaExtent){d->Width, d->Height, d->Depth}, d->Flags));
}

CUresult cuArrayCreate(CUarray *out, const CUDA_ARRAY_DESCRIPTOR *d) {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3 = {d->Width, d->Height, 0, d->Format, d->NumChannels, 0};
  return cuArray3DCreate(out, &d3);
}

CUresult cuArrayDestroy(CUarray a) { return READY_THEN(cudaFreeArray(RT(a))); }

CUresult cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR *d, CUarray a) {
  struct cudaChannelFormatDesc cd;
  struct cudaExtent e;
  unsigned flags;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = READY_THEN(cudaArrayGetInfo(&cd, &e, &flags, RT(a)));
  if (rc) return rc;
  d->Width = e.width, d->Height = e.height, d->Depth = e.depth, d->Flags = flags;
  d->Format = array_format(&cd, &d->NumChannels);
  return CUDA_SUCCESS;
}

CUresult cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR *d, CUarray a) {
  CUDA_ARRAY3D_DESCRIPTOR d3;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = cuArray3DGetDescriptor(&d3, a);
  if (!rc) *d = (CUDA_ARRAY_DESCRIPTOR){d3.Width, d3.Height, d3.Format, d3.NumChannels};
  return rc;
}

/* bytes per element of an array (the runtime counts array x in elements) */
static CUresult elem_bytes(CUarray a, size_t *n) {
  struct cudaChannelFormatDesc cd;
  struct cudaExtent e;
  unsigned flags;
  CUresult rc = FERRY_CU_RT(cudaArrayGetInfo(&cd, &e, &flags, RT(a)));
  if (!rc) *n = (size_t)(cd.x + cd.y + cd.z + cd.w) / 8;
  return rc || *n ? rc : CUDA_ERROR_INVALID_VALUE;
}

/* one side of a 3D copy as the runtime's pitched pointer or array and position */
static CUresult side3d(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray arr, size_t pitch,
                       size_t rows, size_t x, size_t y, size_t z, struct cudaPitchedPtr *p,
                       cudaArray_t *array, struct cudaPos *pos, int *device, size_t *elem) {
  *elem = 1;
  switch (type) {
  case CU_MEMORYTYPE_ARRAY: {
    CUresult rc = elem_bytes(arr, elem);
    if (rc) return rc;
    if (x % *elem) return CUDA_ERROR_INVALID_VALUE;
    *array = RT(arr);
    *pos = (struct cudaPos){x / *elem, y, z};
    *device = 1;
    return CUDA_SUCCESS;
  }
  case CU_MEMORYTYPE_HOST: *device = 0; break;
  case CU_MEMORYTYPE_DEVICE: *device = 1; host = DEV(dev); break;
  case CU_MEMORYTYPE_UNIFIED: host = DEV(dev); *device = ferry_vgpu_of(host) != NULL; break;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  *p = (struct cudaPitchedPtr){(void *)host, pitch, pitch, rows};
  *pos = (struct cudaPos){x, y, z};
  return CUDA_SUCCESS;
}

static CUresult copy3d(const CUDA_MEMCPY3D *c, CUstream s, int async, int per_thread) {
  if (!c || c->srcLOD || c->dstLOD || c->reserved0 || c->reserved1) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct cudaMemcpy3DParms p;
  memset(&p, 0, sizeof p);
  int sdev, ddev;
  size_t se, de;
  if ((rc = side3d(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcPitch,
                   c->srcHeight, c->srcXInBytes, c->srcY, c->srcZ, &p.srcPtr, &p.srcArray,
                   &p.srcPos, &sdev, &se)) ||
      (rc = side3d(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstPitch,
                   c->dstHeight, c->dstXInBytes, c->dstY, c->dstZ, &p.dstPtr, &p.dstArray,
                   &p.dstPos, &ddev, &de)))
    return rc;
  /* the runtime's width is in elements when an array takes part */
  size_t elem = p.srcArray ? se : p.dstArray ? de : 1;
  if (c->WidthInBytes % elem) return CUDA_ERROR_INVALID_VALUE;
  p.extent = (struct cudaExtent){c->WidthInBytes / elem, c->Height, c->Depth ? c->Depth : 1};
  p.kind = sdev ? (ddev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                : (ddev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  cudaStream_t st = (cudaStream_t)s;
  if (!async) return FERRY_CU_RT(per_thread ? cudaMemcpy3D_ptds(&p) : cudaMemcpy3D(&p));
  return FERRY_CU_RT(per_thread ? cudaMemcpy3DAsync_ptsz(&p, st) : cudaMemcpy3DAsync(&p, st));
}
CUresult cuMemcpy3D(const CUDA_MEMCPY3D *c) { return copy3d(c, NULL, 0, 0); }
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *c) { return copy3d(c, NULL, 0, 1); }
CUresult cuMemcpy3DAsync(const CUDA_MEMCPY3D *c, CUstream s) { return copy3d(c, s, 1, 0); }
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *c, CUstream s) { return copy3d(c, s, 1, 1); }

/* a 2D copy with an array on either side (memory.c hands these over) */
CUresult ferry_cu_copy2d_array(const CUDA_MEMCPY2D *c, CUstream s, int async, int per_thread) {
  CUDA_MEMCPY3D m = {
      .srcXInBytes = c->srcXInBytes, .srcY = c->srcY, .srcMemoryType = c->srcMemoryType,
      .srcHost = c->srcHost, .srcDevice = c->srcDevice, .srcArray = c->srcArray,
      .srcPitch = c->srcPitch, .srcHeight = c->Height + c->srcY,
      .dstXInBytes = c->dstXInBytes, .dstY = c->dstY, .dstMemoryType = c->dstMemoryType,
      .dstHost = c->dstHost, .dstDevice = c->dstDevice, .dstArray = c->dstArray,
      .dstPitch = c->dstPitch, .dstHeight = c->Height + c->dstY,
      .WidthInBytes = c->WidthInBytes, .Height = c->Height, .Depth = 1};
  return copy3d(&m, s, async, per_thread);
}

/* 1D copies between host or device memory and an array, at a byte offset */
static CUresult copy_array_1d(CUarray a, size_t offset, CUmemorytype type, const void *host,
                              CUdeviceptr dev, size_t n, int to_array, CUstream s, int async) {
  CUDA_MEMCPY3D m;
  memset(&m, 0, sizeof m);
  if (to_array) {
    m.dstMemoryType = CU_MEMORYTYPE_ARRAY, m.dstArray = a, m.dstXInBytes = offset;
    m.srcMemoryType = type, m.srcHost = host, m.srcDevice = dev, m.srcPitch = n;
  } else {
    m.srcMemoryType = CU_MEMORYTYPE_ARRAY, m.srcArray = a, m.srcXInBytes = offset;
    m.dstMemoryType = type, m.dstHost = (void *)host, m.dstDevice = dev, m.dstPitch = n;
  }
  m.WidthInBytes = n, m.Height = 1, m.Depth = 1;
  return copy3d(&m, s, async, 0);
}
CUresult cuMemcpyHtoA(CUarray a, size_t off, const void *src, size_t n) {
  return copy_array_1d(a, off, CU_MEMORYTYPE_HOST, src, 0, n, 1, NULL, 0);
}
CUresult cuMemcpyAtoH(void *dst, CUarray a, size_t off, size_t n) {
  return copy_array_1d(a, off, CU_MEMORYTYPE_HOST, dst, 0, n, 0, NULL, 0);
}
CUresult cuMemcpyHtoAAsync(CUarray a, size_t off, const void *src, size_t n, CUstream s) {
  return copy_array_1d(a, off, CU_MEMORYTYPE_HOST, src, 0, n, 1, s, 1);
}
CUresult cuMemcpyAtoHAsync(void *dst, CUarray a, size_t off, size_t n, CUstream s) {
  return copy_array_1d(a, off, CU_MEMORYTYPE_HOST, dst, 0, n, 0, s, 1);
}
CUresult cuMemcpyDtoA(CUarray a, size_t off, CUdeviceptr src, size_t n) {
  return copy_array_1d(a, off, CU_MEMORYTYPE_DEVICE, NULL, src, n, 1, NULL, 0);
}
CUresult cuMemcpyAtoD(CUdeviceptr dst, CUarray a, size_t off, size_t n) {
  return copy_array_1d(a, off, CU_MEMORYTYPE_DEVICE, NULL, dst, n, 0, NULL, 0);
}

/* ---- texture and surface objects ---- */
static CUresult runtime_resource(const CUDA_RESOURCE_DESC *r, struct cudaResourceDesc *out,
                                 CUarray_format *format) {
  memset(out, 0, sizeof *out);
  CUresult rc = CUDA_SUCCESS;
  *format = CU_AD_FORMAT_FLOAT;
  switch (r->resType) {
  case CU_RESOURCE_TYPE_ARRAY: {
    out->resType = cudaResourceTypeArray;
    out->res.array.array = RT(r->res.array.hArray);
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (!(rc = cuArray3DGetDescriptor(&d, r->res.array.hArray))) *format = d.Format;
    return rc;
  }
  case CU_RESOURCE_TYPE_LINEAR:
    out->resType = cudaResourceTypeLinear;
    out->res.linear.devPtr = DEV(r->res.linear.devPtr);
    out->res.linear.sizeInBytes = r->res.linear.sizeInBytes;
    *format = r->res.linear.format;
    return channel_desc(r->res.linear.format, r->res.linear.numChannels, &out->res.linear.desc);
  case CU_RESOURCE_TYPE_PITCH2D:
    out->resType = cudaResourceTypePitch2D;
    out->res.pitch2D.devPtr = DEV(r->res.pitch2D.devPtr);
    out->res.pitch2D.width = r->res.pitch2D.width;
    out->res.pitch2D.height = r->res.pitch2D.height;
    out->res.pitch2D.pitchInBytes = r->res.pitch2D.pitchInBytes;
    *format = r->res.pitch2D.format;
    return channel_desc(r->res.pitch2D.format, r->res.pitch2D.numChannels, &out->res.pitch2D.desc);
  case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
    return ferry_cu_unsupported("a texture over a mipmapped array");
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

/* the driver's flags as the runtime's fields (shim/runtime/array.c turns them back) */
static struct cudaTextureDesc runtime_tex(const CUDA_TEXTURE_DESC *t, CUarray_format format) {
  struct cudaTextureDesc d;
  memset(&d, 0, sizeof d);
  for (int i = 0; i < 3; i++) d.addressMode[i] = (enum cudaTextureAddressMode)t->addressMode[i];
  d.filterMode = (enum cudaTextureFilterMode)t->filterMode;
  int is_float = format == CU_AD_FORMAT_FLOAT || format == CU_AD_FORMAT_HALF;
  d.readMode = is_float || (t->flags & CU_TRSF_READ_AS_INTEGER) ? cudaReadModeElementType
                                                                 : cudaReadModeNormalizedFloat;
  d.normalizedCoords = (t->flags & CU_TRSF_NORMALIZED_COORDINATES) != 0;
  d.sRGB = (t->flags & CU_TRSF_SRGB) != 0;
  d.disableTrilinearOptimization = (t->flags & CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION) != 0;
  d.seamlessCubemap = (t->flags & CU_TRSF_SEAMLESS_CUBEMAP) != 0;
  d.maxAnisotropy = t->maxAnisotropy;
  d.mipmapFilterMode = (enum cudaTextureFilterMode)t->mipmapFilterMode;
  d.mipmapLevelBias = t->mipmapLevelBias;
  d.minMipmapLevelClamp = t->minMipmapLevelClamp;
  d.maxMipmapLevelClamp = t->maxMipmapLevelClamp;
  memcpy(d.borderColor, t->borderColor, sizeof d.borderColor);
  return d;
}

CUresult cuTexObjectCreate(CUtexObject *out, const CUDA_RESOURCE_DESC *res,
                           const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view) {
  if (!out || !res || !tex) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct cudaResourceDesc r;
  CUarray_format format;
  if ((rc = runtime_resource(res, &r, &format))) return rc;
  struct cudaTextureDesc t = runtime_tex(tex, format);
  struct cudaResourceViewDesc vd, *vp = NULL;
  if (view) {
    memset(&vd, 0, sizeof vd);
    vd.format = (enum cudaResourceViewFormat)view->format; /* the same numbering */
    vd.width = view->width, vd.height = view->height, vd.depth = view->depth;
    vd.firstMipmapLevel = view->firstMipmapLevel, vd.lastMipmapLevel = view->lastMipmapLevel;
    vd.firstLayer = view->firstLayer, vd.lastLayer = view->lastLayer;
    vp = &vd;
  }
  return FERRY_CU_RT(cudaCreateTextureObject((cudaTextureObject_t *)out, &r, &t, vp));
}
CUresult cuTexObjectDestroy(CUtexObject o) { return READY_THEN(cudaDestroyTextureObject(o)); }

CUresult cuSurfObjectCreate(CUsurfObject *out, const CUDA_RESOURCE_DESC *res) {
  if (!out || !res) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct cudaResourceDesc r;
  CUarray_format format;
  if ((rc = runtime_resource(res, &r, &format))) return rc;
  return FERRY_CU_RT(cudaCreateSurfaceObject((cudaSurfaceObject_t *)out, &r));
}
CUresult cuSurfObjectDestroy(CUsurfObject o) { return READY_THEN(cudaDestroySurfaceObject(o)); }

/* what an object was made from, in the driver's terms */
static CUresult driver_resource(const struct cudaResourceDesc *r, CUDA_RESOURCE_DESC *out) {
  memset(out, 0, sizeof *out);
  switch (r->resType) {
  case cudaResourceTypeArray:
    out->resType = CU_RESOURCE_TYPE_ARRAY;
    out->res.array.hArray = (CUarray)r->res.array.array;
    return CUDA_SUCCESS;
  case cudaResourceTypeLinear:
    out->resType = CU_RESOURCE_TYPE_LINEAR;
    out->res.linear.devPtr = (CUdeviceptr)(uintptr_t)r->res.linear.devPtr;
    out->res.linear.format = array_format(&r->res.linear.desc, &out->res.linear.numChannels);
    out->res.linear.sizeInBytes = r->res.linear.sizeInBytes;
    return CUDA_SUCCESS;
  case cudaResourceTypePitch2D:
    out->resType = CU_RESOURCE_TYPE_PITCH2D;
    out->res.pitch2D.devPtr = (CUdeviceptr)(uintptr_t)r->res.pitch2D.devPtr;
    out->res.pitch2D.format = array_format(&r->res.pitch2D.desc, &out->res.pitch2D.numChannels);
    out->res.pitch2D.width = r->res.pitch2D.width;
    out->res.pitch2D.height = r->res.pitch2D.height;
    out->res.pitch2D.pitchInBytes = r->res.pitch2D.pitchInBytes;
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *out, CUtexObject o) {
  struct cudaResourceDesc r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = READY_THEN(cudaGetTextureObjectResourceDesc(&r, o));
  return rc ? rc : driver_resource(&r, out);
}

CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *out, CUsurfObject o) {
  struct cudaResourceDesc r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = READY_THEN(cudaGetSurfaceObjectResourceDesc(&r, o));
  return rc ? rc : driver_resource(&r, out);
}
