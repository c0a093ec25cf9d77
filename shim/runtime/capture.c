/*
 * Stream capture, answered here without a round trip (PyTorch's allocator
 * asks cudaStreamIsCapturing on every allocation). While a stream
 * captures, its kernels, memsets, copies, host functions and event
 * records/waits become nodes of the capture's graph instead of running;
 * dependencies follow CUDA's rules: each stream of a capture has a current
 * dependency set, a recorded event keeps a copy of it, a wait on such an
 * event makes another stream join the capture (fork) or merges the sets
 * (join). What cannot be captured is refused in one line and invalidates
 * the capture, so a wrong graph is never built. The capture mode rules
 * (global, thread-local, relaxed) decide which "potentially unsafe" calls
 * are refused, as CUDA does.
 */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "shim/core/link.h"
#include "shim/runtime/graph.h"

struct cap_stream {
  int vgpu;
  uint32_t sid;
  int blocking; /* synchronizes with the legacy stream */
  struct ferry_gnode_obj **deps;
  uint32_t n, cap;
};

struct cap_event {
  int vgpu;
  uint32_t id;
  struct ferry_gnode_obj **deps;
  uint32_t n;
};

struct capture {
  unsigned long long id;
  struct ferry_graph *graph;
  int own_graph; /* cudaStreamBeginCapture made it (not ...ToGraph) */
  enum cudaStreamCaptureMode mode;
  pthread_t thread;
  int invalidated;
  struct cap_stream *streams; /* [0]: the origin */
  uint32_t nstreams, scap;
  struct cap_event *events;
  uint32_t nevents, ecap;
  struct capture *next;
};

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct capture *captures;
static int ncaptures; /* atomic: the fast path reads it without the lock */
static unsigned long long next_capture_id;
static __thread enum cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;
static __thread struct ferry_sink *sink;

void ferry_sink_set(struct ferry_sink *s) { sink = s; }

static int none_active(void) { return __atomic_load_n(&ncaptures, __ATOMIC_ACQUIRE) == 0; }

/* ---- dependency sets ---- */
static int deps_set(struct ferry_gnode_obj ***deps, uint32_t *n, uint32_t *cap,
                    struct ferry_gnode_obj *const *from, uint32_t count) {
  if (count > *cap) {
    struct ferry_gnode_obj **d = realloc(*deps, count * sizeof *d);
    if (!d) return cudaErrorMemoryAllocation;
    *deps = d;
    *cap = count;
  }
  if (count) memmove(*deps, from, count * sizeof **deps);
  *n = count;
  return 0;
}

static int deps_add(struct cap_stream *s, struct ferry_gnode_obj *node) {
  for (uint32_t i = 0; i < s->n; i++)
    if (s->deps[i] == node) return 0;
  if (s->n == s->cap) {
    uint32_t cap = s->cap ? 2 * s->cap : 4;
    struct ferry_gnode_obj **d = realloc(s->deps, cap * sizeof *d);
    if (!d) return cudaErrorMemoryAllocation;
    s->deps = d;
    s->cap = cap;
  }
  s->deps[s->n++] = node;
  return 0;
}

/* ---- lookups (under cap_lock) ---- */
static struct cap_stream *find_stream(int vgpu, uint32_t sid, struct capture **out) {
  for (struct capture *c = captures; c; c = c->next)
    for (uint32_t i = 0; i < c->nstreams; i++)
      if (c->streams[i].vgpu == vgpu && c->streams[i].sid == sid) {
        *out = c;
        return &c->streams[i];
      }
  *out = NULL;
  return NULL;
}

static struct cap_event *find_event(int vgpu, uint32_t id, struct capture **out) {
  for (struct capture *c = captures; c; c = c->next)
    for (uint32_t i = 0; i < c->nevents; i++)
      if (c->events[i].vgpu == vgpu && c->events[i].id == id) {
        if (out) *out = c;
        return &c->events[i];
      }
  return NULL;
}

static void forget_event(struct capture *c, struct cap_event *e) {
  free(e->deps);
  *e = c->events[--c->nevents];
}

static struct cap_stream *join(struct capture *c, int vgpu, uint32_t sid, int blocking) {
  if (c->nstreams == c->scap) {
    uint32_t cap = c->scap ? 2 * c->scap : 4;
    struct cap_stream *s = realloc(c->streams, cap * sizeof *s);
    if (!s) return NULL;
    c->streams = s;
    c->scap = cap;
  }
  struct cap_stream *s = &c->streams[c->nstreams++];
  *s = (struct cap_stream){vgpu, sid, blocking, NULL, 0, 0};
  return s;
}

static void invalidate(struct capture *c) { c->invalidated = 1; }

/* the legacy stream synchronizes with every blocking stream: used while one
   captures, it would depend on the capture (cudaErrorStreamCaptureImplicit,
   that capture invalidated) */
static int legacy_implicit(int vgpu) {
  int hit = 0;
  for (struct capture *c = captures; c; c = c->next)
    for (uint32_t i = 0; i < c->nstreams; i++)
      if (c->streams[i].vgpu == vgpu && c->streams[i].blocking) {
        invalidate(c);
        hit = 1;
        break;
      }
  return hit ? cudaErrorStreamCaptureImplicit : 0;
}

#define LEGACY_SID 0u

/* ---- operations on a capturing stream ---- */
int ferry_capture_op(struct ferry_vgpu *v, uint32_t stream, struct ferry_gop *op) {
  if (sink) {
    *sink->op = *op;
    sink->filled = 1;
    return FERRY_CAPTURED;
  }
  if (none_active()) return 0;
  pthread_mutex_lock(&cap_lock);
  struct capture *c;
  struct cap_stream *s = find_stream(v->index, stream, &c);
  int rc = 0;
  if (!s) {
    if (stream == LEGACY_SID) rc = legacy_implicit(v->index);
  } else if (c->invalidated) {
    rc = cudaErrorStreamCaptureInvalidated;
  } else {
    struct ferry_gnode_obj *node;
    rc = ferry_graph_add(c->graph, op, s->deps, s->n, &node);
    op = NULL; /* taken over */
    if (!rc) rc = deps_set(&s->deps, &s->n, &s->cap, &node, 1);
    if (rc) invalidate(c);
    else rc = FERRY_CAPTURED;
  }
  pthread_mutex_unlock(&cap_lock);
  if (op) ferry_gop_release(op); /* not taken: the operation runs, or fails */
  return rc;
}

int ferry_capture_refuse(struct ferry_vgpu *v, uint32_t stream, const char *what) {
  if (sink) {
    ferry_log("%s: %s in a graph is not supported by ferry", sink->what, what);
    return cudaErrorNotSupported;
  }
  if (none_active()) return 0;
  pthread_mutex_lock(&cap_lock);
  struct capture *c;
  int rc = 0;
  if (find_stream(v->index, stream, &c)) {
    ferry_log("%s during stream capture is not supported by ferry; the capture is invalidated", what);
    invalidate(c);
    rc = cudaErrorStreamCaptureUnsupported;
  } else if (stream == LEGACY_SID) {
    rc = legacy_implicit(v->index);
  }
  pthread_mutex_unlock(&cap_lock);
  return rc;
}

int ferry_capture_sync(struct ferry_vgpu *v, uint32_t stream) {
  if (none_active()) return 0;
  pthread_mutex_lock(&cap_lock);
  struct capture *c;
  int rc = 0;
  if (find_stream(v->index, stream, &c)) {
    invalidate(c);
    rc = cudaErrorStreamCaptureUnsupported;
  } else if (stream == LEGACY_SID) {
    rc = legacy_implicit(v->index);
  }
  pthread_mutex_unlock(&cap_lock);
  return rc;
}

/* CUDA's rule for "potentially unsafe" calls (cudaThreadExchangeStreamCaptureMode):
   global: refused while this thread has a capture that is not relaxed, or
   any thread has a global one; thread-local: only this thread's; relaxed:
   never. The captures that make the call unsafe are invalidated. */
int ferry_capture_unsafe(void) {
  if (none_active() || thread_mode == cudaStreamCaptureModeRelaxed) return 0;
  pthread_t self = pthread_self();
  int rc = 0;
  pthread_mutex_lock(&cap_lock);
  for (struct capture *c = captures; c; c = c->next) {
    if (c->mode == cudaStreamCaptureModeRelaxed) continue;
    int mine = pthread_equal(c->thread, self);
    if (mine || (thread_mode == cudaStreamCaptureModeGlobal && c->mode == cudaStreamCaptureModeGlobal)) {
      invalidate(c);
      rc = cudaErrorStreamCaptureUnsupported;
    }
  }
  pthread_mutex_unlock(&cap_lock);
  return rc;
}

int ferry_capture_record(struct ferry_vgpu *v, uint32_t stream, void *handle, uint32_t event,
                         unsigned flags) {
  if (none_active()) return 0;
  pthread_mutex_lock(&cap_lock);
  struct capture *c, *ec;
  struct cap_stream *s = find_stream(v->index, stream, &c);
  struct cap_event *e = find_event(v->index, event, &ec);
  int rc = 0;
  if (!s) {
    if (e) forget_event(ec, e); /* recorded outside any capture again */
    if (stream == LEGACY_SID) rc = legacy_implicit(v->index);
    pthread_mutex_unlock(&cap_lock);
    return rc;
  }
  if (c->invalidated) {
    rc = cudaErrorStreamCaptureInvalidated;
  } else if (flags & cudaEventRecordExternal) {
    /* an event record node: the graph records the event when it runs */
    pthread_mutex_unlock(&cap_lock);
    struct ferry_gop op = {.type = cudaGraphNodeTypeEventRecord, .vgpu = v->index};
    op.u.event.handle = handle;
    op.u.event.id = event;
    return ferry_capture_op(v, stream, &op);
  } else {
    /* the event stands for the stream's dependency set at this point */
    if (e && ec != c) {
      forget_event(ec, e);
      e = NULL;
    }
    if (!e) {
      if (c->nevents == c->ecap) {
        uint32_t cap = c->ecap ? 2 * c->ecap : 4;
        struct cap_event *ev = realloc(c->events, cap * sizeof *ev);
        if (!ev) {
          rc = cudaErrorMemoryAllocation;
          goto out;
        }
        c->events = ev;
        c->ecap = cap;
      }
      e = &c->events[c->nevents++];
      *e = (struct cap_event){v->index, event, NULL, 0};
    }
    uint32_t cap = e->n;
    if ((rc = deps_set(&e->deps, &e->n, &cap, s->deps, s->n))) invalidate(c);
    else rc = FERRY_CAPTURED;
  }
out:
  pthread_mutex_unlock(&cap_lock);
  return rc;
}

int ferry_capture_wait(struct ferry_vgpu *v, uint32_t stream, int blocking, void *handle,
                       uint32_t event, unsigned flags) {
  if (none_active()) return 0;
  pthread_mutex_lock(&cap_lock);
  struct capture *c, *ec = NULL;
  struct cap_stream *s = find_stream(v->index, stream, &c);
  struct cap_event *e = find_event(v->index, event, &ec);
  int rc = 0;
  if (!e || (flags & cudaEventWaitExternal)) {
    if (s && !(flags & cudaEventWaitExternal)) {
      /* work outside the capture: CUDA refuses the dependency
         ("dependency created on uncaptured work in another stream") */
      invalidate(c);
      pthread_mutex_unlock(&cap_lock);
      return cudaErrorStreamCaptureIsolation;
    }
    pthread_mutex_unlock(&cap_lock);
    if (!s) return stream == LEGACY_SID ? ferry_capture_sync(v, stream) : 0;
    /* cudaEventWaitExternal: the graph waits for the event when it runs */
    struct ferry_gop op = {.type = cudaGraphNodeTypeWaitEvent, .vgpu = v->index};
    op.u.event.handle = handle;
    op.u.event.id = event;
    return ferry_capture_op(v, stream, &op);
  }
  if (s && c != ec) {
    rc = cudaErrorStreamCaptureMerge; /* two captures never merge */
    invalidate(c);
    invalidate(ec);
  } else if (ec->invalidated) {
    rc = cudaErrorStreamCaptureInvalidated;
  } else if (!s) {
    /* fork: the stream joins the capture, after the event's point */
    if (stream == LEGACY_SID) {
      rc = cudaErrorStreamCaptureImplicit;
      invalidate(ec);
    } else if (!(s = join(ec, v->index, stream, blocking))) {
      rc = cudaErrorMemoryAllocation;
    } else {
      rc = deps_set(&s->deps, &s->n, &s->cap, e->deps, e->n);
      rc = rc ? rc : FERRY_CAPTURED;
    }
  } else {
    /* join: the stream's next node depends on both sets */
    for (uint32_t i = 0; i < e->n && !rc; i++) rc = deps_add(s, e->deps[i]);
    if (rc) invalidate(c);
    else rc = FERRY_CAPTURED;
  }
  pthread_mutex_unlock(&cap_lock);
  return rc;
}

int ferry_capture_event_busy(int vgpu, uint32_t event) {
  if (none_active()) return 0;
  pthread_mutex_lock(&cap_lock);
  int busy = find_event(vgpu, event, NULL) != NULL;
  pthread_mutex_unlock(&cap_lock);
  return busy ? cudaErrorCapturedEvent : 0;
}

/* a destroyed stream's capture goes on without it (CUDA invalidates it) */
void ferry_capture_stream_gone(struct ferry_vgpu *v, uint32_t stream) {
  if (none_active()) return;
  pthread_mutex_lock(&cap_lock);
  struct capture *c;
  if (find_stream(v->index, stream, &c)) invalidate(c);
  pthread_mutex_unlock(&cap_lock);
}

int ferry_stream_capturing(struct ferry_vgpu *v, uint32_t stream) {
  if (none_active()) return 0;
  pthread_mutex_lock(&cap_lock);
  struct capture *c;
  int yes = find_stream(v->index, stream, &c) != NULL;
  pthread_mutex_unlock(&cap_lock);
  return yes;
}

/* ---- the API ---- */
static int is_legacy(cudaStream_t s, int per_thread) {
  uintptr_t raw = (uintptr_t)s;
  return raw == (uintptr_t)cudaStreamLegacy || (raw == 0 && !per_thread);
}

static int begin(cudaStream_t s, int per_thread, struct ferry_graph *into,
                 struct ferry_gnode_obj *const *deps, size_t ndeps, enum cudaStreamCaptureMode mode) {
  struct ferry_vgpu *v;
  uint32_t sid;
  int rc = ferry_stream_resolve(s, per_thread, &v, &sid);
  if (rc) return rc;
  if ((unsigned)mode > cudaStreamCaptureModeRelaxed) return cudaErrorInvalidValue;
  if (is_legacy(s, per_thread)) return cudaErrorStreamCaptureUnsupported; /* as CUDA */
  unsigned sflags = 0;
  cudaStreamGetFlags(s, &sflags);
  struct capture *c = calloc(1, sizeof *c);
  if (!c) return cudaErrorMemoryAllocation;
  c->graph = into ? into : ferry_graph_new();
  c->own_graph = !into;
  c->mode = mode;
  c->thread = pthread_self();
  struct cap_stream *st = c->graph ? join(c, v->index, sid, !(sflags & cudaStreamNonBlocking)) : NULL;
  if (!st || deps_set(&st->deps, &st->n, &st->cap, deps, (uint32_t)ndeps)) {
    if (st) free(st->deps);
    if (c->own_graph) ferry_graph_free(c->graph);
    free(c->streams);
    free(c);
    return cudaErrorMemoryAllocation;
  }
  pthread_mutex_lock(&cap_lock);
  struct capture *other;
  if (find_stream(v->index, sid, &other)) {
    pthread_mutex_unlock(&cap_lock);
    free(st->deps);
    if (c->own_graph) ferry_graph_free(c->graph);
    free(c->streams);
    free(c);
    return cudaErrorIllegalState;
  }
  c->id = ++next_capture_id;
  c->graph->capturing++;
  c->next = captures;
  captures = c;
  __atomic_add_fetch(&ncaptures, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&cap_lock);
  return 0;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
  return ferry_ret(begin(s, 0, NULL, NULL, 0, mode));
}
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode) {
  return ferry_ret(begin(s, 1, NULL, NULL, 0, mode));
}

static int begin_to_graph(cudaStream_t s, int per_thread, cudaGraph_t graph,
                          const cudaGraphNode_t *deps, const cudaGraphEdgeData *edges, size_t n,
                          enum cudaStreamCaptureMode mode) {
  struct ferry_graph *g = ferry_graph_of(graph);
  if (!g || (n && !deps)) return cudaErrorInvalidValue;
  for (size_t i = 0; i < n; i++) {
    struct ferry_gnode_obj *d = ferry_gnode_of(deps[i]);
    if (!d || d->graph != g) return cudaErrorInvalidValue;
  }
  int rc = ferry_edge_data_plain(edges, n, "cudaStreamBeginCaptureToGraph");
  if (rc) return rc;
  return begin(s, per_thread, g, (struct ferry_gnode_obj *const *)deps, n, mode);
}
cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t s, cudaGraph_t graph,
                                          const cudaGraphNode_t *deps,
                                          const cudaGraphEdgeData *edges, size_t n,
                                          enum cudaStreamCaptureMode mode) {
  return ferry_ret(begin_to_graph(s, 0, graph, deps, edges, n, mode));
}
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t s, cudaGraph_t graph,
                                               const cudaGraphNode_t *deps,
                                               const cudaGraphEdgeData *edges, size_t n,
                                               enum cudaStreamCaptureMode mode) {
  return ferry_ret(begin_to_graph(s, 1, graph, deps, edges, n, mode));
}

/* every stream that forked from the origin joined it back: the nodes each
   one would depend on next are behind the origin's (a walk back from the
   origin's dependencies, each node once); -1 out of memory */
static int joined(struct capture *c) {
  uint32_t n = c->graph->n ? c->graph->n : 1, top = 0;
  unsigned char *seen = calloc(n, 1);
  struct ferry_gnode_obj **stack = malloc(n * sizeof *stack);
  int ok = seen && stack ? 1 : -1;
  for (uint32_t i = 0; ok > 0 && i < c->streams[0].n; i++) {
    struct ferry_gnode_obj *d = c->streams[0].deps[i];
    if (!seen[d->index]) seen[d->index] = 1, stack[top++] = d;
  }
  while (ok > 0 && top) {
    struct ferry_gnode_obj *node = stack[--top];
    for (uint32_t i = 0; i < node->ndeps; i++) {
      struct ferry_gnode_obj *d = node->deps[i];
      if (!seen[d->index]) seen[d->index] = 1, stack[top++] = d;
    }
  }
  for (uint32_t s = 1; ok > 0 && s < c->nstreams; s++)
    for (uint32_t i = 0; ok > 0 && i < c->streams[s].n; i++) ok = seen[c->streams[s].deps[i]->index];
  free(seen);
  free(stack);
  return ok;
}

static void capture_free(struct capture *c) {
  for (uint32_t i = 0; i < c->nstreams; i++) free(c->streams[i].deps);
  for (uint32_t i = 0; i < c->nevents; i++) free(c->events[i].deps);
  free(c->streams);
  free(c->events);
  free(c);
}

static int end(cudaStream_t s, int per_thread, cudaGraph_t *out) {
  if (!out) return cudaErrorInvalidValue;
  struct ferry_vgpu *v;
  uint32_t sid;
  int rc = ferry_stream_resolve(s, per_thread, &v, &sid);
  if (rc) return rc;
  pthread_mutex_lock(&cap_lock);
  struct capture *c;
  struct cap_stream *st = find_stream(v->index, sid, &c);
  if (!st) rc = cudaErrorIllegalState;
  else if (st != &c->streams[0]) rc = cudaErrorStreamCaptureUnmatched;
  else if (c->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(c->thread, pthread_self()))
    rc = cudaErrorStreamCaptureWrongThread;
  if (rc) {
    pthread_mutex_unlock(&cap_lock);
    return rc;
  }
  int j = c->invalidated ? 1 : joined(c);
  if (c->invalidated) rc = cudaErrorStreamCaptureInvalidated;
  else if (j < 0) rc = cudaErrorMemoryAllocation;
  else if (!j) rc = cudaErrorStreamCaptureUnjoined;
  for (struct capture **p = &captures; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  __atomic_sub_fetch(&ncaptures, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&cap_lock);
  c->graph->capturing--;
  if (rc && c->own_graph) ferry_graph_free(c->graph);
  *out = rc ? NULL : (cudaGraph_t)c->graph;
  capture_free(c);
  return rc;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
  return ferry_ret(end(s, 0, graph));
}
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *graph) {
  return ferry_ret(end(s, 1, graph));
}

static __thread cudaGraphEdgeData *zero_edges;
static __thread size_t zero_edges_n;

static int capture_info(cudaStream_t s, int per_thread, enum cudaStreamCaptureStatus *status,
                        unsigned long long *id, cudaGraph_t *graph, const cudaGraphNode_t **deps,
                        const cudaGraphEdgeData **edges, size_t *ndeps) {
  if (!status || (edges && !deps)) return cudaErrorInvalidValue;
  struct ferry_vgpu *v;
  uint32_t sid;
  int rc = ferry_stream_resolve(s, per_thread, &v, &sid);
  if (rc) return rc;
  *status = cudaStreamCaptureStatusNone;
  if (none_active()) return 0;
  pthread_mutex_lock(&cap_lock);
  struct capture *c;
  struct cap_stream *st = find_stream(v->index, sid, &c);
  if (!st && sid == LEGACY_SID) {
    /* the legacy stream while a blocking stream captures (that capture stays valid) */
    for (struct capture *o = captures; o && !rc; o = o->next)
      for (uint32_t i = 0; i < o->nstreams; i++)
        if (o->streams[i].vgpu == v->index && o->streams[i].blocking) rc = cudaErrorStreamCaptureImplicit;
  }
  if (st) {
    *status = c->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    if (id) *id = c->id;
    if (graph) *graph = (cudaGraph_t)c->graph;
    if (deps) *deps = (const cudaGraphNode_t *)st->deps;
    if (ndeps) *ndeps = st->n;
    if (edges) {
      if (zero_edges_n < st->n) {
        free(zero_edges);
        zero_edges_n = 0;
        if (!(zero_edges = calloc(st->n, sizeof *zero_edges))) rc = cudaErrorMemoryAllocation;
        else zero_edges_n = st->n;
      }
      *edges = st->n ? zero_edges : NULL;
    }
  }
  pthread_mutex_unlock(&cap_lock);
  return rc;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status) {
  return ferry_ret(capture_info(s, 0, status, NULL, NULL, NULL, NULL, NULL));
}
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *status) {
  return ferry_ret(capture_info(s, 1, status, NULL, NULL, NULL, NULL, NULL));
}
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *status,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                     size_t *ndeps) {
  return ferry_ret(capture_info(s, 0, status, id, graph, deps, edges, ndeps));
}
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *status,
                                          unsigned long long *id, cudaGraph_t *graph,
                                          const cudaGraphNode_t **deps,
                                          const cudaGraphEdgeData **edges, size_t *ndeps) {
  return ferry_ret(capture_info(s, 1, status, id, graph, deps, edges, ndeps));
}

static int update_deps(cudaStream_t s, int per_thread, cudaGraphNode_t *deps,
                       const cudaGraphEdgeData *edges, size_t n, unsigned flags) {
  if ((n && !deps) || flags > cudaStreamSetCaptureDependencies) return cudaErrorInvalidValue;
  int rc = ferry_edge_data_plain(edges, n, "cudaStreamUpdateCaptureDependencies");
  if (rc) return rc;
  struct ferry_vgpu *v;
  uint32_t sid;
  rc = ferry_stream_resolve(s, per_thread, &v, &sid);
  if (rc) return rc;
  pthread_mutex_lock(&cap_lock);
  struct capture *c;
  struct cap_stream *st = find_stream(v->index, sid, &c);
  if (!st) rc = cudaErrorIllegalState;
  else if (c->invalidated) rc = cudaErrorStreamCaptureInvalidated;
  for (size_t i = 0; i < n && !rc; i++) {
    struct ferry_gnode_obj *d = ferry_gnode_of(deps[i]);
    if (!d || d->graph != c->graph) rc = cudaErrorInvalidValue;
  }
  if (!rc && flags == cudaStreamSetCaptureDependencies) {
    /* deps may be the array cudaStreamGetCaptureInfo handed out: copied first */
    struct ferry_gnode_obj **copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy) rc = cudaErrorMemoryAllocation;
    else {
      if (n) memcpy(copy, deps, n * sizeof *copy);
      st->n = 0;
      for (size_t i = 0; i < n && !rc; i++) rc = deps_add(st, copy[i]);
      free(copy);
    }
  } else {
    for (size_t i = 0; i < n && !rc; i++) rc = deps_add(st, (struct ferry_gnode_obj *)deps[i]);
  }
  pthread_mutex_unlock(&cap_lock);
  return rc;
}
cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t s, cudaGraphNode_t *deps,
                                                const cudaGraphEdgeData *edges, size_t n,
                                                unsigned int flags) {
  return ferry_ret(update_deps(s, 0, deps, edges, n, flags));
}
cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t s, cudaGraphNode_t *deps,
                                                     const cudaGraphEdgeData *edges, size_t n,
                                                     unsigned int flags) {
  return ferry_ret(update_deps(s, 1, deps, edges, n, flags));
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  if (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed) return ferry_ret(cudaErrorInvalidValue);
  enum cudaStreamCaptureMode old = thread_mode;
  thread_mode = *mode;
  *mode = old;
  return cudaSuccess;
}

/* ---- the operations' nodes ---- */
/* the operation may become a node (or meet the legacy stream's rule): worth
   describing; otherwise it runs as it is, with nothing copied */
static int capture_wanted(struct ferry_vgpu *v, uint32_t stream) {
  return sink || (!none_active() && (stream == LEGACY_SID || ferry_stream_capturing(v, stream)));
}

int ferry_capture_launch(struct ferry_vgpu *v, uint32_t stream, const struct ferry_launch_args *a,
                         const struct ferry_layout *layout, const void *fn) {
  if (!capture_wanted(v, stream)) return 0;
  struct ferry_gop op = {.type = cudaGraphNodeTypeKernel, .vgpu = v->index};
  op.u.kernel.fn = fn;
  op.u.kernel.layout = layout;
  op.u.kernel.func = a->func;
  op.u.kernel.gx = a->gx, op.u.kernel.gy = a->gy, op.u.kernel.gz = a->gz;
  op.u.kernel.bx = a->bx, op.u.kernel.by = a->by, op.u.kernel.bz = a->bz;
  op.u.kernel.shmem = a->shmem;
  op.u.kernel.cooperative = a->cooperative;
  if (a->cooperative) return ferry_capture_refuse(v, stream, "a cooperative launch");
  op.u.kernel.params_len = a->params.len;
  op.u.kernel.attrs_len = a->attrs.len;
  op.u.kernel.params = malloc(a->params.len ? a->params.len : 1);
  op.u.kernel.attrs = a->attrs.len ? malloc(a->attrs.len) : NULL;
  if (!op.u.kernel.params || (a->attrs.len && !op.u.kernel.attrs)) {
    ferry_gop_release(&op);
    return cudaErrorMemoryAllocation;
  }
  if (a->params.len) memcpy(op.u.kernel.params, a->params.ptr, a->params.len);
  if (a->attrs.len) memcpy(op.u.kernel.attrs, a->attrs.ptr, a->attrs.len);
  return ferry_capture_op(v, stream, &op);
}

int ferry_capture_memset(struct ferry_vgpu *v, uint32_t stream, uint64_t dst, uint64_t pitch,
                         uint32_t value, uint32_t elem, uint64_t width, uint64_t height) {
  if (!capture_wanted(v, stream)) return 0;
  struct ferry_gop op = {.type = cudaGraphNodeTypeMemset, .vgpu = v->index};
  op.u.memset = (struct ferry_gnode_memset){dst, pitch, width, height, value, elem};
  return ferry_capture_op(v, stream, &op);
}

int ferry_capture_copy(struct ferry_vgpu *v, uint32_t stream, uint64_t dst, uint64_t dpitch,
                       uint64_t src, uint64_t spitch, uint64_t width, uint64_t height) {
  if (!capture_wanted(v, stream)) return 0;
  struct ferry_gop op = {.type = cudaGraphNodeTypeMemcpy, .vgpu = v->index};
  op.u.memcpy.dst = dst, op.u.memcpy.dpitch = dpitch, op.u.memcpy.src = src;
  op.u.memcpy.spitch = spitch, op.u.memcpy.width = width, op.u.memcpy.height = height;
  op.u.memcpy.kind = cudaMemcpyDeviceToDevice;
  return ferry_capture_op(v, stream, &op);
}

/* Copies with host memory and host functions become nodes the client
   plays when the graph is launched (graph_unroll.c): the bytes are read
   and written, and the function called, in this process then. */
int ferry_capture_host_copy(struct ferry_vgpu *v, uint32_t stream, void *dst, size_t dpitch,
                            const void *src, size_t spitch, size_t width, size_t height,
                            enum cudaMemcpyKind kind) {
  if (!capture_wanted(v, stream)) return 0;
  struct ferry_gop op;
  int rc = ferry_graph_host_copy_op(dst, dpitch, src, spitch, width, height, kind, &op);
  return rc ? rc : ferry_capture_op(v, stream, &op);
}

int ferry_capture_host(struct ferry_vgpu *v, uint32_t stream, cudaHostFn_t fn, void *user) {
  if (!capture_wanted(v, stream)) return 0;
  struct ferry_gop op;
  int rc = ferry_graph_host_op(fn, user, &op);
  return rc ? rc : ferry_capture_op(v, stream, &op);
}
