/*
 * Texture and surface objects for CPU twins. In the simulation an
 * object's value is the address of its record (sim/sim_array.c) in the
 * server process, which is where twins run, so a twin can find texels
 * itself. Header-only: twins are separate shared objects and cannot call
 * into the simulation. Point sampling with clamped, unnormalized
 * coordinates, which is what the test kernels use; a made-up value faults
 * inside the guarded launch and fails it.
 */
#ifndef FERRY_TWIN_TEX_H
#define FERRY_TWIN_TEX_H

#include "sim/sim.h"

static inline long ferry_twin_clamp(long v, long n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

/* element (x, y) of a texture over an array or pitched memory, clamped */
static inline const void *ferry_twin_texel(unsigned long long obj, long x, long y) {
  const struct sim_texobj *o = (const struct sim_texobj *)(uintptr_t)obj;
  if (o->res.resType == CU_RESOURCE_TYPE_ARRAY) {
    const struct sim_array *a = (const struct sim_array *)o->res.res.array.hArray;
    x = ferry_twin_clamp(x, (long)a->desc.Width);
    y = ferry_twin_clamp(y, (long)a->rows);
    return a->mem + (size_t)y * a->row_bytes + (size_t)x * a->elem;
  }
  if (o->res.resType == CU_RESOURCE_TYPE_PITCH2D) {
    x = ferry_twin_clamp(x, (long)o->res.res.pitch2D.width);
    y = ferry_twin_clamp(y, (long)o->res.res.pitch2D.height);
    return (const char *)(uintptr_t)o->res.res.pitch2D.devPtr +
           (size_t)y * o->res.res.pitch2D.pitchInBytes + (size_t)x * o->elem;
  }
  x = ferry_twin_clamp(x, (long)(o->res.res.linear.sizeInBytes / o->elem));
  return (const char *)(uintptr_t)o->res.res.linear.devPtr + (size_t)x * o->elem;
}

/* the bytes at (x_bytes, y) of a surface's array, or NULL outside it */
static inline void *ferry_twin_surface(unsigned long long obj, long x_bytes, long y) {
  const struct sim_texobj *o = (const struct sim_texobj *)(uintptr_t)obj;
  const struct sim_array *a = (const struct sim_array *)o->res.res.array.hArray;
  if (x_bytes < 0 || y < 0 || (size_t)x_bytes + o->elem > a->row_bytes || (size_t)y >= a->rows)
    return NULL;
  return a->mem + (size_t)y * a->row_bytes + (size_t)x_bytes;
}

#endif
