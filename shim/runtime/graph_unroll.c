/*
 * Graphs with host work, played by the client. A host node or a copy with
 * host memory cannot run on the remote GPU (it cannot call this process's
 * functions or reach its memory), so such a graph is never sent: each
 * launch issues its nodes in topological order, each as the ordinary
 * stream operation it stands for, on the launch stream. Serialized on one
 * stream, every dependency holds. A launch then costs one call per node
 * (and a stream synchronization per host node) where a graph the server
 * holds costs one; nothing of it lives on the server beyond those ordinary
 * calls, so a migration moves it as it moves them.
 */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "protocol/layout.h"
#include "shim/core/link.h"
#include "shim/core/shadow.h"
#include "shim/runtime/graph.h"

int ferry_graph_unrolled(const struct ferry_graph *g) {
  for (uint32_t i = 0; i < g->n; i++) {
    const struct ferry_gop *op = &g->nodes[i]->op;
    if (op->type == cudaGraphNodeTypeHost || (op->type == cudaGraphNodeTypeMemcpy && op->u.memcpy.host) ||
        (op->type == cudaGraphNodeTypeGraph && ferry_graph_unrolled(op->u.child.graph)))
      return 1;
  }
  return 0;
}

/* a walk of a graph (and its child graphs) in topological order: it checks
   the graph (v NULL) or plays it on (v, s) */
struct play {
  struct ferry_vgpu *v;
  cudaStream_t s;
  uint32_t sid; /* s's wire id on v */
  int vgpu;     /* checking: the one vGPU its nodes name so far, or -1 */
};

static __thread unsigned char moved_params[FERRY_MAX_PARAM_BYTES];

/* a kernel node: the launch call, with module variables where they are now
   (a move between the look-up and the call makes it stale: again) */
static int play_kernel(struct play *p, const struct ferry_gop *op) {
  for (;;) {
    uint64_t gen = __atomic_load_n(&p->v->generation, __ATOMIC_ACQUIRE);
    const unsigned char *params = op->u.kernel.params;
    if (op->u.kernel.params_len <= sizeof moved_params)
      params = ferry_params_now(op->u.kernel.layout, p->v->index, params, op->u.kernel.params_len,
                                moved_params);
    struct ferry_launch_args a = {
        .func = op->u.kernel.func, .gx = op->u.kernel.gx, .gy = op->u.kernel.gy, .gz = op->u.kernel.gz,
        .bx = op->u.kernel.bx, .by = op->u.kernel.by, .bz = op->u.kernel.bz, .shmem = op->u.kernel.shmem,
        .stream = p->sid, .params = {params, op->u.kernel.params_len},
        .attrs = {op->u.kernel.attrs, op->u.kernel.attrs_len}};
    /* pinned host memory the kernel is given: its shadow goes with this call */
    int rc = ferry_shadow_scan(p->v, params, op->u.kernel.params_len);
    if (rc > 0) return rc;
    ferry_expect_generation(p->v, gen);
    rc = ferry_call(p->v, FERRY_CALL_launch, &a, NULL, NULL);
    ferry_expect_generation(NULL, 0);
    if (rc != FERRY_STALE) return rc;
  }
}

/* a copy node: through the ordinary copy path; one between host buffers
   runs in the stream's order, after the work before it */
static int play_copy(struct play *p, const struct ferry_gop *op) {
  void *dst = (void *)(uintptr_t)op->u.memcpy.dst;
  const void *src = (const void *)(uintptr_t)op->u.memcpy.src;
  uint64_t w = op->u.memcpy.width, h = op->u.memcpy.height ? op->u.memcpy.height : 1;
  unsigned host = op->u.memcpy.host;
  int rc = 0;
  if (host == (FERRY_COPY_HOST_DST | FERRY_COPY_HOST_SRC)) {
    if ((rc = (int)cudaStreamSynchronize(p->s))) return rc;
    for (uint64_t r = 0; r < h; r++)
      memmove((char *)dst + r * op->u.memcpy.dpitch, (const char *)src + r * op->u.memcpy.spitch, w);
    return 0;
  }
  /* a copy into pinned memory earlier on the stream may still owe its bytes
     (they come with the next synchronization, remote.c): this copy reads
     host memory after it, as CUDA's would */
  if ((host & FERRY_COPY_HOST_SRC) && !ferry_is_local(p->v) && ferry_deferred_pending(&p->v->link) &&
      (rc = (int)cudaStreamSynchronize(p->s)))
    return rc;
  enum cudaMemcpyKind kind = host == FERRY_COPY_HOST_SRC   ? cudaMemcpyHostToDevice
                             : host == FERRY_COPY_HOST_DST ? cudaMemcpyDeviceToHost
                                                           : cudaMemcpyDeviceToDevice;
  if (h == 1) return (int)cudaMemcpyAsync(dst, src, w, kind, p->s);
  return (int)cudaMemcpy2DAsync(dst, op->u.memcpy.dpitch, src, op->u.memcpy.spitch, w, h, kind, p->s);
}

static int play_graph(struct play *p, const struct ferry_graph *g);

static int play_node(struct play *p, const struct ferry_gnode_obj *n) {
  const struct ferry_gop *op = &n->op;
  if (!p->v) { /* checking */
    if (op->vgpu >= 0 && p->vgpu >= 0 && op->vgpu != p->vgpu) {
      ferry_log("cudaGraphInstantiate: a graph with work on two devices is not supported by ferry");
      return cudaErrorNotSupported;
    }
    if (op->vgpu >= 0) p->vgpu = op->vgpu;
    switch (op->type) {
    case cudaGraphNodeTypeKernel:
    case cudaGraphNodeTypeMemset:
    case cudaGraphNodeTypeMemcpy:
    case cudaGraphNodeTypeEventRecord:
    case cudaGraphNodeTypeWaitEvent:
    case cudaGraphNodeTypeEmpty:
    case cudaGraphNodeTypeHost: return 0;
    case cudaGraphNodeTypeGraph: return play_graph(p, op->u.child.graph);
    default:
      ferry_log("cudaGraphInstantiate: a graph node of type %d is not supported by ferry", (int)op->type);
      return cudaErrorNotSupported;
    }
  }
  if (n->disabled) return 0; /* it keeps its place and does nothing */
  switch (op->type) {
  case cudaGraphNodeTypeKernel: return play_kernel(p, op);
  case cudaGraphNodeTypeMemset:
    return ferry_memset_wide((void *)(uintptr_t)op->u.memset.dst, op->u.memset.pitch, op->u.memset.value,
                             op->u.memset.elem, op->u.memset.width, op->u.memset.height, p->s, 0);
  case cudaGraphNodeTypeMemcpy: return play_copy(p, op);
  case cudaGraphNodeTypeEventRecord: return (int)cudaEventRecord((cudaEvent_t)op->u.event.handle, p->s);
  case cudaGraphNodeTypeWaitEvent: return (int)cudaStreamWaitEvent(p->s, (cudaEvent_t)op->u.event.handle, 0);
  case cudaGraphNodeTypeHost: {
    /* as cudaLaunchHostFunc: after the work before it, in this thread; the
       work after it is issued once it returned */
    int rc = (int)cudaStreamSynchronize(p->s);
    if (!rc) op->u.host.fn(op->u.host.user);
    return rc;
  }
  case cudaGraphNodeTypeGraph: return play_graph(p, op->u.child.graph);
  default: return 0; /* empty */
  }
}

/* depth first from each node in creation order, dependencies first;
   state: 0 new, 1 on the path (meeting it again is a cycle), 2 done */
static int visit(struct play *p, const struct ferry_graph *g, uint32_t i, unsigned char *state) {
  if (state[i] == 2) return 0;
  if (state[i] == 1) return cudaErrorInvalidValue;
  state[i] = 1;
  const struct ferry_gnode_obj *n = g->nodes[i];
  for (uint32_t k = 0; k < n->ndeps; k++) {
    int rc = visit(p, g, n->deps[k]->index, state);
    if (rc) return rc;
  }
  state[i] = 2;
  return play_node(p, n);
}

static int play_graph(struct play *p, const struct ferry_graph *g) {
  unsigned char *state = calloc(g->n ? g->n : 1, 1);
  if (!state) return cudaErrorMemoryAllocation;
  int rc = 0;
  for (uint32_t i = 0; i < g->n && !rc; i++) rc = visit(p, g, i, state);
  free(state);
  return rc;
}

int ferry_graph_check(const struct ferry_graph *g, int *vgpu) {
  struct play p = {.vgpu = -1};
  int rc = play_graph(&p, g);
  if (rc == cudaErrorInvalidValue) ferry_log("cudaGraphInstantiate: the graph has a cycle");
  *vgpu = p.vgpu;
  return rc;
}

int ferry_graph_unroll(const struct ferry_graph *g, struct ferry_vgpu *v, cudaStream_t s) {
  struct play p = {.v = v, .s = s, .vgpu = v->index};
  struct ferry_vgpu *sv;
  int rc = ferry_stream_resolve(s, 0, &sv, &p.sid);
  if (!rc && sv != v) rc = cudaErrorInvalidValue;
  return rc ? rc : play_graph(&p, g);
}
