/* CUDA graphs with host work through ferry's driver API, the driver twin
 * of graph_host.cu (nvcc's static runtime reaches ferry this way): a graph
 * built with cuGraphAddMemcpyNode (host to device from pinned memory,
 * device to host into pageable memory), cuGraphAddKernelNode and
 * cuGraphAddHostNode, and the same by stream capture (cuMemcpyHtoDAsync,
 * cuLaunchKernel, cuMemcpyDtoHAsync into pinned memory, cuLaunchHostFunc).
 * Each launch feeds the next through host memory; results are checked
 * against a CPU model. Integer arithmetic only: a migrated run must end
 * with the same checksum.
 * usage: drv_graph_host FATBIN [REPLAYS=100]
 * Prints "graph launches: G", "launches: L", "played kernels: K",
 * "checksum: <hex>", PASSED.
 */
#include <string.h>

#include "drv_check.h"

#define N 4096
#define SALT 0x2345u
static int launches, graph_launches, played_kernels;
static CUfunction mix;

/* drv_mix: x[i] = x[i] * 1664525 + SALT + k + i */
static void model_mix(unsigned *x, unsigned k) {
  for (unsigned i = 0; i < N; i++) x[i] = x[i] * 1664525u + SALT + k + i;
}

/* the host node: folds the results into a sum, makes the next input */
struct fold {
  const unsigned *out;
  unsigned *in;
  unsigned iter;
  unsigned long long sum;
};
static void CUDA_CB fold_host(void *p) {
  struct fold *f = p;
  for (unsigned i = 0; i < N; i++) {
    f->sum = f->sum * 31 + f->out[i];
    f->in[i] = f->out[i] ^ (i + f->iter);
  }
  f->iter++;
}

static void graph_launch(CUgraphExec x, CUstream s) {
  MUST(cuGraphLaunch(x, s));
  graph_launches++;
  launches++;
  played_kernels++;
}

/* H2D (pinned) -> mix(k) -> D2H (pageable) -> host node, explicitly; k
   changed in the executable graph halfway */
static unsigned long long explicit_graph(int replays) {
  unsigned *hin;
  static unsigned hout[N], min[N];
  MUST(cuMemAllocHost((void **)&hin, N * 4));
  for (unsigned i = 0; i < N; i++) hin[i] = min[i] = i * 40503u;
  CUdeviceptr d;
  MUST(cuMemAlloc(&d, N * 4));
  CUstream s;
  MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUcontext ctx;
  MUST(cuCtxGetCurrent(&ctx));
  struct fold f = {hout, hin, 0, 0}, m = {min, min, 0, 0};

  CUgraph g;
  CUgraphNode nh2d, nk, nd2h, nhost;
  MUST(cuGraphCreate(&g, 0));
  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = hin;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = d;
  c.WidthInBytes = N * 4, c.Height = 1, c.Depth = 1;
  CU(cuGraphAddMemcpyNode(&nh2d, g, NULL, 0, &c, ctx));
  int n = N;
  unsigned k = 1;
  void *args[] = {&d, &n, &k};
  CUDA_KERNEL_NODE_PARAMS kp;
  memset(&kp, 0, sizeof kp);
  kp.func = mix;
  kp.gridDimX = N / 256, kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = 256, kp.blockDimY = kp.blockDimZ = 1;
  kp.kernelParams = args;
  CU(cuGraphAddKernelNode(&nk, g, &nh2d, 1, &kp));
  memset(&c, 0, sizeof c);
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = d;
  c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = hout;
  c.WidthInBytes = N * 4, c.Height = 1, c.Depth = 1;
  CU(cuGraphAddMemcpyNode(&nd2h, g, &nk, 1, &c, ctx));
  CUDA_HOST_NODE_PARAMS hp = {fold_host, &f};
  CU(cuGraphAddHostNode(&nhost, g, &nd2h, 1, &hp));
  /* what was given comes back */
  CUDA_MEMCPY3D back;
  CU(cuGraphMemcpyNodeGetParams(nd2h, &back));
  EXPECT(back.srcMemoryType == CU_MEMORYTYPE_DEVICE && back.srcDevice == d &&
         back.dstMemoryType == CU_MEMORYTYPE_HOST && back.dstHost == hout && back.WidthInBytes == N * 4);
  CUDA_HOST_NODE_PARAMS hback;
  CU(cuGraphHostNodeGetParams(nhost, &hback));
  EXPECT(hback.fn == fold_host && hback.userData == &f);
  CUgraphNodeType type;
  CU(cuGraphNodeGetType(nhost, &type));
  EXPECT(type == CU_GRAPH_NODE_TYPE_HOST);

  CUgraphExec x;
  MUST(cuGraphInstantiateWithFlags(&x, g, 0));
  for (int r = 0; r < replays; r++) {
    if (r == replays / 2) {
      k = 2;
      MUST(cuGraphExecKernelNodeSetParams(x, nk, &kp));
    }
    graph_launch(x, s);
    model_mix(min, k);
    fold_host(&m);
  }
  MUST(cuStreamSynchronize(s));
  EXPECT(f.iter == (unsigned)replays);
  EXPECT(f.sum == m.sum);
  EXPECT(memcmp(hin, min, sizeof min) == 0);
  CU(cuGraphExecDestroy(x));
  CU(cuGraphDestroy(g));
  MUST(cuStreamDestroy(s));
  MUST(cuMemFree(d));
  MUST(cuMemFreeHost(hin));
  return m.sum;
}

/* the same by stream capture: in from pageable memory, out into pinned */
static unsigned long long captured_graph(int replays) {
  unsigned *hout;
  static unsigned hin[N], min[N], mout[N];
  MUST(cuMemAllocHost((void **)&hout, N * 4));
  for (unsigned i = 0; i < N; i++) hin[i] = min[i] = i ^ 0x3c3c3c3cu;
  CUdeviceptr d;
  MUST(cuMemAlloc(&d, N * 4));
  CUstream s;
  MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  struct fold f = {hout, hin, 0, 0}, m = {mout, min, 0, 0};
  int n = N;
  unsigned k = 3;
  void *args[] = {&d, &n, &k};

  CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU(cuMemcpyHtoDAsync(d, hin, N * 4, s));
  CU(cuLaunchKernel(mix, N / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
  CU(cuMemcpyDtoHAsync(hout, d, N * 4, s));
  CU(cuLaunchHostFunc(s, fold_host, &f));
  CUgraph g = NULL;
  CU(cuStreamEndCapture(s, &g));
  size_t count = 0;
  CU(cuGraphGetNodes(g, NULL, &count));
  EXPECT(count == 4);
  EXPECT(f.iter == 0);
  CUgraphExec x;
  MUST(cuGraphInstantiateWithFlags(&x, g, 0));
  for (int r = 0; r < replays; r++) {
    graph_launch(x, s);
    memcpy(mout, min, sizeof min);
    model_mix(mout, k);
    fold_host(&m);
  }
  MUST(cuStreamSynchronize(s));
  EXPECT(f.iter == (unsigned)replays);
  EXPECT(f.sum == m.sum);
  EXPECT(memcmp(hin, min, sizeof min) == 0);
  CU(cuGraphExecDestroy(x));
  CU(cuGraphDestroy(g));
  MUST(cuStreamDestroy(s));
  MUST(cuMemFree(d));
  MUST(cuMemFreeHost(hout));
  return m.sum;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FATBIN [REPLAYS=100]\n", argv[0]);
    return 2;
  }
  int replays = argc > 2 ? atoi(argv[2]) : 100;
  setvbuf(stdout, NULL, _IOLBF, 0);
  CUdevice dev;
  CUmodule mod;
  drv_primary(&dev);
  MUST(cuModuleLoad(&mod, argv[1]));
  MUST(cuModuleGetFunction(&mix, mod, "drv_mix"));
  drv_set_salt(mod, SALT);
  unsigned long long h = explicit_graph(replays);
  h = h * 31 + captured_graph(replays);
  printf("graph launches: %d\n", graph_launches);
  printf("device graph launches: 0\n");
  printf("played kernels: %d\n", played_kernels);
  printf("launches: %d\n", launches);
  printf("checksum: %016llx\n", h);
  MUST(cuModuleUnload(mod));
  MUST(cuDevicePrimaryCtxRelease(dev));
  return drv_summary();
}
