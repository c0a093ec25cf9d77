/*
 * Private driver entries the math libraries need, run on the executor's
 * own context. cuBLAS, cuBLASLt and cuSOLVER ask TOOLS_CONTEXT entry 51 for
 * an object for a context and stream and read a value from it through
 * entry 39 (what
 * either means is not public: docs/driver-export-tables.md). Rather than
 * imitate what was seen, the executor calls the driver's own entries and
 * keeps each object under the client's id, so the answers are always the
 * real driver's, on whichever GPU the vGPU now runs.
 */
#include "executor/exec_internal.h"

#include <string.h>

#define EXEC_MAX_CTX_OBJECT_ID (1u << 20)
#define TOOLS_CONTEXT_OBJECT 51
#define TOOLS_CONTEXT_QUERY 39
#define OBJECT_BYTES 32 /* what driver 580's entry 51 hands out */

typedef CUresult (*object_create_fn)(CUcontext ctx, CUstream stream, void **object);
typedef CUresult (*object_query_fn)(CUcontext ctx, void *object, uint64_t *value);

static const CUuuid tools_context_uuid = {{0x21, 0x31, (char)0x8c, 0x60, (char)0x97, 0x14, 0x32,
                                           0x48, (char)0x8c, (char)0xa6, 0x41, (char)0xff, 0x73,
                                           0x24, (char)0xc8, (char)0xf2}};

/* entry n of the driver's TOOLS_CONTEXT, or NULL when it has none */
static const void *tools_context_entry(struct ferry_exec *ex, unsigned n) {
  const void *const *table = NULL;
  if (ex->d->GetExportTable((const void **)&table, &tools_context_uuid) != CUDA_SUCCESS || !table)
    return NULL;
  /* slot 0 holds the table's size in bytes */
  if ((uintptr_t)table[0] < (n + 1) * sizeof(void *))
    return NULL;
  return table[n];
}

int ferry_x_ctx_object_create(struct ferry_exec *ex, const struct ferry_ctx_object_create_args *a,
                              struct ferry_ctx_object_create_rets *r, struct ferry_io *io) {
  (void)io;
  CUstream stream;
  int err = exec_stream(ex, a->stream, &stream);
  if (err)
    return err;
  if (a->object == 0 || a->object >= EXEC_MAX_CTX_OBJECT_ID)
    return EXEC_INVALID_VALUE;
  if (exec_grow(&ex->ctx_objects, &ex->nctx_objects, a->object))
    return EXEC_MEMORY_ALLOCATION;
  if (ex->ctx_objects[a->object])
    return EXEC_INVALID_VALUE;
  const void *entry = tools_context_entry(ex, TOOLS_CONTEXT_OBJECT);
  if (!entry)
    return CU(CUDA_ERROR_NOT_SUPPORTED);
  object_create_fn create;
  memcpy(&create, &entry, sizeof create);
  void *object = NULL;
  CUresult res = create(ex->ctx, stream, &object);
  if (res != CUDA_SUCCESS)
    return CU(res);
  if (!object)
    return EXEC_UNKNOWN;
  r->same_as = 0;
  for (uint32_t i = 1; i < ex->nctx_objects; i++)
    if (ex->ctx_objects[i] == object) {
      r->same_as = i;
      break;
    }
  uint64_t *bytes = exec_ret_alloc(ex, 0, OBJECT_BYTES);
  if (!bytes)
    return EXEC_MEMORY_ALLOCATION;
  memcpy(bytes, object, OBJECT_BYTES);
  r->ctx_fields = r->stream_fields = 0;
  for (unsigned i = 0; i < OBJECT_BYTES / 8; i++)
    if (bytes[i] == (uint64_t)(uintptr_t)ex->ctx) {
      bytes[i] = 0;
      r->ctx_fields |= 1u << i;
    } else if (stream && bytes[i] == (uint64_t)(uintptr_t)stream) {
      bytes[i] = 0;
      r->stream_fields |= 1u << i;
    }
  r->object_bytes = (ferry_blob){bytes, OBJECT_BYTES};
  ex->ctx_objects[a->object] = object; /* replay may rely on either id */
  return EXEC_OK;
}

int ferry_x_ctx_object_query(struct ferry_exec *ex, const struct ferry_ctx_object_query_args *a,
                             struct ferry_ctx_object_query_rets *r, struct ferry_io *io) {
  (void)io;
  /* one of a destroyed stream is not replayed after a migration: an
     error, not a broken client */
  if (a->object >= ex->nctx_objects || !ex->ctx_objects[a->object])
    return EXEC_INVALID_HANDLE;
  const void *entry = tools_context_entry(ex, TOOLS_CONTEXT_QUERY);
  if (!entry)
    return CU(CUDA_ERROR_NOT_SUPPORTED);
  object_query_fn query;
  memcpy(&query, &entry, sizeof query);
  uint64_t value = 0;
  CUresult res = query(ex->ctx, ex->ctx_objects[a->object], &value);
  r->value = value;
  return CU(res);
}

/* the driver owns the objects and frees them with its context */
void exec_free_ctx_objects(struct ferry_exec *ex) {
  if (ex->ctx_objects)
    memset(ex->ctx_objects, 0, ex->nctx_objects * sizeof *ex->ctx_objects);
}
