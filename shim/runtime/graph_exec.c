/*
 * Executable graphs (issue 21). Instantiation copies the graph (later
 * changes to it do not reach the executable one) and sends the copy as one
 * blob of nodes (protocol/graph.h: topological order, child graphs
 * flattened between two empty nodes) in graph_instantiate; each launch is
 * then one asynchronous graph_launch. An update (cudaGraphExecUpdate, the
 * cudaGraphExec*NodeSetParams calls) changes the copy and sends the whole
 * blob again under the same exec id, which the server replaces and the
 * replay log keeps as the newest: a migration rebuilds every live
 * executable graph from its blob. A graph with host work (host nodes,
 * copies with host memory) is never sent: each launch plays it here
 * (graph_unroll.c).
 */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "protocol/graph.h"
#include "protocol/layout.h"
#include "shim/core/shadow.h"
#include "shim/core/link.h"
#include "shim/migrate/migrate.h"
#include "shim/runtime/graph.h"

/* ---- the blob ---- */
struct emit {
  struct ferry_gbuf b;
  int vgpu;   /* -1 until a node names one */
  int target; /* the vGPU it goes to, when known (module variables are looked up there) */
};

static __thread unsigned char moved_params[FERRY_MAX_PARAM_BYTES];

static int put(struct emit *e, const struct ferry_gnode *n, uint32_t *index) {
  *index = e->b.nnodes;
  return ferry_graph_put(&e->b, n) ? cudaErrorMemoryAllocation : 0;
}

static int emit_graph(struct emit *e, const struct ferry_graph *g, const uint32_t *root, uint32_t nroot,
                      uint32_t *map);

/* one node (its deps already emitted); map[its index] gets its blob index */
static int emit_node(struct emit *e, const struct ferry_gnode_obj *n, const uint32_t *root,
                     uint32_t nroot, uint32_t *map) {
  const struct ferry_gop *op = &n->op;
  if (op->vgpu >= 0) {
    if (e->vgpu >= 0 && e->vgpu != op->vgpu) {
      ferry_log("cudaGraphInstantiate: a graph with work on two devices is not supported by ferry");
      return cudaErrorNotSupported;
    }
    e->vgpu = op->vgpu;
  }
  uint32_t *deps = NULL, ndeps = n->ndeps;
  if (ndeps) {
    if (!(deps = malloc(ndeps * sizeof *deps))) return cudaErrorMemoryAllocation;
    for (uint32_t i = 0; i < ndeps; i++) deps[i] = map[n->deps[i]->index];
  }
  struct ferry_gnode gn = {.ndeps = ndeps ? ndeps : nroot, .deps = ndeps ? deps : root};
  int rc = 0;
  int target = op->vgpu >= 0 ? op->vgpu : e->target; /* where module variables are looked up */
  /* a disabled node keeps its place and edges, and does nothing */
  switch (n->disabled ? cudaGraphNodeTypeEmpty : op->type) {
  case cudaGraphNodeTypeKernel:
    gn.type = FERRY_GNODE_KERNEL;
    gn.u.kernel.func = op->u.kernel.func;
    gn.u.kernel.gx = op->u.kernel.gx, gn.u.kernel.gy = op->u.kernel.gy, gn.u.kernel.gz = op->u.kernel.gz;
    gn.u.kernel.bx = op->u.kernel.bx, gn.u.kernel.by = op->u.kernel.by, gn.u.kernel.bz = op->u.kernel.bz;
    gn.u.kernel.shmem = op->u.kernel.shmem;
    gn.u.kernel.params = op->u.kernel.params;
    gn.u.kernel.params_len = op->u.kernel.params_len;
    /* pointer parameters naming module variables: where they are now
       (put copies them before the buffer is used again) */
    if (op->u.kernel.params_len <= sizeof moved_params)
      gn.u.kernel.params = ferry_params_now(op->u.kernel.layout, target, op->u.kernel.params,
                                            op->u.kernel.params_len, moved_params);
    gn.u.kernel.attrs = op->u.kernel.attrs;
    gn.u.kernel.attrs_len = op->u.kernel.attrs_len;
    break;
  case cudaGraphNodeTypeMemset:
    gn.type = FERRY_GNODE_MEMSET;
    gn.u.memset = op->u.memset;
    gn.u.memset.dst = ferry_variable_now(target, gn.u.memset.dst);
    break;
  case cudaGraphNodeTypeMemcpy:
    if (op->u.memcpy.host) { /* never sent: such a graph is played here (graph_unroll.c) */
      rc = cudaErrorNotSupported;
      break;
    }
    gn.type = FERRY_GNODE_MEMCPY;
    gn.u.memcpy = (struct ferry_gnode_memcpy){
        ferry_variable_now(target, op->u.memcpy.dst), op->u.memcpy.dpitch,
        ferry_variable_now(target, op->u.memcpy.src), op->u.memcpy.spitch, op->u.memcpy.width,
        op->u.memcpy.height};
    break;
  case cudaGraphNodeTypeEventRecord:
  case cudaGraphNodeTypeWaitEvent:
    gn.type = op->type == cudaGraphNodeTypeEventRecord ? FERRY_GNODE_EVENT_RECORD : FERRY_GNODE_EVENT_WAIT;
    gn.u.event.event = op->u.event.id;
    break;
  case cudaGraphNodeTypeEmpty:
    gn.type = FERRY_GNODE_EMPTY;
    break;
  case cudaGraphNodeTypeGraph: {
    /* flattened: an empty node before the child's roots, one after its nodes */
    const struct ferry_graph *c = op->u.child.graph;
    uint32_t entry, *cmap = NULL, *last = NULL;
    gn.type = FERRY_GNODE_EMPTY;
    if ((rc = put(e, &gn, &entry))) break;
    if (c->n && (!(cmap = malloc(c->n * sizeof *cmap)) || !(last = malloc(c->n * sizeof *last)))) {
      free(cmap);
      rc = cudaErrorMemoryAllocation;
      break;
    }
    if (!(rc = emit_graph(e, c, &entry, 1, cmap))) {
      memcpy(last, cmap, c->n * sizeof *last);
      struct ferry_gnode exit = {.type = FERRY_GNODE_EMPTY, .ndeps = c->n ? c->n : 1,
                                 .deps = c->n ? last : &entry};
      rc = put(e, &exit, &map[n->index]);
    }
    free(cmap);
    free(last);
    free(deps);
    return rc;
  }
  default:
    ferry_log("cudaGraphInstantiate: a graph node of type %d is not supported by ferry", (int)op->type);
    rc = cudaErrorNotSupported;
  }
  if (!rc) rc = put(e, &gn, &map[n->index]);
  free(deps);
  return rc;
}

/* depth first from each node in creation order: dependencies come first;
   state: 0 new, 1 on the path (meeting it again is a cycle), 2 emitted */
static int visit(struct emit *e, const struct ferry_graph *g, uint32_t i, unsigned char *state,
                 const uint32_t *root, uint32_t nroot, uint32_t *map) {
  if (state[i] == 2) return 0;
  if (state[i] == 1) return cudaErrorInvalidValue;
  state[i] = 1;
  const struct ferry_gnode_obj *n = g->nodes[i];
  for (uint32_t k = 0; k < n->ndeps; k++) {
    int rc = visit(e, g, n->deps[k]->index, state, root, nroot, map);
    if (rc) return rc;
  }
  state[i] = 2;
  return emit_node(e, n, root, nroot, map);
}

static int emit_graph(struct emit *e, const struct ferry_graph *g, const uint32_t *root, uint32_t nroot,
                      uint32_t *map) {
  unsigned char *state = calloc(g->n ? g->n : 1, 1);
  if (!state) return cudaErrorMemoryAllocation;
  int rc = 0;
  for (uint32_t i = 0; i < g->n && !rc; i++) rc = visit(e, g, i, state, root, nroot, map);
  free(state);
  if (rc == cudaErrorInvalidValue)
    ferry_log("cudaGraphInstantiate: the graph has a cycle");
  return rc;
}

/* device resets of each vGPU: they destroyed its executable graphs */
static uint32_t resets[FERRY_MAX_VGPUS]; /* atomic */

void ferry_gexecs_forget(int vgpu) { __atomic_add_fetch(&resets[vgpu], 1, __ATOMIC_RELEASE); }

/* x's graph still exists where it runs (no reset since) */
static int exec_live(const struct ferry_gexec *x) {
  return x->vgpu < 0 || x->epoch == __atomic_load_n(&resets[x->vgpu], __ATOMIC_ACQUIRE);
}

/* pinned host memory the graph's kernels are given (zero-copy): *hits
   counts the kernels given some; 0 or a cudaError_t */
static int scan_kernels(struct ferry_vgpu *v, const struct ferry_graph *g, int *hits) {
  int rc = 0;
  for (uint32_t i = 0; i < g->n && !rc; i++) {
    const struct ferry_gop *op = &g->nodes[i]->op;
    if (op->type == cudaGraphNodeTypeKernel) {
      rc = ferry_shadow_scan(v, op->u.kernel.params, op->u.kernel.params_len);
      if (rc == FERRY_SHADOW_HIT) (*hits)++, rc = 0;
    } else if (op->type == cudaGraphNodeTypeGraph && op->u.child.graph) {
      rc = scan_kernels(v, op->u.child.graph, hits);
    }
  }
  return rc;
}

/* the vGPU x runs on: the one its nodes name (vgpu), fixed once known;
   none named: the current device's. 0 or an error */
static int settle_vgpu(struct ferry_gexec *x, int vgpu) {
  int rc = 0;
  if (vgpu >= 0 && x->vgpu >= 0 && vgpu != x->vgpu) {
    ferry_log("cudaGraphExecUpdate: the new graph's work is on another device; not supported by ferry");
    return cudaErrorNotSupported;
  }
  if (x->vgpu < 0) {
    if (vgpu >= 0) x->vgpu = vgpu;
    else {
      struct ferry_vgpu *v = ferry_current(&rc);
      if (v) x->vgpu = v->index;
    }
    if (x->vgpu >= 0) x->epoch = __atomic_load_n(&resets[x->vgpu], __ATOMIC_ACQUIRE);
  }
  if (!rc && !exec_live(x)) rc = cudaErrorInvalidResourceHandle;
  return rc;
}

/* sends x's graph under x's id (a first instantiation or a replacement;
   `update`: the changes of one the server has, asynchronously) */
static int send_graph(struct ferry_gexec *x, int update) {
  struct emit e = {.vgpu = -1, .target = x->vgpu >= 0 ? x->vgpu : ferry_thread()->device};
  uint32_t *map = malloc((x->graph->n ? x->graph->n : 1) * sizeof *map);
  int rc = map ? emit_graph(&e, x->graph, NULL, 0, map) : cudaErrorMemoryAllocation;
  free(map);
  if (!rc) rc = settle_vgpu(x, e.vgpu);
  /* the whole graph travels in one message */
  if (!rc && e.b.len > FERRY_MAX_BODY - 4096) {
    ferry_log("cudaGraphInstantiate of a graph of %u nodes (%zu bytes of nodes, more than one "
              "message's %u) is not supported by ferry; returning cudaErrorNotSupported",
              e.b.nnodes, e.b.len, FERRY_MAX_BODY - 4096);
    rc = cudaErrorNotSupported;
  }
  int hits = 0;
  if (!rc) rc = scan_kernels(&ferry.vgpus[x->vgpu], x->graph, &hits);
  x->touches_mapped = hits > 0;
  if (!rc) {
    struct ferry_vgpu *v = &ferry.vgpus[x->vgpu];
    struct ferry_graph_instantiate_args a = {
        .exec = x->id, .flags = (uint32_t)x->flags, .nodes = {e.b.data, (uint32_t)e.b.len}};
    uint64_t gen = __atomic_load_n(&v->generation, __ATOMIC_ACQUIRE);
    struct ferry_graph_update_args u = {a.exec, a.flags, a.nodes};
    rc = ferry_dead(v) ? cudaErrorDevicesUnavailable
         : update     ? ferry_call(v, FERRY_CALL_graph_update, &u, NULL, NULL)
                      : ferry_call(v, FERRY_CALL_graph_instantiate, &a, NULL, NULL);
    if (!rc) x->generation = gen, x->dirty = 0, x->on_server = 1;
  }
  ferry_gbuf_free(&e.b);
  return rc;
}
static int send_exec(struct ferry_gexec *x) { return send_graph(x, 0); }

/* x's graph holds host work: it is played here at each launch
   (graph_unroll.c), checked now, and the server holds none of it (a copy
   it held before an update gave the graph host work is destroyed) */
static int keep_here(struct ferry_gexec *x) {
  int vgpu;
  int rc = ferry_graph_check(x->graph, &vgpu);
  if (!rc) rc = settle_vgpu(x, vgpu);
  if (!rc && x->on_server) {
    struct ferry_vgpu *v = &ferry.vgpus[x->vgpu];
    struct ferry_graph_exec_destroy_args a = {x->id};
    rc = ferry_dead(v) ? cudaErrorDevicesUnavailable
                       : ferry_call(v, FERRY_CALL_graph_exec_destroy, &a, NULL, NULL);
    if (!rc) x->on_server = 0;
  }
  if (!rc) x->dirty = 0;
  return rc;
}

/* before a launch (or an upload): where x runs has its newest graph. A
   graph played here needs nothing sent; the server's copy is sent again
   after a change (an upload sends it whole, a launch as an update) or, at
   a launch, after a move (gen: its vGPU's generation now) */
static int refresh(struct ferry_gexec *x, uint64_t gen, int upload) {
  if (x->dirty) x->unrolled = ferry_graph_unrolled(x->graph);
  if (x->unrolled) return x->dirty || x->on_server ? keep_here(x) : 0;
  if (!x->on_server || (!upload && x->generation != gen)) return send_exec(x);
  return !x->dirty ? 0 : upload ? send_exec(x) : send_graph(x, 1);
}

/* ---- instantiation ---- */
static uint32_t next_exec_id = 1;

static int instantiate(cudaGraphExec_t *out, cudaGraph_t graph, unsigned long long flags) {
  struct ferry_graph *g = ferry_graph_of(graph);
  if (!out || !g) return cudaErrorInvalidValue;
  int rc = ferry_ensure_init();
  if (rc) return rc;
  if (flags & cudaGraphInstantiateFlagDeviceLaunch) {
    ferry_log("cudaGraphInstantiate with cudaGraphInstantiateFlagDeviceLaunch is not supported by ferry");
    return cudaErrorNotSupported;
  }
  struct ferry_gexec *x = calloc(1, sizeof *x);
  if (!x || !(x->graph = ferry_graph_copy(g))) {
    free(x);
    return cudaErrorMemoryAllocation;
  }
  x->magic = FERRY_GEXEC_OBJ_MAGIC;
  x->vgpu = -1;
  x->id = __atomic_fetch_add(&next_exec_id, 1, __ATOMIC_RELAXED);
  x->flags = flags;
  x->unrolled = ferry_graph_unrolled(x->graph);
  if ((rc = x->unrolled ? keep_here(x) : send_exec(x))) {
    ferry_graph_free(x->graph);
    x->magic = 0;
    free(x);
    return rc;
  }
  *out = (cudaGraphExec_t)x;
  return 0;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *out, cudaGraph_t graph, unsigned long long flags) {
  return ferry_ret(instantiate(out, graph, flags));
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *out, cudaGraph_t graph,
                                          unsigned long long flags) {
  return ferry_ret(instantiate(out, graph, flags));
}

static int upload(cudaGraphExec_t exec, cudaStream_t s, int per_thread);

static cudaError_t instantiate_with_params(cudaGraphExec_t *out, cudaGraph_t graph,
                                          cudaGraphInstantiateParams *p, int per_thread) {
  if (!p) return ferry_ret(cudaErrorInvalidValue);
  int rc = instantiate(out, graph, p->flags & ~(unsigned long long)cudaGraphInstantiateFlagUpload);
  if (!rc && (p->flags & cudaGraphInstantiateFlagUpload)) rc = upload(*out, p->uploadStream, per_thread);
  p->errNode_out = NULL;
  p->result_out = rc ? cudaGraphInstantiateError : cudaGraphInstantiateSuccess;
  return ferry_ret(rc);
}
cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *out, cudaGraph_t graph,
                                           cudaGraphInstantiateParams *p) {
  return instantiate_with_params(out, graph, p, 0);
}
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *out, cudaGraph_t graph,
                                                cudaGraphInstantiateParams *p) {
  return instantiate_with_params(out, graph, p, 1);
}

cudaError_t cudaGraphExecGetFlags(cudaGraphExec_t exec, unsigned long long *flags) {
  struct ferry_gexec *x = ferry_gexec_of(exec);
  if (!x || !flags) return ferry_ret(cudaErrorInvalidValue);
  *flags = x->flags;
  return cudaSuccess;
}

/* ---- launching ---- */
/* the exec's vGPU and the stream's wire id there */
static int exec_stream(struct ferry_gexec *x, cudaStream_t s, int per_thread, struct ferry_vgpu **v,
                       uint32_t *sid) {
  if (!x) return cudaErrorInvalidValue;
  if (!exec_live(x)) return cudaErrorInvalidResourceHandle; /* its device was reset */
  int rc = ferry_stream_resolve(s, per_thread, v, sid);
  if (rc) return rc;
  return (*v)->index == x->vgpu ? 0 : cudaErrorInvalidValue;
}

static int launch(cudaGraphExec_t exec, cudaStream_t s, int per_thread) {
  struct ferry_gexec *x = ferry_gexec_of(exec);
  struct ferry_vgpu *v;
  struct ferry_graph_launch_args a = {.exec = x ? x->id : 0};
  int rc = exec_stream(x, s, per_thread, &v, &a.stream);
  if (rc) return rc;
  /* launched into a capture: the capture embeds the graph */
  if (ferry_stream_capturing(v, a.stream)) {
    struct ferry_gop op = {.type = cudaGraphNodeTypeGraph, .vgpu = -1};
    if (!(op.u.child.graph = ferry_graph_copy(x->graph))) return cudaErrorMemoryAllocation;
    return FERRY_CAPTURE_DONE(ferry_capture_op(v, a.stream, &op));
  }
  /* the legacy stream while a blocking stream captures */
  if ((rc = ferry_capture_refuse(v, a.stream, "cudaGraphLaunch"))) return rc;
  ferry_migrate_at_launch(v->index);
  for (;;) {
    /* moved since it was sent: the target has it as recorded, with module
       variables where they were; sent again with where they are now. A
       move between this check and the launch makes the launch stale: again */
    uint64_t gen = __atomic_load_n(&v->generation, __ATOMIC_ACQUIRE);
    if ((rc = refresh(x, gen, 0))) return rc;
    /* host work: the client plays it, node by node, on the launch stream */
    if (x->unrolled) return ferry_graph_unroll(x->graph, v, per_thread && !s ? cudaStreamPerThread : s);
    if (x->touches_mapped) ferry_shadow_touch();
    ferry_expect_generation(v, gen);
    rc = ferry_call(v, FERRY_CALL_graph_launch, &a, NULL, NULL);
    ferry_expect_generation(NULL, 0);
    if (rc != FERRY_STALE) return rc;
  }
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) { return ferry_ret(launch(exec, s, 0)); }
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t s) {
  return ferry_ret(launch(exec, s, 1));
}

static int upload(cudaGraphExec_t exec, cudaStream_t s, int per_thread) {
  struct ferry_gexec *x = ferry_gexec_of(exec);
  struct ferry_vgpu *v;
  struct ferry_graph_upload_args a = {.exec = x ? x->id : 0};
  int rc = exec_stream(x, s, per_thread, &v, &a.stream);
  if (!rc) rc = ferry_capture_refuse(v, a.stream, "cudaGraphUpload");
  if (!rc) rc = refresh(x, 0, 1);
  if (!rc && x->unrolled) return 0; /* played here: nothing to upload */
  return rc ? rc : ferry_call(v, FERRY_CALL_graph_upload, &a, NULL, NULL);
}
cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t s) { return ferry_ret(upload(exec, s, 0)); }
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t exec, cudaStream_t s) {
  return ferry_ret(upload(exec, s, 1));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  struct ferry_gexec *x = ferry_gexec_of(exec);
  if (!x) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *v = &ferry.vgpus[x->vgpu];
  struct ferry_graph_exec_destroy_args a = {x->id};
  int rc = !exec_live(x) || !x->on_server ? 0 /* the reset destroyed it, or it was played here */
           : ferry_dead(v) ? cudaErrorDevicesUnavailable
                           : ferry_call(v, FERRY_CALL_graph_exec_destroy, &a, NULL, NULL);
  ferry_graph_free(x->graph);
  x->magic = 0;
  free(x);
  return ferry_ret(rc);
}

/* ---- updates ---- */
/* the exec's copy of the program's node n */
static struct ferry_gnode_obj *exec_node(struct ferry_gexec *x, const void *node) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!x || !n) return NULL;
  for (uint32_t i = 0; i < x->graph->n; i++)
    if (x->graph->nodes[i]->orig == n) return x->graph->nodes[i];
  return NULL;
}

int ferry_gexec_set(cudaGraphExec_t exec, const void *node, struct ferry_gop *op) {
  struct ferry_gexec *x = ferry_gexec_of(exec);
  struct ferry_gnode_obj *n = exec_node(x, node);
  if (!n) {
    ferry_gop_release(op);
    return cudaErrorInvalidValue;
  }
  struct ferry_gop old;
  int rc = ferry_gop_copy(&old, &n->op);
  if (rc) {
    ferry_gop_release(op);
    return rc;
  }
  if ((rc = ferry_gnode_replace(n, op))) {
    ferry_gop_release(&old);
    return rc;
  }
  ferry_gop_release(&old);
  x->dirty = 1; /* sent with the next launch: a failure is that launch's */
  return 0;
}

#define EXEC_SET(make)                                                                         \
  __extension__({                                                                              \
    struct ferry_gop op_;                                                                      \
    int rc_ = (make);                                                                          \
    ferry_ret(rc_ ? rc_ : ferry_gexec_set(exec, node, &op_));                                         \
  })

cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const struct cudaKernelNodeParams *p) {
  return EXEC_SET(ferry_graph_kernel_op(p, &op_));
}
cudaError_t cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const struct cudaMemsetParams *p) {
  return EXEC_SET(ferry_graph_memset_op(p, &op_));
}
cudaError_t cudaGraphExecMemcpyNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const struct cudaMemcpy3DParms *p) {
  return EXEC_SET(ferry_graph_memcpy_op(p, &op_));
}
cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t exec, cudaGraphNode_t node, void *dst,
                                               const void *src, size_t count,
                                               enum cudaMemcpyKind kind) {
  return EXEC_SET(ferry_graph_memcpy1d_op(dst, src, count, kind, &op_));
}
cudaError_t cudaGraphExecEventRecordNodeSetEvent(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                 cudaEvent_t e) {
  return EXEC_SET(ferry_graph_event_op(e, cudaGraphNodeTypeEventRecord, &op_));
}
cudaError_t cudaGraphExecEventWaitNodeSetEvent(cudaGraphExec_t exec, cudaGraphNode_t node,
                                               cudaEvent_t e) {
  return EXEC_SET(ferry_graph_event_op(e, cudaGraphNodeTypeWaitEvent, &op_));
}

/* same nodes, types and edges (node i of one is node i of the other) */
static int same_topology(const struct ferry_graph *a, const struct ferry_graph *b,
                         cudaGraphExecUpdateResultInfo *info) {
  if (a->n != b->n) {
    info->result = cudaGraphExecUpdateErrorTopologyChanged;
    return 0;
  }
  for (uint32_t i = 0; i < a->n; i++) {
    const struct ferry_gnode_obj *x = a->nodes[i], *y = b->nodes[i];
    info->errorNode = (cudaGraphNode_t)y;
    if (x->op.type != y->op.type) {
      info->result = cudaGraphExecUpdateErrorNodeTypeChanged;
      return 0;
    }
    int same = x->ndeps == y->ndeps;
    for (uint32_t k = 0; k < x->ndeps && same; k++) {
      same = 0;
      for (uint32_t j = 0; j < y->ndeps && !same; j++) same = x->deps[k]->index == y->deps[j]->index;
    }
    if (!same) {
      info->result = cudaGraphExecUpdateErrorTopologyChanged;
      return 0;
    }
    if (x->op.type == cudaGraphNodeTypeGraph &&
        !same_topology(x->op.u.child.graph, y->op.u.child.graph, info))
      return 0;
  }
  info->errorNode = NULL;
  return 1;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                cudaGraphExecUpdateResultInfo *info) {
  struct ferry_gexec *x = ferry_gexec_of(exec);
  struct ferry_graph *g = ferry_graph_of(graph);
  cudaGraphExecUpdateResultInfo local;
  if (!info) info = &local;
  memset(info, 0, sizeof *info);
  if (!x || !g) return ferry_ret(cudaErrorInvalidValue);
  if (!same_topology(x->graph, g, info)) return ferry_ret(cudaErrorGraphExecUpdateFailure);
  struct ferry_graph *copy = ferry_graph_copy(g), *old = x->graph;
  if (!copy) return ferry_ret(cudaErrorMemoryAllocation);
  /* the nodes keep naming the graph it was instantiated from (CUDA's key) */
  for (uint32_t i = 0; i < copy->n; i++) {
    copy->nodes[i]->orig = old->nodes[i]->orig;
    copy->nodes[i]->disabled = old->nodes[i]->disabled; /* what the exec was told stays */
  }
  x->graph = copy;
  ferry_graph_free(old);
  x->dirty = 1; /* sent with the next launch */
  info->result = cudaGraphExecUpdateSuccess;
  return cudaSuccess;
}

cudaError_t cudaGraphExecChildGraphNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                 cudaGraph_t child) {
  struct ferry_gexec *x = ferry_gexec_of(exec);
  struct ferry_gnode_obj *n = exec_node(x, node);
  cudaGraphExecUpdateResultInfo info;
  if (!n || n->op.type != cudaGraphNodeTypeGraph || !ferry_graph_of(child))
    return ferry_ret(cudaErrorInvalidValue);
  /* only the child's parameters may change, not its shape */
  if (!same_topology(n->op.u.child.graph, ferry_graph_of(child), &info))
    return ferry_ret(cudaErrorInvalidValue);
  struct ferry_gop op;
  int rc = ferry_graph_child_op(child, &op);
  return ferry_ret(rc ? rc : ferry_gexec_set(exec, node, &op));
}

/* a disabled node runs as an empty one: the blob is sent again */
cudaError_t cudaGraphNodeSetEnabled(cudaGraphExec_t exec, cudaGraphNode_t node, unsigned int enabled) {
  struct ferry_gexec *x = ferry_gexec_of(exec);
  struct ferry_gnode_obj *n = exec_node(x, node);
  if (!n) return ferry_ret(cudaErrorInvalidValue);
  enum cudaGraphNodeType t = n->op.type;
  if (t != cudaGraphNodeTypeKernel && t != cudaGraphNodeTypeMemset && t != cudaGraphNodeTypeMemcpy)
    return ferry_ret(cudaErrorInvalidValue); /* the kinds CUDA lets be disabled */
  if (n->disabled != !enabled) {
    n->disabled = !enabled;
    x->dirty = 1; /* sent with the next launch */
  }
  return cudaSuccess;
}

cudaError_t cudaGraphNodeGetEnabled(cudaGraphExec_t exec, cudaGraphNode_t node, unsigned int *enabled) {
  struct ferry_gnode_obj *n = exec_node(ferry_gexec_of(exec), node);
  if (!n || !enabled) return ferry_ret(cudaErrorInvalidValue);
  *enabled = !n->disabled;
  return cudaSuccess;
}
