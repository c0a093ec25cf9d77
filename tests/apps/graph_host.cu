// CUDA graphs with host work through ferry, as NVIDIA's simpleCudaGraphs
// and jacobiCudaGraphs build them: memcpy nodes to and from host memory
// (pinned and pageable, 1D and pitched), host nodes, and the same made by
// stream capture (cudaMemcpyAsync / cudaMemcpy2DAsync with the host,
// cudaLaunchHostFunc). ferry plays such graphs node by node on the launch
// stream (docs/graphs.md). Each launch feeds the next through host memory
// (the host node rewrites what the next launch copies in), so a node played
// out of order, or a copy that read or wrote host memory at the wrong time,
// shows in the results, checked against a CPU model. Integer arithmetic
// only: a run moved to another GPU ends with the checksum of one that did
// not move.
// usage: graph_host [REPLAYS=100]
// Prints "graph launches: G", "launches: L" (graph launches and direct
// kernel launches: what FERRY_MIGRATE_AT counts), "played kernels: K" (the
// kernel nodes of graphs with host work that ran), "device graph launches:
// D" (launches of a graph without host work), "checksum: <hex>", PASSED.
// CPU twins of its kernels: tests/twins/app_twins.c (graphs.cu's).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_check.h"

static const int N = 4096;
static const int ROW = 1024, ROWS = N * 4 / ROW, PITCH = 1536; // the pitched host buffer
static int failures, launches, graph_launches, played_kernels, device_graph_launches;

#include "graph_kernels.h"

static const dim3 grid((N + 255) / 256), block(256);

static void graph_launch(cudaGraphExec_t x, cudaStream_t s, int kernels) {
  CHECK(cudaGraphLaunch(x, s));
  graph_launches++;
  launches++;
  played_kernels += kernels;
}

// what a host node does: folds the results copied out into a sum, and
// makes the next launch's input from them
struct fold {
  const unsigned *out; // the results, as the graph copied them out
  int pitched;         // out is ROWS rows of ROW bytes, PITCH apart
  unsigned *in;        // the next launch's input
  unsigned iter;
  unsigned long long sum;
};
static unsigned at(const fold *f, int i) {
  if (!f->pitched) return f->out[i];
  int per_row = ROW / 4;
  return f->out[(i / per_row) * (PITCH / 4) + i % per_row];
}
static void CUDART_CB fold_host(void *p) {
  fold *f = (fold *)p;
  for (int i = 0; i < N; i++) {
    unsigned v = at(f, i);
    f->sum = f->sum * 31 + v;
    f->in[i] = v ^ (unsigned)(i + f->iter);
  }
  f->iter++;
}
// the model's step: the same fold over the model's results
static void model_fold(const std::vector<unsigned> &out, std::vector<unsigned> &in, unsigned &iter,
                       unsigned long long &sum) {
  for (int i = 0; i < N; i++) {
    sum = sum * 31 + out[i];
    in[i] = out[i] ^ (unsigned)(i + iter);
  }
  iter++;
}

static void kernel_params(cudaKernelNodeParams *p, void **args, unsigned **x, int *n, unsigned *a,
                          unsigned *b) {
  args[0] = x, args[1] = n, args[2] = a, args[3] = b;
  memset(p, 0, sizeof *p);
  p->func = (void *)g_axpb;
  p->gridDim = grid;
  p->blockDim = block;
  p->kernelParams = args;
}

// ---- 1. the explicit API, as simpleCudaGraphs: H2D copy from pinned memory
// (a pitched pointer) -> kernel -> child graph (a kernel adding what a memset
// node set) -> D2H copy into pinned memory (1D: its bytes come with the
// stream's next synchronization) -> host node; the kernel's factor changed
// in the executable graph halfway ----
static unsigned long long explicit_graph(int replays) {
  unsigned *hin, *hout, *dx, *dz;
  CHECK(cudaMallocHost(&hin, N * 4));
  CHECK(cudaMallocHost(&hout, N * 4));
  std::vector<unsigned> model_in(N), mx(N);
  CHECK(cudaMalloc(&dx, N * 4));
  CHECK(cudaMalloc(&dz, N * 4));
  for (int i = 0; i < N; i++) hin[i] = model_in[i] = i * 2654435761u;
  fold f = {hout, 0, hin, 0, 0};
  unsigned miter = 0;
  unsigned long long msum = 0;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  cudaGraph_t g, child;
  cudaGraphNode_t nh2d, nset, nk, nchild, nd2h, nhost, nadd;
  CHECK(cudaGraphCreate(&g, 0));
  cudaMemcpy3DParms cp = {};
  cp.srcPtr = make_cudaPitchedPtr(hin, N * 4, N, 1);
  cp.dstPtr = make_cudaPitchedPtr(dx, N * 4, N, 1);
  cp.extent = make_cudaExtent(N * 4, 1, 1);
  cp.kind = cudaMemcpyHostToDevice;
  CHECK(cudaGraphAddMemcpyNode(&nh2d, g, NULL, 0, &cp));
  cudaMemsetParams mp = {};
  mp.dst = dz, mp.value = 1, mp.elementSize = 1, mp.width = N * 4, mp.height = 1;
  CHECK(cudaGraphAddMemsetNode(&nset, g, NULL, 0, &mp));
  void *args[4];
  int n = N;
  unsigned A = 3, B = 11;
  cudaKernelNodeParams kp;
  kernel_params(&kp, args, &dx, &n, &A, &B);
  CHECK(cudaGraphAddKernelNode(&nk, g, &nh2d, 1, &kp));
  CHECK(cudaGraphCreate(&child, 0));
  void *add_args[] = {&dx, &dz, &n};
  cudaKernelNodeParams ap = {};
  ap.func = (void *)g_add, ap.gridDim = grid, ap.blockDim = block, ap.kernelParams = add_args;
  CHECK(cudaGraphAddKernelNode(&nadd, child, NULL, 0, &ap));
  cudaGraphNode_t before_child[] = {nk, nset};
  CHECK(cudaGraphAddChildGraphNode(&nchild, g, before_child, 2, child));
  CHECK(cudaGraphDestroy(child));
  CHECK(cudaGraphAddMemcpyNode1D(&nd2h, g, &nchild, 1, hout, dx, N * 4, cudaMemcpyDeviceToHost));
  cudaHostNodeParams hp = {};
  hp.fn = fold_host, hp.userData = &f;
  CHECK(cudaGraphAddHostNode(&nhost, g, &nd2h, 1, &hp));

  // what was given comes back
  cudaMemcpy3DParms back = {};
  CHECK(cudaGraphMemcpyNodeGetParams(nh2d, &back));
  EXPECT(back.kind == cudaMemcpyHostToDevice && back.srcPtr.ptr == hin && back.dstPtr.ptr == dx &&
             back.extent.width == N * 4,
         "memcpy node parameters read back wrong");
  cudaHostNodeParams hback = {};
  CHECK(cudaGraphHostNodeGetParams(nhost, &hback));
  EXPECT(hback.fn == fold_host && hback.userData == &f, "host node parameters read back wrong");
  cudaGraphNodeType type;
  CHECK(cudaGraphNodeGetType(nhost, &type));
  EXPECT(type == cudaGraphNodeTypeHost, "host node type %d", (int)type);

  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g, 0));
  for (int r = 0; r < replays; r++) {
    if (r == replays / 2) { // the exec's kernel node changed in place
      A = 5;
      kernel_params(&kp, args, &dx, &n, &A, &B);
      CHECK(cudaGraphExecKernelNodeSetParams(x, nk, &kp));
    }
    graph_launch(x, s, 2);
    for (int i = 0; i < N; i++) mx[i] = model_in[i] * A + B + 0x01010101u;
    model_fold(mx, model_in, miter, msum);
  }
  CHECK(cudaStreamSynchronize(s));
  EXPECT(f.iter == (unsigned)replays, "the host node ran %u times, want %d", f.iter, replays);
  EXPECT(f.sum == msum, "explicit graph x%d: sum %016llx, want %016llx", replays, f.sum, msum);
  EXPECT(memcmp(hin, model_in.data(), N * 4) == 0, "explicit graph: the next input differs");
  printf("explicit: 6 nodes (2 host copies, a host node), %d replays\n", replays);

  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dz));
  CHECK(cudaFreeHost(hin));
  CHECK(cudaFreeHost(hout));
  return msum ^ ((unsigned long long)model_in[7] << 32);
}

// ---- 2. stream capture, as jacobiCudaGraphs: a copy in from pageable
// memory, a kernel, a pitched copy out into pinned memory, a host function;
// the graph also launched into another capture (embedded) ----
static unsigned long long captured_graph(int replays) {
  unsigned *hp, *dy;
  CHECK(cudaMallocHost(&hp, ROWS * PITCH));
  memset(hp, 0, ROWS * PITCH);
  std::vector<unsigned> hin(N), model_in(N), my(N);
  for (int i = 0; i < N; i++) hin[i] = model_in[i] = i ^ 0x5a5a5a5au;
  CHECK(cudaMalloc(&dy, N * 4));
  fold f = {hp, 1, hin.data(), 0, 0};
  unsigned miter = 0;
  unsigned long long msum = 0;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(cudaMemcpyAsync(dy, hin.data(), N * 4, cudaMemcpyHostToDevice, s));
  g_axpb<<<grid, block, 0, s>>>(dy, N, 5, 3);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy2DAsync(hp, PITCH, dy, ROW, ROW, ROWS, cudaMemcpyDeviceToHost, s));
  CHECK(cudaLaunchHostFunc(s, fold_host, &f));
  CHECK(cudaStreamEndCapture(s, &g));
  size_t count = 0;
  CHECK(cudaGraphGetNodes(g, NULL, &count));
  EXPECT(count == 4, "captured %zu nodes, want 4", count);
  EXPECT(f.iter == 0, "the capture ran its host function");

  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g, 0));
  for (int r = 0; r < replays; r++) {
    graph_launch(x, s, 1);
    for (int i = 0; i < N; i++) my[i] = model_in[i] * 5 + 3;
    model_fold(my, model_in, miter, msum);
  }
  // launched into a capture: that graph holds it, and plays it
  cudaStream_t s2;
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaGraph_t outer;
  CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
  CHECK(cudaGraphLaunch(x, s2));
  CHECK(cudaStreamEndCapture(s2, &outer));
  cudaGraphExec_t ox;
  CHECK(cudaGraphInstantiate(&ox, outer, 0));
  graph_launch(ox, s2, 1);
  for (int i = 0; i < N; i++) my[i] = model_in[i] * 5 + 3;
  model_fold(my, model_in, miter, msum);
  CHECK(cudaStreamSynchronize(s2));
  EXPECT(f.iter == (unsigned)replays + 1, "the host function ran %u times, want %d", f.iter, replays + 1);
  EXPECT(f.sum == msum, "captured graph x%d: sum %016llx, want %016llx", replays, f.sum, msum);
  EXPECT(hin == model_in, "captured graph: the next input differs");
  printf("captured: 4 nodes (2 host copies, one pitched; a host function), %d replays\n", replays);

  CHECK(cudaGraphExecDestroy(ox));
  CHECK(cudaGraphDestroy(outer));
  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaStreamDestroy(s2));
  CHECK(cudaFree(dy));
  CHECK(cudaFreeHost(hp));
  return msum;
}

// ---- 3. a graph of device work only still runs as one call (graph_host.sh
// counts its graph_launch calls), beside a direct launch; and a legacy
// stream callback, which CUDA does not capture ----
static unsigned long long device_graph(int replays) {
  unsigned *dw;
  CHECK(cudaMalloc(&dw, N * 4));
  CHECK(cudaMemset(dw, 0, N * 4));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  g_axpb<<<grid, block, 0, s>>>(dw, N, 3, 1);
  CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g, 0));
  unsigned want = 0;
  for (int r = 0; r < replays; r++) {
    CHECK(cudaGraphLaunch(x, s));
    graph_launches++, launches++, device_graph_launches++;
    want = want * 3 + 1;
  }
  g_axpb<<<grid, block, 0, s>>>(dw, N, 1, 1);
  launches++;
  want += 1;
  CHECK(cudaStreamSynchronize(s));
  unsigned got = 0;
  CHECK(cudaMemcpy(&got, dw, 4, cudaMemcpyDeviceToHost));
  EXPECT(got == want, "device graph: %u, want %u", got, want);
  // a callback on a capturing stream is refused, and its capture with it
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cudaError_t rc = cudaStreamAddCallback(s, [](cudaStream_t, cudaError_t, void *) {}, NULL, 0);
  EXPECT(rc != cudaSuccess, "cudaStreamAddCallback during capture succeeded");
  cudaGraph_t none = NULL;
  if (cudaStreamEndCapture(s, &none) == cudaSuccess && none) CHECK(cudaGraphDestroy(none));
  cudaGetLastError();
  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(dw));
  return got;
}

int main(int argc, char **argv) {
  int replays = argc > 1 ? atoi(argv[1]) : 100;
  setvbuf(stdout, NULL, _IOLBF, 0);
  unsigned long long h = explicit_graph(replays);
  h = h * 31 + captured_graph(replays);
  h = h * 31 + device_graph(replays / 10 + 1);
  printf("graph launches: %d\n", graph_launches);
  printf("device graph launches: %d\n", device_graph_launches);
  printf("played kernels: %d\n", played_kernels);
  printf("launches: %d\n", launches);
  printf("checksum: %016llx\n", h);
  if (failures) {
    printf("FAILED: %d checks\n", failures);
    return 1;
  }
  printf("PASSED\n");
  return 0;
}
