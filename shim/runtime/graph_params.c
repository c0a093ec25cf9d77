/*
 * The generic node API (cudaGraphAddNode, cudaGraphNodeSetParams,
 * cudaGraphExecNodeSetParams: one struct for every node type) over the
 * per-type builders of graph.c. The types ferry's graphs hold are served;
 * the others are refused in one line.
 */
#include <cuda.h>
#include <string.h>

#include "common/log.h"
#include "shim/runtime/graph.h"

/* the operation p describes (op released on error) */
static int params_op(const struct cudaGraphNodeParams *p, const char *call, struct ferry_gop *op) {
  memset(op, 0, sizeof *op);
  if (!p) return cudaErrorInvalidValue;
  switch (p->type) {
  case cudaGraphNodeTypeKernel: {
    struct cudaKernelNodeParams k = {p->kernel.func, p->kernel.gridDim, p->kernel.blockDim,
                                     p->kernel.sharedMemBytes, p->kernel.kernelParams, p->kernel.extra};
    return ferry_graph_kernel_op(&k, op);
  }
  case cudaGraphNodeTypeMemset: {
    struct cudaMemsetParams m = {p->memset.dst, p->memset.pitch, p->memset.value,
                                 p->memset.elementSize, p->memset.width, p->memset.height};
    return ferry_graph_memset_op(&m, op);
  }
  case cudaGraphNodeTypeMemcpy:
    if (p->memcpy.flags) return cudaErrorInvalidValue;
    return ferry_graph_memcpy_op(&p->memcpy.copyParams, op);
  case cudaGraphNodeTypeEmpty:
    op->type = cudaGraphNodeTypeEmpty;
    op->vgpu = -1;
    return 0;
  case cudaGraphNodeTypeEventRecord:
    return ferry_graph_event_op(p->eventRecord.event, cudaGraphNodeTypeEventRecord, op);
  case cudaGraphNodeTypeWaitEvent:
    return ferry_graph_event_op(p->eventWait.event, cudaGraphNodeTypeWaitEvent, op);
  case cudaGraphNodeTypeHost:
    return ferry_graph_host_op(p->host.fn, p->host.userData, op);
  case cudaGraphNodeTypeGraph:
    if (p->graph.ownership != cudaGraphChildGraphOwnershipClone) {
      ferry_log("%s: a child graph moved into its node is not supported by ferry (cloned is)", call);
      return cudaErrorNotSupported;
    }
    return ferry_graph_child_op(p->graph.graph, op);
  default:
    ferry_log("%s with a node of type %d is not supported by ferry", call, (int)p->type);
    return cudaErrorNotSupported;
  }
}

cudaError_t cudaGraphAddNode(cudaGraphNode_t *out, cudaGraph_t graph, const cudaGraphNode_t *deps,
                             const cudaGraphEdgeData *edges, size_t n, struct cudaGraphNodeParams *p) {
  struct ferry_graph *g = ferry_graph_of(graph);
  if (!out || !g || (n && !deps)) return ferry_ret(cudaErrorInvalidValue);
  int rc = ferry_edge_data_plain(edges, n, "cudaGraphAddNode");
  if (rc) return ferry_ret(rc);
  if (p && p->type == cudaGraphNodeTypeGraph && p->graph.graph == graph) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_gop op;
  rc = params_op(p, "cudaGraphAddNode", &op);
  struct ferry_gnode_obj *node;
  if (!rc) rc = ferry_graph_add(g, &op, (struct ferry_gnode_obj *const *)deps, n, &node);
  if (!rc) *out = (cudaGraphNode_t)node;
  return ferry_ret(rc);
}

cudaError_t cudaGraphNodeSetParams(cudaGraphNode_t node, struct cudaGraphNodeParams *p) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_gop op;
  int rc = params_op(p, "cudaGraphNodeSetParams", &op);
  return ferry_ret(rc ? rc : ferry_gnode_replace(n, &op));
}

cudaError_t cudaGraphExecNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                       struct cudaGraphNodeParams *p) {
  struct ferry_gop op;
  int rc = params_op(p, "cudaGraphExecNodeSetParams", &op);
  return ferry_ret(rc ? rc : ferry_gexec_set(exec, node, &op));
}
