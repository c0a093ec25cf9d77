/*
 * Graphs and nodes, objects of this process (issue 21). The explicit API
 * (cudaGraphAdd*) builds a node by running the operation's own entry point
 * with a sink set (capture.c), so a node is checked, resolved and packed
 * exactly as the launch, memset or copy it stands for (a copy with host
 * memory and a host node are made by graph_host.c); only instantiation
 * (graph_exec.c) sends a graph to the server.
 */
#include <stdio.h>
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "protocol/layout.h"
#include "shim/runtime/graph.h"

/* ---- objects ---- */
struct ferry_graph *ferry_graph_of(const void *h) {
  struct ferry_graph *g = (struct ferry_graph *)h;
  return g && g->magic == FERRY_GRAPH_OBJ_MAGIC ? g : NULL;
}
struct ferry_gnode_obj *ferry_gnode_of(const void *h) {
  struct ferry_gnode_obj *n = (struct ferry_gnode_obj *)h;
  return n && n->magic == FERRY_GNODE_OBJ_MAGIC ? n : NULL;
}
struct ferry_gexec *ferry_gexec_of(const void *h) {
  struct ferry_gexec *x = (struct ferry_gexec *)h;
  return x && x->magic == FERRY_GEXEC_OBJ_MAGIC ? x : NULL;
}

struct ferry_graph *ferry_graph_new(void) {
  struct ferry_graph *g = calloc(1, sizeof *g);
  if (g) g->magic = FERRY_GRAPH_OBJ_MAGIC;
  return g;
}

void ferry_gop_release(struct ferry_gop *op) {
  if (op->type == cudaGraphNodeTypeKernel) {
    free(op->u.kernel.params);
    free(op->u.kernel.attrs);
    free(op->u.kernel.argv);
  } else if (op->type == cudaGraphNodeTypeGraph) {
    ferry_graph_free(op->u.child.graph);
  }
  memset(&op->u, 0, sizeof op->u);
}

static void node_free(struct ferry_gnode_obj *n) {
  ferry_gop_release(&n->op);
  free(n->deps);
  n->magic = 0;
  free(n);
}

void ferry_graph_free(struct ferry_graph *g) {
  if (!g) return;
  for (uint32_t i = 0; i < g->n; i++) node_free(g->nodes[i]);
  free(g->nodes);
  g->magic = 0;
  free(g);
}

int ferry_gop_copy(struct ferry_gop *dst, const struct ferry_gop *src) {
  *dst = *src;
  if (src->type == cudaGraphNodeTypeKernel) {
    dst->u.kernel.argv = NULL;
    dst->u.kernel.params = malloc(src->u.kernel.params_len ? src->u.kernel.params_len : 1);
    dst->u.kernel.attrs = src->u.kernel.attrs_len ? malloc(src->u.kernel.attrs_len) : NULL;
    if (!dst->u.kernel.params || (src->u.kernel.attrs_len && !dst->u.kernel.attrs)) {
      free(dst->u.kernel.params);
      free(dst->u.kernel.attrs);
      memset(&dst->u, 0, sizeof dst->u);
      return cudaErrorMemoryAllocation;
    }
    memcpy(dst->u.kernel.params, src->u.kernel.params, src->u.kernel.params_len);
    if (src->u.kernel.attrs_len) memcpy(dst->u.kernel.attrs, src->u.kernel.attrs, src->u.kernel.attrs_len);
  } else if (src->type == cudaGraphNodeTypeGraph) {
    if (!(dst->u.child.graph = ferry_graph_copy(src->u.child.graph))) return cudaErrorMemoryAllocation;
  }
  return 0;
}

int ferry_graph_add(struct ferry_graph *g, struct ferry_gop *op, struct ferry_gnode_obj *const *deps,
                    size_t ndeps, struct ferry_gnode_obj **out) {
  int rc = 0;
  for (size_t i = 0; i < ndeps && !rc; i++) {
    struct ferry_gnode_obj *d = ferry_gnode_of(deps[i]);
    if (!d || d->graph != g) rc = cudaErrorInvalidValue;
    for (size_t k = 0; k < i && !rc; k++)
      if (deps[k] == deps[i]) rc = cudaErrorInvalidValue; /* CUDA refuses a repeated dependency */
  }
  struct ferry_gnode_obj *n = rc ? NULL : calloc(1, sizeof *n);
  if (!rc && !n) rc = cudaErrorMemoryAllocation;
  if (!rc && ndeps && !(n->deps = malloc(ndeps * sizeof *n->deps))) rc = cudaErrorMemoryAllocation;
  if (!rc && g->n == g->cap) {
    uint32_t cap = g->cap ? 2 * g->cap : 16;
    struct ferry_gnode_obj **nodes = realloc(g->nodes, cap * sizeof *nodes);
    if (!nodes) rc = cudaErrorMemoryAllocation;
    else g->nodes = nodes, g->cap = cap;
  }
  if (rc) {
    if (n) free(n->deps);
    free(n);
    ferry_gop_release(op);
    return rc;
  }
  n->magic = FERRY_GNODE_OBJ_MAGIC;
  n->graph = g;
  n->op = *op;
  if (ndeps) memcpy(n->deps, deps, ndeps * sizeof *deps);
  n->ndeps = n->depcap = (uint32_t)ndeps;
  n->index = g->n;
  g->nodes[g->n++] = n;
  if (out) *out = n;
  return 0;
}

struct ferry_graph *ferry_graph_copy(const struct ferry_graph *g) {
  struct ferry_graph *c = ferry_graph_new();
  /* nodes first, then their dependencies: an edge added later may point
     at a node made after its target */
  for (uint32_t i = 0; c && i < g->n; i++) {
    struct ferry_gop op;
    struct ferry_gnode_obj *made;
    if (ferry_gop_copy(&op, &g->nodes[i]->op) || ferry_graph_add(c, &op, NULL, 0, &made)) goto fail;
    made->orig = g->nodes[i];
    made->disabled = g->nodes[i]->disabled;
  }
  for (uint32_t i = 0; c && i < g->n; i++) {
    const struct ferry_gnode_obj *n = g->nodes[i];
    struct ferry_gnode_obj *m = c->nodes[i];
    if (!n->ndeps) continue;
    if (!(m->deps = malloc(n->ndeps * sizeof *m->deps))) goto fail;
    for (uint32_t k = 0; k < n->ndeps; k++) m->deps[k] = c->nodes[n->deps[k]->index];
    m->ndeps = m->depcap = n->ndeps;
  }
  return c;
fail:
  ferry_graph_free(c);
  return NULL;
}

/* ---- creating, copying, destroying ---- */
cudaError_t cudaGraphCreate(cudaGraph_t *out, unsigned int flags) {
  if (!out || flags) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_graph *g = ferry_graph_new();
  if (!g) return ferry_ret(cudaErrorMemoryAllocation);
  *out = (cudaGraph_t)g;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  struct ferry_graph *g = ferry_graph_of(graph);
  if (!g) return ferry_ret(cudaErrorInvalidValue);
  if (g->capturing) return ferry_ret(cudaErrorIllegalState); /* a capture still builds it */
  ferry_graph_free(g);
  return cudaSuccess;
}

cudaError_t cudaGraphClone(cudaGraph_t *out, cudaGraph_t graph) {
  struct ferry_graph *g = ferry_graph_of(graph);
  if (!out || !g) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_graph *c = ferry_graph_copy(g);
  if (!c) return ferry_ret(cudaErrorMemoryAllocation);
  *out = (cudaGraph_t)c;
  return cudaSuccess;
}

cudaError_t cudaGraphNodeFindInClone(cudaGraphNode_t *out, cudaGraphNode_t node, cudaGraph_t clone) {
  struct ferry_graph *c = ferry_graph_of(clone);
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!out || !c || !n) return ferry_ret(cudaErrorInvalidValue);
  for (uint32_t i = 0; i < c->n; i++)
    if (c->nodes[i]->orig == n) {
      *out = (cudaGraphNode_t)c->nodes[i];
      return cudaSuccess;
    }
  return ferry_ret(cudaErrorInvalidValue);
}

cudaError_t cudaGraphDestroyNode(cudaGraphNode_t node) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_graph *g = n->graph;
  if (g->capturing) return ferry_ret(cudaErrorIllegalState);
  for (uint32_t i = 0; i < g->n; i++) {
    struct ferry_gnode_obj *o = g->nodes[i];
    uint32_t k = 0;
    for (uint32_t j = 0; j < o->ndeps; j++)
      if (o->deps[j] != n) o->deps[k++] = o->deps[j];
    o->ndeps = k;
  }
  memmove(&g->nodes[n->index], &g->nodes[n->index + 1], (g->n - n->index - 1) * sizeof *g->nodes);
  g->n--;
  for (uint32_t i = n->index; i < g->n; i++) g->nodes[i]->index = i;
  node_free(n);
  return cudaSuccess;
}

/* ---- adding nodes ---- */
static int add_node(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps, size_t n,
                    struct ferry_gop *op) {
  struct ferry_graph *g = ferry_graph_of(graph);
  if (!out || !g || (n && !deps)) {
    ferry_gop_release(op);
    return cudaErrorInvalidValue;
  }
  struct ferry_gnode_obj *node;
  int rc = ferry_graph_add(g, op, (struct ferry_gnode_obj *const *)deps, n, &node);
  if (!rc) *out = (cudaGraphNode_t)node;
  return rc;
}

/* runs an operation's entry point with a sink: the operation it describes */
#define SINK_RUN(what_, op_, expr)                                                             \
  __extension__({                                                                              \
    struct ferry_sink sink_ = {what_, op_, 0};                                                 \
    ferry_sink_set(&sink_);                                                                    \
    cudaError_t sink_rc_ = (expr);                                                             \
    ferry_sink_set(NULL);                                                                      \
    !sink_rc_ && !sink_.filled ? cudaErrorInvalidValue : (int)sink_rc_;                         \
  })

int ferry_graph_kernel_op(const struct cudaKernelNodeParams *p, struct ferry_gop *op) {
  if (!p) return cudaErrorInvalidValue;
  if (p->extra) {
    ferry_log("cudaGraphAddKernelNode with `extra` is not supported by ferry (kernelParams is)");
    return cudaErrorNotSupported;
  }
  memset(op, 0, sizeof *op);
  int rc = SINK_RUN("cudaGraphAddKernelNode", op,
                    cudaLaunchKernel(p->func, p->gridDim, p->blockDim, p->kernelParams,
                                     p->sharedMemBytes, NULL));
  if (!rc) op->u.kernel.fn = p->func;
  return rc;
}

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                   size_t n, const struct cudaKernelNodeParams *p) {
  struct ferry_gop op;
  int rc = ferry_graph_kernel_op(p, &op);
  if (!rc) rc = add_node(out, graph, deps, n, &op);
  return ferry_ret(rc);
}

/* the kernel's arguments as pointers into the node's packed parameters */
static int kernel_argv(struct ferry_gop *op) {
  const struct ferry_layout *l = op->u.kernel.layout;
  if (op->u.kernel.argv || !l) return 0;
  if (!(op->u.kernel.argv = calloc(l->nparams + 1, sizeof *op->u.kernel.argv))) return cudaErrorMemoryAllocation;
  for (uint32_t i = 0; i < l->nparams; i++) op->u.kernel.argv[i] = op->u.kernel.params + l->offsets[i];
  return 0;
}

cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, struct cudaKernelNodeParams *p) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || !p || n->op.type != cudaGraphNodeTypeKernel) return ferry_ret(cudaErrorInvalidValue);
  int rc = kernel_argv(&n->op);
  if (rc) return ferry_ret(rc);
  const struct ferry_gop *op = &n->op;
  *p = (struct cudaKernelNodeParams){(void *)op->u.kernel.fn,
                                     {op->u.kernel.gx, op->u.kernel.gy, op->u.kernel.gz},
                                     {op->u.kernel.bx, op->u.kernel.by, op->u.kernel.bz},
                                     op->u.kernel.shmem, op->u.kernel.argv, NULL};
  return cudaSuccess;
}

/* a node's new operation, of the same type */
int ferry_gnode_replace(struct ferry_gnode_obj *n, struct ferry_gop *op) {
  if (op->type != n->op.type) {
    ferry_gop_release(op);
    return cudaErrorInvalidValue;
  }
  ferry_gop_release(&n->op);
  n->op = *op;
  return 0;
}

cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node, const struct cudaKernelNodeParams *p) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || n->op.type != cudaGraphNodeTypeKernel) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_gop op;
  int rc = ferry_graph_kernel_op(p, &op);
  if (!rc) rc = ferry_gnode_replace(n, &op);
  return ferry_ret(rc);
}

int ferry_graph_memset_op(const struct cudaMemsetParams *p, struct ferry_gop *op) {
  if (!p) return cudaErrorInvalidValue;
  if (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) return cudaErrorInvalidValue;
  if (p->height > 1 && p->pitch < p->width * p->elementSize) return cudaErrorInvalidValue;
  if (!p->width || !p->height) return cudaErrorInvalidValue;
  memset(op, 0, sizeof *op);
  size_t pitch = p->height > 1 ? p->pitch : p->width * p->elementSize;
  int rc = SINK_RUN("cudaGraphAddMemsetNode", op,
                    ferry_memset_wide(p->dst, pitch, p->value, p->elementSize, p->width, p->height,
                                      NULL, 0));
  if (!rc) { /* the node keeps what the program asked (a uniform value becomes a byte set) */
    op->u.memset.value = p->value;
    op->u.memset.elem = p->elementSize;
    op->u.memset.width = p->width;
    op->u.memset.pitch = pitch;
  }
  return rc;
}

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                   size_t n, const struct cudaMemsetParams *p) {
  struct ferry_gop op;
  int rc = ferry_graph_memset_op(p, &op);
  if (!rc) rc = add_node(out, graph, deps, n, &op);
  return ferry_ret(rc);
}

cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node, struct cudaMemsetParams *p) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || !p || n->op.type != cudaGraphNodeTypeMemset) return ferry_ret(cudaErrorInvalidValue);
  p->dst = (void *)(uintptr_t)n->op.u.memset.dst;
  p->pitch = n->op.u.memset.pitch;
  p->value = n->op.u.memset.value;
  p->elementSize = n->op.u.memset.elem;
  p->width = n->op.u.memset.width;
  p->height = n->op.u.memset.height;
  return cudaSuccess;
}

cudaError_t cudaGraphMemsetNodeSetParams(cudaGraphNode_t node, const struct cudaMemsetParams *p) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || n->op.type != cudaGraphNodeTypeMemset) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_gop op;
  int rc = ferry_graph_memset_op(p, &op);
  if (!rc) rc = ferry_gnode_replace(n, &op);
  return ferry_ret(rc);
}

/* a copy between two pointers: of one vGPU (sent with the graph), or with
   host memory on a side (the client plays it, graph_host.c); arrays and
   3D extents are refused */
int ferry_graph_memcpy_op(const struct cudaMemcpy3DParms *p, struct ferry_gop *op) {
  if (!p) return cudaErrorInvalidValue;
  if (p->srcArray || p->dstArray || p->extent.depth > 1 || p->srcPos.z || p->dstPos.z) {
    ferry_log("cudaGraphAddMemcpyNode with a CUDA array or a 3D extent is not supported by ferry "
              "(copies between two pointers are)");
    return cudaErrorNotSupported;
  }
  size_t spitch = p->srcPtr.pitch, dpitch = p->dstPtr.pitch;
  /* one row: its pitch plays no part (the driver's copies leave it 0) */
  if (p->extent.height <= 1 && !p->srcPos.y && spitch < p->extent.width) spitch = p->extent.width;
  if (p->extent.height <= 1 && !p->dstPos.y && dpitch < p->extent.width) dpitch = p->extent.width;
  const char *src = (const char *)p->srcPtr.ptr + p->srcPos.y * spitch + p->srcPos.x;
  char *dst = (char *)p->dstPtr.ptr + p->dstPos.y * dpitch + p->dstPos.x;
  memset(op, 0, sizeof *op);
  if (ferry_graph_copy_is_host(dst, src, p->kind))
    return ferry_graph_host_copy_op(dst, dpitch, src, spitch, p->extent.width,
                                    p->extent.depth ? p->extent.height : 0, p->kind, op);
  int rc = SINK_RUN("cudaGraphAddMemcpyNode", op,
                    cudaMemcpy2DAsync(dst, dpitch, src, spitch, p->extent.width,
                                      p->extent.depth ? p->extent.height : 0, p->kind, NULL));
  if (!rc) op->u.memcpy.kind = p->kind;
  return rc;
}

cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                   size_t n, const struct cudaMemcpy3DParms *p) {
  struct ferry_gop op;
  int rc = ferry_graph_memcpy_op(p, &op);
  if (!rc) rc = add_node(out, graph, deps, n, &op);
  return ferry_ret(rc);
}

int ferry_graph_memcpy1d_op(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            struct ferry_gop *op) {
  memset(op, 0, sizeof *op);
  if (ferry_graph_copy_is_host(dst, src, kind))
    return ferry_graph_host_copy_op(dst, count, src, count, count, 1, kind, op);
  int rc = SINK_RUN("cudaGraphAddMemcpyNode1D", op, cudaMemcpyAsync(dst, src, count, kind, NULL));
  if (!rc) op->u.memcpy.kind = kind;
  return rc;
}

cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *out, cudaGraph_t graph,
                                     const cudaGraphNode_t *deps, size_t n, void *dst,
                                     const void *src, size_t count, enum cudaMemcpyKind kind) {
  struct ferry_gop op;
  int rc = ferry_graph_memcpy1d_op(dst, src, count, kind, &op);
  if (!rc) rc = add_node(out, graph, deps, n, &op);
  return ferry_ret(rc);
}

cudaError_t cudaGraphMemcpyNodeGetParams(cudaGraphNode_t node, struct cudaMemcpy3DParms *p) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || !p || n->op.type != cudaGraphNodeTypeMemcpy) return ferry_ret(cudaErrorInvalidValue);
  memset(p, 0, sizeof *p);
  const struct ferry_gop *op = &n->op;
  p->srcPtr = (struct cudaPitchedPtr){(void *)(uintptr_t)op->u.memcpy.src, op->u.memcpy.spitch,
                                      op->u.memcpy.width, op->u.memcpy.height};
  p->dstPtr = (struct cudaPitchedPtr){(void *)(uintptr_t)op->u.memcpy.dst, op->u.memcpy.dpitch,
                                      op->u.memcpy.width, op->u.memcpy.height};
  p->extent = (struct cudaExtent){op->u.memcpy.width, op->u.memcpy.height, 1};
  p->kind = op->u.memcpy.kind;
  return cudaSuccess;
}

cudaError_t cudaGraphMemcpyNodeSetParams(cudaGraphNode_t node, const struct cudaMemcpy3DParms *p) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || n->op.type != cudaGraphNodeTypeMemcpy) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_gop op;
  int rc = ferry_graph_memcpy_op(p, &op);
  if (!rc) rc = ferry_gnode_replace(n, &op);
  return ferry_ret(rc);
}

cudaError_t cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t node, void *dst, const void *src,
                                           size_t count, enum cudaMemcpyKind kind) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || n->op.type != cudaGraphNodeTypeMemcpy) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_gop op;
  int rc = ferry_graph_memcpy1d_op(dst, src, count, kind, &op);
  if (!rc) rc = ferry_gnode_replace(n, &op);
  return ferry_ret(rc);
}

cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                  size_t n) {
  struct ferry_gop op = {.type = cudaGraphNodeTypeEmpty, .vgpu = -1};
  return ferry_ret(add_node(out, graph, deps, n, &op));
}

int ferry_graph_event_op(cudaEvent_t e, enum cudaGraphNodeType type, struct ferry_gop *op) {
  memset(op, 0, sizeof *op);
  op->type = type;
  op->u.event.handle = e;
  return ferry_event_find(e, &op->vgpu, &op->u.event.id);
}

static cudaError_t add_event_node(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                  size_t n, cudaEvent_t e, enum cudaGraphNodeType type) {
  struct ferry_gop op;
  int rc = ferry_graph_event_op(e, type, &op);
  if (!rc) rc = add_node(out, graph, deps, n, &op);
  return ferry_ret(rc);
}
cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t *out, cudaGraph_t graph,
                                        const cudaGraphNode_t *deps, size_t n, cudaEvent_t e) {
  return add_event_node(out, graph, deps, n, e, cudaGraphNodeTypeEventRecord);
}
cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t *out, cudaGraph_t graph,
                                      const cudaGraphNode_t *deps, size_t n, cudaEvent_t e) {
  return add_event_node(out, graph, deps, n, e, cudaGraphNodeTypeWaitEvent);
}

static cudaError_t event_of_node(cudaGraphNode_t node, enum cudaGraphNodeType type, cudaEvent_t *out) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || !out || n->op.type != type) return ferry_ret(cudaErrorInvalidValue);
  *out = (cudaEvent_t)n->op.u.event.handle;
  return cudaSuccess;
}
cudaError_t cudaGraphEventRecordNodeGetEvent(cudaGraphNode_t node, cudaEvent_t *out) {
  return event_of_node(node, cudaGraphNodeTypeEventRecord, out);
}
cudaError_t cudaGraphEventWaitNodeGetEvent(cudaGraphNode_t node, cudaEvent_t *out) {
  return event_of_node(node, cudaGraphNodeTypeWaitEvent, out);
}

/* CUDA embeds a copy: later changes to child do not reach the node */
int ferry_graph_child_op(cudaGraph_t child, struct ferry_gop *op) {
  struct ferry_graph *c = ferry_graph_of(child);
  memset(op, 0, sizeof *op);
  op->type = cudaGraphNodeTypeGraph;
  op->vgpu = -1;
  if (!c) return cudaErrorInvalidValue;
  return (op->u.child.graph = ferry_graph_copy(c)) ? 0 : cudaErrorMemoryAllocation;
}

cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t *out, cudaGraph_t graph,
                                       const cudaGraphNode_t *deps, size_t n, cudaGraph_t child) {
  if (child == graph) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_gop op;
  int rc = ferry_graph_child_op(child, &op);
  if (!rc) rc = add_node(out, graph, deps, n, &op);
  return ferry_ret(rc);
}

cudaError_t cudaGraphChildGraphNodeGetGraph(cudaGraphNode_t node, cudaGraph_t *out) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || !out || n->op.type != cudaGraphNodeTypeGraph) return ferry_ret(cudaErrorInvalidValue);
  *out = (cudaGraph_t)n->op.u.child.graph;
  return cudaSuccess;
}

/* ---- structure ---- */
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *type) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || !type) return ferry_ret(cudaErrorInvalidValue);
  *type = n->op.type;
  return cudaSuccess;
}

static int has_dep(const struct ferry_gnode_obj *n, const struct ferry_gnode_obj *d) {
  for (uint32_t i = 0; i < n->ndeps; i++)
    if (n->deps[i] == d) return 1;
  return 0;
}

/* to depends on from; 0, or an error with nothing changed for that edge */
static int edge_add(struct ferry_gnode_obj *from, struct ferry_gnode_obj *to) {
  if (from == to || has_dep(to, from)) return cudaErrorInvalidValue;
  if (to->ndeps == to->depcap) {
    uint32_t cap = to->depcap ? 2 * to->depcap : 4;
    struct ferry_gnode_obj **d = realloc(to->deps, cap * sizeof *d);
    if (!d) return cudaErrorMemoryAllocation;
    to->deps = d;
    to->depcap = cap;
  }
  to->deps[to->ndeps++] = from;
  return 0;
}

int ferry_edge_data_plain(const cudaGraphEdgeData *edges, size_t n, const char *call) {
  for (size_t i = 0; edges && i < n; i++) {
    const cudaGraphEdgeData *e = &edges[i];
    int reserved = 0;
    for (size_t k = 0; k < sizeof e->reserved; k++) reserved |= e->reserved[k];
    int weaker = e->from_port <= cudaGraphKernelNodePortLaunchCompletion && e->to_port == 0 &&
                 e->type <= cudaGraphDependencyTypeProgrammatic && !reserved;
    if (!weaker) {
      ferry_log("%s with edge data (from port %u, to port %u, type %u) is not supported by ferry; "
                "returning cudaErrorNotSupported", call, e->from_port, e->to_port, e->type);
      return cudaErrorNotSupported;
    }
  }
  return 0;
}

static int check_edges(struct ferry_graph *g, const cudaGraphNode_t *from, const cudaGraphNode_t *to,
                       const cudaGraphEdgeData *edges, size_t n) {
  if (!g || (n && (!from || !to))) return cudaErrorInvalidValue;
  for (size_t i = 0; i < n; i++) {
    struct ferry_gnode_obj *f = ferry_gnode_of(from[i]), *t = ferry_gnode_of(to[i]);
    if (!f || !t || f->graph != g || t->graph != g) return cudaErrorInvalidValue;
  }
  return ferry_edge_data_plain(edges, n, "cudaGraphAddDependencies / cudaGraphRemoveDependencies");
}

cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t *from,
                                     const cudaGraphNode_t *to, const cudaGraphEdgeData *edges,
                                     size_t n) {
  int rc = check_edges(ferry_graph_of(graph), from, to, edges, n);
  for (size_t i = 0; i < n && !rc; i++)
    rc = edge_add((struct ferry_gnode_obj *)from[i], (struct ferry_gnode_obj *)to[i]);
  return ferry_ret(rc);
}

cudaError_t cudaGraphRemoveDependencies(cudaGraph_t graph, const cudaGraphNode_t *from,
                                        const cudaGraphNode_t *to, const cudaGraphEdgeData *edges,
                                        size_t n) {
  int rc = check_edges(ferry_graph_of(graph), from, to, edges, n);
  for (size_t i = 0; i < n && !rc; i++)
    if (!has_dep((struct ferry_gnode_obj *)to[i], (struct ferry_gnode_obj *)from[i])) rc = cudaErrorInvalidValue;
  for (size_t i = 0; i < n && !rc; i++) {
    struct ferry_gnode_obj *t = (struct ferry_gnode_obj *)to[i];
    uint32_t k = 0;
    for (uint32_t j = 0; j < t->ndeps; j++)
      if (t->deps[j] != (struct ferry_gnode_obj *)from[i]) t->deps[k++] = t->deps[j];
    t->ndeps = k;
  }
  return ferry_ret(rc);
}

/* CUDA's listing convention: NULL out asks for the count; else up to *count
   are written and *count becomes how many there are if fewer */
static void list_out(cudaGraphNode_t *out, size_t *count, struct ferry_gnode_obj *n, size_t *k) {
  if (out && *k < *count) out[*k] = (cudaGraphNode_t)n;
  (*k)++;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count) {
  struct ferry_graph *g = ferry_graph_of(graph);
  if (!g || !count) return ferry_ret(cudaErrorInvalidValue);
  size_t k = 0;
  for (uint32_t i = 0; i < g->n; i++) list_out(nodes, count, g->nodes[i], &k);
  if (!nodes || k < *count) *count = k;
  return cudaSuccess;
}

cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count) {
  struct ferry_graph *g = ferry_graph_of(graph);
  if (!g || !count) return ferry_ret(cudaErrorInvalidValue);
  size_t k = 0;
  for (uint32_t i = 0; i < g->n; i++)
    if (!g->nodes[i]->ndeps) list_out(nodes, count, g->nodes[i], &k);
  if (!nodes || k < *count) *count = k;
  return cudaSuccess;
}

cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t *from, cudaGraphNode_t *to,
                              cudaGraphEdgeData *edges, size_t *count) {
  struct ferry_graph *g = ferry_graph_of(graph);
  if (!g || !count || (!from != !to) || (edges && !from)) return ferry_ret(cudaErrorInvalidValue);
  size_t k = 0;
  for (uint32_t i = 0; i < g->n; i++)
    for (uint32_t j = 0; j < g->nodes[i]->ndeps; j++, k++)
      if (from && k < *count) {
        from[k] = (cudaGraphNode_t)g->nodes[i]->deps[j];
        to[k] = (cudaGraphNode_t)g->nodes[i];
        if (edges) memset(&edges[k], 0, sizeof edges[k]);
      }
  if (!from || k < *count) *count = k;
  return cudaSuccess;
}

cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t *deps,
                                         cudaGraphEdgeData *edges, size_t *count) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || !count) return ferry_ret(cudaErrorInvalidValue);
  size_t k = 0;
  for (uint32_t i = 0; i < n->ndeps; i++) {
    if (edges && deps && k < *count) memset(&edges[k], 0, sizeof edges[k]);
    list_out(deps, count, n->deps[i], &k);
  }
  if (!deps || k < *count) *count = k;
  return cudaSuccess;
}

cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t *out,
                                           cudaGraphEdgeData *edges, size_t *count) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || !count) return ferry_ret(cudaErrorInvalidValue);
  size_t k = 0;
  for (uint32_t i = 0; i < n->graph->n; i++)
    if (has_dep(n->graph->nodes[i], n)) {
      if (edges && out && k < *count) memset(&edges[k], 0, sizeof edges[k]);
      list_out(out, count, n->graph->nodes[i], &k);
    }
  if (!out || k < *count) *count = k;
  return cudaSuccess;
}

/* ---- a dot file: one box per node, one arrow per dependency ---- */
static const char *type_name(enum cudaGraphNodeType t) {
  switch (t) {
  case cudaGraphNodeTypeKernel: return "kernel";
  case cudaGraphNodeTypeMemcpy: return "memcpy";
  case cudaGraphNodeTypeMemset: return "memset";
  case cudaGraphNodeTypeGraph: return "graph";
  case cudaGraphNodeTypeEmpty: return "empty";
  case cudaGraphNodeTypeWaitEvent: return "event wait";
  case cudaGraphNodeTypeEventRecord: return "event record";
  case cudaGraphNodeTypeHost: return "host";
  default: return "?";
  }
}

static void dot_graph(FILE *f, const struct ferry_graph *g, const char *prefix) {
  for (uint32_t i = 0; i < g->n; i++) {
    const struct ferry_gnode_obj *n = g->nodes[i];
    fprintf(f, "  \"%s%u\" [shape=box label=\"%u: %s\"];\n", prefix, i, i, type_name(n->op.type));
    for (uint32_t k = 0; k < n->ndeps; k++)
      fprintf(f, "  \"%s%u\" -> \"%s%u\";\n", prefix, n->deps[k]->index, prefix, i);
    if (n->op.type == cudaGraphNodeTypeGraph) {
      char sub[256];
      snprintf(sub, sizeof sub, "%s%u.", prefix, i);
      fprintf(f, "  subgraph \"cluster_%s\" {\n", sub);
      dot_graph(f, n->op.u.child.graph, sub);
      fprintf(f, "  }\n");
    }
  }
}

cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char *path, unsigned int flags) {
  (void)flags;
  struct ferry_graph *g = ferry_graph_of(graph);
  if (!g || !path) return ferry_ret(cudaErrorInvalidValue);
  FILE *f = fopen(path, "w");
  if (!f) return ferry_ret(cudaErrorOperatingSystem);
  fprintf(f, "digraph ferry_graph {\n");
  dot_graph(f, g, "");
  fprintf(f, "}\n");
  return ferry_ret(fclose(f) ? cudaErrorOperatingSystem : cudaSuccess);
}
