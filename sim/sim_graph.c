/*
 * CUDA graphs on the CPU: the explicit API's node kinds that ferry builds
 * (empty, kernel, memset, memcpy, event record and wait). A graph is its
 * nodes in the order they were added, which is topological, since a node
 * can only depend on nodes that exist; instantiating copies them, and a
 * launch runs them in that order through the simulation's own launch,
 * memset, copy and event code, at enqueue time like all stream work. As in
 * the driver, a kernel node's parameters are copied when it is added.
 */
#include "sim/sim.h"

#include <stdlib.h>
#include <string.h>

#define SIM_NODE_ATTRS 16

struct sim_gnode {
  struct sim_obj obj; /* registered while in a graph; unused in an executable copy */
  struct sim_graph *graph;
  size_t index; /* in the graph */
  CUgraphNodeType type;
  size_t *deps; /* indexes of earlier nodes of the same graph */
  size_t ndeps;
  union {
    struct {
      struct sim_func *f;
      unsigned grid[3], block[3], shmem;
      unsigned char *buf; /* packed parameters, the twin's layout */
      size_t len;
      CUlaunchAttribute attrs[SIM_NODE_ATTRS];
      unsigned nattrs;
    } k;
    CUDA_MEMSET_NODE_PARAMS ms;
    CUDA_MEMCPY3D cp;
    CUevent ev;
  } u;
};

struct sim_graph {
  struct sim_obj obj;
  struct sim_gnode **nodes;
  size_t n, cap;
};

struct sim_gexec {
  struct sim_obj obj;
  struct sim_gnode *nodes; /* copies */
  size_t n;
};

static void node_clear(struct sim_gnode *n) {
  free(n->deps);
  if (n->type == CU_GRAPH_NODE_TYPE_KERNEL)
    free(n->u.k.buf);
}

void sim_graph_obj_free(struct sim_obj *o) {
  if (o->kind == SIM_GRAPH) {
    struct sim_graph *g = (struct sim_graph *)o;
    for (size_t i = 0; i < g->n; i++) {
      sim_unregister(g->nodes[i]);
      node_clear(g->nodes[i]);
      free(g->nodes[i]);
    }
    free(g->nodes);
    free(g);
  } else {
    struct sim_gexec *e = (struct sim_gexec *)o;
    for (size_t i = 0; i < e->n; i++)
      node_clear(&e->nodes[i]);
    free(e->nodes);
    free(e);
  }
}

CUresult sim_GraphCreate(CUgraph *graph, unsigned int flags) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!graph || flags)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_graph *g = calloc(1, sizeof *g);
  if (!g)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  g->obj.kind = SIM_GRAPH;
  if (sim_register(g)) {
    free(g);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  *graph = (CUgraph)g;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_GraphDestroy(CUgraph graph) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_graph *g = sim_lookup(graph, SIM_GRAPH);
  if (!g)
    return sim_leave(CUDA_ERROR_INVALID_VALUE); /* as the driver answers a bad graph */
  sim_unregister(g);
  sim_graph_obj_free(&g->obj);
  return sim_leave(CUDA_SUCCESS);
}

/* a new node of graph after deps (lock held): checked, not yet added */
static CUresult node_new(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                         CUgraphNodeType type, struct sim_graph **gout, struct sim_gnode **nout) {
  struct sim_graph *g = sim_lookup(graph, SIM_GRAPH);
  if (!out || !g || (ndeps && !deps))
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_gnode *n = calloc(1, sizeof *n);
  if (!n || (ndeps && !(n->deps = malloc(ndeps * sizeof *n->deps)))) {
    free(n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < ndeps; i++) {
    const struct sim_gnode *d = sim_lookup(deps[i], SIM_GRAPH_NODE);
    size_t at = d ? d->index : 0;
    /* a node of another graph, or one named twice */
    int twice = 0;
    for (size_t j = 0; d && j < i; j++)
      twice |= n->deps[j] == at;
    if (!d || d->graph != g || twice) {
      free(n->deps);
      free(n);
      return CUDA_ERROR_INVALID_VALUE;
    }
    n->deps[i] = at;
  }
  n->obj.kind = SIM_GRAPH_NODE;
  n->graph = g;
  n->type = type;
  n->ndeps = ndeps;
  *gout = g;
  *nout = n;
  return CUDA_SUCCESS;
}

/* adds a checked node to its graph (lock held) */
static CUresult node_add(struct sim_graph *g, struct sim_gnode *n, CUgraphNode *out) {
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    struct sim_gnode **p = realloc(g->nodes, cap * sizeof *p);
    if (!p)
      goto oom;
    g->nodes = p;
    g->cap = cap;
  }
  if (sim_register(n))
    goto oom;
  n->index = g->n;
  g->nodes[g->n++] = n;
  *out = (CUgraphNode)n;
  return CUDA_SUCCESS;
oom:
  node_clear(n);
  free(n);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult sim_GraphAddEmptyNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                               size_t ndeps) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_graph *g;
  struct sim_gnode *n;
  r = node_new(node, graph, deps, ndeps, CU_GRAPH_NODE_TYPE_EMPTY, &g, &n);
  return sim_leave(r ? r : node_add(g, n, node));
}

CUresult sim_GraphAddKernelNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *p) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!p)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if (!p->func || p->extra) /* CUkernel handles and the extra form: not simulated */
    return sim_leave(CUDA_ERROR_NOT_SUPPORTED);
  struct sim_func *f = sim_lookup(p->func, SIM_FUNC);
  if (!f)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  r = sim_check_launch(f, NULL, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
                       p->blockDimZ, p->sharedMemBytes);
  const struct ferry_twin *t = f->twin;
  if (!r && t->nparams && !p->kernelParams)
    r = CUDA_ERROR_INVALID_VALUE;
  struct sim_graph *g;
  struct sim_gnode *n;
  if (r || (r = node_new(node, graph, deps, ndeps, CU_GRAPH_NODE_TYPE_KERNEL, &g, &n)))
    return sim_leave(r);
  size_t need = 0;
  for (unsigned i = 0; i < t->nparams && i < FERRY_TWIN_MAX_PARAMS; i++)
    if (t->params[i].offset + t->params[i].size > need)
      need = t->params[i].offset + t->params[i].size;
  n->u.k.f = f;
  n->u.k.grid[0] = p->gridDimX, n->u.k.grid[1] = p->gridDimY, n->u.k.grid[2] = p->gridDimZ;
  n->u.k.block[0] = p->blockDimX, n->u.k.block[1] = p->blockDimY, n->u.k.block[2] = p->blockDimZ;
  n->u.k.shmem = p->sharedMemBytes;
  n->u.k.len = need;
  if (!(n->u.k.buf = calloc(1, need ? need : 1))) {
    node_clear(n);
    free(n);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  /* by value, now: the caller's parameters may change once this returns */
  for (unsigned i = 0; i < t->nparams && i < FERRY_TWIN_MAX_PARAMS; i++)
    memcpy(n->u.k.buf + t->params[i].offset, p->kernelParams[i], t->params[i].size);
  return sim_leave(node_add(g, n, node));
}

/* the attributes a kernel node takes (CU_KERNEL_NODE_ATTRIBUTE_* in cuda.h) */
static int node_attr(CUlaunchAttributeID id) {
  switch (id) {
  case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
  case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
  case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
  case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
  case CU_LAUNCH_ATTRIBUTE_PRIORITY:
  case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
  case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
  case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
  case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    return 1;
  default:
    return 0;
  }
}

static CUlaunchConfig node_config(const struct sim_gnode *n, CUstream s) {
  return (CUlaunchConfig){.gridDimX = n->u.k.grid[0], .gridDimY = n->u.k.grid[1],
                          .gridDimZ = n->u.k.grid[2], .blockDimX = n->u.k.block[0],
                          .blockDimY = n->u.k.block[1], .blockDimZ = n->u.k.block[2],
                          .sharedMemBytes = n->u.k.shmem, .hStream = s,
                          .attrs = (CUlaunchAttribute *)n->u.k.attrs, .numAttrs = n->u.k.nattrs};
}

CUresult sim_GraphKernelNodeSetAttribute(CUgraphNode node, CUkernelNodeAttrID attr,
                                         const CUkernelNodeAttrValue *value) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_gnode *n = sim_lookup(node, SIM_GRAPH_NODE);
  if (!n || n->type != CU_GRAPH_NODE_TYPE_KERNEL || !value || !node_attr(attr))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  CUlaunchAttribute at;
  memset(&at, 0, sizeof at);
  at.id = attr;
  at.value = *value;
  CUlaunchConfig c = node_config(n, NULL);
  if ((r = sim_check_attr(n->u.k.f, &c, &at)))
    return sim_leave(r);
  unsigned i = 0;
  while (i < n->u.k.nattrs && n->u.k.attrs[i].id != attr)
    i++;
  if (i == SIM_NODE_ATTRS)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  n->u.k.attrs[i] = at; /* a later value of the same attribute replaces it */
  if (i == n->u.k.nattrs)
    n->u.k.nattrs++;
  return sim_leave(CUDA_SUCCESS);
}

/* a graph's memory nodes run in the context the caller names, which must
   be the current one here (one simulated context per device) */
static int ctx_ok(CUcontext ctx) { return ctx == NULL || ctx == (CUcontext)sim_cur(); }

CUresult sim_GraphAddMemsetNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                size_t ndeps, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!p || !ctx_ok(ctx) || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) ||
      p->width == 0 || p->height == 0 || (p->height > 1 && p->pitch < p->width * p->elementSize))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_graph *g;
  struct sim_gnode *n;
  if ((r = node_new(node, graph, deps, ndeps, CU_GRAPH_NODE_TYPE_MEMSET, &g, &n)))
    return sim_leave(r);
  n->u.ms = *p;
  return sim_leave(node_add(g, n, node));
}

CUresult sim_GraphAddMemcpyNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                size_t ndeps, const CUDA_MEMCPY3D *copy, CUcontext ctx) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!copy || !ctx_ok(ctx) || copy->WidthInBytes == 0 || copy->Height == 0 || copy->Depth == 0)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_graph *g;
  struct sim_gnode *n;
  if ((r = node_new(node, graph, deps, ndeps, CU_GRAPH_NODE_TYPE_MEMCPY, &g, &n)))
    return sim_leave(r);
  n->u.cp = *copy;
  return sim_leave(node_add(g, n, node));
}

static CUresult add_event_node(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                               size_t ndeps, CUevent event, CUgraphNodeType type) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!sim_lookup_any(event, SIM_EVENT))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_graph *g;
  struct sim_gnode *n;
  if ((r = node_new(node, graph, deps, ndeps, type, &g, &n)))
    return sim_leave(r);
  n->u.ev = event;
  return sim_leave(node_add(g, n, node));
}

CUresult sim_GraphAddEventRecordNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                     size_t ndeps, CUevent event) {
  return add_event_node(node, graph, deps, ndeps, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult sim_GraphAddEventWaitNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                   size_t ndeps, CUevent event) {
  return add_event_node(node, graph, deps, ndeps, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

/* a deep copy of a graph's node (lock held); 0, or -1 out of memory */
static int node_copy(struct sim_gnode *dst, const struct sim_gnode *src) {
  *dst = *src;
  dst->deps = NULL;
  if (src->type == CU_GRAPH_NODE_TYPE_KERNEL)
    dst->u.k.buf = NULL;
  if (src->ndeps && !(dst->deps = malloc(src->ndeps * sizeof *dst->deps)))
    return -1;
  if (src->ndeps)
    memcpy(dst->deps, src->deps, src->ndeps * sizeof *dst->deps);
  if (src->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    if (!(dst->u.k.buf = malloc(src->u.k.len ? src->u.k.len : 1))) {
      free(dst->deps);
      return -1;
    }
    memcpy(dst->u.k.buf, src->u.k.buf, src->u.k.len);
  }
  return 0;
}

/* the graph's nodes, copied (lock held) */
static struct sim_gnode *copy_nodes(const struct sim_graph *g) {
  struct sim_gnode *nodes = calloc(g->n ? g->n : 1, sizeof *nodes);
  for (size_t i = 0; nodes && i < g->n; i++)
    if (node_copy(&nodes[i], g->nodes[i])) {
      while (i--)
        node_clear(&nodes[i]);
      free(nodes);
      return NULL;
    }
  return nodes;
}

CUresult sim_GraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_graph *g = sim_lookup(graph, SIM_GRAPH);
  const unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                   CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
                                   CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  /* device launch needs device-side graph support: not simulated */
  if (!exec || !g || (flags & ~known))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_gexec *e = calloc(1, sizeof *e);
  if (!e || !(e->nodes = copy_nodes(g))) {
    free(e);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  e->n = g->n;
  e->obj.kind = SIM_GRAPH_EXEC;
  if (sim_register(e)) {
    sim_graph_obj_free(&e->obj);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  *exec = (CUgraphExec)e;
  return sim_leave(CUDA_SUCCESS);
}

/* CUDA's rule, as far as the simulated node kinds go: the same nodes in the
   same order with the same edges; parameters may change */
CUresult sim_GraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_gexec *e = sim_lookup(exec, SIM_GRAPH_EXEC);
  struct sim_graph *g = sim_lookup(graph, SIM_GRAPH);
  if (!e || !g || !info)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  memset(info, 0, sizeof *info);
  info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  if (g->n != e->n)
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
  for (size_t i = 0; !info->result && i < g->n; i++) {
    const struct sim_gnode *a = &e->nodes[i], *b = g->nodes[i];
    if (a->type != b->type) {
      info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
      info->errorNode = (CUgraphNode)b;
    } else if (a->ndeps != b->ndeps || (a->ndeps && memcmp(a->deps, b->deps, a->ndeps * sizeof *a->deps))) {
      info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
      info->errorNode = (CUgraphNode)b;
    }
  }
  if (info->result)
    return sim_leave(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  struct sim_gnode *nodes = copy_nodes(g);
  if (!nodes)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  for (size_t i = 0; i < e->n; i++)
    node_clear(&e->nodes[i]);
  free(e->nodes);
  e->nodes = nodes;
  return sim_leave(CUDA_SUCCESS);
}

/* one node of a launch (lock held) */
static CUresult run_node(const struct sim_gnode *n, CUstream s) {
  switch (n->type) {
  case CU_GRAPH_NODE_TYPE_KERNEL: {
    const struct ferry_twin *t;
    struct sim_func *f = sim_lookup(n->u.k.f, SIM_FUNC); /* its module may be gone */
    if (!f)
      return CUDA_ERROR_INVALID_HANDLE;
    t = f->twin;
    void *ptrs[FERRY_TWIN_MAX_PARAMS];
    for (unsigned i = 0; i < t->nparams && i < FERRY_TWIN_MAX_PARAMS; i++)
      ptrs[i] = n->u.k.buf + t->params[i].offset;
    CUlaunchConfig c = node_config(n, s);
    return sim_launch_ex(&c, f, t->nparams ? ptrs : NULL, NULL);
  }
  case CU_GRAPH_NODE_TYPE_MEMSET: {
    const CUDA_MEMSET_NODE_PARAMS *p = &n->u.ms;
    uint32_t v = p->value;
    uint16_t v16 = (uint16_t)v;
    uint8_t v8 = (uint8_t)v;
    const void *value = p->elementSize == 4 ? (const void *)&v : p->elementSize == 2 ? (const void *)&v16 : &v8;
    return sim_memset(p->dst, p->height > 1 ? p->pitch : p->width * p->elementSize, value,
                      p->elementSize, p->width, p->height);
  }
  case CU_GRAPH_NODE_TYPE_MEMCPY:
    return sim_copy3d(&n->u.cp);
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD: {
    struct sim_event *e = sim_lookup_any(n->u.ev, SIM_EVENT);
    if (!e)
      return CUDA_ERROR_INVALID_HANDLE;
    e->recorded = 1;
    e->ns = sim_now_ns();
    return CUDA_SUCCESS;
  }
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT: /* everything before ran already */
    return sim_lookup_any(n->u.ev, SIM_EVENT) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  default:
    return CUDA_SUCCESS;
  }
}

CUresult sim_GraphLaunch(CUgraphExec exec, CUstream stream) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_gexec *e = sim_lookup(exec, SIM_GRAPH_EXEC);
  if (!e || !sim_stream_ok(stream))
    return sim_leave(e ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE);
  /* the added order is topological; a kernel fault ends the rest, as the
     context is gone on a GPU */
  struct sim_dev *c = sim_cur();
  for (size_t i = 0; !r && i < e->n && c->sticky == CUDA_SUCCESS; i++)
    r = run_node(&e->nodes[i], stream);
  return sim_leave(r);
}

CUresult sim_GraphUpload(CUgraphExec exec, CUstream stream) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_gexec *e = sim_lookup(exec, SIM_GRAPH_EXEC);
  if (!e || !sim_stream_ok(stream))
    return sim_leave(e ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_GraphExecDestroy(CUgraphExec exec) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_gexec *e = sim_lookup(exec, SIM_GRAPH_EXEC);
  if (!e)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  sim_unregister(e);
  sim_graph_obj_free(&e->obj);
  return sim_leave(CUDA_SUCCESS);
}
