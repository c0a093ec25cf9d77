/* CUDA graphs through ferry's driver API (issue 21), the driver twin of
 * graphs.cu: a stream capture (32- and 16-bit memsets, kernels, a device to
 * device copy, a fork onto a second stream and its join) replayed, a graph
 * built with cuGraphAdd*, its executable graph changed in place
 * (cuGraphExecKernelNodeSetParams) and from another graph
 * (cuGraphExecUpdate), a graph given a module variable's address, a host
 * copy captured, and refused edge data. Integer
 * arithmetic only: a migrated run must end with the same checksum.
 * usage: drv_graphs FATBIN [REPLAYS=100]
 * Prints "graph launches: G", "launches: L", "checksum: <hex>", PASSED.
 */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <stddef.h>
#include <string.h>
#include <dlfcn.h>

#include "drv_check.h"

#define N 4096
#define SALT 0x1234u
static int launches, graph_launches;
static CUfunction mix;

static void model_mix(unsigned *x, unsigned k) {
  for (unsigned i = 0; i < N; i++) x[i] = x[i] * 1664525u + SALT + k + i;
}

static CUresult launch_mix(CUstream s, CUdeviceptr *x, unsigned *k) {
  int n = N;
  void *args[] = {x, &n, k};
  return cuLaunchKernel(mix, N / 256, 1, 1, 256, 1, 1, 0, s, args, NULL);
}

static void graph_launch(CUgraphExec x, CUstream s) {
  MUST(cuGraphLaunch(x, s));
  graph_launches++;
  launches++;
}

/* x = mix(x, 1); fork: y = x, y = mix(y, 2) | z = 0x0102 (16-bit); join: x[0..N/2) = y */
static unsigned long long captured(int replays) {
  CUdeviceptr x, y, z;
  MUST(cuMemAlloc(&x, N * 4));
  MUST(cuMemAlloc(&y, N * 4));
  MUST(cuMemAlloc(&z, N * 4));
  static unsigned hx[N], hy[N], got[N];
  static unsigned short hz[2 * N];
  for (unsigned i = 0; i < N; i++) hx[i] = i * 3u;
  MUST(cuMemcpyHtoD(x, hx, sizeof hx));
  CUstream s1, s2;
  CUevent fork, join;
  MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  MUST(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  MUST(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));

  unsigned one = 1, two = 2;
  CU(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CU(cuStreamIsCapturing(s1, &st));
  EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CU(cuMemsetD32Async(y, 5u, N, s1));
  CU(launch_mix(s1, &x, &one));
  CU(cuEventRecord(fork, s1));
  CU(cuStreamWaitEvent(s2, fork, 0));
  CU(cuMemcpyDtoDAsync(y, x, N * 4, s2));
  CU(launch_mix(s2, &y, &two));
  CU(cuMemsetD16Async(z, 0x0102, 2 * N, s1));
  cuuint64_t id = 0;
  CUgraph during = NULL;
  const CUgraphNode *deps = NULL;
  size_t ndeps = 0;
  CU(cuStreamGetCaptureInfo(s2, &st, &id, &during, &deps, NULL, &ndeps));
  EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0 && ndeps == 1);
  CU(cuEventRecord(join, s2));
  CU(cuStreamWaitEvent(s1, join, 0));
  CU(cuMemcpyDtoDAsync(x, y, N * 2, s1));
  CUgraph g = NULL;
  CU(cuStreamEndCapture(s1, &g));
  EXPECT(g == during);
  size_t count = 0;
  CU(cuGraphGetNodes(g, NULL, &count));
  EXPECT(count == 6);
  CUgraphExec exec;
  MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
  for (int r = 0; r < replays; r++) {
    graph_launch(exec, s1);
    for (unsigned i = 0; i < N; i++) hy[i] = 5;
    model_mix(hx, 1);
    memcpy(hy, hx, sizeof hy);
    model_mix(hy, 2);
    for (unsigned i = 0; i < 2 * N; i++) hz[i] = 0x0102;
    memcpy(hx, hy, N * 2);
  }
  MUST(cuStreamSynchronize(s1));
  MUST(cuMemcpyDtoH(got, x, sizeof got));
  EXPECT(memcmp(got, hx, sizeof hx) == 0);
  MUST(cuMemcpyDtoH(got, z, sizeof got));
  EXPECT(memcmp(got, hz, sizeof hz) == 0);
  unsigned long long h = drv_fnv(drv_fnv(1469598103934665603ull, hx, sizeof hx), hy, sizeof hy);
  CU(cuGraphExecDestroy(exec));
  CU(cuGraphDestroy(g));
  MUST(cuEventDestroy(fork));
  MUST(cuEventDestroy(join));
  MUST(cuStreamDestroy(s1));
  MUST(cuStreamDestroy(s2));
  MUST(cuMemFree(x));
  MUST(cuMemFree(y));
  MUST(cuMemFree(z));
  return h;
}

static CUDA_KERNEL_NODE_PARAMS mix_params(void **args, CUdeviceptr *x, int *n, unsigned *k) {
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  args[0] = x, args[1] = n, args[2] = k;
  p.func = mix;
  p.gridDimX = N / 256, p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = 256, p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  return p;
}

/* w = 9 (32-bit memset node), then w = mix(w, k) for k = 4, 6 (set in the
   exec), 8 (cuGraphExecUpdate from a clone) */
static unsigned long long explicit_api(void) {
  CUdeviceptr w;
  MUST(cuMemAlloc(&w, N * 4));
  CUstream s;
  MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUcontext ctx;
  MUST(cuCtxGetCurrent(&ctx));
  CUgraph g;
  CU(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS mp;
  memset(&mp, 0, sizeof mp);
  mp.dst = w, mp.value = 9, mp.elementSize = 4, mp.width = N, mp.height = 1;
  CUgraphNode nset, nkern, nempty;
  CU(cuGraphAddMemsetNode(&nset, g, NULL, 0, &mp, ctx));
  /* the generic form: an empty node after the memset */
  CUgraphNodeParams ep;
  memset(&ep, 0, sizeof ep);
  ep.type = CU_GRAPH_NODE_TYPE_EMPTY;
  CU(cuGraphAddNode(&nempty, g, &nset, NULL, 1, &ep));
  void *args[3];
  int n = N;
  unsigned k = 4;
  CUDA_KERNEL_NODE_PARAMS kp = mix_params(args, &w, &n, &k);
  CU(cuGraphAddKernelNode(&nkern, g, &nset, 1, &kp));
  CUgraphNodeType type;
  CU(cuGraphNodeGetType(nkern, &type));
  EXPECT(type == CU_GRAPH_NODE_TYPE_KERNEL);
  CUDA_KERNEL_NODE_PARAMS back;
  CU(cuGraphKernelNodeGetParams(nkern, &back));
  EXPECT(back.func == mix && back.gridDimX == N / 256 && *(unsigned *)back.kernelParams[2] == 4);
  CUgraphExec x;
  MUST(cuGraphInstantiateWithFlags(&x, g, 0));
  static unsigned got[N], want[N];
  unsigned long long h = 0;
  unsigned ks[3] = {4, 6, 8};
  for (int r = 0; r < 3; r++) {
    if (r == 1) {
      k = 6;
      kp = mix_params(args, &w, &n, &k);
      CU(cuGraphExecKernelNodeSetParams(x, nkern, &kp));
    } else if (r == 2) {
      CUgraph g2;
      CUgraphNode k2;
      CU(cuGraphClone(&g2, g));
      CU(cuGraphNodeFindInClone(&k2, nkern, g2));
      k = 8;
      kp = mix_params(args, &w, &n, &k);
      CU(cuGraphKernelNodeSetParams(k2, &kp));
      CUgraphExecUpdateResultInfo info;
      CU(cuGraphExecUpdate(x, g2, &info));
      EXPECT(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
      CU(cuGraphDestroy(g2));
    }
    graph_launch(x, s);
    MUST(cuStreamSynchronize(s));
    MUST(cuMemcpyDtoH(got, w, sizeof got));
    for (unsigned i = 0; i < N; i++) want[i] = 9;
    model_mix(want, ks[r]);
    EXPECT(memcmp(got, want, sizeof got) == 0);
    h = drv_fnv(h, got, sizeof got);
  }
  /* disabled, the kernel node does nothing: w stays 9 */
  unsigned enabled = 1;
  CU(cuGraphNodeSetEnabled(x, nkern, 0));
  CU(cuGraphNodeGetEnabled(x, nkern, &enabled));
  EXPECT(enabled == 0);
  graph_launch(x, s);
  MUST(cuStreamSynchronize(s));
  MUST(cuMemcpyDtoH(got, w, sizeof got));
  EXPECT(got[0] == 9 && got[N - 1] == 9);
  CU(cuGraphExecDestroy(x));
  CU(cuGraphDestroy(g));
  MUST(cuStreamDestroy(s));
  MUST(cuMemFree(w));
  return h;
}

/* a graph whose kernel is given a module variable's address, as XLA gives
   its kernels its constants: acc += drv_salt, the variable set before each
   replay. After a migration the variable lives elsewhere; the graph must
   read it there. */
static unsigned long long constants(CUmodule mod, int replays) {
  CUfunction fold;
  CUdeviceptr salt, acc;
  size_t bytes;
  MUST(cuModuleGetFunction(&fold, mod, "_Z8drv_foldPjPKji"));
  MUST(cuModuleGetGlobal(&salt, &bytes, mod, "drv_salt"));
  MUST(cuMemAlloc(&acc, 8));
  MUST(cuMemsetD32(acc, 0, 2));
  int n = 1;
  void *args[] = {&acc, &salt, &n};
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.func = fold;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  CUgraph g;
  CUgraphNode node;
  CUgraphExec x;
  CUstream s;
  MUST(cuGraphCreate(&g, 0));
  MUST(cuGraphAddKernelNode(&node, g, NULL, 0, &p));
  /* a second one into acc[1], after the first by a programmatic edge (XLA's
     command buffers add them; ferry keeps a full dependency) */
  CUdeviceptr acc1 = acc + 4;
  void *args1[] = {&acc1, &salt, &n};
  CUgraphNodeParams p1;
  memset(&p1, 0, sizeof p1);
  p1.type = CU_GRAPH_NODE_TYPE_KERNEL;
  p1.kernel.func = fold;
  p1.kernel.gridDimX = p1.kernel.gridDimY = p1.kernel.gridDimZ = 1;
  p1.kernel.blockDimX = p1.kernel.blockDimY = p1.kernel.blockDimZ = 1;
  p1.kernel.kernelParams = args1;
  CUgraphEdgeData edge;
  memset(&edge, 0, sizeof edge);
  edge.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
  edge.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  CUgraphNode node1;
  MUST(cuGraphAddNode_v2(&node1, g, &node, &edge, 1, &p1));
  MUST(cuGraphInstantiateWithFlags(&x, g, 0));
  MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  unsigned want = 0, got = 0;
  for (int r = 0; r < replays; r++) {
    unsigned v = 0x9e3779b9u * (unsigned)(r + 1);
    MUST(cuMemcpyHtoD(salt, &v, sizeof v));
    graph_launch(x, s);
    MUST(cuStreamSynchronize(s));
    want += v;
  }
  unsigned both[2];
  MUST(cuMemcpyDtoH(both, acc, sizeof both));
  got = both[0];
  EXPECT(got == want);
  EXPECT(both[1] == want);
  /* the variable's address given to a launch of its own, as XLA does
     without command buffers: after a move, and with a move at this very
     launch (its number is printed for FERRY_MIGRATE_AT), the kernel must
     read the variable where it lives now */
  unsigned salt_now = 0x1234567u, zero = 0;
  MUST(cuMemcpyHtoD(salt, &salt_now, sizeof salt_now));
  MUST(cuMemcpyHtoD(acc1, &zero, sizeof zero));
  printf("variable launch: %d\n", launches + 1);
  MUST(cuLaunchKernel(fold, 1, 1, 1, 1, 1, 1, 0, s, args1, NULL));
  launches++;
  MUST(cuStreamSynchronize(s));
  MUST(cuMemcpyDtoH(&got, acc1, sizeof got));
  EXPECT(got == salt_now);
  /* the address inside a structure parameter (cuBLASLt passes its
     deviceConstants so) */
  struct {
    CUdeviceptr y, x;
    int n;
  } fa = {acc1, salt, 1};
  void *sargs[] = {&fa};
  CUfunction fold_struct;
  MUST(cuModuleGetFunction(&fold_struct, mod, "drv_fold_struct"));
  MUST(cuLaunchKernel(fold_struct, 1, 1, 1, 1, 1, 1, 0, s, sargs, NULL));
  launches++;
  MUST(cuStreamSynchronize(s));
  MUST(cuMemcpyDtoH(&got, acc1, sizeof got));
  EXPECT(got == 2 * salt_now);
  /* the same through `extra`, given fewer bytes than the parameter holds
     (its fields, not its padding): NCCL passes only the used part of its
     kernels' 4 KiB argument structure so */
  size_t short_size = offsetof(__typeof__(fa), n) + sizeof fa.n; /* 20 of 24 */
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &fa, CU_LAUNCH_PARAM_BUFFER_SIZE, &short_size,
                   CU_LAUNCH_PARAM_END};
  MUST(cuLaunchKernel(fold_struct, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra));
  launches++;
  MUST(cuStreamSynchronize(s));
  MUST(cuMemcpyDtoH(&got, acc1, sizeof got));
  EXPECT(got == 3 * salt_now);
  got = want;
  MUST(cuGraphExecDestroy(x));
  MUST(cuGraphDestroy(g));
  MUST(cuStreamDestroy(s));
  MUST(cuMemFree(acc));
  drv_set_salt(mod, SALT);
  return got;
}

static void refusal(void) {
  /* ferry's refusals: skipped under NVIDIA's driver */
  if (!dlopen("libferry-client.so.0", RTLD_NOLOAD | RTLD_LAZY)) return;
  CUstream s;
  CUdeviceptr d;
  unsigned host[16] = {0};
  MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  MUST(cuMemAlloc(&d, sizeof host));
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  CU(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT(mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
  CU(cuThreadExchangeStreamCaptureMode(&mode));
  /* a host copy is captured (drv_graph_host.c runs such graphs) */
  CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU(cuMemcpyHtoDAsync(d, host, sizeof host, s));
  CUgraph g = NULL;
  CU(cuStreamEndCapture(s, &g));
  size_t count = 0;
  CU(cuGraphGetNodes(g, NULL, &count));
  EXPECT(count == 1);
  MUST(cuGraphDestroy(g));
  /* edge data ferry cannot keep as a full dependency: a port of the node
     after the edge (CUDA defines none) */
  MUST(cuGraphCreate(&g, 0));
  CUgraphNode a, b;
  CUgraphNodeParams empty;
  memset(&empty, 0, sizeof empty);
  empty.type = CU_GRAPH_NODE_TYPE_EMPTY;
  MUST(cuGraphAddNode_v2(&a, g, NULL, NULL, 0, &empty));
  CUgraphEdgeData odd;
  memset(&odd, 0, sizeof odd);
  odd.to_port = 1;
  CU_IS(cuGraphAddNode_v2(&b, g, &a, &odd, 1, &empty), CUDA_ERROR_NOT_SUPPORTED);
  MUST(cuGraphDestroy(g));
  MUST(cuMemFree(d));
  MUST(cuStreamDestroy(s));
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
  unsigned long long h = captured(replays);
  h ^= explicit_api() << 1;
  h ^= constants(mod, replays / 4 + 2) << 2;
  refusal();
  printf("graph launches: %d\n", graph_launches);
  printf("launches: %d\n", launches);
  printf("checksum: %016llx\n", h);
  MUST(cuModuleUnload(mod));
  MUST(cuDevicePrimaryCtxRelease(dev));
  return drv_summary();
}
