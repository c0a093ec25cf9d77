/*
 * The driver's private tables, as far as the executor uses them
 * (executor/exec_private.c): TOOLS_CONTEXT entries 51 and 39, modelled on
 * what NVIDIA's driver 580 did on an H100 (docs/driver-export-tables.md):
 * entry 51 (ctx, stream, &object) gives a 32-byte object {1, 0, ctx, 0}
 * (for a stream too), here the same one again for the same pair; entry 39
 * (ctx, object, &value) writes 7, as it did under cuBLAS. Other tables are refused, as a driver
 * that lacks them would.
 */
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

#define SLOTS 64

struct sim_ctx_object {
  uint64_t fields[4];
  CUstream stream;
  struct sim_ctx_object *next; /* every object stays reachable: the driver owns them */
};
static struct sim_ctx_object *objects;

static struct sim_dev *dev_of(CUcontext ctx) {
  for (int k = 0; k < sim.ngpus; k++)
    if (ctx == (CUcontext)&sim.devs[k] && sim.devs[k].refs)
      return &sim.devs[k];
  return NULL;
}

static CUresult object_create(CUcontext ctx, CUstream stream, void **out) {
  CUresult r = sim_enter_noctx();
  if (r)
    return r;
  if (!dev_of(ctx))
    return sim_leave(CUDA_ERROR_INVALID_CONTEXT);
  int named = stream && stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD;
  if (!out || (named && !sim_lookup(stream, SIM_STREAM)))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  for (struct sim_ctx_object *o = objects; o; o = o->next)
    if (o->fields[2] == (uint64_t)(uintptr_t)ctx && o->stream == stream) {
      *out = o;
      return sim_leave(CUDA_SUCCESS);
    }
  struct sim_ctx_object *o = calloc(1, sizeof *o);
  if (!o)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  o->fields[0] = 1;
  o->fields[2] = (uint64_t)(uintptr_t)ctx;
  o->stream = stream;
  o->next = objects;
  objects = o;
  *out = o;
  return sim_leave(CUDA_SUCCESS);
}

static CUresult object_query(CUcontext ctx, void *object, uint64_t *value) {
  CUresult r = sim_enter_noctx();
  if (r)
    return r;
  if (!dev_of(ctx))
    return sim_leave(CUDA_ERROR_INVALID_CONTEXT);
  struct sim_ctx_object *o = objects;
  while (o && o != object)
    o = o->next;
  if (!o || !value || o->fields[2] != (uint64_t)(uintptr_t)ctx)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  *value = 7;
  return sim_leave(CUDA_SUCCESS);
}

#define FN(f) ((const void *)(uintptr_t)(f))
static const void *const tools_context[SLOTS] = {
    [0] = (const void *)(uintptr_t)(SLOTS * sizeof(void *)),
    [39] = FN(object_query),
    [51] = FN(object_create),
};

CUresult sim_GetExportTable(const void **table, const CUuuid *id) {
  static const unsigned char tools_context_uuid[16] = {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14,
                                                       0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff,
                                                       0x73, 0x24, 0xc8, 0xf2};
  if (!table || !id)
    return CUDA_ERROR_INVALID_VALUE;
  if (memcmp(id->bytes, tools_context_uuid, 16))
    return CUDA_ERROR_INVALID_VALUE;
  *table = tools_context;
  return CUDA_SUCCESS;
}
