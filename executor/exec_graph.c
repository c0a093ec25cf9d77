/*
 * CUDA graphs (issue 21). The client sends each graph whole, as a node blob
 * (protocol/graph.h); here it becomes a CUgraph through the driver's
 * explicit graph API, is instantiated under the client's exec id, and the
 * CUgraph is dropped again (an executable graph stands alone; the driver
 * copied every node's parameters when the node was added). An instantiate
 * for a live exec id updates that executable graph in place, or replaces
 * it where the driver refuses the update.
 */
#include "executor/exec_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "protocol/graph.h"

struct build {
  struct ferry_exec *ex;
  CUgraph g;
  CUgraphNode *nodes; /* by blob index */
  CUgraphNode deps[64];
  int rc; /* a cudaError_t once a node failed */
};

static const char *const node_names[FERRY_GNODE_TYPES] = {"empty", "kernel", "memset", "memcpy",
                                                          "event record", "event wait"};

static int add_kernel(struct build *b, CUgraphNode *node, const CUgraphNode *deps, size_t ndeps,
                      const struct ferry_gnode *n) {
  struct ferry_exec *ex = b->ex;
  struct exec_func *f;
  void **params;
  int err = exec_func(ex, n->u.kernel.func, &f);
  if (!err)
    err = exec_pack_params(ex, f, (ferry_blob){n->u.kernel.params, n->u.kernel.params_len},
                           &params);
  if (err)
    return err;
  /* the attributes go on the node one by one (CUDA_KERNEL_NODE_PARAMS has
     none); the array is aligned, the blob is not */
  CUlaunchAttribute attrs[FERRY_MAX_LAUNCH_ATTRS];
  uint32_t len = n->u.kernel.attrs_len;
  if (len % sizeof *attrs || len / sizeof *attrs > FERRY_MAX_LAUNCH_ATTRS)
    return EXEC_INVALID_VALUE;
  unsigned nattrs = len / (unsigned)sizeof *attrs;
  if (len)
    memcpy(attrs, n->u.kernel.attrs, len);
  for (unsigned i = 0; i < nattrs; i++)
    if (!exec_attr_is_plain(attrs[i].id))
      return EXEC_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS p = {.func = f->fn,
                               .gridDimX = n->u.kernel.gx, .gridDimY = n->u.kernel.gy,
                               .gridDimZ = n->u.kernel.gz, .blockDimX = n->u.kernel.bx,
                               .blockDimY = n->u.kernel.by, .blockDimZ = n->u.kernel.bz,
                               .sharedMemBytes = n->u.kernel.shmem, .kernelParams = params};
  CUresult res = ex->d->GraphAddKernelNode(node, b->g, deps, ndeps, &p);
  for (unsigned i = 0; res == CUDA_SUCCESS && i < nattrs; i++)
    if (attrs[i].id != CU_LAUNCH_ATTRIBUTE_IGNORE)
      res = ex->d->GraphKernelNodeSetAttribute(*node, attrs[i].id, &attrs[i].value);
  return CU(res);
}

static int add_node(void *ctx, uint32_t index, const struct ferry_gnode *n) {
  struct build *b = ctx;
  struct ferry_exec *ex = b->ex;
  const struct ferry_driver *d = ex->d;
  /* dependencies as driver nodes: most nodes have a few */
  CUgraphNode *deps = b->deps;
  if (n->ndeps > sizeof b->deps / sizeof b->deps[0] && !(deps = malloc(n->ndeps * sizeof *deps))) {
    b->rc = EXEC_MEMORY_ALLOCATION;
    return 1;
  }
  for (uint32_t i = 0; i < n->ndeps; i++)
    deps[i] = b->nodes[n->deps[i]]; /* earlier: the walk checked */
  CUgraphNode *node = &b->nodes[index];
  CUevent ev = NULL;
  int rc = EXEC_OK;
  switch (n->type) {
  case FERRY_GNODE_EMPTY:
    rc = CU(d->GraphAddEmptyNode(node, b->g, deps, n->ndeps));
    break;
  case FERRY_GNODE_KERNEL:
    rc = add_kernel(b, node, deps, n->ndeps, n);
    break;
  case FERRY_GNODE_MEMSET: {
    CUDA_MEMSET_NODE_PARAMS p = {.dst = n->u.memset.dst, .pitch = n->u.memset.pitch,
                                 .value = n->u.memset.value, .elementSize = n->u.memset.elem,
                                 .width = n->u.memset.width, .height = n->u.memset.height};
    rc = CU(d->GraphAddMemsetNode(node, b->g, deps, n->ndeps, &p, ex->ctx));
    break;
  }
  case FERRY_GNODE_MEMCPY: {
    CUDA_MEMCPY3D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = n->u.memcpy.src,
                       .srcPitch = n->u.memcpy.spitch, .srcHeight = n->u.memcpy.height,
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = n->u.memcpy.dst,
                       .dstPitch = n->u.memcpy.dpitch, .dstHeight = n->u.memcpy.height,
                       .WidthInBytes = n->u.memcpy.width, .Height = n->u.memcpy.height,
                       .Depth = 1};
    rc = CU(d->GraphAddMemcpyNode(node, b->g, deps, n->ndeps, &c, ex->ctx));
    break;
  }
  case FERRY_GNODE_EVENT_RECORD:
  case FERRY_GNODE_EVENT_WAIT:
    rc = exec_event(ex, n->u.event.event, &ev);
    if (!rc && n->type == FERRY_GNODE_EVENT_RECORD)
      rc = CU(d->GraphAddEventRecordNode(node, b->g, deps, n->ndeps, ev));
    else if (!rc)
      rc = CU(d->GraphAddEventWaitNode(node, b->g, deps, n->ndeps, ev));
    break;
  default:
    rc = EXEC_INVALID_VALUE; /* the walk refuses unknown types */
    break;
  }
  if (deps != b->deps)
    free(deps);
  if (rc) {
    if (ferry_debug_enabled())
      ferry_debug("graph_instantiate: node %" PRIu32 " (%s) failed with cudaError %d", index,
                  node_names[n->type], rc);
    b->rc = rc;
    return 1;
  }
  return 0;
}

/* the blob as a CUgraph; a cudaError_t. A malformed blob is a broken client. */
static int build_graph(struct ferry_exec *ex, ferry_blob blob, CUgraph *out) {
  int count = ferry_graph_walk(blob.ptr, blob.len, NULL, NULL);
  if (count < 0) {
    snprintf(ex->violation, sizeof ex->violation, "its node blob is malformed (%" PRIu32 " bytes)",
             blob.len);
    return EXEC_INVALID_VALUE;
  }
  struct build b = {.ex = ex};
  b.nodes = calloc(count ? (size_t)count : 1, sizeof *b.nodes);
  if (!b.nodes)
    return EXEC_MEMORY_ALLOCATION;
  CUresult res = ex->d->GraphCreate(&b.g, 0);
  if (res != CUDA_SUCCESS) {
    free(b.nodes);
    return CU(res);
  }
  /* a failed node stops the walk with 1, which a one-node count would look like */
  int w = ferry_graph_walk(blob.ptr, blob.len, add_node, &b);
  free(b.nodes);
  if (b.rc || w != count) {
    ex->d->GraphDestroy(b.g);
    return b.rc ? b.rc : EXEC_MEMORY_ALLOCATION;
  }
  *out = b.g;
  return EXEC_OK;
}

static int live_exec(struct ferry_exec *ex, uint32_t id, CUgraphExec *out) {
  if (id >= ex->ngexecs || !ex->gexecs[id])
    return exec_bad_handle(ex, "graph exec", id);
  *out = ex->gexecs[id];
  return EXEC_OK;
}

int ferry_x_graph_instantiate(struct ferry_exec *ex, const struct ferry_graph_instantiate_args *a,
                              struct ferry_graph_instantiate_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  const struct ferry_driver *d = ex->d;
  if (a->exec >= EXEC_MAX_GRAPH_ID)
    return EXEC_INVALID_VALUE;
  if (exec_grow((void ***)&ex->gexecs, &ex->ngexecs, a->exec))
    return EXEC_MEMORY_ALLOCATION;
  CUgraph g;
  int rc = build_graph(ex, a->nodes, &g);
  if (rc)
    return rc;
  CUgraphExec old = ex->gexecs[a->exec], ge = NULL;
  if (old) {
    /* the same topology with new parameters updates in place (and keeps
       launches already queued as they were); otherwise a new one */
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    if (d->GraphExecUpdate(old, g, &info) == CUDA_SUCCESS) {
      d->GraphDestroy(g);
      return EXEC_OK;
    }
  }
  CUresult res = d->GraphInstantiateWithFlags(&ge, g, a->flags);
  d->GraphDestroy(g);
  if (res != CUDA_SUCCESS)
    return CU(res); /* a live exec stays as it was, as the recorder keeps its blob */
  if (old)
    d->GraphExecDestroy(old); /* launches in flight finish first (the driver frees it after) */
  ex->gexecs[a->exec] = ge;
  return EXEC_OK;
}

int ferry_x_graph_update(struct ferry_exec *ex, const struct ferry_graph_update_args *a,
                         struct ferry_graph_update_rets *r, struct ferry_io *io) {
  (void)r;
  const struct ferry_graph_instantiate_args i = {a->exec, a->flags, a->nodes};
  return ferry_x_graph_instantiate(ex, &i, NULL, io);
}

/* a launch or an upload: the same two handles, then the driver's call */
static int on_exec_stream(struct ferry_exec *ex, uint32_t exec, uint32_t stream,
                          CUresult (*op)(CUgraphExec, CUstream)) {
  CUgraphExec ge = NULL;
  CUstream s = NULL;
  int rc = live_exec(ex, exec, &ge);
  if (!rc)
    rc = exec_stream(ex, stream, &s);
  return rc ? rc : CU(op(ge, s));
}

int ferry_x_graph_launch(struct ferry_exec *ex, const struct ferry_graph_launch_args *a,
                         struct ferry_graph_launch_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return on_exec_stream(ex, a->exec, a->stream, ex->d->GraphLaunch);
}

int ferry_x_graph_upload(struct ferry_exec *ex, const struct ferry_graph_upload_args *a,
                         struct ferry_graph_upload_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return on_exec_stream(ex, a->exec, a->stream, ex->d->GraphUpload);
}

int ferry_x_graph_exec_destroy(struct ferry_exec *ex, const struct ferry_graph_exec_destroy_args *a,
                               struct ferry_graph_exec_destroy_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  CUgraphExec ge = NULL;
  int rc = live_exec(ex, a->exec, &ge);
  if (rc)
    return rc;
  ex->gexecs[a->exec] = NULL;
  return CU(ex->d->GraphExecDestroy(ge));
}

void exec_free_graphs(struct ferry_exec *ex, int driver_ok) {
  for (uint32_t i = 0; i < ex->ngexecs; i++) {
    if (ex->gexecs[i] && driver_ok)
      ex->d->GraphExecDestroy(ex->gexecs[i]);
    ex->gexecs[i] = NULL;
  }
}
