/*
 * Graph nodes with host work: copies with host memory on a side (pinned or
 * pageable) and host nodes. The remote GPU cannot reach this process's
 * memory or call its functions, so such nodes never go to the server: the
 * client plays their graph node by node (graph_unroll.c). Here, their
 * operations, checked when the node is made as the copy would be when it
 * runs, and the explicit API of host nodes.
 */
#include <cuda.h>
#include <string.h>

#include "common/log.h"
#include "shim/core/host.h"
#include "shim/runtime/graph.h"

/* p names device memory of a vGPU's arena (the copy path's device side) */
static int in_arena(const void *p) { return ferry_vgpu_of(p) != NULL; }

/* pinned host memory given as a device pointer (unified addressing): CUDA
   copies it as host memory, and so does ferry's copy path */
static int pinned_host(const void *p) { return !in_arena(p) && ferry_host_pinned(p); }

int ferry_graph_copy_is_host(const void *dst, const void *src, enum cudaMemcpyKind kind) {
  switch (kind) {
  case cudaMemcpyHostToHost:
  case cudaMemcpyHostToDevice:
  case cudaMemcpyDeviceToHost: return 1;
  case cudaMemcpyDeviceToDevice: return pinned_host(dst) || pinned_host(src);
  default: return !in_arena(dst) || !in_arena(src); /* cudaMemcpyDefault: the addresses tell */
  }
}

/* the n bytes at p, a copy's device side: inside one live allocation when
   p is in an arena (else a module variable, which the copy path checks
   when it runs); *v: its vGPU */
static int device_side(const void *p, uint64_t n, struct ferry_vgpu **v) {
  int err;
  if (!(*v = ferry_vgpu_of(p))) return (*v = ferry_current(&err)) ? 0 : err;
  if (ferry_dead(*v)) return cudaErrorDevicesUnavailable;
  pthread_mutex_lock(&(*v)->arena_lock);
  int ok = ferry_arena_covers(&(*v)->arena, (uint64_t)(uintptr_t)p, n);
  pthread_mutex_unlock(&(*v)->arena_lock);
  return ok ? 0 : cudaErrorInvalidValue;
}

int ferry_graph_host_copy_op(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                             size_t height, enum cudaMemcpyKind kind, struct ferry_gop *op) {
  memset(op, 0, sizeof *op);
  op->type = cudaGraphNodeTypeMemcpy;
  op->vgpu = -1;
  if (height == 0) height = 1;
  if (!dst || !src || !width || (unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidValue;
  if (height > 1 && (width > dpitch || width > spitch)) return cudaErrorInvalidPitchValue;
  if (height == 1) dpitch = spitch = width; /* one row: its pitch plays no part */
  /* which sides are the device's: the kind, or (default) the addresses */
  int ddev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice ||
             (kind == cudaMemcpyDefault && in_arena(dst));
  int sdev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice ||
             (kind == cudaMemcpyDefault && in_arena(src));
  if (ddev && pinned_host(dst)) ddev = 0;
  if (sdev && pinned_host(src)) sdev = 0;
  struct ferry_vgpu *dv = NULL, *sv = NULL;
  int rc = 0;
  if (ddev) rc = device_side(dst, (uint64_t)dpitch * (height - 1) + width, &dv);
  if (!rc && sdev) rc = device_side(src, (uint64_t)spitch * (height - 1) + width, &sv);
  if (rc) return rc;
  if (dv && sv && dv != sv) {
    ferry_log("a graph's copy between two devices with host memory is not supported by ferry");
    return cudaErrorNotSupported;
  }
  op->vgpu = dv ? dv->index : sv ? sv->index : -1;
  op->u.memcpy.dst = (uint64_t)(uintptr_t)dst;
  op->u.memcpy.src = (uint64_t)(uintptr_t)src;
  op->u.memcpy.dpitch = dpitch;
  op->u.memcpy.spitch = spitch;
  op->u.memcpy.width = width;
  op->u.memcpy.height = height;
  op->u.memcpy.kind = kind;
  op->u.memcpy.host = (ddev ? 0 : FERRY_COPY_HOST_DST) | (sdev ? 0 : FERRY_COPY_HOST_SRC);
  return op->u.memcpy.host ? 0 : cudaErrorInvalidValue; /* two device pointers: not a host copy */
}

int ferry_graph_host_op(cudaHostFn_t fn, void *user, struct ferry_gop *op) {
  memset(op, 0, sizeof *op);
  op->type = cudaGraphNodeTypeHost;
  op->vgpu = -1; /* it runs in this process, whichever device the graph's work is on */
  op->u.host.fn = fn;
  op->u.host.user = user;
  return fn ? 0 : cudaErrorInvalidValue;
}

/* ---- host nodes ---- */
cudaError_t cudaGraphAddHostNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                 size_t n, const struct cudaHostNodeParams *p) {
  struct ferry_graph *g = ferry_graph_of(graph);
  if (!out || !g || !p || (n && !deps)) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_gop op;
  int rc = ferry_graph_host_op(p->fn, p->userData, &op);
  struct ferry_gnode_obj *node;
  if (!rc) rc = ferry_graph_add(g, &op, (struct ferry_gnode_obj *const *)deps, n, &node);
  if (!rc) *out = (cudaGraphNode_t)node;
  return ferry_ret(rc);
}

cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node, struct cudaHostNodeParams *p) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || !p || n->op.type != cudaGraphNodeTypeHost) return ferry_ret(cudaErrorInvalidValue);
  p->fn = n->op.u.host.fn;
  p->userData = n->op.u.host.user;
  return cudaSuccess;
}

cudaError_t cudaGraphHostNodeSetParams(cudaGraphNode_t node, const struct cudaHostNodeParams *p) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n || !p || n->op.type != cudaGraphNodeTypeHost) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_gop op;
  int rc = ferry_graph_host_op(p->fn, p->userData, &op);
  return ferry_ret(rc ? rc : ferry_gnode_replace(n, &op));
}

cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                           const struct cudaHostNodeParams *p) {
  if (!p) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_gop op;
  int rc = ferry_graph_host_op(p->fn, p->userData, &op);
  return ferry_ret(rc ? rc : ferry_gexec_set(exec, node, &op));
}
