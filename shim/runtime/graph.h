/*
 * CUDA graphs on the client (issue 21): graphs and their nodes are objects
 * of this process, built by stream capture (capture.c) or the explicit API
 * (graph.c); a graph reaches the server only when it is instantiated, as
 * one blob of nodes (protocol/graph.h). The driver front end's CUgraph,
 * CUgraphNode and CUgraphExec are the same objects.
 */
#ifndef FERRY_RUNTIME_GRAPH_H
#define FERRY_RUNTIME_GRAPH_H

#include <cuda.h>

#include "protocol/graph.h"
#include "shim/runtime/runtime.h"

#define FERRY_GRAPH_OBJ_MAGIC 0x47726146u /* "FarG" */
#define FERRY_GNODE_OBJ_MAGIC 0x4e726146u /* "FarN" */
#define FERRY_GEXEC_OBJ_MAGIC 0x58726146u /* "FarX" */

struct ferry_graph;
struct ferry_layout;

#define FERRY_COPY_HOST_DST 1u /* a memcpy node's destination is host memory */
#define FERRY_COPY_HOST_SRC 2u /* its source is */

/* what a node does: cudaGraphNodeType values (Kernel, Memcpy, Memset,
   Graph, Empty, WaitEvent, EventRecord, Host) and their parameters, owned */
struct ferry_gop {
  enum cudaGraphNodeType type;
  int vgpu; /* the vGPU its addresses, function or event belong to; -1: none */
  union {
    struct {
      const void *fn; /* what the program named (GetParams gives it back) */
      int by_kernel;  /* the driver's node named a CUkernel (kern): GetParams gives it back */
      const struct ferry_layout *layout; /* NULL when unknown */
      uint32_t func, gx, gy, gz, bx, by, bz, shmem, cooperative;
      unsigned char *params, *attrs;
      uint32_t params_len, attrs_len;
      void **argv; /* pointers into params, for GetParams (built on demand) */
    } kernel;
    struct ferry_gnode_memset memset; /* as it goes out */
    struct {
      uint64_t dst, dpitch, src, spitch, width, height; /* width in bytes; 1D: height 1 */
      enum cudaMemcpyKind kind; /* as the program named it (GetParams gives it back) */
      unsigned host; /* FERRY_COPY_HOST_*: host memory on a side, copied by the client when the
                        graph runs (0: between device pointers, sent with the graph) */
    } memcpy;
    struct {
      cudaHostFn_t fn; /* called in the launching thread (graph_unroll.c) */
      void *user;
    } host;
    struct {
      void *handle; /* the cudaEvent_t */
      uint32_t id;
    } event;
    struct {
      struct ferry_graph *graph; /* owned: a clone of what the program gave */
    } child;
  } u;
};

struct ferry_gnode_obj {
  uint32_t magic;
  struct ferry_graph *graph;
  uint32_t index; /* in graph->nodes */
  struct ferry_gop op;
  struct ferry_gnode_obj **deps;
  uint32_t ndeps, depcap;
  struct ferry_gnode_obj *orig; /* in a copy (clone, exec): the node it copies */
  int disabled;                 /* in an exec's copy: cudaGraphNodeSetEnabled(0), sent as empty */
};

struct ferry_graph {
  uint32_t magic;
  struct ferry_gnode_obj **nodes; /* in order of creation */
  uint32_t n, cap;
  int capturing; /* a capture builds it: it may not be destroyed */
};

struct ferry_gexec {
  uint32_t magic;
  int vgpu;
  uint32_t epoch; /* the vGPU's resets when it was made (graph_exec.c) */
  uint32_t id; /* the wire id of the executable graph */
  unsigned long long flags;
  struct ferry_graph *graph; /* the copy it was made from (nodes' orig: the program's) */
  int touches_mapped;        /* its kernels are given pinned host memory (shim/core/shadow.c) */
  int unrolled;              /* its graph holds host work: each launch plays it node by node
                                on the launch stream (graph_unroll.c); the server has none of it */
  int on_server;             /* the server holds it under id (instantiated, not destroyed) */
  uint64_t generation;       /* its vGPU's when it was last sent: a migration moved module
                                variables its nodes may name, so it is sent again */
  int dirty;                 /* changed since it was sent (node parameters, an update):
                                sent at its next launch or upload, once for any number of
                                changes (XLA changes a dozen nodes before each launch) */
};

/* ---- graphs and nodes (graph.c) ---- */
struct ferry_graph *ferry_graph_new(void);
void ferry_graph_free(struct ferry_graph *g);
/* a deep copy; each copied node's orig is its original */
struct ferry_graph *ferry_graph_copy(const struct ferry_graph *g);
/* a node of op (taken over: on failure it is released) depending on deps */
int ferry_graph_add(struct ferry_graph *g, struct ferry_gop *op, struct ferry_gnode_obj *const *deps,
                    size_t ndeps, struct ferry_gnode_obj **out);
void ferry_gop_release(struct ferry_gop *op);
/* a deep copy of an operation (its own blobs and child graph) */
int ferry_gop_copy(struct ferry_gop *dst, const struct ferry_gop *src);
/* a node's operation from the explicit API's parameters (the driver
   front end's nodes too); 0 or an error, op released on error */
int ferry_graph_kernel_op(const struct cudaKernelNodeParams *p, struct ferry_gop *op);
int ferry_graph_memset_op(const struct cudaMemsetParams *p, struct ferry_gop *op);
int ferry_graph_memcpy_op(const struct cudaMemcpy3DParms *p, struct ferry_gop *op);
int ferry_graph_memcpy1d_op(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            struct ferry_gop *op);
int ferry_graph_event_op(cudaEvent_t e, enum cudaGraphNodeType type, struct ferry_gop *op);
/* (graph_host.c) a copy with host memory on a side, kind as the program
   named it (cudaMemcpyDefault: the addresses tell), checked as the copy
   would be: its node is played by the client (graph_unroll.c) */
int ferry_graph_host_copy_op(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                             size_t height, enum cudaMemcpyKind kind, struct ferry_gop *op);
/* 1 when such a copy has host memory on a side, so that its node is a
   host copy (ferry_graph_host_copy_op) rather than a device copy */
int ferry_graph_copy_is_host(const void *dst, const void *src, enum cudaMemcpyKind kind);
int ferry_graph_host_op(cudaHostFn_t fn, void *user, struct ferry_gop *op);
int ferry_graph_child_op(cudaGraph_t child, struct ferry_gop *op);
/* a node's new operation, of the same type (taken over) */
int ferry_gnode_replace(struct ferry_gnode_obj *n, struct ferry_gop *op);
/* checks handles (NULL when not one of ours) */
/* the edge data of n edges (NULL: none) can be kept as ordinary edges: 0,
   or cudaErrorNotSupported said in one line naming call. A programmatic or
   launch-order edge lets the downstream kernel start before the upstream
   one ends; ferry keeps it as a full dependency, which CUDA allows too
   (cudaGridDependencySynchronize then returns at once): the same results,
   less overlap. */
int ferry_edge_data_plain(const cudaGraphEdgeData *edges, size_t n, const char *call);
struct ferry_graph *ferry_graph_of(const void *h);
struct ferry_gnode_obj *ferry_gnode_of(const void *h);
struct ferry_gexec *ferry_gexec_of(const void *h);

/* ---- graphs with host work (graph_unroll.c) ----
   A host node, or a copy with host memory, cannot run on the remote GPU:
   such a graph is played by the client, each node as the ordinary stream
   operation it stands for, in topological order, on the launch stream. */
/* g (or a child graph of it) holds host work */
int ferry_graph_unrolled(const struct ferry_graph *g);
/* g can be played: no cycle, its work on one vGPU (*vgpu: that one, or -1
   when no node names one); 0 or an error, said in one line */
int ferry_graph_check(const struct ferry_graph *g, int *vgpu);
/* plays g on stream s (the launch's, resolved to v): 0, or the first error */
int ferry_graph_unroll(const struct ferry_graph *g, struct ferry_vgpu *v, cudaStream_t s);

/* ---- executable graphs (graph_exec.c) ---- */
/* the exec's copy of the program's node gets op (taken over) and the whole
   graph is sent again under the same exec id */
int ferry_gexec_set(cudaGraphExec_t exec, const void *node, struct ferry_gop *op);
/* a reset of vgpu destroyed its executable graphs on the server: the
   handles the program still holds are refused from now on */
void ferry_gexecs_forget(int vgpu);

/* ---- building a node's operation by running its call (capture.c) ----
   While a sink is set on this thread, the launch, memset and copy paths
   describe their operation into it instead of running it (the explicit API
   reuses their checks, kernel lookup and parameter packing). what: the
   call that builds the node, for refusals. Returns the operation path's
   result; FERRY_CAPTURED when op was filled. */
#define FERRY_CAPTURED (-10)
/* what an operation's entry point returns once its operation was captured */
#define FERRY_CAPTURE_DONE(rc) ((rc) == FERRY_CAPTURED ? 0 : (rc))
struct ferry_sink {
  const char *what;
  struct ferry_gop *op;
  int filled;
};
void ferry_sink_set(struct ferry_sink *s); /* NULL: none */

/* ---- capture state (capture.c) ---- */
/* the node an operation on (v, stream) becomes while that stream captures:
   0 not capturing (run it), FERRY_CAPTURED (op taken over, a node added),
   or an error (op released) */
int ferry_capture_op(struct ferry_vgpu *v, uint32_t stream, struct ferry_gop *op);
/* an operation on (v, stream) that cannot be captured: 0 when the stream is
   not capturing, else one line naming what, the capture invalidated, and
   cudaErrorStreamCaptureUnsupported */
int ferry_capture_refuse(struct ferry_vgpu *v, uint32_t stream, const char *what);
/* a potentially unsafe call (cudaMalloc, cudaFree, a device synchronize, a
   synchronous host copy): 0, or cudaErrorStreamCaptureUnsupported (the
   captures that forbid it invalidated) under this thread's mode's rules */
int ferry_capture_unsafe(void);
/* synchronizing or querying (v, stream): 0, or the error CUDA gives for a
   capturing stream (the capture invalidated) */
int ferry_capture_sync(struct ferry_vgpu *v, uint32_t stream);
/* the event (v, event) was recorded on (v, stream): captured (0 or
   FERRY_CAPTURED) or forwarded; flags: cudaEventRecordExternal */
int ferry_capture_record(struct ferry_vgpu *v, uint32_t stream, void *handle, uint32_t event,
                         unsigned flags);
/* blocking: the waiting stream synchronizes with the legacy stream */
int ferry_capture_wait(struct ferry_vgpu *v, uint32_t stream, int blocking, void *handle,
                       uint32_t event, unsigned flags);
/* the operations a capture (or a sink) takes: 0 to run them, FERRY_CAPTURED,
   or an error; blobs and arguments are copied */
int ferry_capture_launch(struct ferry_vgpu *v, uint32_t stream, const struct ferry_launch_args *a,
                         const struct ferry_layout *layout, const void *fn);
int ferry_capture_memset(struct ferry_vgpu *v, uint32_t stream, uint64_t dst, uint64_t pitch,
                         uint32_t value, uint32_t elem, uint64_t width, uint64_t height);
int ferry_capture_copy(struct ferry_vgpu *v, uint32_t stream, uint64_t dst, uint64_t dpitch,
                       uint64_t src, uint64_t spitch, uint64_t width, uint64_t height);
/* an asynchronous copy with host memory on (v, stream), the copy path's
   checks passed (memory.c): a memcpy node the client plays (graph_unroll.c) */
int ferry_capture_host_copy(struct ferry_vgpu *v, uint32_t stream, void *dst, size_t dpitch,
                            const void *src, size_t spitch, size_t width, size_t height,
                            enum cudaMemcpyKind kind);
/* cudaLaunchHostFunc on (v, stream): a host node */
int ferry_capture_host(struct ferry_vgpu *v, uint32_t stream, cudaHostFn_t fn, void *user);
/* an event last recorded in a capture: cudaErrorCapturedEvent, else 0 */
int ferry_capture_event_busy(int vgpu, uint32_t event);
/* a stream is destroyed: it leaves its capture */
void ferry_capture_stream_gone(struct ferry_vgpu *v, uint32_t stream);

/* the per-thread-default-stream entry points, which cuda_runtime_api.h
   declares only under --default-stream per-thread */
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t s, cudaGraph_t graph,
                                               const cudaGraphNode_t *deps,
                                               const cudaGraphEdgeData *edges, size_t n,
                                               enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *status);
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *status,
                                          unsigned long long *id, cudaGraph_t *graph,
                                          const cudaGraphNode_t **deps,
                                          const cudaGraphEdgeData **edges, size_t *ndeps);
cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t s, cudaGraphNode_t *deps,
                                                     const cudaGraphEdgeData *edges, size_t n,
                                                     unsigned int flags);
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *out, cudaGraph_t graph,
                                                cudaGraphInstantiateParams *p);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned int flags);

/* ---- events (stream.c) ---- */
int ferry_event_find(void *e, int *vgpu, uint32_t *id);

#endif
