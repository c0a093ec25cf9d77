/*
 * Stream capture and graph building on the client (shim/runtime/capture.c,
 * graph.c, graph_exec.c, graph_host.c, graph_unroll.c) without a server:
 * the operations' entry points and the call path are stand-ins here, so the
 * tests see exactly which nodes a capture makes, with which dependencies,
 * the blob an instantiation sends (walked with protocol/graph.c's
 * ferry_graph_walk), and the operations a graph with host work plays.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/graph.h"
#include "shim/core/link.h"
#include "shim/runtime/graph.h"

/* ---- stand-ins for the rest of the client ----
   streams are handles 0x100 + id on vGPU 0; 0 is the legacy stream */
struct ferry_state ferry;
static struct ferry_thread thread_state;
struct ferry_thread *ferry_thread(void) { return &thread_state; }
int ferry_ensure_init(void) { return 0; }
struct ferry_vgpu *ferry_current(int *err) {
  (void)err;
  return &ferry.vgpus[0];
}
int ferry_stream_resolve(cudaStream_t s, int per_thread, struct ferry_vgpu **v, uint32_t *id) {
  (void)per_thread;
  uintptr_t raw = (uintptr_t)s;
  *v = &ferry.vgpus[0];
  *id = raw == 0 || raw == (uintptr_t)cudaStreamLegacy ? 0 : (uint32_t)(raw - 0x100);
  return 0;
}
cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int *flags) {
  *flags = (uintptr_t)s >= 0x180 ? 0 : cudaStreamNonBlocking; /* 0x180 and up: blocking */
  return cudaSuccess;
}
int ferry_event_find(void *e, int *vgpu, uint32_t *id) {
  *vgpu = 0;
  *id = (uint32_t)(uintptr_t)e;
  return 0;
}
void ferry_migrate_at_launch(int vgpu) { (void)vgpu; }
/* mapped host memory (shim/core/shadow.c) is tested end to end (e2e_mapped_*) */
int ferry_shadow_scan(struct ferry_vgpu *v, const void *params, size_t len) {
  (void)v, (void)params, (void)len;
  return 0;
}
void ferry_shadow_touch(void) {}
/* no migration here: no call is ever stale */
void ferry_expect_generation(struct ferry_vgpu *v, uint64_t gen) { (void)v, (void)gen; }
/* no driver front end: module variables never move */
uint64_t ferry_variable_now(int vgpu, uint64_t addr) {
  (void)vgpu;
  return addr;
}
const unsigned char *ferry_params_now(const struct ferry_layout *l, int vgpu,
                                      const unsigned char *params, uint32_t len, unsigned char *buf) {
  (void)l, (void)vgpu, (void)len, (void)buf;
  return params;
}

/* the operations a graph with host work issues when it is played
   (graph_unroll.c), in order: what ('k' kernel with its tag, 's' memset,
   'c' copy, 'y' stream synchronize, 'r' event record, 'w' event wait, 'h'
   a host function) and two values */
struct played {
  char what;
  uint64_t a, b;
};
static struct played played[64];
static int nplayed;
static void play_log(char what, uint64_t a, uint64_t b) {
  if (nplayed < 64) played[nplayed++] = (struct played){what, a, b};
}

/* device memory: vGPU 0's arena, mapped by nobody; pinned host memory */
#define ARENA_BASE 0x300000000000ull
static unsigned char pinned[4096];
struct ferry_vgpu *ferry_vgpu_of(const void *p) {
  uint64_t a = (uint64_t)(uintptr_t)p;
  return a >= ARENA_BASE && a < ARENA_BASE + (1ull << 30) ? &ferry.vgpus[0] : NULL;
}
int ferry_host_pinned(const void *p) {
  return (const unsigned char *)p >= pinned && (const unsigned char *)p < pinned + sizeof pinned;
}
static int no_map(void *ctx, uint64_t addr, uint64_t size) {
  (void)ctx, (void)addr, (void)size;
  return 0;
}
static void *dev_alloc(uint64_t n) {
  struct ferry_arena *a = &ferry.vgpus[0].arena;
  if (!a->size) assert_int_equal(ferry_arena_init(a, ARENA_BASE, 1ull << 30, 2u << 20), 0);
  struct ferry_arena_backend be = {no_map, no_map, NULL};
  uint64_t addr;
  assert_int_equal(ferry_arena_alloc(a, n, &be, &addr), 0);
  return (void *)(uintptr_t)addr;
}
/* copies into pinned memory still owed by the link (remote.c) */
static size_t owed;
size_t ferry_deferred_pending(struct ferry_link *l) {
  (void)l;
  return owed;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  play_log('y', (uintptr_t)s, 0);
  owed = 0;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  play_log('r', (uintptr_t)e, (uintptr_t)s);
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  (void)flags;
  play_log('w', (uintptr_t)e, (uintptr_t)s);
  return cudaSuccess;
}

/* the wire: what the last graph_instantiate or graph_update carried, and
   the calls made */
static unsigned char *sent;
static size_t sent_len;
static int launches_sent, instantiates_sent, updates_sent, destroys_sent;
static void keep_sent(ferry_blob nodes) {
  free(sent);
  sent = malloc(nodes.len + 1);
  memcpy(sent, nodes.ptr, nodes.len);
  sent_len = nodes.len;
}
int ferry_call(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
               const struct ferry_bulk *bulk) {
  (void)v, (void)rets, (void)bulk;
  if (call == FERRY_CALL_graph_instantiate) {
    keep_sent(((const struct ferry_graph_instantiate_args *)args)->nodes);
    instantiates_sent++;
  } else if (call == FERRY_CALL_graph_update) {
    keep_sent(((const struct ferry_graph_update_args *)args)->nodes);
    updates_sent++;
  } else if (call == FERRY_CALL_graph_launch) {
    launches_sent++;
  } else if (call == FERRY_CALL_graph_exec_destroy) {
    destroys_sent++;
  } else if (call == FERRY_CALL_launch) {
    const struct ferry_launch_args *a = args;
    unsigned tag = 0;
    memcpy(&tag, a->params.ptr, a->params.len < 4 ? a->params.len : 4);
    play_log('k', tag, a->stream);
  }
  return 0;
}

/* the operations: what ferry_launch and memory.c do with a capture */
static int op_on(cudaStream_t s, int (*capture)(struct ferry_vgpu *, uint32_t, void *), void *ctx) {
  struct ferry_vgpu *v;
  uint32_t sid;
  ferry_stream_resolve(s, 0, &v, &sid);
  return FERRY_CAPTURE_DONE(capture(v, sid, ctx));
}
static int cap_kernel(struct ferry_vgpu *v, uint32_t sid, void *ctx) {
  unsigned tag = *(unsigned *)ctx;
  struct ferry_launch_args a = {.func = 7, .gx = 1, .gy = 1, .gz = 1, .bx = 32, .by = 1, .bz = 1,
                                .params = {&tag, sizeof tag}};
  return ferry_capture_launch(v, sid, &a, NULL, (void *)0x1234);
}
static int kernel(cudaStream_t s, unsigned tag) { return op_on(s, cap_kernel, &tag); }
cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                             cudaStream_t stream) {
  (void)func, (void)grid, (void)block, (void)shmem;
  return (cudaError_t)kernel(stream, *(unsigned *)args[0]);
}
static int cap_set(struct ferry_vgpu *v, uint32_t sid, void *ctx) {
  return ferry_capture_memset(v, sid, 0x200000001000ull, 64, *(uint32_t *)ctx, 1, 64, 1);
}
int ferry_memset_wide(void *dst, size_t pitch, uint32_t value, unsigned elem, size_t width,
                      size_t height, cudaStream_t stream, int per_thread) {
  (void)pitch, (void)elem, (void)width, (void)height, (void)per_thread;
  play_log('s', (uintptr_t)dst, value);
  return op_on(stream, cap_set, &value);
}
static int cap_copy(struct ferry_vgpu *v, uint32_t sid, void *ctx) {
  (void)ctx;
  return ferry_capture_copy(v, sid, 0x200000002000ull, 64, 0x200000001000ull, 64, 64, 1);
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s) {
  (void)src, (void)n;
  play_log('c', (uintptr_t)dst, kind);
  return (cudaError_t)op_on(s, cap_copy, NULL);
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t w,
                              size_t h, enum cudaMemcpyKind kind, cudaStream_t s) {
  (void)dpitch, (void)spitch, (void)w, (void)h;
  return cudaMemcpyAsync(dst, src, 0, kind, s);
}

#define S(n) ((cudaStream_t)(uintptr_t)(0x100 + (n)))
#define EV(n) ((void *)(uintptr_t)(n))
static struct ferry_vgpu *v0(void) { return &ferry.vgpus[0]; }
static int record(cudaStream_t s, unsigned e) {
  return FERRY_CAPTURE_DONE(ferry_capture_record(v0(), (uint32_t)((uintptr_t)s - 0x100), EV(e), e, 0));
}
static int wait_on(cudaStream_t s, unsigned e) {
  return FERRY_CAPTURE_DONE(ferry_capture_wait(v0(), (uint32_t)((uintptr_t)s - 0x100), 0, EV(e), e, 0));
}

/* ---- the blob ---- */
struct seen {
  uint32_t n, type[64], ndeps[64], deps[64][8], tag[64];
};
static int collect(void *ctx, uint32_t i, const struct ferry_gnode *n) {
  struct seen *s = ctx;
  s->type[i] = n->type;
  s->ndeps[i] = n->ndeps;
  for (uint32_t k = 0; k < n->ndeps && k < 8; k++) s->deps[i][k] = n->deps[k];
  if (n->type == FERRY_GNODE_KERNEL) memcpy(&s->tag[i], n->u.kernel.params, 4);
  s->n = i + 1;
  return 0;
}
static struct seen instantiate_and_walk(cudaGraph_t g, cudaGraphExec_t *x) {
  struct seen s = {0};
  assert_int_equal(cudaGraphInstantiate(x, g, 0), cudaSuccess);
  assert_true(ferry_graph_walk(sent, sent_len, collect, &s) >= 0);
  return s;
}

static void host_fn(void *user);

/* a fork onto a second stream and its join: a diamond */
static void test_fork_join(void **state) {
  (void)state;
  enum cudaStreamCaptureStatus st;
  unsigned long long id = 0;
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(cudaStreamGetCaptureInfo(S(1), &st, &id, NULL, NULL, NULL, NULL), cudaSuccess);
  assert_int_equal(st, cudaStreamCaptureStatusActive);
  assert_true(id != 0);
  assert_int_equal(kernel(S(1), 1), 0);
  assert_int_equal(record(S(1), 50), 0);
  assert_int_equal(wait_on(S(2), 50), 0);
  assert_int_equal(ferry_stream_capturing(v0(), 2), 1);
  assert_int_equal(kernel(S(2), 2), 0);
  assert_int_equal(kernel(S(1), 3), 0);
  assert_int_equal(record(S(2), 51), 0);
  assert_int_equal(ferry_capture_event_busy(0, 51), cudaErrorCapturedEvent);
  assert_int_equal(wait_on(S(1), 51), 0);
  assert_int_equal(kernel(S(1), 4), 0);
  cudaGraph_t g;
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaSuccess);
  assert_int_equal(ferry_stream_capturing(v0(), 2), 0);
  assert_int_equal(ferry_capture_event_busy(0, 51), 0);
  cudaGraphExec_t x;
  struct seen s = instantiate_and_walk(g, &x);
  assert_int_equal(s.n, 4);
  /* 1; 2 and 3 after 1; 4 after both */
  assert_int_equal(s.tag[0], 1);
  assert_int_equal(s.ndeps[0], 0);
  assert_int_equal(s.ndeps[1], 1);
  assert_int_equal(s.ndeps[2], 1);
  assert_int_equal(s.tag[3], 4);
  assert_int_equal(s.ndeps[3], 2);
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  assert_int_equal(launches_sent, 1);
  assert_int_equal(cudaGraphExecDestroy(x), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
}

/* a fork that never joins back */
static void test_unjoined(void **state) {
  (void)state;
  cudaGraph_t g = (cudaGraph_t)1;
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(kernel(S(1), 1), 0);
  assert_int_equal(record(S(1), 60), 0);
  assert_int_equal(wait_on(S(2), 60), 0);
  assert_int_equal(kernel(S(2), 2), 0);
  assert_int_equal(cudaStreamEndCapture(S(2), &g), cudaErrorStreamCaptureUnmatched);
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaErrorStreamCaptureUnjoined);
  assert_null(g);
  assert_int_equal(ferry_stream_capturing(v0(), 2), 0);
}

/* refusals invalidate; the legacy stream may not be captured, nor used
   while a blocking stream captures */
static void test_refusals(void **state) {
  (void)state;
  cudaGraph_t g;
  assert_int_equal(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  assert_int_equal(ferry_capture_refuse(v0(), 1, "a test copy"), cudaErrorStreamCaptureUnsupported);
  assert_int_equal(ferry_capture_refuse(v0(), 3, "a copy elsewhere"), 0);
  assert_int_equal(kernel(S(1), 1), cudaErrorStreamCaptureInvalidated);
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaErrorStreamCaptureInvalidated);
  /* 0x180: a blocking stream */
  assert_int_equal(cudaStreamBeginCapture(S(0x80), cudaStreamCaptureModeRelaxed), cudaSuccess);
  assert_int_equal(kernel(0, 9), cudaErrorStreamCaptureImplicit);
  assert_int_equal(cudaStreamEndCapture(S(0x80), &g), cudaErrorStreamCaptureInvalidated);
  assert_int_equal(ferry_capture_sync(v0(), 1), 0);
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(ferry_capture_sync(v0(), 1), cudaErrorStreamCaptureUnsupported);
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaErrorStreamCaptureInvalidated);
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaErrorIllegalState);
  /* uncaptured work: refused, unless waited for as external (a node) */
  assert_int_equal(record(S(3), 70), 0);
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(wait_on(S(1), 70), cudaErrorStreamCaptureIsolation);
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaErrorStreamCaptureInvalidated);
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(ferry_capture_wait(v0(), 1, 0, EV(70), 70, cudaEventWaitExternal), FERRY_CAPTURED);
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaSuccess);
  size_t n = 0;
  assert_int_equal(cudaGraphGetNodes(g, NULL, &n), cudaSuccess);
  assert_int_equal(n, 1);
  assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
  /* two captures never merge */
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(cudaStreamBeginCapture(S(2), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(record(S(1), 71), 0);
  assert_int_equal(wait_on(S(2), 71), cudaErrorStreamCaptureMerge);
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaErrorStreamCaptureInvalidated);
  assert_int_equal(cudaStreamEndCapture(S(2), &g), cudaErrorStreamCaptureInvalidated);
}

/* the mode rules for potentially unsafe calls, from another thread */
static int other_rc;
static enum cudaStreamCaptureMode other_mode;
static void *other(void *p) {
  (void)p;
  enum cudaStreamCaptureMode m = other_mode;
  cudaThreadExchangeStreamCaptureMode(&m);
  other_rc = ferry_capture_unsafe();
  return NULL;
}
static int from_other(enum cudaStreamCaptureMode mode) {
  pthread_t t;
  other_mode = mode;
  pthread_create(&t, NULL, other, NULL);
  pthread_join(t, NULL);
  return other_rc;
}
static void test_modes(void **state) {
  (void)state;
  cudaGraph_t g;
  assert_int_equal(ferry_capture_unsafe(), 0);
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  assert_int_equal(from_other(cudaStreamCaptureModeGlobal), 0);
  assert_int_equal(from_other(cudaStreamCaptureModeThreadLocal), 0);
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(from_other(cudaStreamCaptureModeThreadLocal), 0);
  assert_int_equal(from_other(cudaStreamCaptureModeRelaxed), 0);
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(from_other(cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaErrorStreamCaptureInvalidated);
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeRelaxed), cudaSuccess);
  assert_int_equal(ferry_capture_unsafe(), 0);
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
}

/* the explicit API: an edge added to an earlier node, a child graph
   flattened between two empty nodes, an update of the exec */
static void test_explicit(void **state) {
  (void)state;
  cudaGraph_t g, child;
  cudaGraphNode_t a, b, c, ch, k;
  assert_int_equal(cudaGraphCreate(&g, 0), cudaSuccess);
  assert_int_equal(cudaGraphCreate(&child, 0), cudaSuccess);
  unsigned t1 = 11, t2 = 22, t3 = 33;
  void *args1[] = {&t1}, *args2[] = {&t2}, *args3[] = {&t3};
  struct cudaKernelNodeParams kp = {.func = (void *)1, .gridDim = {1, 1, 1}, .blockDim = {32, 1, 1},
                                    .kernelParams = args2};
  assert_int_equal(cudaGraphAddKernelNode(&b, g, NULL, 0, &kp), cudaSuccess);
  struct cudaMemsetParams mp = {.dst = (void *)0x200000001000ull, .value = 0x0101, .elementSize = 2,
                                .width = 32, .height = 1};
  assert_int_equal(cudaGraphAddMemsetNode(&a, g, NULL, 0, &mp), cudaSuccess);
  assert_int_equal(cudaGraphAddDependencies(g, &a, &b, NULL, 1), cudaSuccess); /* b after a, made later */
  assert_int_equal(cudaGraphAddDependencies(g, &a, &b, NULL, 1), cudaErrorInvalidValue);
  kp.kernelParams = args3;
  assert_int_equal(cudaGraphAddKernelNode(&k, child, NULL, 0, &kp), cudaSuccess);
  assert_int_equal(cudaGraphAddChildGraphNode(&ch, g, &b, 1, child), cudaSuccess);
  assert_int_equal(cudaGraphAddMemcpyNode1D(&c, g, &ch, 1, (void *)0x200000002000ull,
                                            (void *)0x200000001000ull, 64, cudaMemcpyDeviceToDevice),
                   cudaSuccess);
  cudaGraphExec_t x;
  struct seen s = instantiate_and_walk(g, &x);
  /* memset, kernel 22, entry, kernel 33, exit, copy */
  assert_int_equal(s.n, 6);
  assert_int_equal(s.type[0], FERRY_GNODE_MEMSET);
  assert_int_equal(s.type[1], FERRY_GNODE_KERNEL);
  assert_int_equal(s.tag[1], 22);
  assert_int_equal(s.deps[1][0], 0);
  assert_int_equal(s.type[2], FERRY_GNODE_EMPTY);
  assert_int_equal(s.deps[2][0], 1);
  assert_int_equal(s.tag[3], 33);
  assert_int_equal(s.deps[3][0], 2);
  assert_int_equal(s.type[4], FERRY_GNODE_EMPTY);
  assert_int_equal(s.deps[4][0], 3);
  assert_int_equal(s.type[5], FERRY_GNODE_MEMCPY);
  assert_int_equal(s.deps[5][0], 4);
  /* the exec's node changes; the graph's stays. Changes travel with the
     next launch, once however many there were, asynchronously */
  int before = instantiates_sent, updates = updates_sent;
  kp.kernelParams = args2;
  assert_int_equal(cudaGraphExecKernelNodeSetParams(x, b, &kp), cudaSuccess);
  kp.kernelParams = args1;
  assert_int_equal(cudaGraphExecKernelNodeSetParams(x, b, &kp), cudaSuccess);
  assert_int_equal(instantiates_sent, before);
  assert_int_equal(updates_sent, updates);
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  assert_int_equal(updates_sent, updates + 1);
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess); /* nothing changed since */
  assert_int_equal(updates_sent, updates + 1);
  assert_int_equal(instantiates_sent, before);
  memset(&s, 0, sizeof s);
  assert_true(ferry_graph_walk(sent, sent_len, collect, &s) == 6);
  assert_int_equal(s.tag[1], 11);
  /* a disabled node is sent as an empty one, in its place */
  assert_int_equal(cudaGraphNodeSetEnabled(x, b, 0), cudaSuccess);
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  memset(&s, 0, sizeof s);
  assert_true(ferry_graph_walk(sent, sent_len, collect, &s) == 6);
  assert_int_equal(s.type[1], FERRY_GNODE_EMPTY);
  assert_int_equal(s.deps[1][0], 0);
  assert_int_equal(cudaGraphNodeSetEnabled(x, ch, 0), cudaErrorInvalidValue); /* not a kind CUDA disables */
  assert_int_equal(cudaGraphNodeSetEnabled(x, b, 1), cudaSuccess);
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  memset(&s, 0, sizeof s);
  assert_true(ferry_graph_walk(sent, sent_len, collect, &s) == 6);
  assert_int_equal(s.type[1], FERRY_GNODE_KERNEL);
  /* the generic form, in the exec */
  struct cudaGraphNodeParams gp = {.type = cudaGraphNodeTypeMemset};
  gp.memset.dst = (void *)0x200000003000ull, gp.memset.value = 5, gp.memset.elementSize = 1;
  gp.memset.width = 16, gp.memset.height = 1;
  assert_int_equal(cudaGraphExecNodeSetParams(x, a, &gp), cudaSuccess);
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  memset(&s, 0, sizeof s);
  assert_true(ferry_graph_walk(sent, sent_len, collect, &s) == 6);
  assert_int_equal(s.type[0], FERRY_GNODE_MEMSET);
  gp.type = cudaGraphNodeTypeMemAlloc; /* a kind ferry has not */
  assert_int_equal(cudaGraphExecNodeSetParams(x, a, &gp), cudaErrorNotSupported);
  gp.type = cudaGraphNodeTypeHost, gp.host.fn = host_fn; /* another kind than the node's */
  assert_int_equal(cudaGraphExecNodeSetParams(x, a, &gp), cudaErrorInvalidValue);
  struct cudaKernelNodeParams back;
  assert_int_equal(cudaGraphKernelNodeGetParams(b, &back), cudaSuccess);
  assert_ptr_equal(back.func, (void *)1);
  /* another topology is refused */
  cudaGraph_t g2;
  cudaGraphNode_t e;
  cudaGraphExecUpdateResultInfo info;
  assert_int_equal(cudaGraphClone(&g2, g), cudaSuccess);
  assert_int_equal(cudaGraphExecUpdate(x, g2, &info), cudaSuccess);
  assert_int_equal(cudaGraphAddEmptyNode(&e, g2, NULL, 0), cudaSuccess);
  assert_int_equal(cudaGraphExecUpdate(x, g2, &info), cudaErrorGraphExecUpdateFailure);
  assert_int_equal(info.result, cudaGraphExecUpdateErrorTopologyChanged);
  /* a cycle is refused at instantiation */
  cudaGraphExec_t y;
  assert_int_equal(cudaGraphAddDependencies(g, &c, &a, NULL, 1), cudaSuccess);
  assert_int_equal(cudaGraphInstantiate(&y, g, 0), cudaErrorInvalidValue);
  assert_int_equal(cudaGraphExecDestroy(x), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(g2), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(child), cudaSuccess);
}

/* after a device reset the server has no executable graph: the old
   handles are refused here, never sent (an unknown exec ends a session) */
static void test_reset(void **state) {
  (void)state;
  cudaGraph_t g;
  cudaGraphNode_t e;
  cudaGraphExec_t x;
  assert_int_equal(cudaGraphCreate(&g, 0), cudaSuccess);
  assert_int_equal(cudaGraphAddEmptyNode(&e, g, NULL, 0), cudaSuccess);
  assert_int_equal(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  int launched = launches_sent;
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  ferry_gexecs_forget(0);
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaErrorInvalidResourceHandle);
  assert_int_equal(launches_sent, launched + 1);
  assert_int_equal(cudaGraphExecDestroy(x), cudaSuccess);
  assert_int_equal(cudaGraphInstantiate(&x, g, 0), cudaSuccess); /* a new one works */
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  assert_int_equal(cudaGraphExecDestroy(x), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
}

/* a graph whose nodes exceed one message is refused at instantiation, and
   nothing is sent; a smaller one of the same kind goes */
static void test_too_big(void **state) {
  (void)state;
  cudaGraph_t g;
  cudaGraphExec_t x;
  for (int n = 1000, pass = 0; pass < 2; n = 40000, pass++) {
    assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
    for (int i = 0; i < n; i++) assert_int_equal(kernel(S(1), (unsigned)i), 0);
    assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaSuccess);
    int sent_before = instantiates_sent;
    cudaError_t rc = cudaGraphInstantiate(&x, g, 0);
    if (pass == 0) {
      assert_int_equal(rc, cudaSuccess);
      assert_int_equal(instantiates_sent, sent_before + 1);
      assert_int_equal(cudaGraphExecDestroy(x), cudaSuccess);
    } else {
      assert_int_equal(rc, cudaErrorNotSupported);
      assert_int_equal(instantiates_sent, sent_before);
    }
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
  }
}

/* ---- graphs with host work: played by the client, never sent ---- */
static int host_calls;
static void host_fn(void *user) {
  host_calls++;
  *(int *)user = nplayed; /* what had been issued when it ran */
  play_log('h', 0, 0);
}

static struct cudaKernelNodeParams tagged(void **args) {
  return (struct cudaKernelNodeParams){.func = (void *)1, .gridDim = {1, 1, 1}, .blockDim = {32, 1, 1},
                                       .kernelParams = args};
}

/* want: the letters of what was played, in order */
static void expect_played(const char *want) {
  char got[65] = {0};
  for (int i = 0; i < nplayed; i++) got[i] = played[i].what;
  assert_string_equal(got, want);
}

/* H2D copy -> kernel -> D2H copy -> host node, by the explicit API */
static void test_host_explicit(void **state) {
  (void)state;
  void *a = dev_alloc(4096);
  static unsigned char in[256], out[256];
  cudaGraph_t g;
  cudaGraphNode_t h2d, k, d2h, h;
  assert_int_equal(cudaGraphCreate(&g, 0), cudaSuccess);
  struct cudaMemcpy3DParms p = {0};
  p.srcPtr = (struct cudaPitchedPtr){in, 256, 256, 1};
  p.dstPtr = (struct cudaPitchedPtr){a, 256, 256, 1};
  p.extent = (struct cudaExtent){256, 1, 1};
  p.kind = cudaMemcpyHostToDevice;
  assert_int_equal(cudaGraphAddMemcpyNode(&h2d, g, NULL, 0, &p), cudaSuccess);
  unsigned t7 = 7, t8 = 8;
  void *args7[] = {&t7}, *args8[] = {&t8};
  struct cudaKernelNodeParams kp = tagged(args7);
  assert_int_equal(cudaGraphAddKernelNode(&k, g, &h2d, 1, &kp), cudaSuccess);
  assert_int_equal(cudaGraphAddMemcpyNode1D(&d2h, g, &k, 1, out, a, 256, cudaMemcpyDeviceToHost), cudaSuccess);
  int at = -1;
  struct cudaHostNodeParams hp = {host_fn, &at}, hback;
  assert_int_equal(cudaGraphAddHostNode(&h, g, &d2h, 1, &hp), cudaSuccess);
  /* what was given comes back */
  struct cudaMemcpy3DParms back;
  assert_int_equal(cudaGraphMemcpyNodeGetParams(h2d, &back), cudaSuccess);
  assert_int_equal(back.kind, cudaMemcpyHostToDevice);
  assert_ptr_equal(back.srcPtr.ptr, in);
  assert_ptr_equal(back.dstPtr.ptr, a);
  assert_int_equal(cudaGraphHostNodeGetParams(h, &hback), cudaSuccess);
  assert_ptr_equal(hback.fn, host_fn);
  assert_ptr_equal(hback.userData, &at);
  enum cudaGraphNodeType type;
  assert_int_equal(cudaGraphNodeGetType(h, &type), cudaSuccess);
  assert_int_equal(type, cudaGraphNodeTypeHost);
  /* a device copy's range is checked as the copy's would be; a host node needs a function */
  assert_int_equal(cudaGraphAddMemcpyNode1D(&d2h, g, NULL, 0, out, (char *)a + 4000, 256,
                                            cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  struct cudaHostNodeParams none = {NULL, NULL};
  assert_int_equal(cudaGraphAddHostNode(&h, g, NULL, 0, &none), cudaErrorInvalidValue);

  /* nothing of it goes to the server, now or at launch */
  int inst = instantiates_sent, launched = launches_sent, destroyed = destroys_sent;
  cudaGraphExec_t x;
  assert_int_equal(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  assert_int_equal(instantiates_sent, inst);
  nplayed = 0, host_calls = 0;
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  assert_int_equal(launches_sent, launched);
  /* in order, each as its own operation; the host function after the stream's work */
  expect_played("ckcyh");
  assert_int_equal(played[0].a, (uintptr_t)a);
  assert_int_equal(played[0].b, cudaMemcpyHostToDevice);
  assert_int_equal(played[1].a, 7);
  assert_int_equal(played[1].b, 1); /* on the launch stream */
  assert_int_equal(played[2].a, (uintptr_t)out);
  assert_int_equal(played[2].b, cudaMemcpyDeviceToHost);
  assert_int_equal(host_calls, 1);
  assert_int_equal(at, 4);
  /* the exec's nodes change; the next launch plays the new ones */
  kp = tagged(args8);
  assert_int_equal(cudaGraphExecKernelNodeSetParams(x, k, &kp), cudaSuccess);
  static unsigned char out2[256];
  assert_int_equal(cudaGraphExecMemcpyNodeSetParams1D(x, d2h, out2, a, 256, cudaMemcpyDeviceToHost),
                   cudaSuccess);
  int at2 = -1;
  struct cudaHostNodeParams hp2 = {host_fn, &at2};
  assert_int_equal(cudaGraphExecHostNodeSetParams(x, h, &hp2), cudaSuccess);
  nplayed = 0;
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  expect_played("ckcyh");
  assert_int_equal(played[1].a, 8);
  assert_int_equal(played[2].a, (uintptr_t)out2);
  assert_int_equal(at2, 4);
  assert_int_equal(at, 4); /* the graph's node kept its own */
  /* a copy into pinned memory still owed: the host-to-device copy reads
     host memory after the stream's synchronization */
  owed = 1, nplayed = 0;
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  expect_played("yckcyh");
  /* a disabled node does nothing, in its place */
  assert_int_equal(cudaGraphNodeSetEnabled(x, k, 0), cudaSuccess);
  nplayed = 0;
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  expect_played("ccyh");
  assert_int_equal(cudaGraphExecDestroy(x), cudaSuccess);
  assert_int_equal(destroys_sent, destroyed);
  assert_int_equal(launches_sent, launched);
  assert_int_equal(instantiates_sent, inst);

  /* the generic API makes host nodes too; an update from a graph of the same shape */
  cudaGraph_t g2;
  cudaGraphNode_t h3;
  assert_int_equal(cudaGraphClone(&g2, g), cudaSuccess);
  struct cudaGraphNodeParams gp = {.type = cudaGraphNodeTypeHost};
  gp.host.fn = host_fn, gp.host.userData = &at2;
  assert_int_equal(cudaGraphAddNode(&h3, g, &h, NULL, 1, &gp), cudaSuccess);
  assert_int_equal(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  nplayed = 0, host_calls = 0;
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  expect_played("ckcyhyh");
  assert_int_equal(host_calls, 2);
  cudaGraphExecUpdateResultInfo info;
  assert_int_equal(cudaGraphExecUpdate(x, g2, &info), cudaErrorGraphExecUpdateFailure); /* one node fewer */
  assert_int_equal(cudaGraphExecDestroy(x), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(g2), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
  assert_int_equal(instantiates_sent, inst);
}

/* the same by stream capture: the copy path hands its host copies over
   (memory.c), cudaLaunchHostFunc its function (stream.c) */
static void test_host_capture(void **state) {
  (void)state;
  void *a = dev_alloc(4096);
  static unsigned char in[256], out[256];
  int at = -1;
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(ferry_capture_host_copy(v0(), 1, a, 256, in, 256, 256, 1, cudaMemcpyHostToDevice),
                   FERRY_CAPTURED);
  assert_int_equal(kernel(S(1), 9), 0);
  assert_int_equal(ferry_capture_host_copy(v0(), 1, pinned, 256, a, 256, 256, 1, cudaMemcpyDeviceToHost),
                   FERRY_CAPTURED);
  assert_int_equal(ferry_capture_host(v0(), 1, host_fn, &at), FERRY_CAPTURED);
  /* another stream runs them (0: not captured) */
  assert_int_equal(ferry_capture_host_copy(v0(), 3, out, 256, a, 256, 256, 1, cudaMemcpyDeviceToHost), 0);
  assert_int_equal(ferry_capture_host(v0(), 3, host_fn, &at), 0);
  /* a bad range is the copy's error, and the capture goes on */
  assert_int_equal(ferry_capture_host_copy(v0(), 1, (char *)a + 4000, 256, in, 256, 256, 1,
                                           cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  cudaGraph_t g;
  assert_int_equal(cudaStreamEndCapture(S(1), &g), cudaSuccess);
  size_t n = 0;
  assert_int_equal(cudaGraphGetNodes(g, NULL, &n), cudaSuccess);
  assert_int_equal(n, 4);
  cudaGraphNode_t nodes[4];
  assert_int_equal(cudaGraphGetNodes(g, nodes, &n), cudaSuccess);
  for (int i = 1; i < 4; i++) { /* a chain, as the stream ordered them */
    cudaGraphNode_t dep;
    size_t nd = 1;
    assert_int_equal(cudaGraphNodeGetDependencies(nodes[i], &dep, NULL, &nd), cudaSuccess);
    assert_int_equal(nd, 1);
    assert_ptr_equal(dep, nodes[i - 1]);
  }
  int inst = instantiates_sent, launched = launches_sent;
  cudaGraphExec_t x;
  assert_int_equal(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  for (int r = 0; r < 3; r++) {
    nplayed = 0, at = -1;
    assert_int_equal(cudaGraphLaunch(x, S(2)), cudaSuccess);
    expect_played("ckcyh");
    assert_int_equal(played[1].a, 9);
    assert_int_equal(played[1].b, 2);
    assert_int_equal(played[2].a, (uintptr_t)pinned);
    assert_int_equal(at, 4);
  }
  assert_int_equal(instantiates_sent, inst);
  assert_int_equal(launches_sent, launched);
  /* launched into another capture, it is embedded: that graph is played too */
  assert_int_equal(cudaStreamBeginCapture(S(1), cudaStreamCaptureModeGlobal), cudaSuccess);
  assert_int_equal(kernel(S(1), 10), 0);
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  cudaGraph_t outer;
  assert_int_equal(cudaStreamEndCapture(S(1), &outer), cudaSuccess);
  cudaGraphExec_t y;
  assert_int_equal(cudaGraphInstantiate(&y, outer, 0), cudaSuccess);
  nplayed = 0;
  assert_int_equal(cudaGraphLaunch(y, S(1)), cudaSuccess);
  expect_played("kckcyh");
  assert_int_equal(instantiates_sent, inst);
  assert_int_equal(cudaGraphExecDestroy(y), cudaSuccess);
  assert_int_equal(cudaGraphExecDestroy(x), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(outer), cudaSuccess);
  assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
}

/* an exec whose node gains host memory is played from then on (the
   server's copy destroyed); back between device pointers, it is sent again */
static void test_host_transition(void **state) {
  (void)state;
  void *a = dev_alloc(4096), *b = dev_alloc(4096);
  static unsigned char out[256];
  cudaGraph_t g;
  cudaGraphNode_t c;
  cudaGraphExec_t x;
  assert_int_equal(cudaGraphCreate(&g, 0), cudaSuccess);
  assert_int_equal(cudaGraphAddMemcpyNode1D(&c, g, NULL, 0, b, a, 256, cudaMemcpyDeviceToDevice), cudaSuccess);
  int inst = instantiates_sent, launched = launches_sent, destroyed = destroys_sent;
  assert_int_equal(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  assert_int_equal(instantiates_sent, inst + 1);
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  assert_int_equal(launches_sent, launched + 1);
  assert_int_equal(cudaGraphExecMemcpyNodeSetParams1D(x, c, out, a, 256, cudaMemcpyDefault), cudaSuccess);
  nplayed = 0;
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  assert_int_equal(destroys_sent, destroyed + 1);
  assert_int_equal(launches_sent, launched + 1);
  expect_played("c");
  assert_int_equal(played[0].b, cudaMemcpyDeviceToHost); /* the addresses told */
  assert_int_equal(cudaGraphUpload(x, S(1)), cudaSuccess); /* nothing to upload */
  assert_int_equal(cudaGraphExecMemcpyNodeSetParams1D(x, c, b, a, 256, cudaMemcpyDeviceToDevice), cudaSuccess);
  assert_int_equal(cudaGraphLaunch(x, S(1)), cudaSuccess);
  assert_int_equal(instantiates_sent, inst + 2);
  assert_int_equal(launches_sent, launched + 2);
  assert_int_equal(cudaGraphExecDestroy(x), cudaSuccess);
  assert_int_equal(destroys_sent, destroyed + 2);
  assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fork_join), cmocka_unit_test(test_unjoined),
      cmocka_unit_test(test_refusals),  cmocka_unit_test(test_modes),
      cmocka_unit_test(test_explicit),  cmocka_unit_test(test_reset),
      cmocka_unit_test(test_too_big),   cmocka_unit_test(test_host_explicit),
      cmocka_unit_test(test_host_capture), cmocka_unit_test(test_host_transition),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
