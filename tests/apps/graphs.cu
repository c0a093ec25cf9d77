// CUDA graphs through ferry (issue 21): stream capture and the explicit
// graph API, replays, updates of executable graphs, the capture mode rules
// across threads, and what a capture refuses. All arithmetic is on
// unsigned integers, so the results do not depend on where (or when) the
// program ran: the migration tests compare its checksum with a run that
// did not move, and the program checks itself against a host model.
// usage: graphs [REPLAYS=100]
// Prints "graph launches: G", "launches: L" (graph launches and direct
// kernel launches: what FERRY_MIGRATE_AT counts), "checksum: <hex>" and
// "PASSED". CPU twins of its kernels: tests/twins/app_twins.c.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_check.h"

static const int N = 4096;
static const int W = 256, H = 16; // the 2D copy: H rows of W bytes
static int failures, launches, graph_launches;
// instantiations, and launches of an exec changed since its last launch:
// ferry sends a graph at each (graphs.sh counts its graph_instantiate calls)
static int instantiations, sent_changed;
static cudaGraphExec_t changed_exec;

#include "graph_kernels.h"
/* a call CUDA refuses, with an error ferry gives as want (CUDA's own may
   differ where its documentation names none) */
#define EXPECT_FAILS(call)                                                                  \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    EXPECT(e_ != cudaSuccess, "%s succeeded", #call);                                       \
    cudaGetLastError();                                                                     \
  } while (0)
#define EXPECT_ERR(call, want)                                                              \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    EXPECT(e_ == (want), "%s -> %s, want %s", #call, cudaGetErrorName(e_), #want);           \
    cudaGetLastError();                                                                     \
  } while (0)

static const dim3 grid((N + 255) / 256), block(256);

static void graph_launch(cudaGraphExec_t x, cudaStream_t s) {
  if (x == changed_exec) {
    sent_changed++;
    changed_exec = NULL;
  }
  CHECK(cudaGraphLaunch(x, s));
  graph_launches++;
  launches++;
}

// ---- 1. a captured graph: kernels, a memset, device-to-device copies (1D
// and 2D), a fork onto a second stream and a join, replayed ----
static void model_step(std::vector<unsigned> &a, std::vector<unsigned> &b, std::vector<unsigned> &c,
                       std::vector<unsigned char> &d) {
  for (int i = 0; i < N; i++) b[i] = 0;
  for (int i = 0; i < N; i++) a[i] = a[i] * 3 + 1;
  for (int i = 0; i < N; i++) b[i] = a[i] * 2 + 5;     // s2: b = a, then b = b * 2 + 5
  for (int i = 0; i < N; i++) c[i] = c[i] * 5 + 3;     // s1 meanwhile
  for (int i = 0; i < N; i++) a[i] += b[i] + c[i];     // after the join
  const unsigned char *ab = (const unsigned char *)a.data();
  for (int r = 0; r < H; r++) memcpy(&d[r * 512], ab + r * W, W); // 2D: pitch 512 from pitch W
}

static unsigned long long sum(const std::vector<unsigned> &v) {
  unsigned long long s = 0;
  for (size_t i = 0; i < v.size(); i++) s = s * 31 + v[i];
  return s;
}

static unsigned long long captured(int replays) {
  unsigned *a, *b, *c;
  unsigned char *d;
  CHECK(cudaMalloc(&a, N * 4));
  CHECK(cudaMalloc(&b, N * 4));
  CHECK(cudaMalloc(&c, N * 4));
  CHECK(cudaMalloc(&d, 512 * H));
  std::vector<unsigned> ha(N), hb(N, 0), hc(N);
  std::vector<unsigned char> hd(512 * H, 0);
  for (int i = 0; i < N; i++) ha[i] = i * 7 + 1, hc[i] = i ^ 0x55;
  CHECK(cudaMemcpy(a, ha.data(), N * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(c, hc.data(), N * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d, 0, 512 * H));
  cudaStream_t s1, s2, s3;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
  unsigned *w;
  std::vector<unsigned> hw(N);
  for (int i = 0; i < N; i++) hw[i] = i;
  CHECK(cudaMalloc(&w, N * 4));
  CHECK(cudaMemcpy(w, hw.data(), N * 4, cudaMemcpyHostToDevice));
  cudaEvent_t fork, join;
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

  cudaStreamCaptureStatus st;
  CHECK(cudaStreamIsCapturing(s1, &st));
  EXPECT(st == cudaStreamCaptureStatusNone, "s1 captures before BeginCapture");
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  CHECK(cudaStreamIsCapturing(s1, &st));
  EXPECT(st == cudaStreamCaptureStatusActive, "s1 does not capture");
  unsigned long long id = 0;
  cudaGraph_t during = NULL;
  const cudaGraphNode_t *deps = NULL;
  size_t ndeps = 99;
  CHECK(cudaStreamGetCaptureInfo(s1, &st, &id, &during, &deps, NULL, &ndeps));
  EXPECT(id != 0 && during != NULL && ndeps == 0, "capture info: id %llu, %zu deps", id, ndeps);
  CHECK(cudaMemsetAsync(b, 0, N * 4, s1));
  g_axpb<<<grid, block, 0, s1>>>(a, N, 3, 1);
  CHECK(cudaGetLastError());
  // a launch of the program's own on another stream while the capture is
  // under way: the first launch, where the migration tests move the program
  g_axpb<<<grid, block, 0, s3>>>(w, N, 3, 7);
  launches++;
  for (int i = 0; i < N; i++) hw[i] = hw[i] * 3 + 7;
  CHECK(cudaStreamGetCaptureInfo(s1, &st, NULL, NULL, &deps, NULL, &ndeps));
  EXPECT(ndeps == 1, "after two nodes, %zu deps", ndeps);
  CHECK(cudaEventRecord(fork, s1));
  CHECK(cudaStreamWaitEvent(s2, fork, 0)); // s2 joins the capture
  CHECK(cudaStreamIsCapturing(s2, &st));
  EXPECT(st == cudaStreamCaptureStatusActive, "s2 did not join the capture");
  CHECK(cudaMemcpyAsync(b, a, N * 4, cudaMemcpyDeviceToDevice, s2));
  g_axpb<<<grid, block, 0, s2>>>(b, N, 2, 5);
  g_axpb<<<grid, block, 0, s1>>>(c, N, 5, 3);
  CHECK(cudaEventRecord(join, s2));
  CHECK(cudaStreamWaitEvent(s1, join, 0));
  g_add<<<grid, block, 0, s1>>>(a, b, N);
  g_add<<<grid, block, 0, s1>>>(a, c, N);
  CHECK(cudaMemcpy2DAsync(d, 512, a, W, W, H, cudaMemcpyDeviceToDevice, s1));
  cudaGraph_t graph;
  CHECK(cudaStreamEndCapture(s1, &graph));
  EXPECT(graph == during, "EndCapture gave another graph");
  CHECK(cudaStreamIsCapturing(s2, &st));
  EXPECT(st == cudaStreamCaptureStatusNone, "s2 still captures after the end");
  size_t nodes = 0;
  CHECK(cudaGraphGetNodes(graph, NULL, &nodes));
  EXPECT(nodes == 8, "captured %zu nodes, want 8", nodes);

  // nothing ran while capturing
  std::vector<unsigned> got(N);
  CHECK(cudaMemcpy(got.data(), a, N * 4, cudaMemcpyDeviceToHost));
  EXPECT(got == ha, "the capture ran its work");

  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  instantiations++;
  for (int r = 0; r < replays; r++) {
    graph_launch(exec, s1);
    model_step(ha, hb, hc, hd);
  }
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaMemcpy(got.data(), a, N * 4, cudaMemcpyDeviceToHost));
  EXPECT(got == ha, "captured graph x%d: a differs (a[1] %u, want %u)", replays, got[1], ha[1]);
  CHECK(cudaMemcpy(got.data(), c, N * 4, cudaMemcpyDeviceToHost));
  EXPECT(got == hc, "captured graph: c differs");
  std::vector<unsigned char> gd(512 * H);
  CHECK(cudaMemcpy(gd.data(), d, 512 * H, cudaMemcpyDeviceToHost));
  EXPECT(gd == hd, "captured graph: the 2D copy differs");
  CHECK(cudaMemcpy(got.data(), w, N * 4, cudaMemcpyDeviceToHost));
  EXPECT(got == hw, "the launch made during the capture: w differs");
  printf("captured: %zu nodes, %d replays\n", nodes, replays);

  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaEventDestroy(fork));
  CHECK(cudaEventDestroy(join));
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s2));
  CHECK(cudaStreamDestroy(s3));
  CHECK(cudaFree(w));
  unsigned long long h = sum(ha) ^ (sum(hc) << 1) ^ (sum(hw) << 2);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  CHECK(cudaFree(d));
  return h;
}

// ---- 2 and 3. the explicit API, and updates of the executable graph ----
static cudaKernelNodeParams axpb_params(void **args, unsigned **x, int *n, unsigned *a, unsigned *b) {
  args[0] = x, args[1] = n, args[2] = a, args[3] = b;
  cudaKernelNodeParams p = {};
  p.func = (void *)g_axpb;
  p.gridDim = grid;
  p.blockDim = block;
  p.kernelParams = args;
  return p;
}

static unsigned long long explicit_api(void) {
  unsigned *e, *f;
  CHECK(cudaMalloc(&e, N * 4));
  CHECK(cudaMalloc(&f, N * 4));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaGraph_t g, child;
  CHECK(cudaGraphCreate(&g, 0));
  CHECK(cudaGraphCreate(&child, 0));
  // e = 7 (memset of 4-byte elements); e = e * A + 1; f = e; child: f = f * 3 + 2
  cudaMemsetParams mp = {};
  mp.dst = e, mp.value = 7, mp.elementSize = 4, mp.width = N, mp.height = 1;
  cudaGraphNode_t nset, nkern, ncopy, nempty, nchild, nc;
  CHECK(cudaGraphAddMemsetNode(&nset, g, NULL, 0, &mp));
  void *args[4], *cargs[4];
  int n = N;
  unsigned A = 2, one = 1, three = 3, two = 2;
  unsigned *fp = f;
  cudaKernelNodeParams kp = axpb_params(args, &e, &n, &A, &one);
  CHECK(cudaGraphAddKernelNode(&nkern, g, &nset, 1, &kp));
  CHECK(cudaGraphAddMemcpyNode1D(&ncopy, g, &nkern, 1, f, e, N * 4, cudaMemcpyDeviceToDevice));
  cudaGraphNodeParams empty = {};
  empty.type = cudaGraphNodeTypeEmpty;
  CHECK(cudaGraphAddNode(&nempty, g, NULL, NULL, 0, &empty));
  CHECK(cudaGraphAddDependencies(g, &ncopy, &nempty, NULL, 1)); // an edge added afterwards
  cudaKernelNodeParams cp = axpb_params(cargs, &fp, &n, &three, &two);
  CHECK(cudaGraphAddKernelNode(&nc, child, NULL, 0, &cp));
  CHECK(cudaGraphAddChildGraphNode(&nchild, g, &nempty, 1, child));
  CHECK(cudaGraphDestroy(child)); // the node holds its own copy

  size_t count = 0;
  CHECK(cudaGraphGetNodes(g, NULL, &count));
  EXPECT(count == 5, "explicit graph: %zu nodes", count);
  CHECK(cudaGraphGetRootNodes(g, NULL, &count));
  EXPECT(count == 1, "explicit graph: %zu roots", count);
  CHECK(cudaGraphGetEdges(g, NULL, NULL, NULL, &count));
  EXPECT(count == 4, "explicit graph: %zu edges", count);
  cudaGraphNodeType type;
  CHECK(cudaGraphNodeGetType(nchild, &type));
  EXPECT(type == cudaGraphNodeTypeGraph, "child node type %d", (int)type);
  cudaKernelNodeParams back;
  CHECK(cudaGraphKernelNodeGetParams(nkern, &back));
  EXPECT(back.func == (void *)g_axpb && back.gridDim.x == grid.x &&
             *(unsigned *)back.kernelParams[2] == 2,
         "kernel node parameters read back wrong");
  cudaMemsetParams mback;
  CHECK(cudaGraphMemsetNodeGetParams(nset, &mback));
  EXPECT(mback.value == 7 && mback.elementSize == 4 && mback.width == (size_t)N, "memset params");

  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiateWithFlags(&x, g, 0));
  instantiations++;
  std::vector<unsigned> got(N);
  unsigned long long h = 0;
  // the result for e = 7 * a + 1 and f = e * 3 + 2
  unsigned as[3] = {2, 5, 9};
  for (int k = 0; k < 3; k++) {
    if (k == 1) { // the exec's node, changed in place, several times (as XLA does)
      for (unsigned a = 1; a <= 5; a++) {
        A = a;
        kp = axpb_params(args, &e, &n, &A, &one);
        CHECK(cudaGraphExecKernelNodeSetParams(x, nkern, &kp));
      }
      changed_exec = x;
    } else if (k == 2) { // the same topology from another graph
      cudaGraph_t g2;
      CHECK(cudaGraphClone(&g2, g));
      cudaGraphNode_t k2;
      CHECK(cudaGraphNodeFindInClone(&k2, nkern, g2));
      A = 9;
      kp = axpb_params(args, &e, &n, &A, &one);
      CHECK(cudaGraphKernelNodeSetParams(k2, &kp));
      cudaGraphExecUpdateResultInfo info;
      CHECK(cudaGraphExecUpdate(x, g2, &info));
      EXPECT(info.result == cudaGraphExecUpdateSuccess, "update result %d", (int)info.result);
      changed_exec = x;
      // another topology is refused and changes nothing
      cudaGraphNode_t extra;
      CHECK(cudaGraphAddEmptyNode(&extra, g2, NULL, 0));
      EXPECT_ERR(cudaGraphExecUpdate(x, g2, &info), cudaErrorGraphExecUpdateFailure);
      EXPECT(info.result == cudaGraphExecUpdateErrorTopologyChanged, "update result %d", (int)info.result);
      CHECK(cudaGraphDestroy(g2));
    }
    graph_launch(x, s);
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(got.data(), f, N * 4, cudaMemcpyDeviceToHost));
    unsigned want = (7 * as[k] + 1) * 3 + 2;
    EXPECT(got[0] == want && got[N - 1] == want, "explicit graph, A=%u: f %u, want %u", as[k], got[0], want);
    h = h * 1000003 + got[0];
  }
  // a disabled kernel node does nothing: f = 7 * 3 + 2
  unsigned enabled = 1;
  CHECK(cudaGraphNodeSetEnabled(x, nkern, 0));
  changed_exec = x;
  CHECK(cudaGraphNodeGetEnabled(x, nkern, &enabled));
  EXPECT(enabled == 0, "the kernel node is still enabled");
  graph_launch(x, s);
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemcpy(got.data(), f, N * 4, cudaMemcpyDeviceToHost));
  EXPECT(got[0] == 23 && got[N - 1] == 23, "disabled kernel node: f %u, want 23", got[0]);
  CHECK(cudaGraphNodeSetEnabled(x, nkern, 1));
  CHECK(cudaGraphDebugDotPrint(g, "/dev/null", 0));
  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(e));
  CHECK(cudaFree(f));
  printf("explicit: 5 nodes, 2 updates, a node disabled\n");
  return h;
}

// ---- 4. capture modes across threads ----
struct other {
  cudaStream_t s;
  cudaStreamCaptureStatus st;
  cudaError_t malloc_rc;
  int relaxed;
};
static void *other_thread(void *p) {
  other *o = (other *)p;
  CHECK(cudaStreamIsCapturing(o->s, &o->st));
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (o->relaxed) CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  void *q = NULL;
  o->malloc_rc = cudaMalloc(&q, 1024);
  cudaGetLastError();
  if (q) CHECK(cudaFree(q));
  if (o->relaxed) CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  return NULL;
}
static cudaError_t from_other(cudaStream_t s, int relaxed, cudaStreamCaptureStatus *st) {
  other o = {s, cudaStreamCaptureStatusNone, cudaSuccess, relaxed};
  pthread_t t;
  pthread_create(&t, NULL, other_thread, &o);
  pthread_join(t, NULL);
  *st = o.st;
  return o.malloc_rc;
}

static void modes(void) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned *x;
  CHECK(cudaMalloc(&x, N * 4));
  cudaGraph_t g;
  cudaStreamCaptureStatus st;
  void *q;
  // thread-local: another thread may allocate; this one may not
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  EXPECT(from_other(s, 0, &st) == cudaSuccess, "thread-local capture: another thread's cudaMalloc refused");
  EXPECT(st == cudaStreamCaptureStatusActive, "another thread sees status %d", (int)st);
  EXPECT_ERR(cudaMalloc(&q, 64), cudaErrorStreamCaptureUnsupported);
  CHECK(cudaStreamIsCapturing(s, &st));
  EXPECT(st == cudaStreamCaptureStatusInvalidated, "status after an unsafe call: %d", (int)st);
  EXPECT_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT(g == NULL, "an invalidated capture gave a graph");
  // global: another thread may not either...
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT(from_other(s, 0, &st) == cudaErrorStreamCaptureUnsupported,
         "global capture: another thread's cudaMalloc allowed");
  EXPECT_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  // ...unless it made its own mode relaxed
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT(from_other(s, 1, &st) == cudaSuccess, "relaxed thread's cudaMalloc refused");
  g_axpb<<<grid, block, 0, s>>>(x, N, 1, 1);
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphDestroy(g));
  // a relaxed capture allows this thread everything potentially unsafe
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  CHECK(cudaMalloc(&q, 64));
  CHECK(cudaFree(q));
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaFree(x));
  CHECK(cudaStreamDestroy(s));
  printf("modes: thread-local, global, relaxed\n");
}

// ---- 5. events of the world outside a capture ----
static void external_events(void) {
  cudaStream_t s, other;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  cudaEvent_t outside, done;
  CHECK(cudaEventCreateWithFlags(&outside, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  unsigned *x;
  CHECK(cudaMalloc(&x, N * 4));
  CHECK(cudaMemset(x, 0, N * 4));
  CHECK(cudaEventRecord(outside, other));
  cudaGraph_t g;
  // a plain wait on uncaptured work crosses the capture's boundary
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT_ERR(cudaStreamWaitEvent(s, outside, 0), cudaErrorStreamCaptureIsolation);
  EXPECT_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  // external: the graph waits for the event, and records another, when it runs
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(cudaStreamWaitEvent(s, outside, cudaEventWaitExternal));
  g_axpb<<<grid, block, 0, s>>>(x, N, 1, 4);
  CHECK(cudaEventRecordWithFlags(done, s, cudaEventRecordExternal));
  CHECK(cudaStreamEndCapture(s, &g));
  size_t count = 0;
  CHECK(cudaGraphGetNodes(g, NULL, &count));
  EXPECT(count == 3, "external events: %zu nodes, want 3", count);
  cudaGraphExec_t x_exec;
  CHECK(cudaGraphInstantiate(&x_exec, g, 0));
  instantiations++;
  graph_launch(x_exec, s);
  graph_launch(x_exec, s);
  CHECK(cudaEventSynchronize(done));
  unsigned first = 0;
  CHECK(cudaMemcpy(&first, x, 4, cudaMemcpyDeviceToHost));
  EXPECT(first == 8, "external events: x %u, want 8", first);
  CHECK(cudaGraphExecDestroy(x_exec));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaFree(x));
  CHECK(cudaEventDestroy(outside));
  CHECK(cudaEventDestroy(done));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaStreamDestroy(other));
  printf("external events: a wait node and a record node\n");
}

// ---- 6. what a capture refuses ----
static void refusals(void) {
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  unsigned *x;
  CHECK(cudaMalloc(&x, N * 4));
  std::vector<unsigned> h(N, 1);
  cudaGraph_t g;
  cudaEvent_t e;
  CHECK(cudaEventCreate(&e));
  // a host-to-device copy and a host function are captured (graph_host.cu
  // runs such graphs), not refused
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
  CHECK(cudaMemcpyAsync(x, h.data(), N * 4, cudaMemcpyHostToDevice, s1));
  CHECK(cudaLaunchHostFunc(s1, [](void *) {}, NULL));
  CHECK(cudaStreamEndCapture(s1, &g));
  size_t captured_host = 0;
  CHECK(cudaGraphGetNodes(g, NULL, &captured_host));
  EXPECT(captured_host == 2, "a host copy and a host function: %zu nodes, want 2", captured_host);
  CHECK(cudaGraphDestroy(g));
  // a fork that never joins
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  g_axpb<<<grid, block, 0, s1>>>(x, N, 1, 1);
  CHECK(cudaEventRecord(e, s1));
  CHECK(cudaStreamWaitEvent(s2, e, 0));
  g_axpb<<<grid, block, 0, s2>>>(x, N, 1, 1);
  EXPECT_ERR(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureUnjoined);
  cudaStreamCaptureStatus st;
  CHECK(cudaStreamIsCapturing(s2, &st));
  EXPECT(st == cudaStreamCaptureStatusNone, "s2 still captures after the unjoined end");
  // a synchronize of a capturing stream; the legacy stream; no capture to end
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  EXPECT_ERR(cudaStreamSynchronize(s1), cudaErrorStreamCaptureUnsupported);
  EXPECT_ERR(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT_FAILS(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal));
  EXPECT_FAILS(cudaStreamEndCapture(s1, &g));
  // an event recorded in a capture cannot be asked about
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  CHECK(cudaEventRecord(e, s1));
  EXPECT_ERR(cudaEventQuery(e), cudaErrorCapturedEvent);
  if (cudaStreamEndCapture(s1, &g) == cudaSuccess) CHECK(cudaGraphDestroy(g));
  cudaGetLastError();
  // the streams work as before
  CHECK(cudaMemcpyAsync(x, h.data(), N * 4, cudaMemcpyHostToDevice, s1));
  g_axpb<<<grid, block, 0, s1>>>(x, N, 2, 0);
  launches++;
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaMemcpy(h.data(), x, 4, cudaMemcpyDeviceToHost));
  EXPECT(h[0] == 2, "after the refusals: %u", h[0]);
  CHECK(cudaEventDestroy(e));
  CHECK(cudaFree(x));
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s2));
  printf("refusals: unjoined fork, synchronize, legacy stream (a host copy and function captured)\n");
}

int main(int argc, char **argv) {
  int replays = argc > 1 ? atoi(argv[1]) : 100;
  unsigned long long h = captured(replays);
  h = h * 31 + explicit_api();
  modes();
  external_events();
  refusals();
  printf("graph launches: %d\n", graph_launches);
  printf("graphs sent: %d\n", instantiations + sent_changed);
  printf("launches: %d\n", launches);
  printf("checksum: %016llx\n", h);
  if (failures) {
    printf("FAILED: %d checks\n", failures);
    return 1;
  }
  printf("PASSED\n");
  return 0;
}
