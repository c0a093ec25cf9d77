// A tour of the CUDA runtime API that ferry must forward faithfully. Every
// check prints on failure; the program exits non-zero if any check failed.
// It runs natively, through ferry on a real GPU, and through ferry on the
// CPU simulation (tests/twins/app_twins.c holds CPU twins of its kernels).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <pthread.h>
#include <cuda_runtime.h>

static int checks, failures;
#define EXPECT(cond)                                                              \
  do {                                                                            \
    checks++;                                                                     \
    if (!(cond)) {                                                                \
      failures++;                                                                 \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);             \
    }                                                                             \
  } while (0)
#define OK(call) EXPECT((call) == cudaSuccess)

struct Mixed {
  char a;
  double b;
  int c;
};
struct BigParam {
  int v[8000]; // 32000 bytes: needs the large-parameter path
};

__device__ int dev_value;
__constant__ float coeffs[4];

extern "C" __global__ void fill_index(int *out, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = base + i;
}

__global__ void scale(float *x, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}

__global__ void mixed_params(double *out, float f, Mixed m, char c, double d) {
  out[0] = f;
  out[1] = m.a;
  out[2] = m.b;
  out[3] = m.c;
  out[4] = c;
  out[5] = d;
}

__global__ void big_param(const __grid_constant__ BigParam p, int *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 8000) out[i] = p.v[i];
}

__global__ void read_symbols(float *out) {
  int i = threadIdx.x;
  if (i < 4) out[i] = coeffs[i] * dev_value;
  if (i == 0) dev_value += 1;
}

__global__ void say_hello(int tag) { printf("hello from the GPU, tag %d\n", tag); }

template <typename T> __global__ void add_one(T *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += (T)1;
}

static void test_device() {
  int count = -1, dev = -1;
  OK(cudaGetDeviceCount(&count));
  EXPECT(count >= 1);
  OK(cudaSetDevice(0));
  OK(cudaGetDevice(&dev));
  EXPECT(dev == 0);
  EXPECT(cudaSetDevice(count + 5) == cudaErrorInvalidDevice);
  EXPECT(cudaGetLastError() == cudaErrorInvalidDevice);
  EXPECT(cudaGetLastError() == cudaSuccess);
  cudaDeviceProp p;
  OK(cudaGetDeviceProperties(&p, 0));
  EXPECT(strlen(p.name) > 0);
  EXPECT(p.major >= 7);
  EXPECT(p.maxThreadsPerBlock == 1024);
  EXPECT(p.warpSize == 32);
  EXPECT(p.totalGlobalMem > (1ull << 30));
  int v = 0;
  OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
  EXPECT(v == p.multiProcessorCount && v > 0);
  OK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0));
  EXPECT(v == p.major);
  int least, greatest;
  OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  EXPECT(least >= greatest);
  size_t free_b = 0, total_b = 0;
  OK(cudaMemGetInfo(&free_b, &total_b));
  EXPECT(total_b > 0 && free_b <= total_b);
  int drv = 0, rt = 0;
  OK(cudaDriverGetVersion(&drv));
  OK(cudaRuntimeGetVersion(&rt));
  EXPECT(drv >= 13000 && rt >= 13000);
  size_t limit = 0;
  OK(cudaDeviceSetLimit(cudaLimitPrintfFifoSize, 4 << 20));
  OK(cudaDeviceGetLimit(&limit, cudaLimitPrintfFifoSize));
  EXPECT(limit >= (4u << 20));
  OK(cudaSetDeviceFlags(cudaDeviceScheduleAuto));
  unsigned flags = 99;
  OK(cudaGetDeviceFlags(&flags));
  int can = 1;
  OK(cudaDeviceCanAccessPeer(&can, 0, 0));
  EXPECT(can == 0);
  // deprecated, and without effect since Volta; miniFE still asks for 8 bytes
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  cudaSharedMemConfig bank = cudaSharedMemBankSizeDefault;
  OK(cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeEightByte));
  OK(cudaDeviceGetSharedMemConfig(&bank));
  EXPECT(bank == cudaSharedMemBankSizeFourByte);
#pragma GCC diagnostic pop
}

static void test_memory() {
  const int n = 1 << 16;
  int *d = nullptr;
  OK(cudaMalloc(&d, n * sizeof(int)));
  EXPECT(d != nullptr && ((uintptr_t)d % 256) == 0);
  OK(cudaMemset(d, 0xab, n * sizeof(int)));
  int *h = (int *)malloc(n * sizeof(int));
  OK(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT(h[0] == (int)0xabababab && h[n - 1] == (int)0xabababab);
  fill_index<<<(n + 255) / 256, 256>>>(d, n, 7);
  OK(cudaGetLastError());
  OK(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDefault));
  int bad = 0;
  for (int i = 0; i < n; i++) bad += h[i] != 7 + i;
  EXPECT(bad == 0);
  // device-to-device, then a partial copy at an offset
  int *d2;
  OK(cudaMalloc(&d2, n * sizeof(int)));
  OK(cudaMemcpy(d2, d, n * sizeof(int), cudaMemcpyDeviceToDevice));
  memset(h, 0, n * sizeof(int));
  OK(cudaMemcpy(h, d2 + 100, 10 * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT(h[0] == 107 && h[9] == 116);
  // template kernel
  add_one<int><<<(n + 255) / 256, 256>>>(d2, n);
  OK(cudaMemcpy(h, d2, n * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT(h[0] == 8 && h[n - 1] == 7 + n);
  // pointer attributes
  cudaPointerAttributes attr;
  OK(cudaPointerGetAttributes(&attr, d));
  EXPECT(attr.type == cudaMemoryTypeDevice && attr.device == 0 && attr.devicePointer == d);
  OK(cudaPointerGetAttributes(&attr, h));
  EXPECT(attr.type == cudaMemoryTypeUnregistered);
  // errors: a pointer that was never allocated
  EXPECT(cudaFree((void *)0x1234) == cudaErrorInvalidValue);
  cudaGetLastError();
  OK(cudaFree(d));
  OK(cudaFree(d2));
  EXPECT(cudaFree(d) == cudaErrorInvalidValue);
  cudaGetLastError();
  // a large allocation, copied both ways
  size_t big = (64u << 20) + 12345;
  char *db, *hb = (char *)malloc(big), *hb2 = (char *)malloc(big);
  for (size_t i = 0; i < big; i++) hb[i] = (char)(i * 7 + 3);
  OK(cudaMalloc(&db, big));
  OK(cudaMemcpy(db, hb, big, cudaMemcpyHostToDevice));
  OK(cudaMemcpy(hb2, db, big, cudaMemcpyDeviceToHost));
  EXPECT(memcmp(hb, hb2, big) == 0);
  OK(cudaFree(db));
  free(hb), free(hb2), free(h);
  OK(cudaFree(nullptr));
}

static void test_pitch() {
  size_t width = 100 * sizeof(float), height = 37, pitch = 0;
  float *d;
  OK(cudaMallocPitch((void **)&d, &pitch, width, height));
  EXPECT(pitch >= width && pitch % 256 == 0);
  size_t hpitch = width + 24;
  char *h = (char *)calloc(height, hpitch), *back = (char *)calloc(height, hpitch);
  for (size_t r = 0; r < height; r++)
    for (size_t c = 0; c < width; c++) h[r * hpitch + c] = (char)(r * 31 + c);
  OK(cudaMemset2D(d, pitch, 0, width, height));
  OK(cudaMemcpy2D(d, pitch, h, hpitch, width, height, cudaMemcpyHostToDevice));
  OK(cudaMemcpy2D(back, hpitch, d, pitch, width, height, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (size_t r = 0; r < height; r++) bad += memcmp(h + r * hpitch, back + r * hpitch, width) != 0;
  EXPECT(bad == 0);
  EXPECT(cudaMemcpy2D(d, 8, h, hpitch, width, height, cudaMemcpyHostToDevice) ==
         cudaErrorInvalidPitchValue);
  cudaGetLastError();
  OK(cudaFree(d));
  free(h), free(back);
}

static void CUDART_CB on_stream_done(cudaStream_t, cudaError_t status, void *user) {
  *(int *)user += status == cudaSuccess ? 1 : 100;
}
static void CUDART_CB host_function(void *user) { *(int *)user += 10; }

static void test_streams_events() {
  const int n = 1 << 18;
  cudaStream_t s1, s2;
  OK(cudaStreamCreate(&s1));
  OK(cudaStreamCreateWithPriority(&s2, cudaStreamNonBlocking, -1));
  unsigned flags = 0;
  int prio = 0;
  OK(cudaStreamGetFlags(s2, &flags));
  EXPECT(flags == cudaStreamNonBlocking);
  OK(cudaStreamGetPriority(s2, &prio));
  EXPECT(prio <= 0);
  float *h, *back, *d;
  OK(cudaMallocHost((void **)&h, n * sizeof(float)));
  OK(cudaHostAlloc((void **)&back, n * sizeof(float), cudaHostAllocDefault));
  OK(cudaMalloc(&d, n * sizeof(float)));
  for (int i = 0; i < n; i++) h[i] = (float)i, back[i] = -1;
  cudaEvent_t start, stop, mid;
  OK(cudaEventCreate(&start));
  OK(cudaEventCreate(&stop));
  OK(cudaEventCreateWithFlags(&mid, cudaEventDisableTiming));
  OK(cudaEventRecord(start, s1));
  OK(cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, s1));
  scale<<<(n + 255) / 256, 256, 0, s1>>>(d, 3.0f, n);
  OK(cudaEventRecord(mid, s1));
  OK(cudaStreamWaitEvent(s2, mid, 0));
  scale<<<(n + 255) / 256, 256, 0, s2>>>(d, 0.5f, n);
  OK(cudaMemcpyAsync(back, d, n * sizeof(float), cudaMemcpyDeviceToHost, s2));
  /* pinned memory named as a device side (unified addressing, as XLA reads
     results): it is read after the copy into it lands */
  float *again = (float *)malloc(n * sizeof(float));
  OK(cudaMemcpyAsync(again, back, n * sizeof(float), cudaMemcpyDeviceToHost, s2));
  OK(cudaEventRecord(stop, s2));
  int called = 0;
  OK(cudaStreamAddCallback(s2, on_stream_done, &called, 0));
  OK(cudaLaunchHostFunc(s2, host_function, &called));
  OK(cudaEventSynchronize(stop));
  OK(cudaStreamSynchronize(s2));
  EXPECT(called == 11);
  OK(cudaEventQuery(stop));
  OK(cudaStreamQuery(s2));
  int bad = 0;
  for (int i = 0; i < n; i++) bad += back[i] != 1.5f * i || again[i] != 1.5f * i;
  EXPECT(bad == 0);
  free(again);
  float ms = -1;
  OK(cudaEventElapsedTime(&ms, start, stop));
  EXPECT(ms >= 0);
  EXPECT(cudaEventElapsedTime(&ms, start, mid) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  OK(cudaStreamSynchronize(s1));
  OK(cudaStreamSynchronize(0));
  OK(cudaStreamSynchronize(cudaStreamPerThread));
  cudaPointerAttributes attr;
  OK(cudaPointerGetAttributes(&attr, h));
  EXPECT(attr.type == cudaMemoryTypeHost);
  OK(cudaStreamDestroy(s1));
  OK(cudaStreamDestroy(s2));
  OK(cudaEventDestroy(start));
  OK(cudaEventDestroy(stop));
  OK(cudaEventDestroy(mid));
  OK(cudaFreeHost(h));
  OK(cudaFreeHost(back));
  OK(cudaFree(d));
}

// many device-to-host copies into pinned memory before one synchronize
// (ferry holds their data on the server until then, up to its
// --max-deferred): how many calls failed, what the synchronize said, and
// how many chunks arrived intact. The chunks a refused copy had are left
// as they were (-1).
struct DeferredResult {
  int calls_failed, intact;
  cudaError_t sync;
};
static DeferredResult deferred_copies(int copies, int words) {
  DeferredResult r = {0, 0, cudaSuccess};
  const int n = copies * words;
  int *d = nullptr, *h = nullptr;
  cudaStream_t s;
  if (cudaMalloc(&d, n * sizeof(int)) != cudaSuccess || cudaMallocHost((void **)&h, n * sizeof(int)) != cudaSuccess ||
      cudaStreamCreate(&s) != cudaSuccess) {
    r.sync = cudaErrorMemoryAllocation;
    return r;
  }
  for (int i = 0; i < n; i++) h[i] = -1;
  fill_index<<<(n + 255) / 256, 256, 0, s>>>(d, n, 0);
  for (int k = 0; k < copies; k++)
    r.calls_failed += cudaMemcpyAsync(h + (size_t)k * words, d + (size_t)k * words, words * sizeof(int),
                                      cudaMemcpyDeviceToHost, s) != cudaSuccess;
  r.sync = cudaStreamSynchronize(s);
  cudaGetLastError();
  for (int k = 0; k < copies; k++) {
    int ok = 1;
    for (int i = k * words; i < (k + 1) * words && ok; i++) ok = h[i] == i;
    r.intact += ok;
  }
  cudaStreamSynchronize(s); // an error is reported once, not again
  cudaStreamDestroy(s);
  cudaFreeHost(h);
  cudaFree(d);
  return r;
}

static void test_deferred() {
  DeferredResult r = deferred_copies(64, 16384); // 64 x 64 KiB: far below any default limit
  EXPECT(r.calls_failed == 0);
  EXPECT(r.sync == cudaSuccess);
  EXPECT(r.intact == 64);
}

static void test_kernels() {
  double *dout, out[6];
  OK(cudaMalloc(&dout, sizeof out));
  Mixed m = {'x', 2.5, -42};
  mixed_params<<<1, 1>>>(dout, 1.25f, m, 'q', -7.75);
  OK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
  EXPECT(out[0] == 1.25 && out[1] == 'x' && out[2] == 2.5 && out[3] == -42 && out[4] == 'q' &&
         out[5] == -7.75);
  OK(cudaFree(dout));

  static BigParam bp;
  for (int i = 0; i < 8000; i++) bp.v[i] = i * 3 + 1;
  int *dbig, *hbig = (int *)malloc(8000 * sizeof(int));
  OK(cudaMalloc(&dbig, 8000 * sizeof(int)));
  big_param<<<(8000 + 255) / 256, 256>>>(bp, dbig);
  OK(cudaGetLastError());
  OK(cudaMemcpy(hbig, dbig, 8000 * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT(hbig[0] == 1 && hbig[7999] == 7999 * 3 + 1 && hbig[4000] == 12001);
  OK(cudaFree(dbig));
  free(hbig);

  // the public launch API with an explicit argument array
  int *d;
  OK(cudaMalloc(&d, 64 * sizeof(int)));
  int n = 64, base = 100;
  void *args[] = {&d, &n, &base};
  OK(cudaLaunchKernel((const void *)fill_index, dim3(1), dim3(64), args, 0, 0));
  int h[64];
  OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h[0] == 100 && h[63] == 163);
  base = 200;
  OK(cudaLaunchCooperativeKernel((const void *)fill_index, dim3(1), dim3(64), args, 0, 0));
  OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h[0] == 200 && h[63] == 263);

  // an impossible configuration is reported by the launch
  fill_index<<<1, 2048>>>(d, n, 0);
  cudaError_t launch_error = cudaGetLastError();
  printf("api_tour: a 2048-thread block gives %s\n", cudaGetErrorName(launch_error));
  EXPECT(launch_error == cudaErrorInvalidValue); // what CUDA 13 answers natively
  EXPECT(cudaGetLastError() == cudaSuccess);
  OK(cudaFree(d));

  cudaFuncAttributes fa;
  OK(cudaFuncGetAttributes(&fa, (const void *)scale));
  EXPECT(fa.maxThreadsPerBlock > 0);
  OK(cudaFuncSetAttribute((const void *)scale, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024));
  /* as cuDNN does before each launch: the same value again (ferry: no call) */
  for (int i = 0; i < 10; i++)
    OK(cudaFuncSetAttribute((const void *)scale, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024));
  OK(cudaFuncGetAttributes(&fa, (const void *)scale));
  EXPECT(fa.maxDynamicSharedSizeBytes == 1024);
  OK(cudaFuncSetCacheConfig((const void *)scale, cudaFuncCachePreferL1));
  int blocks = 0;
  OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void *)scale, 256, 0));
  EXPECT(blocks > 0);
  OK(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, (const void *)scale, 128, 0,
                                                            cudaOccupancyDefault));
  EXPECT(blocks > 0);
  cudaError_t not_kernel = cudaFuncGetAttributes(&fa, (const void *)test_kernels);
  printf("api_tour: cudaFuncGetAttributes of a host function gives %s\n",
         cudaGetErrorName(not_kernel));
  EXPECT(not_kernel == cudaErrorInvalidResourceHandle); // likewise
  cudaGetLastError();
}

// cudaLaunchKernelEx (the C++ template over cudaLaunchKernelExC), as CUB
// and Thrust launch in CUDA 13: each launch carries launch attributes
static void test_launch_ex() {
  int *d, h[64];
  OK(cudaMalloc(&d, sizeof h));
  cudaStream_t s;
  OK(cudaStreamCreate(&s));
  cudaLaunchAttribute at[3];
  memset(at, 0, sizeof at);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(2);
  cfg.blockDim = dim3(32);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = s;
  cfg.attrs = at;

  // programmatic stream serialization, next to an entry to ignore
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  at[1].id = cudaLaunchAttributeIgnore;
  cfg.numAttrs = 2;
  OK(cudaLaunchKernelEx(&cfg, fill_index, d, 64, 300));
  OK(cudaStreamSynchronize(s));
  OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h[0] == 300 && h[63] == 363);

  // a cluster of two blocks (the grid of two divides into it; sm_90), with a priority
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = 2;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  at[1].id = cudaLaunchAttributePriority;
  at[1].val.priority = 0;
  cfg.numAttrs = 2;
  OK(cudaLaunchKernelEx(&cfg, fill_index, d, 64, 400));
  OK(cudaStreamSynchronize(s));
  OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h[0] == 400 && h[63] == 463);

  // cooperative through the attribute, alone and beside another attribute,
  // on the default stream
  cfg.stream = 0;
  memset(at, 0, sizeof at);
  at[0].id = cudaLaunchAttributeCooperative;
  at[0].val.cooperative = 1;
  cfg.numAttrs = 1;
  OK(cudaLaunchKernelEx(&cfg, fill_index, d, 64, 500));
  OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h[0] == 500 && h[63] == 563);
  at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[1].val.programmaticStreamSerializationAllowed = 0;
  cfg.numAttrs = 2;
  OK(cudaLaunchKernelEx(&cfg, fill_index, d, 64, 600));
  OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h[0] == 600 && h[63] == 663);

  // no attributes at all, through the C API with an argument array
  int n = 64, base = 700;
  void *args[] = {&d, &n, &base};
  cfg.numAttrs = 0;
  cfg.attrs = nullptr;
  OK(cudaLaunchKernelExC(&cfg, (const void *)fill_index, args));
  OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h[0] == 700 && h[63] == 763);

  OK(cudaStreamDestroy(s));
  OK(cudaFree(d));
}

static void test_symbols() {
  float c[4] = {1, 2, 3, 4}, back[4] = {0};
  int value = 10;
  OK(cudaMemcpyToSymbol(coeffs, c, sizeof c));
  OK(cudaMemcpyToSymbol(dev_value, &value, sizeof value));
  size_t size = 0;
  OK(cudaGetSymbolSize(&size, coeffs));
  EXPECT(size == sizeof c);
  float *d;
  OK(cudaMalloc(&d, sizeof c));
  read_symbols<<<1, 32>>>(d);
  OK(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
  EXPECT(back[0] == 10 && back[3] == 40);
  OK(cudaMemcpyFromSymbol(&value, dev_value, sizeof value));
  EXPECT(value == 11);
  OK(cudaMemcpyFromSymbol(back, coeffs, sizeof(float), 2 * sizeof(float)));
  EXPECT(back[0] == 3);
  EXPECT(cudaMemcpyToSymbol(coeffs, c, sizeof c, 4) == cudaErrorInvalidValue);
  cudaGetLastError();
  void *addr = nullptr;
  OK(cudaGetSymbolAddress(&addr, dev_value));
  EXPECT(addr != nullptr);
  OK(cudaFree(d));
}

static void *thread_work(void *arg) {
  long id = (long)arg;
  int *ok = (int *)calloc(1, sizeof(int));
  const int n = 4096;
  int *d, h[4096];
  if (cudaSetDevice(0) != cudaSuccess || cudaMalloc(&d, n * sizeof(int)) != cudaSuccess) return ok;
  for (int round = 0; round < 20; round++) {
    fill_index<<<n / 256, 256>>>(d, n, (int)id * 1000 + round);
    if (cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess) return ok;
    for (int i = 0; i < n; i++)
      if (h[i] != (int)id * 1000 + round + i) return ok;
  }
  // last errors are per thread: make one here, it must not leak elsewhere
  cudaSetDevice(-1);
  *ok = cudaGetLastError() == cudaErrorInvalidDevice && cudaFree(d) == cudaSuccess;
  return ok;
}

static void test_threads() {
  pthread_t t[4];
  for (long i = 0; i < 4; i++) pthread_create(&t[i], nullptr, thread_work, (void *)i);
  int all = 1;
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    all &= *(int *)r;
    free(r);
  }
  EXPECT(all);
  EXPECT(cudaGetLastError() == cudaSuccess);
}

static void test_printf() {
  say_hello<<<1, 1>>>(42);
  OK(cudaDeviceSynchronize());
}

// usage: api_tour                   the tour; exits 1 if any check failed
//        api_tour deferred N WORDS  only N copies of WORDS ints each, then
//                                   one synchronize, reported in one line
int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "deferred")) {
    DeferredResult r = deferred_copies(atoi(argv[2]), atoi(argv[3]));
    // then a few that fit: the refusal was the copies', not the device's
    DeferredResult after = deferred_copies(2, 1024);
    printf("deferred: calls_failed=%d sync=%s intact=%d after=%s after_intact=%d\n", r.calls_failed,
           cudaGetErrorName(r.sync), r.intact, cudaGetErrorName(after.sync), after.intact);
    return 0;
  }
  test_device();
  test_memory();
  test_pitch();
  test_streams_events();
  test_deferred();
  test_kernels();
  test_launch_ex();
  test_symbols();
  test_threads();
  test_printf();
  OK(cudaDeviceReset());
  int *d;
  OK(cudaMalloc(&d, 1024));
  OK(cudaFree(d));
  printf("api_tour: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
