/*
 * CUDA arrays, texture objects and surface objects in the simulation.
 * Arrays are plain host memory (rows of elements, layers and cube faces
 * as slices) that sim_copy3d reads and writes; texture and surface
 * objects only keep their descriptors, checked the way the driver checks
 * them, so the executor's translation of runtime descriptors is tested
 * in CI. CPU twins read texels through sim/twin_tex.h.
 */
#include "sim/sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

size_t sim_format_bytes(CUarray_format f, unsigned n) {
  if (n != 1 && n != 2 && n != 4)
    return 0;
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT8:
  case CU_AD_FORMAT_SIGNED_INT8: return n;
  case CU_AD_FORMAT_UNSIGNED_INT16:
  case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF: return 2u * n;
  case CU_AD_FORMAT_UNSIGNED_INT32:
  case CU_AD_FORMAT_SIGNED_INT32:
  case CU_AD_FORMAT_FLOAT: return 4u * n;
  /* the normalized formats name their channel count */
  case CU_AD_FORMAT_UNORM_INT8X1:
  case CU_AD_FORMAT_SNORM_INT8X1: return n == 1 ? 1 : 0;
  case CU_AD_FORMAT_UNORM_INT8X2:
  case CU_AD_FORMAT_SNORM_INT8X2: return n == 2 ? 2 : 0;
  case CU_AD_FORMAT_UNORM_INT8X4:
  case CU_AD_FORMAT_SNORM_INT8X4: return n == 4 ? 4 : 0;
  case CU_AD_FORMAT_UNORM_INT16X1:
  case CU_AD_FORMAT_SNORM_INT16X1: return n == 1 ? 2 : 0;
  case CU_AD_FORMAT_UNORM_INT16X2:
  case CU_AD_FORMAT_SNORM_INT16X2: return n == 2 ? 4 : 0;
  case CU_AD_FORMAT_UNORM_INT16X4:
  case CU_AD_FORMAT_SNORM_INT16X4: return n == 4 ? 8 : 0;
  default: return 0;
  }
}

static void object_free(struct sim_texobj *o);

void sim_array_obj_free(struct sim_obj *o) {
  if (o && o->kind == SIM_ARRAY)
    free(((struct sim_array *)o)->mem);
  if (o && (o->kind == SIM_TEXOBJ || o->kind == SIM_SURFOBJ))
    object_free((struct sim_texobj *)o);
  else
    free(o);
}

/* the limits an H100 reports (see device_attribute in sim_core.c) */
static int extent_ok(const CUDA_ARRAY3D_DESCRIPTOR *d) {
  unsigned known = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |
                   CUDA_ARRAY3D_TEXTURE_GATHER;
  if (d->Flags & ~known || d->Width == 0)
    return 0;
  int layered = (d->Flags & CUDA_ARRAY3D_LAYERED) != 0;
  if (d->Flags & CUDA_ARRAY3D_CUBEMAP) {
    if (d->Width != d->Height || d->Depth == 0 || d->Depth % 6 || (!layered && d->Depth != 6))
      return 0;
  } else if (layered) {
    if (d->Depth == 0)
      return 0;
  } else if (d->Depth && !d->Height) {
    return 0; /* a 3D array needs a height */
  }
  if ((d->Flags & CUDA_ARRAY3D_TEXTURE_GATHER) && (d->Depth || !d->Height))
    return 0; /* gather is for 2D arrays */
  if (d->Depth && !layered && !(d->Flags & CUDA_ARRAY3D_CUBEMAP))
    return d->Width <= 16384 && d->Height <= 16384 && d->Depth <= 16384;
  return d->Width <= 131072 && d->Height <= 65536 && d->Depth <= 2048 * 6;
}

CUresult sim_Array3DCreate(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!array || !desc || !extent_ok(desc))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  size_t elem = sim_format_bytes(desc->Format, desc->NumChannels);
  if (!elem)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_array *a = calloc(1, sizeof *a);
  if (!a)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  a->obj.kind = SIM_ARRAY;
  a->desc = *desc;
  a->elem = elem;
  a->row_bytes = desc->Width * elem;
  a->rows = desc->Height ? desc->Height : 1;
  a->slices = desc->Depth ? desc->Depth : 1;
  /* within the limits above the product cannot overflow */
  a->mem = malloc(a->row_bytes * a->rows * a->slices);
  if (!a->mem || sim_register(a)) {
    sim_array_obj_free(&a->obj);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  *array = (CUarray)a;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_ArrayDestroy(CUarray array) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_array *a = sim_lookup(array, SIM_ARRAY);
  if (!a)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  sim_unregister(a);
  sim_array_obj_free(&a->obj);
  return sim_leave(CUDA_SUCCESS);
}

/* linear and pitch2D resources must lie in mapped device memory */
static CUresult check_resource(const CUDA_RESOURCE_DESC *res, int surface) {
  if (res->flags)
    return CUDA_ERROR_INVALID_VALUE;
  switch (res->resType) {
  case CU_RESOURCE_TYPE_ARRAY: {
    struct sim_array *a = sim_lookup(res->res.array.hArray, SIM_ARRAY);
    if (!a)
      return CUDA_ERROR_INVALID_HANDLE;
    if (surface && !(a->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST))
      return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  }
  case CU_RESOURCE_TYPE_LINEAR: {
    size_t elem = sim_format_bytes(res->res.linear.format, res->res.linear.numChannels);
    /* as CUDA, only the start must be mapped: the end may pass the
       allocation (fetches are kept to what is mapped: object_create) */
    if (surface || !elem || res->res.linear.devPtr % 512 || res->res.linear.sizeInBytes == 0 ||
        !sim_range_ok(res->res.linear.devPtr, elem, PROT_READ))
      return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  }
  case CU_RESOURCE_TYPE_PITCH2D: {
    size_t elem = sim_format_bytes(res->res.pitch2D.format, res->res.pitch2D.numChannels);
    size_t w = res->res.pitch2D.width, h = res->res.pitch2D.height;
    size_t pitch = res->res.pitch2D.pitchInBytes;
    CUdeviceptr p = res->res.pitch2D.devPtr;
    if (surface || !elem || !w || !h || w > 131072 || h > 65536 || p % 32 || pitch % 32 ||
        pitch < w * elem || !sim_range_ok(p, pitch * (h - 1) + w * elem, PROT_READ))
      return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  }
  default: /* mipmapped arrays are not simulated */
    return CUDA_ERROR_INVALID_VALUE;
  }
}

static int tex_desc_ok(const CUDA_TEXTURE_DESC *t) {
  for (int i = 0; i < 3; i++)
    if ((unsigned)t->addressMode[i] > CU_TR_ADDRESS_MODE_BORDER)
      return 0;
  unsigned known = CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB |
                   CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION | CU_TRSF_SEAMLESS_CUBEMAP;
  return (unsigned)t->filterMode <= CU_TR_FILTER_MODE_LINEAR &&
         (unsigned)t->mipmapFilterMode <= CU_TR_FILTER_MODE_LINEAR && !(t->flags & ~known);
}

/* Object values are record addresses. CUDA hands out its object values in
   creation order in a fresh context, so a migration that re-creates a
   program's objects in order gets the values the program holds; records
   come from a slab at a fixed address, never reused, to behave the same. */
#define OBJ_SLAB_BASE 0x1f0000000000ull
#define OBJ_SLOT 1024u
#define OBJ_SLOTS 65536u
_Static_assert(sizeof(struct sim_texobj) <= OBJ_SLOT, "an object record fits its slot");
static char *obj_slab;
static unsigned obj_next;

static struct sim_texobj *object_alloc(void) {
  if (!obj_slab && obj_next == 0) {
    void *p = mmap((void *)OBJ_SLAB_BASE, (size_t)OBJ_SLOT * OBJ_SLOTS, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != MAP_FAILED && (uintptr_t)p == OBJ_SLAB_BASE) obj_slab = p;
    else if (p != MAP_FAILED) munmap(p, (size_t)OBJ_SLOT * OBJ_SLOTS);
  }
  if (!obj_slab || obj_next == OBJ_SLOTS) return calloc(1, sizeof(struct sim_texobj));
  struct sim_texobj *o = (void *)(obj_slab + (size_t)OBJ_SLOT * obj_next++);
  memset(o, 0, sizeof *o);
  return o;
}

static void object_free(struct sim_texobj *o) {
  char *p = (char *)o;
  if (obj_slab && p >= obj_slab && p < obj_slab + (size_t)OBJ_SLOT * OBJ_SLOTS) return;
  free(o);
}

static CUresult make_object(enum sim_kind kind, const CUDA_RESOURCE_DESC *res,
                            const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view,
                            unsigned long long *out) {
  struct sim_texobj *o = object_alloc();
  if (!o)
    return CUDA_ERROR_OUT_OF_MEMORY;
  o->obj.kind = kind;
  o->res = *res;
  if (tex)
    o->tex = *tex;
  if (view) {
    o->view = *view;
    o->has_view = 1;
  }
  switch (res->resType) {
  case CU_RESOURCE_TYPE_ARRAY:
    o->elem = ((struct sim_array *)res->res.array.hArray)->elem;
    break;
  case CU_RESOURCE_TYPE_LINEAR: {
    o->elem = sim_format_bytes(res->res.linear.format, res->res.linear.numChannels);
    /* what lies past the mapped bytes reads as the last mapped element */
    CUdeviceptr p = res->res.linear.devPtr, end = p + res->res.linear.sizeInBytes;
    CUdeviceptr mapped = (p / SIM_GRANULARITY + 1) * SIM_GRANULARITY;
    while (mapped < end && sim_range_ok(mapped, SIM_GRANULARITY, PROT_READ))
      mapped += SIM_GRANULARITY;
    if (mapped < end)
      o->res.res.linear.sizeInBytes = (mapped - p) / o->elem * o->elem;
    break;
  }
  default:
    o->elem = sim_format_bytes(res->res.pitch2D.format, res->res.pitch2D.numChannels);
    break;
  }
  if (sim_register(o)) {
    object_free(o);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *out = (unsigned long long)(uintptr_t)o;
  return CUDA_SUCCESS;
}

CUresult sim_TexObjectCreate(CUtexObject *obj, const CUDA_RESOURCE_DESC *res,
                             const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!obj || !res || !tex || !tex_desc_ok(tex))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  /* a view is only for arrays */
  if (view && res->resType != CU_RESOURCE_TYPE_ARRAY)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if ((r = check_resource(res, 0)))
    return sim_leave(r);
  return sim_leave(make_object(SIM_TEXOBJ, res, tex, view, obj));
}

CUresult sim_TexObjectDestroy(CUtexObject obj) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_texobj *o = sim_lookup((void *)(uintptr_t)obj, SIM_TEXOBJ);
  if (!o)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  sim_unregister(o);
  object_free(o);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_SurfObjectCreate(CUsurfObject *obj, const CUDA_RESOURCE_DESC *res) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!obj || !res || res->resType != CU_RESOURCE_TYPE_ARRAY)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if ((r = check_resource(res, 1)))
    return sim_leave(r);
  return sim_leave(make_object(SIM_SURFOBJ, res, NULL, NULL, obj));
}

CUresult sim_SurfObjectDestroy(CUsurfObject obj) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_texobj *o = sim_lookup((void *)(uintptr_t)obj, SIM_SURFOBJ);
  if (!o)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  sim_unregister(o);
  object_free(o);
  return sim_leave(CUDA_SUCCESS);
}
