/*
 * CUDA arrays under client-chosen ids, copies of 2D/3D boxes that have
 * an array (or pitched device memory) on one side, and texture/surface
 * objects. The shim has already turned the runtime's descriptors into
 * the driver's, so this file only swaps ids for CUarray handles. Object
 * values are the driver's own: the program passes them to kernels.
 * Host bytes of a box travel packed and go through the pinned staging
 * buffers of exec_mem.c, so big array uploads overlap network and DMA.
 */
#include "executor/exec_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* one device-side end of a copy, as the client described it */
struct exec_side {
  CUmemorytype type;
  CUdeviceptr dev;
  CUarray arr;
  uint64_t pitch, rows; /* device memory: bytes per row, rows per slice */
  uint64_t x, y, z;     /* x in bytes */
};

static int array_of(struct ferry_exec *ex, uint32_t id, CUarray *out) {
  if (id >= ex->narrays || !ex->arrays[id])
    return exec_bad_handle(ex, "array", id);
  *out = ex->arrays[id];
  return EXEC_OK;
}

/* kind 0: device memory at addr; 1: the array with id addr */
static int side_of(struct ferry_exec *ex, uint32_t kind, uint64_t addr, uint64_t pitch,
                   uint64_t rows, uint64_t x, uint64_t y, uint64_t z, struct exec_side *s) {
  *s = (struct exec_side){.pitch = pitch, .rows = rows, .x = x, .y = y, .z = z};
  if (kind == 0) {
    s->type = CU_MEMORYTYPE_DEVICE;
    s->dev = addr;
    return EXEC_OK;
  }
  if (kind != 1 || addr > UINT32_MAX)
    return EXEC_INVALID_VALUE;
  s->type = CU_MEMORYTYPE_ARRAY;
  return array_of(ex, (uint32_t)addr, &s->arr);
}

/* the side at offset (dx, dy, dz) of the box */
static void put_src(CUDA_MEMCPY3D *c, const struct exec_side *s, uint64_t dx, uint64_t dy,
                    uint64_t dz) {
  c->srcMemoryType = s->type;
  c->srcDevice = s->dev;
  c->srcArray = s->arr;
  c->srcPitch = s->pitch;
  c->srcHeight = s->rows;
  c->srcXInBytes = s->x + dx;
  c->srcY = s->y + dy;
  c->srcZ = s->z + dz;
}

static void put_dst(CUDA_MEMCPY3D *c, const struct exec_side *s, uint64_t dx, uint64_t dy,
                    uint64_t dz) {
  c->dstMemoryType = s->type;
  c->dstDevice = s->dev;
  c->dstArray = s->arr;
  c->dstPitch = s->pitch;
  c->dstHeight = s->rows;
  c->dstXInBytes = s->x + dx;
  c->dstY = s->y + dy;
  c->dstZ = s->z + dz;
}

/* a box of width bytes x height rows x depth slices */
struct box {
  struct exec_side side;
  uint64_t w, h, d;
};

/* the size checks every box copy shares; *bytes: the packed size */
static int box_check(const struct box *b, uint64_t *bytes) {
  if (b->h && b->w > UINT64_MAX / b->h)
    return EXEC_INVALID_VALUE;
  if (b->d && b->w * b->h > UINT64_MAX / b->d)
    return EXEC_INVALID_VALUE;
  *bytes = b->w * b->h * b->d;
  if (b->side.type == CU_MEMORYTYPE_DEVICE && (b->h > 1 || b->d > 1) && b->side.pitch < b->w)
    return EXEC_INVALID_PITCH;
  return EXEC_OK;
}

/* exec_xfer span: packed bytes [off, off + n) of the box, in pieces that
   never cross a slice: the rest of a cut row, whole rows, the start of a
   row. Chunks are multiples of 64 KiB, so pieces stay whole elements. */
static int box_span(struct ferry_exec *ex, const struct exec_xfer *x, uint64_t off, char *buf,
                    size_t n) {
  const struct box *b = x->ctx;
  while (n) {
    uint64_t row = off / b->w, col = off % b->w;
    uint64_t z = row / b->h, y = row % b->h;
    uint64_t k, rows = 1;
    if (col || n < b->w) {
      k = b->w - col < n ? b->w - col : n;
    } else {
      k = b->w;
      rows = n / b->w < b->h - y ? n / b->w : b->h - y;
    }
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    if (x->to_device) {
      c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = buf, c.srcPitch = b->w;
      put_dst(&c, &b->side, col, y, z);
    } else {
      c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = buf, c.dstPitch = b->w;
      put_src(&c, &b->side, col, y, z);
    }
    c.WidthInBytes = k, c.Height = rows, c.Depth = 1;
    CUresult res = ex->d->Memcpy3DAsync(&c, x->s);
    if (res != CUDA_SUCCESS)
      return CU(res);
    buf += k * rows, off += k * rows, n -= k * rows;
  }
  return EXEC_OK;
}

/* ---- arrays ---- */

int ferry_x_array_create(struct ferry_exec *ex, const struct ferry_array_create_args *a,
                         struct ferry_array_create_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (a->array == 0 || a->array >= EXEC_MAX_ARRAY_ID)
    return EXEC_INVALID_VALUE;
  if (a->array >= ex->narrays) {
    uint32_t cap = ex->narrays ? ex->narrays : 16;
    while (cap <= a->array)
      cap *= 2;
    CUarray *p = realloc(ex->arrays, cap * sizeof *p);
    if (!p)
      return EXEC_MEMORY_ALLOCATION;
    memset(p + ex->narrays, 0, (cap - ex->narrays) * sizeof *p);
    ex->arrays = p;
    ex->narrays = cap;
  }
  if (ex->arrays[a->array])
    return EXEC_INVALID_VALUE; /* the client reused a live id */
  CUDA_ARRAY3D_DESCRIPTOR desc = {.Width = a->width, .Height = a->height, .Depth = a->depth,
                                  .Format = (CUarray_format)a->format,
                                  .NumChannels = a->channels, .Flags = a->flags};
  CUarray arr = NULL;
  CUresult res = ex->d->Array3DCreate(&arr, &desc);
  if (res != CUDA_SUCCESS)
    return CU(res);
  ex->arrays[a->array] = arr;
  return EXEC_OK;
}

int ferry_x_array_destroy(struct ferry_exec *ex, const struct ferry_array_destroy_args *a,
                          struct ferry_array_destroy_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  CUarray arr = NULL;
  int rc = array_of(ex, a->array, &arr);
  if (rc)
    return rc;
  /* like cudaFreeArray: work still queued may use the array */
  CUresult sync = ex->d->CtxSynchronize();
  CUresult res = ex->d->ArrayDestroy(arr);
  ex->arrays[a->array] = NULL;
  return CU(sync != CUDA_SUCCESS ? sync : res);
}

/* ---- copies ---- */

int ferry_x_memcpy3d_htod(struct ferry_exec *ex, const struct ferry_memcpy3d_htod_args *a,
                          struct ferry_memcpy3d_htod_rets *r, struct ferry_io *io) {
  (void)r;
  if (!io->in)
    return EXEC_INVALID_VALUE;
  struct box b = {.w = a->width, .h = a->height, .d = a->depth};
  struct exec_xfer x = {.to_device = 1, .span = box_span, .ctx = &b};
  uint64_t bytes = 0;
  int err = side_of(ex, a->dst_kind, a->dst, a->dst_pitch, a->dst_rows, a->dst_x, a->dst_y,
                    a->dst_z, &b.side);
  if (!err)
    err = exec_stream(ex, a->stream, &x.s);
  if (!err)
    err = box_check(&b, &bytes);
  if (!err && bytes != io->in->len)
    err = EXEC_INVALID_VALUE;
  err = exec_pull(ex, &x, io->in, err);
  if (!err && !a->async)
    err = CU(ex->d->StreamSynchronize(x.s));
  return err;
}

int ferry_x_memcpy3d_dtoh(struct ferry_exec *ex, const struct ferry_memcpy3d_dtoh_args *a,
                          struct ferry_memcpy3d_dtoh_rets *r, struct ferry_io *io) {
  (void)r;
  struct box b = {.w = a->width, .h = a->height, .d = a->depth};
  struct exec_xfer x = {.to_device = 0, .span = box_span, .ctx = &b};
  uint64_t bytes = 0;
  int err = side_of(ex, a->src_kind, a->src, a->src_pitch, a->src_rows, a->src_x, a->src_y,
                    a->src_z, &b.side);
  if (!err)
    err = exec_stream(ex, a->stream, &x.s);
  if (!err)
    err = box_check(&b, &bytes);
  return err ? err : exec_push(ex, &x, bytes, io->out);
}

int ferry_x_memcpy3d_dtod(struct ferry_exec *ex, const struct ferry_memcpy3d_dtod_args *a,
                          struct ferry_memcpy3d_dtod_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  struct exec_side dst, src;
  CUstream s;
  int err = side_of(ex, a->dst_kind, a->dst, a->dst_pitch, a->dst_rows, a->dst_x, a->dst_y,
                    a->dst_z, &dst);
  if (!err)
    err = side_of(ex, a->src_kind, a->src, a->src_pitch, a->src_rows, a->src_x, a->src_y,
                  a->src_z, &src);
  if (!err)
    err = exec_stream(ex, a->stream, &s);
  if (err)
    return err;
  int multi = a->height > 1 || a->depth > 1;
  if (multi && ((dst.type == CU_MEMORYTYPE_DEVICE && dst.pitch < a->width) ||
                (src.type == CU_MEMORYTYPE_DEVICE && src.pitch < a->width)))
    return EXEC_INVALID_PITCH;
  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof c);
  put_dst(&c, &dst, 0, 0, 0);
  put_src(&c, &src, 0, 0, 0);
  c.WidthInBytes = a->width, c.Height = a->height, c.Depth = a->depth;
  return CU(ex->d->Memcpy3DAsync(&c, s));
}

/* ---- texture and surface objects ---- */

static int remember(uint64_t **list, size_t *n, size_t *cap, uint64_t v) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    uint64_t *p = realloc(*list, c * sizeof *p);
    if (!p)
      return -1;
    *list = p;
    *cap = c;
  }
  (*list)[(*n)++] = v;
  return 0;
}

/* removes v; 0 when the session never created it */
static int forget(uint64_t *list, size_t *n, uint64_t v) {
  for (size_t i = 0; i < *n; i++)
    if (list[i] == v) {
      list[i] = list[--*n];
      return 1;
    }
  return 0;
}

static int bad_object(struct ferry_exec *ex, const char *kind, uint64_t v) {
  if (!ex->violation[0])
    snprintf(ex->violation, sizeof ex->violation, "%s 0x%" PRIx64 " was never created", kind, v);
  return EXEC_INVALID_HANDLE;
}

_Static_assert(sizeof(CUtexObject) == sizeof(uint64_t), "texture objects are 64-bit values");
_Static_assert(sizeof(CUsurfObject) == sizeof(uint64_t), "surface objects are 64-bit values");

int ferry_x_tex_create(struct ferry_exec *ex, const struct ferry_tex_create_args *a,
                       struct ferry_tex_create_rets *r, struct ferry_io *io) {
  (void)io;
  CUDA_RESOURCE_DESC res;
  CUDA_TEXTURE_DESC tex;
  CUDA_RESOURCE_VIEW_DESC view;
  memset(&res, 0, sizeof res);
  r->object = 0;
  if (a->tex.len != sizeof tex || (a->view.len && a->view.len != sizeof view))
    return EXEC_INVALID_VALUE;
  memcpy(&tex, a->tex.ptr, sizeof tex); /* blobs are not aligned */
  if (a->view.len)
    memcpy(&view, a->view.ptr, sizeof view);
  res.resType = (CUresourcetype)a->res_type;
  switch (a->res_type) {
  case CU_RESOURCE_TYPE_ARRAY: {
    int rc = array_of(ex, a->array, &res.res.array.hArray);
    if (rc)
      return rc;
    break;
  }
  case CU_RESOURCE_TYPE_LINEAR:
    res.res.linear.devPtr = a->dev;
    res.res.linear.format = (CUarray_format)a->format;
    res.res.linear.numChannels = a->channels;
    res.res.linear.sizeInBytes = a->width;
    break;
  case CU_RESOURCE_TYPE_PITCH2D:
    res.res.pitch2D.devPtr = a->dev;
    res.res.pitch2D.format = (CUarray_format)a->format;
    res.res.pitch2D.numChannels = a->channels;
    res.res.pitch2D.width = a->width;
    res.res.pitch2D.height = a->height;
    res.res.pitch2D.pitchInBytes = a->pitch;
    break;
  default: /* mipmapped arrays are not forwarded */
    return EXEC_INVALID_VALUE;
  }
  CUtexObject obj = 0;
  CUresult cr = ex->d->TexObjectCreate(&obj, &res, &tex, a->view.len ? &view : NULL);
  if (cr != CUDA_SUCCESS)
    return CU(cr);
  if (remember(&ex->texobjs, &ex->ntexobjs, &ex->ctexobjs, obj)) {
    ex->d->TexObjectDestroy(obj);
    return EXEC_MEMORY_ALLOCATION;
  }
  r->object = obj;
  return EXEC_OK;
}

int ferry_x_tex_destroy(struct ferry_exec *ex, const struct ferry_tex_destroy_args *a,
                        struct ferry_tex_destroy_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (!forget(ex->texobjs, &ex->ntexobjs, a->object))
    return bad_object(ex, "texture object", a->object);
  return CU(ex->d->TexObjectDestroy(a->object));
}

int ferry_x_surf_create(struct ferry_exec *ex, const struct ferry_surf_create_args *a,
                        struct ferry_surf_create_rets *r, struct ferry_io *io) {
  (void)io;
  CUDA_RESOURCE_DESC res;
  memset(&res, 0, sizeof res);
  r->object = 0;
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  int rc = array_of(ex, a->array, &res.res.array.hArray);
  if (rc)
    return rc;
  CUsurfObject obj = 0;
  CUresult cr = ex->d->SurfObjectCreate(&obj, &res);
  if (cr != CUDA_SUCCESS)
    return CU(cr);
  if (remember(&ex->surfobjs, &ex->nsurfobjs, &ex->csurfobjs, obj)) {
    ex->d->SurfObjectDestroy(obj);
    return EXEC_MEMORY_ALLOCATION;
  }
  r->object = obj;
  return EXEC_OK;
}

int ferry_x_surf_destroy(struct ferry_exec *ex, const struct ferry_surf_destroy_args *a,
                         struct ferry_surf_destroy_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (!forget(ex->surfobjs, &ex->nsurfobjs, a->object))
    return bad_object(ex, "surface object", a->object);
  return CU(ex->d->SurfObjectDestroy(a->object));
}

void exec_free_arrays(struct ferry_exec *ex, int driver_ok) {
  for (size_t i = 0; i < ex->ntexobjs && driver_ok; i++)
    ex->d->TexObjectDestroy(ex->texobjs[i]);
  for (size_t i = 0; i < ex->nsurfobjs && driver_ok; i++)
    ex->d->SurfObjectDestroy(ex->surfobjs[i]);
  for (uint32_t i = 0; i < ex->narrays && driver_ok; i++)
    if (ex->arrays[i])
      ex->d->ArrayDestroy(ex->arrays[i]);
  free(ex->texobjs);
  free(ex->surfobjs);
  free(ex->arrays);
  ex->texobjs = ex->surfobjs = NULL;
  ex->arrays = NULL;
  ex->ntexobjs = ex->ctexobjs = ex->nsurfobjs = ex->csurfobjs = 0;
  ex->narrays = 0;
}
