/*
 * TOOLS_CONTEXT entries 51 and 39 (export.c's table), which cuBLAS,
 * cuBLASLt and cuSOLVER call while they set up a GEMM: entry 51 hands out
 * an object for a context and a stream (NULL unless the program gave the
 * library one), entry 39 reads a value from it. Their meaning is
 * not public (docs/driver-export-tables.md), so ferry guesses nothing: the
 * executor of the vGPU calls the driver's own entries and keeps the
 * driver's object; the library gets a copy of its bytes (with our context
 * and stream where the driver's were) and every query goes to the driver. The objects
 * are in the replay log, so a migrated vGPU has them again.
 */
#include <stdlib.h>
#include <string.h>

#include "shim/driver/cu.h"

#define OBJECT_FIELDS 4

struct ctx_object {
  uint64_t fields[OBJECT_FIELDS]; /* first: the library holds this address */
  int vgpu;
  uint32_t id;
  struct ctx_object *next;
};

static pthread_mutex_t objects_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ctx_object *objects;
static uint32_t next_id = 1;

static struct ctx_object *find(const void *address, int vgpu, uint32_t id) {
  struct ctx_object *o;
  pthread_mutex_lock(&objects_lock);
  for (o = objects; o; o = o->next)
    if (address ? (const void *)o->fields == address : (o->vgpu == vgpu && o->id == id)) break;
  pthread_mutex_unlock(&objects_lock);
  return o;
}

static CUresult vgpu_of(CUcontext *ctx, struct ferry_vgpu **v) {
  CUresult rc = ferry_cu_ready();
  if (!rc && !*ctx) rc = cuCtxGetCurrent(ctx);
  if (rc) return rc;
  *v = ferry_cu_ctx_vgpu(*ctx);
  return *v ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult ferry_cu_ctx_object(CUcontext ctx, CUstream stream, void **out) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  struct ferry_vgpu *v, *sv;
  uint32_t sid;
  CUresult rc = vgpu_of(&ctx, &v);
  if (rc) return rc;
  if (!stream) sv = v, sid = 0; /* the legacy stream of ctx, whichever is current */
  else if (ferry_cu_result(ferry_stream_resolve((cudaStream_t)stream, 0, &sv, &sid))) sv = NULL;
  if (sv != v)
    return ferry_cu_unsupported("entry 51 of the driver's private table TOOLS_CONTEXT with a "
                                "stream that is not one of its context's");
  struct ctx_object *o = calloc(1, sizeof *o);
  if (!o) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&objects_lock);
  o->id = next_id++;
  pthread_mutex_unlock(&objects_lock);
  o->vgpu = v->index;
  struct ferry_ctx_object_create_args a = {.object = o->id, .stream = sid};
  struct ferry_ctx_object_create_rets r;
  rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_ctx_object_create, &a, &r, NULL));
  if (!rc && r.same_as) {
    struct ctx_object *earlier = find(NULL, v->index, r.same_as);
    free(o);
    if (!earlier) return CUDA_ERROR_UNKNOWN;
    *out = earlier->fields;
    return CUDA_SUCCESS;
  }
  if (!rc && r.object_bytes.len != sizeof o->fields) rc = CUDA_ERROR_UNKNOWN;
  if (rc) {
    free(o);
    return rc;
  }
  memcpy(o->fields, r.object_bytes.ptr, sizeof o->fields);
  for (unsigned i = 0; i < OBJECT_FIELDS; i++)
    if (r.ctx_fields & 1u << i) o->fields[i] = (uint64_t)(uintptr_t)ctx;
    else if (r.stream_fields & 1u << i) o->fields[i] = (uint64_t)(uintptr_t)stream;
  pthread_mutex_lock(&objects_lock);
  o->next = objects;
  objects = o;
  pthread_mutex_unlock(&objects_lock);
  *out = o->fields;
  return CUDA_SUCCESS;
}

CUresult ferry_cu_ctx_object_query(CUcontext ctx, void *object, uint64_t *value) {
  struct ferry_vgpu *v;
  CUresult rc = vgpu_of(&ctx, &v);
  if (rc) return rc;
  struct ctx_object *o = object ? find(object, 0, 0) : NULL;
  if (!o)
    return ferry_cu_unsupported("entry 39 of the driver's private table TOOLS_CONTEXT with an object "
                                "entry 51 did not hand out");
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (o->vgpu != v->index) return CUDA_ERROR_INVALID_CONTEXT;
  struct ferry_ctx_object_query_args a = {.object = o->id};
  struct ferry_ctx_object_query_rets r;
  rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_ctx_object_query, &a, &r, NULL));
  if (!rc) *value = r.value;
  return rc;
}

/* a reset freed the driver's objects: the library's copies stay readable,
   queries on them fail (the library makes new ones, as on a reset GPU) */
void ferry_cu_ctx_objects_forget(int vgpu) {
  pthread_mutex_lock(&objects_lock);
  for (struct ctx_object *o = objects; o; o = o->next)
    if (o->vgpu == vgpu) o->vgpu = -1;
  pthread_mutex_unlock(&objects_lock);
}
