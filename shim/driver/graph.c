/*
 * Driver API: stream capture and CUDA graphs (issue 21), over the runtime
 * front end's (capture.c, graph.c, graph_exec.c, graph_host.c). CUgraph, CUgraphNode and
 * CUgraphExec are the runtime's objects; a kernel node is built by running
 * cuLaunchKernel with the runtime's sink set, so it resolves and packs the
 * function as a launch does. NVIDIA's runtime, loaded beside ferry's
 * libcuda.so.1, captures and launches graphs through these calls.
 */
#include <string.h>

#include "common/log.h"

#include "shim/driver/cu.h"
#include "shim/runtime/graph.h"

#define S(s) ((cudaStream_t)(s))
#define G(g) ((cudaGraph_t)(g))
#define N(n) ((cudaGraphNode_t)(n))
#define X(x) ((cudaGraphExec_t)(x))

/* ---- stream capture ---- */
CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  return READY_THEN(cudaStreamBeginCapture(S(s), (enum cudaStreamCaptureMode)mode));
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  return READY_THEN(cudaStreamBeginCapture_ptsz(S(s), (enum cudaStreamCaptureMode)mode));
}
/* the first version captured in global mode */
#undef cuStreamBeginCapture
CUresult cuStreamBeginCapture(CUstream s) {
  return READY_THEN(cudaStreamBeginCapture(S(s), cudaStreamCaptureModeGlobal));
}
CUresult cuStreamBeginCapture_ptsz(CUstream s) {
  return READY_THEN(cudaStreamBeginCapture_ptsz(S(s), cudaStreamCaptureModeGlobal));
}
#undef cuStreamBeginCaptureToGraph
CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                     const CUgraphEdgeData *edges, size_t n, CUstreamCaptureMode mode) {
  return READY_THEN(cudaStreamBeginCaptureToGraph(S(s), G(g), (const cudaGraphNode_t *)deps,
                                                  (const cudaGraphEdgeData *)edges, n,
                                                  (enum cudaStreamCaptureMode)mode));
}
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *deps,
                                          const CUgraphEdgeData *edges, size_t n,
                                          CUstreamCaptureMode mode) {
  return READY_THEN(cudaStreamBeginCaptureToGraph_ptsz(S(s), G(g), (const cudaGraphNode_t *)deps,
                                                       (const cudaGraphEdgeData *)edges, n,
                                                       (enum cudaStreamCaptureMode)mode));
}
#undef cuStreamEndCapture
CUresult cuStreamEndCapture(CUstream s, CUgraph *g) {
  return READY_THEN(cudaStreamEndCapture(S(s), (cudaGraph_t *)g));
}
CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g) {
  return READY_THEN(cudaStreamEndCapture_ptsz(S(s), (cudaGraph_t *)g));
}

#undef cuStreamIsCapturing
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status) {
  return READY_THEN(cudaStreamIsCapturing(S(s), (enum cudaStreamCaptureStatus *)status));
}
CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status) {
  return READY_THEN(cudaStreamIsCapturing_ptsz(S(s), (enum cudaStreamCaptureStatus *)status));
}

static CUresult capture_info(CUstream s, int per_thread, CUstreamCaptureStatus *st, cuuint64_t *id,
                             CUgraph *g, const CUgraphNode **deps, const CUgraphEdgeData **edges,
                             size_t *n) {
  unsigned long long cid = 0;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  enum cudaStreamCaptureStatus rst;
  cudaError_t (*info)(cudaStream_t, enum cudaStreamCaptureStatus *, unsigned long long *,
                      cudaGraph_t *, const cudaGraphNode_t **, const cudaGraphEdgeData **,
                      size_t *) = per_thread ? cudaStreamGetCaptureInfo_ptsz : cudaStreamGetCaptureInfo;
  rc = FERRY_CU_RT(info(S(s), st ? &rst : NULL, &cid, (cudaGraph_t *)g, (const cudaGraphNode_t **)deps,
                        (const cudaGraphEdgeData **)edges, n));
  if (!rc) {
    *st = (CUstreamCaptureStatus)rst;
    if (id) *id = cid;
  }
  return rc;
}
#undef cuStreamGetCaptureInfo
CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id) {
  return capture_info(s, 0, st, id, NULL, NULL, NULL, NULL);
}
CUresult cuStreamGetCaptureInfo_ptsz(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id) {
  return capture_info(s, 1, st, id, NULL, NULL, NULL, NULL);
}
CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                   const CUgraphNode **deps, size_t *n) {
  return capture_info(s, 0, st, id, g, deps, NULL, n);
}
CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id,
                                        CUgraph *g, const CUgraphNode **deps, size_t *n) {
  return capture_info(s, 1, st, id, g, deps, NULL, n);
}
CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                   const CUgraphNode **deps, const CUgraphEdgeData **e, size_t *n) {
  return capture_info(s, 0, st, id, g, deps, e, n);
}
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id,
                                        CUgraph *g, const CUgraphNode **deps,
                                        const CUgraphEdgeData **e, size_t *n) {
  return capture_info(s, 1, st, id, g, deps, e, n);
}

#undef cuStreamUpdateCaptureDependencies
CUresult cuStreamUpdateCaptureDependencies(CUstream s, CUgraphNode *deps, size_t n, unsigned int flags) {
  return READY_THEN(cudaStreamUpdateCaptureDependencies(S(s), (cudaGraphNode_t *)deps, NULL, n, flags));
}
CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream s, CUgraphNode *deps, size_t n,
                                                unsigned int flags) {
  return READY_THEN(cudaStreamUpdateCaptureDependencies_ptsz(S(s), (cudaGraphNode_t *)deps, NULL, n, flags));
}
CUresult cuStreamUpdateCaptureDependencies_v2(CUstream s, CUgraphNode *deps, const CUgraphEdgeData *e,
                                              size_t n, unsigned int flags) {
  return READY_THEN(cudaStreamUpdateCaptureDependencies(S(s), (cudaGraphNode_t *)deps,
                                                        (const cudaGraphEdgeData *)e, n, flags));
}
CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream s, CUgraphNode *deps,
                                                   const CUgraphEdgeData *e, size_t n,
                                                   unsigned int flags) {
  return READY_THEN(cudaStreamUpdateCaptureDependencies_ptsz(S(s), (cudaGraphNode_t *)deps,
                                                             (const cudaGraphEdgeData *)e, n, flags));
}

/* the thread's mode needs no connection */
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  return FERRY_CU_RT(cudaThreadExchangeStreamCaptureMode((enum cudaStreamCaptureMode *)mode));
}

/* ---- graphs and nodes ---- */
CUresult cuGraphCreate(CUgraph *g, unsigned int flags) {
  return FERRY_CU_RT(cudaGraphCreate((cudaGraph_t *)g, flags));
}
CUresult cuGraphDestroy(CUgraph g) { return FERRY_CU_RT(cudaGraphDestroy(G(g))); }
CUresult cuGraphClone(CUgraph *out, CUgraph g) { return FERRY_CU_RT(cudaGraphClone((cudaGraph_t *)out, G(g))); }
CUresult cuGraphNodeFindInClone(CUgraphNode *out, CUgraphNode n, CUgraph clone) {
  return FERRY_CU_RT(cudaGraphNodeFindInClone((cudaGraphNode_t *)out, N(n), G(clone)));
}
CUresult cuGraphDestroyNode(CUgraphNode n) { return FERRY_CU_RT(cudaGraphDestroyNode(N(n))); }
CUresult cuGraphNodeGetType(CUgraphNode n, CUgraphNodeType *type) {
  return FERRY_CU_RT(cudaGraphNodeGetType(N(n), (enum cudaGraphNodeType *)type));
}

static CUresult add(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n, int rc,
                    struct ferry_gop *op) {
  struct ferry_graph *graph = ferry_graph_of(g);
  if (!rc && (!out || !graph || (n && !deps))) {
    ferry_gop_release(op);
    rc = cudaErrorInvalidValue;
  }
  if (!rc) rc = ferry_graph_add(graph, op, (struct ferry_gnode_obj *const *)deps, n,
                                (struct ferry_gnode_obj **)out);
  return ferry_cu_result(rc);
}

/* a kernel node's operation: the launch it stands for, described */
static int kernel_op(const CUDA_KERNEL_NODE_PARAMS *p, struct ferry_gop *op) {
  if (!p) return cudaErrorInvalidValue;
  CUfunction f = p->func ? p->func : (CUfunction)p->kern;
  memset(op, 0, sizeof *op);
  struct ferry_sink sink = {"cuGraphAddKernelNode", op, 0};
  ferry_sink_set(&sink);
  CUresult rc = cuLaunchKernel(f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
                               p->blockDimZ, p->sharedMemBytes, NULL, p->kernelParams, p->extra);
  ferry_sink_set(NULL);
  if (rc) return (int)rc; /* ferry_cu_result passes a driver code on as it is */
  if (!sink.filled) return cudaErrorInvalidValue;
  op->u.kernel.fn = f;
  op->u.kernel.by_kernel = p->kern != NULL;
  return 0;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                                 const CUDA_KERNEL_NODE_PARAMS *p) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_gop op;
  return add(out, g, deps, n, kernel_op(p, &op), &op);
}
/* the first version's parameters lack the last two fields */
#undef cuGraphAddKernelNode
CUresult cuGraphAddKernelNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS p2 = {0};
  memcpy(&p2, p, sizeof *p);
  return cuGraphAddKernelNode_v2(out, g, deps, n, &p2);
}

CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p) {
  struct cudaKernelNodeParams rp;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = FERRY_CU_RT(cudaGraphKernelNodeGetParams(N(node), &rp));
  if (rc) return rc;
  /* a node made from a CUkernel gives it back too (a CUkernel is its CUfunction in ferry) */
  int by_kernel = ferry_gnode_of(node)->op.u.kernel.by_kernel;
  *p = (CUDA_KERNEL_NODE_PARAMS){(CUfunction)rp.func, rp.gridDim.x, rp.gridDim.y, rp.gridDim.z,
                                 rp.blockDim.x, rp.blockDim.y, rp.blockDim.z, rp.sharedMemBytes,
                                 rp.kernelParams, NULL, by_kernel ? (CUkernel)rp.func : NULL, NULL};
  return CUDA_SUCCESS;
}
#undef cuGraphKernelNodeGetParams
CUresult cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  CUDA_KERNEL_NODE_PARAMS p2;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = cuGraphKernelNodeGetParams_v2(node, &p2);
  if (!rc) memcpy(p, &p2, sizeof *p);
  return rc;
}

CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  struct ferry_gop op;
  int rc = kernel_op(p, &op);
  return ferry_cu_result(rc ? rc : ferry_gnode_replace(n, &op));
}
#undef cuGraphKernelNodeSetParams
CUresult cuGraphKernelNodeSetParams(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS p2 = {0};
  memcpy(&p2, p, sizeof *p);
  return cuGraphKernelNodeSetParams_v2(node, &p2);
}

static struct cudaMemsetParams memset_params(const CUDA_MEMSET_NODE_PARAMS *p) {
  return (struct cudaMemsetParams){(void *)(uintptr_t)p->dst, p->pitch, p->value, p->elementSize,
                                   p->width, p->height};
}
CUresult cuGraphAddMemsetNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                              const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx) {
  (void)ctx; /* the address names its device */
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  struct cudaMemsetParams rp = memset_params(p);
  struct ferry_gop op;
  return add(out, g, deps, n, ferry_graph_memset_op(&rp, &op), &op);
}
CUresult cuGraphMemsetNodeGetParams(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS *p) {
  struct cudaMemsetParams rp;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = FERRY_CU_RT(cudaGraphMemsetNodeGetParams(N(node), &rp));
  if (!rc)
    *p = (CUDA_MEMSET_NODE_PARAMS){(CUdeviceptr)(uintptr_t)rp.dst, rp.pitch, rp.value, rp.elementSize,
                                   rp.width, rp.height};
  return rc;
}
CUresult cuGraphMemsetNodeSetParams(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  struct cudaMemsetParams rp = memset_params(p);
  return FERRY_CU_RT(cudaGraphMemsetNodeSetParams(N(node), &rp));
}

/* a copy node's side: its address, and whether it is host memory (host
   memory or a unified address that names no device memory); arrays are
   refused */
static int copy_side(CUmemorytype type, const void *host, CUdeviceptr dev, void **p, int *on_host) {
  switch (type) {
  case CU_MEMORYTYPE_HOST: *p = (void *)host, *on_host = 1; return 0;
  case CU_MEMORYTYPE_DEVICE: *p = (void *)(uintptr_t)dev, *on_host = 0; return 0;
  case CU_MEMORYTYPE_UNIFIED: *p = (void *)(uintptr_t)dev, *on_host = !ferry_vgpu_of(*p); return 0;
  case CU_MEMORYTYPE_ARRAY:
    ferry_cu_unsupported("cuGraphAddMemcpyNode with a CUDA array");
    return cudaErrorNotSupported;
  default: return cudaErrorInvalidValue;
  }
}

/* between pointers: of one device (sent with the graph), or with host
   memory on a side (the client plays it, shim/runtime/graph_unroll.c) */
static int copy_params(const CUDA_MEMCPY3D *c, struct cudaMemcpy3DParms *p) {
  if (!c) return cudaErrorInvalidValue;
  void *src, *dst;
  int shost, dhost;
  int rc = copy_side(c->srcMemoryType, c->srcHost, c->srcDevice, &src, &shost);
  if (!rc) rc = copy_side(c->dstMemoryType, c->dstHost, c->dstDevice, &dst, &dhost);
  if (rc) return rc;
  memset(p, 0, sizeof *p);
  p->srcPtr = (struct cudaPitchedPtr){src, c->srcPitch, c->WidthInBytes, c->srcHeight};
  p->dstPtr = (struct cudaPitchedPtr){dst, c->dstPitch, c->WidthInBytes, c->dstHeight};
  p->srcPos = (struct cudaPos){c->srcXInBytes, c->srcY, c->srcZ};
  p->dstPos = (struct cudaPos){c->dstXInBytes, c->dstY, c->dstZ};
  p->extent = (struct cudaExtent){c->WidthInBytes, c->Height ? c->Height : 1, c->Depth ? c->Depth : 1};
  p->kind = shost ? (dhost ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice)
                  : (dhost ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice);
  return 0;
}
CUresult cuGraphAddMemcpyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                              const CUDA_MEMCPY3D *c, CUcontext ctx) {
  (void)ctx;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct cudaMemcpy3DParms p;
  struct ferry_gop op;
  int err = copy_params(c, &p);
  if (err) return ferry_cu_result(err);
  return add(out, g, deps, n, ferry_graph_memcpy_op(&p, &op), &op);
}
CUresult cuGraphMemcpyNodeGetParams(CUgraphNode node, CUDA_MEMCPY3D *c) {
  struct cudaMemcpy3DParms p;
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = FERRY_CU_RT(cudaGraphMemcpyNodeGetParams(N(node), &p));
  if (rc) return rc;
  unsigned host = ferry_gnode_of(node)->op.u.memcpy.host;
  memset(c, 0, sizeof *c);
  c->srcMemoryType = host & FERRY_COPY_HOST_SRC ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  c->dstMemoryType = host & FERRY_COPY_HOST_DST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  if (host & FERRY_COPY_HOST_SRC) c->srcHost = p.srcPtr.ptr;
  else c->srcDevice = (CUdeviceptr)(uintptr_t)p.srcPtr.ptr;
  c->srcPitch = p.srcPtr.pitch;
  c->srcHeight = p.srcPtr.ysize;
  if (host & FERRY_COPY_HOST_DST) c->dstHost = p.dstPtr.ptr;
  else c->dstDevice = (CUdeviceptr)(uintptr_t)p.dstPtr.ptr;
  c->dstPitch = p.dstPtr.pitch;
  c->dstHeight = p.dstPtr.ysize;
  c->WidthInBytes = p.extent.width;
  c->Height = p.extent.height;
  c->Depth = 1;
  return CUDA_SUCCESS;
}
CUresult cuGraphMemcpyNodeSetParams(CUgraphNode node, const CUDA_MEMCPY3D *c) {
  struct cudaMemcpy3DParms p;
  int err = copy_params(c, &p);
  return err ? ferry_cu_result(err) : FERRY_CU_RT(cudaGraphMemcpyNodeSetParams(N(node), &p));
}

/* host nodes: the runtime's (one layout) */
_Static_assert(sizeof(CUDA_HOST_NODE_PARAMS) == sizeof(struct cudaHostNodeParams), "host node parameters");
CUresult cuGraphAddHostNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                            const CUDA_HOST_NODE_PARAMS *p) {
  return FERRY_CU_RT(cudaGraphAddHostNode((cudaGraphNode_t *)out, G(g), (const cudaGraphNode_t *)deps, n,
                                          (const struct cudaHostNodeParams *)p));
}
CUresult cuGraphHostNodeGetParams(CUgraphNode node, CUDA_HOST_NODE_PARAMS *p) {
  return FERRY_CU_RT(cudaGraphHostNodeGetParams(N(node), (struct cudaHostNodeParams *)p));
}
CUresult cuGraphHostNodeSetParams(CUgraphNode node, const CUDA_HOST_NODE_PARAMS *p) {
  return FERRY_CU_RT(cudaGraphHostNodeSetParams(N(node), (const struct cudaHostNodeParams *)p));
}
CUresult cuGraphExecHostNodeSetParams(CUgraphExec x, CUgraphNode node, const CUDA_HOST_NODE_PARAMS *p) {
  return FERRY_CU_RT(cudaGraphExecHostNodeSetParams(X(x), N(node), (const struct cudaHostNodeParams *)p));
}

CUresult cuGraphAddEmptyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n) {
  return FERRY_CU_RT(cudaGraphAddEmptyNode((cudaGraphNode_t *)out, G(g), (const cudaGraphNode_t *)deps, n));
}
CUresult cuGraphAddEventRecordNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                                   CUevent e) {
  return READY_THEN(cudaGraphAddEventRecordNode((cudaGraphNode_t *)out, G(g),
                                                (const cudaGraphNode_t *)deps, n, (cudaEvent_t)e));
}
CUresult cuGraphAddEventWaitNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                                 CUevent e) {
  return READY_THEN(cudaGraphAddEventWaitNode((cudaGraphNode_t *)out, G(g),
                                              (const cudaGraphNode_t *)deps, n, (cudaEvent_t)e));
}
CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode n, CUevent *e) {
  return FERRY_CU_RT(cudaGraphEventRecordNodeGetEvent(N(n), (cudaEvent_t *)e));
}
CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode n, CUevent *e) {
  return FERRY_CU_RT(cudaGraphEventWaitNodeGetEvent(N(n), (cudaEvent_t *)e));
}
CUresult cuGraphAddChildGraphNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                                  CUgraph child) {
  return FERRY_CU_RT(cudaGraphAddChildGraphNode((cudaGraphNode_t *)out, G(g),
                                                (const cudaGraphNode_t *)deps, n, G(child)));
}
CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode n, CUgraph *out) {
  return FERRY_CU_RT(cudaGraphChildGraphNodeGetGraph(N(n), (cudaGraph_t *)out));
}

/* ---- structure ---- */
CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n) {
  return FERRY_CU_RT(cudaGraphGetNodes(G(g), (cudaGraphNode_t *)nodes, n));
}
CUresult cuGraphGetRootNodes(CUgraph g, CUgraphNode *nodes, size_t *n) {
  return FERRY_CU_RT(cudaGraphGetRootNodes(G(g), (cudaGraphNode_t *)nodes, n));
}
CUresult cuGraphGetEdges_v2(CUgraph g, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *e, size_t *n) {
  return FERRY_CU_RT(cudaGraphGetEdges(G(g), (cudaGraphNode_t *)from, (cudaGraphNode_t *)to,
                                       (cudaGraphEdgeData *)e, n));
}
#undef cuGraphGetEdges
CUresult cuGraphGetEdges(CUgraph g, CUgraphNode *from, CUgraphNode *to, size_t *n) {
  return cuGraphGetEdges_v2(g, from, to, NULL, n);
}
CUresult cuGraphNodeGetDependencies_v2(CUgraphNode node, CUgraphNode *deps, CUgraphEdgeData *e, size_t *n) {
  return FERRY_CU_RT(cudaGraphNodeGetDependencies(N(node), (cudaGraphNode_t *)deps, (cudaGraphEdgeData *)e, n));
}
#undef cuGraphNodeGetDependencies
CUresult cuGraphNodeGetDependencies(CUgraphNode node, CUgraphNode *deps, size_t *n) {
  return cuGraphNodeGetDependencies_v2(node, deps, NULL, n);
}
CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode node, CUgraphNode *out, CUgraphEdgeData *e, size_t *n) {
  return FERRY_CU_RT(cudaGraphNodeGetDependentNodes(N(node), (cudaGraphNode_t *)out, (cudaGraphEdgeData *)e, n));
}
#undef cuGraphNodeGetDependentNodes
CUresult cuGraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode *out, size_t *n) {
  return cuGraphNodeGetDependentNodes_v2(node, out, NULL, n);
}
CUresult cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                                   const CUgraphEdgeData *e, size_t n) {
  return FERRY_CU_RT(cudaGraphAddDependencies(G(g), (const cudaGraphNode_t *)from,
                                              (const cudaGraphNode_t *)to, (const cudaGraphEdgeData *)e, n));
}
#undef cuGraphAddDependencies
CUresult cuGraphAddDependencies(CUgraph g, const CUgraphNode *from, const CUgraphNode *to, size_t n) {
  return cuGraphAddDependencies_v2(g, from, to, NULL, n);
}
CUresult cuGraphRemoveDependencies_v2(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                                      const CUgraphEdgeData *e, size_t n) {
  return FERRY_CU_RT(cudaGraphRemoveDependencies(G(g), (const cudaGraphNode_t *)from,
                                                 (const cudaGraphNode_t *)to,
                                                 (const cudaGraphEdgeData *)e, n));
}
#undef cuGraphRemoveDependencies
CUresult cuGraphRemoveDependencies(CUgraph g, const CUgraphNode *from, const CUgraphNode *to, size_t n) {
  return cuGraphRemoveDependencies_v2(g, from, to, NULL, n);
}
CUresult cuGraphDebugDotPrint(CUgraph g, const char *path, unsigned int flags) {
  return FERRY_CU_RT(cudaGraphDebugDotPrint(G(g), path, flags));
}

/* ---- executable graphs ---- */
#undef cuGraphInstantiate
CUresult cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g, unsigned long long flags) {
  return READY_THEN(cudaGraphInstantiateWithFlags((cudaGraphExec_t *)out, G(g), flags));
}
/* the first form: an error node and a log, which ferry leaves empty */
CUresult cuGraphInstantiate_v2(CUgraphExec *out, CUgraph g, CUgraphNode *err_node, char *log, size_t n) {
  if (err_node) *err_node = NULL;
  if (log && n) log[0] = 0;
  return cuGraphInstantiateWithFlags(out, g, 0);
}
CUresult cuGraphInstantiate(CUgraphExec *out, CUgraph g, CUgraphNode *err_node, char *log, size_t n) {
  return cuGraphInstantiate_v2(out, g, err_node, log, n);
}
static CUresult instantiate_params(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p,
                                   int per_thread) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  cudaGraphInstantiateParams rp = {p->flags, S(p->hUploadStream), NULL, cudaGraphInstantiateSuccess};
  CUresult rc = per_thread ? READY_THEN(cudaGraphInstantiateWithParams_ptsz((cudaGraphExec_t *)out, G(g), &rp))
                           : READY_THEN(cudaGraphInstantiateWithParams((cudaGraphExec_t *)out, G(g), &rp));
  p->hErrNode_out = (CUgraphNode)rp.errNode_out;
  p->result_out = (CUgraphInstantiateResult)rp.result_out;
  return rc;
}
#undef cuGraphInstantiateWithParams
CUresult cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  return instantiate_params(out, g, p, 0);
}
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  return instantiate_params(out, g, p, 1);
}
CUresult cuGraphExecGetFlags(CUgraphExec x, cuuint64_t *flags) {
  unsigned long long f;
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = FERRY_CU_RT(cudaGraphExecGetFlags(X(x), &f));
  if (!rc) *flags = f;
  return rc;
}
#undef cuGraphLaunch
#undef cuGraphUpload
CUresult cuGraphLaunch(CUgraphExec x, CUstream s) { return READY_THEN(cudaGraphLaunch(X(x), S(s))); }
CUresult cuGraphLaunch_ptsz(CUgraphExec x, CUstream s) { return READY_THEN(cudaGraphLaunch_ptsz(X(x), S(s))); }
CUresult cuGraphUpload(CUgraphExec x, CUstream s) { return READY_THEN(cudaGraphUpload(X(x), S(s))); }
CUresult cuGraphUpload_ptsz(CUgraphExec x, CUstream s) { return READY_THEN(cudaGraphUpload_ptsz(X(x), S(s))); }
CUresult cuGraphExecDestroy(CUgraphExec x) { return READY_THEN(cudaGraphExecDestroy(X(x))); }

#undef cuGraphExecUpdate
CUresult cuGraphExecUpdate_v2(CUgraphExec x, CUgraph g, CUgraphExecUpdateResultInfo *info) {
  _Static_assert(sizeof(CUgraphExecUpdateResultInfo) == sizeof(cudaGraphExecUpdateResultInfo),
                 "update result info");
  return READY_THEN(cudaGraphExecUpdate(X(x), G(g), (cudaGraphExecUpdateResultInfo *)info));
}
/* the first form: the error node and the result apart */
CUresult cuGraphExecUpdate(CUgraphExec x, CUgraph g, CUgraphNode *err_node, CUgraphExecUpdateResult *result) {
  CUgraphExecUpdateResultInfo info;
  CUresult rc = cuGraphExecUpdate_v2(x, g, &info);
  if (err_node) *err_node = info.errorNode;
  if (result) *result = info.result;
  return rc;
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec x, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_gop op;
  int err = kernel_op(p, &op);
  return ferry_cu_result(err ? err : ferry_gexec_set(X(x), node, &op));
}
#undef cuGraphExecKernelNodeSetParams
CUresult cuGraphExecKernelNodeSetParams(CUgraphExec x, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS p2 = {0};
  memcpy(&p2, p, sizeof *p);
  return cuGraphExecKernelNodeSetParams_v2(x, node, &p2);
}
CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec x, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p,
                                        CUcontext ctx) {
  (void)ctx;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  struct cudaMemsetParams rp = memset_params(p);
  return READY_THEN(cudaGraphExecMemsetNodeSetParams(X(x), N(node), &rp));
}
CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec x, CUgraphNode node, const CUDA_MEMCPY3D *c,
                                        CUcontext ctx) {
  (void)ctx;
  struct cudaMemcpy3DParms p;
  int err = copy_params(c, &p);
  return err ? ferry_cu_result(err) : READY_THEN(cudaGraphExecMemcpyNodeSetParams(X(x), N(node), &p));
}
CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec x, CUgraphNode node, CUevent e) {
  return READY_THEN(cudaGraphExecEventRecordNodeSetEvent(X(x), N(node), (cudaEvent_t)e));
}
CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec x, CUgraphNode node, CUevent e) {
  return READY_THEN(cudaGraphExecEventWaitNodeSetEvent(X(x), N(node), (cudaEvent_t)e));
}
CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec x, CUgraphNode node, CUgraph child) {
  return READY_THEN(cudaGraphExecChildGraphNodeSetParams(X(x), N(node), G(child)));
}
CUresult cuGraphNodeSetEnabled(CUgraphExec x, CUgraphNode node, unsigned int enabled) {
  return READY_THEN(cudaGraphNodeSetEnabled(X(x), N(node), enabled));
}
CUresult cuGraphNodeGetEnabled(CUgraphExec x, CUgraphNode node, unsigned int *enabled) {
  return FERRY_CU_RT(cudaGraphNodeGetEnabled(X(x), N(node), enabled));
}

/* ---- the generic node API: one struct for every type ---- */
static int params_op(const CUgraphNodeParams *p, const char *call, struct ferry_gop *op) {
  memset(op, 0, sizeof *op);
  if (!p) return cudaErrorInvalidValue;
  switch (p->type) {
  case CU_GRAPH_NODE_TYPE_KERNEL: {
    CUDA_KERNEL_NODE_PARAMS k;
    _Static_assert(sizeof k == sizeof p->kernel, "kernel node parameters v2 and v3");
    memcpy(&k, &p->kernel, sizeof k);
    return kernel_op(&k, op);
  }
  case CU_GRAPH_NODE_TYPE_MEMSET: {
    struct cudaMemsetParams m = {(void *)(uintptr_t)p->memset.dst, p->memset.pitch, p->memset.value,
                                 p->memset.elementSize, p->memset.width, p->memset.height};
    return ferry_graph_memset_op(&m, op);
  }
  case CU_GRAPH_NODE_TYPE_MEMCPY: {
    struct cudaMemcpy3DParms c;
    int rc = p->memcpy.flags ? cudaErrorInvalidValue : copy_params(&p->memcpy.copyParams, &c);
    return rc ? rc : ferry_graph_memcpy_op(&c, op);
  }
  case CU_GRAPH_NODE_TYPE_EMPTY:
    op->type = cudaGraphNodeTypeEmpty;
    op->vgpu = -1;
    return 0;
  case CU_GRAPH_NODE_TYPE_HOST:
    return ferry_graph_host_op(p->host.fn, p->host.userData, op);
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    return ferry_graph_event_op((cudaEvent_t)p->eventRecord.event, cudaGraphNodeTypeEventRecord, op);
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    return ferry_graph_event_op((cudaEvent_t)p->eventWait.event, cudaGraphNodeTypeWaitEvent, op);
  case CU_GRAPH_NODE_TYPE_GRAPH:
    if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE) {
      ferry_log("%s: a child graph moved into its node is not supported by ferry (cloned is)", call);
      return cudaErrorNotSupported;
    }
    return ferry_graph_child_op(G(p->graph.graph), op);
  default:
    ferry_log("%s with a node of type %d is not supported by ferry", call, (int)p->type);
    return cudaErrorNotSupported;
  }
}

CUresult cuGraphAddNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *e,
                           size_t n, CUgraphNodeParams *p) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  if (ferry_edge_data_plain((const cudaGraphEdgeData *)e, n, "cuGraphAddNode")) return CUDA_ERROR_NOT_SUPPORTED;
  if (p && p->type == CU_GRAPH_NODE_TYPE_GRAPH && p->graph.graph == g) return CUDA_ERROR_INVALID_VALUE;
  struct ferry_gop op;
  return add(out, g, deps, n, params_op(p, "cuGraphAddNode", &op), &op);
}
#undef cuGraphAddNode
CUresult cuGraphAddNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n, CUgraphNodeParams *p) {
  return cuGraphAddNode_v2(out, g, deps, NULL, n, p);
}
CUresult cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams *p) {
  struct ferry_gnode_obj *n = ferry_gnode_of(node);
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  struct ferry_gop op;
  int err = params_op(p, "cuGraphNodeSetParams", &op);
  return ferry_cu_result(err ? err : ferry_gnode_replace(n, &op));
}
CUresult cuGraphExecNodeSetParams(CUgraphExec x, CUgraphNode node, CUgraphNodeParams *p) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_gop op;
  int err = params_op(p, "cuGraphExecNodeSetParams", &op);
  return ferry_cu_result(err ? err : ferry_gexec_set(X(x), node, &op));
}
