// The runtime and the driver API on the same objects, as libraries that use
// both do: a context made by the runtime seen by the driver, cudaMalloc
// pointers in cuMemcpy*, cudaStream_t as CUstream and back, cudaEvent_t as
// CUevent, cudaGetFuncBySymbol's cudaFunction_t launched with cuLaunchKernel,
// a module loaded with cuModuleLoadData launched on a runtime stream, and
// memory from cuMemAlloc released by cudaFree. Built with
// `nvcc -cudart shared -lcuda` (tests/e2e/driver.cmake).
//
// usage: drv_mixed FATBIN [ITERATIONS=20 [N=65536]]
//   FATBIN: drv_kernels.fatbin (tests/apps/drv_kernels.cu)
// After the one-off checks, a loop of ITERATIONS iterations (four launches
// each: <<<>>>, cuLaunchKernel of a module kernel, of the same module's
// mangled kernel, and of cudaGetFuncBySymbol's function) on integers, for
// the migration tests. Prints a line per check (drv_check.h), "launches: L",
// "iterations: I", "checksum: <hex>", then "PASSED" or "FAILED: n".
// CPU twins: tests/twins/app_twins.c.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda_check.h"
#include "drv_check.h"

// runtime calls: the same lines, with the cudaError_t's name
static void rt_check(cudaError_t e, const char *file, int line, const char *what) {
  drv_check(e == cudaSuccess, file, line, what, e == cudaSuccess ? NULL : cudaGetErrorName(e));
}
#define RT(call) rt_check((call), __FILE__, __LINE__, #call)
#define RT_MUST(call) CHECK(call) /* cuda_check.h: says where and why, exits 3 */

static const int BLOCK = 256;
static const int SNAP = 256;
static int launches;

// x[i] = (x[i] ^ k) + 3i   (_Z6mx_addPjij)
__global__ void mx_add(unsigned *x, int n, unsigned k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = (x[i] ^ k) + (unsigned)i * 3u;
}

static unsigned blocks_for(int n) { return (unsigned)((n + BLOCK - 1) / BLOCK); }
static unsigned salt_of(int it) { return (unsigned)it * 0x85ebca6bu + 0xc2b2ae35u; }

static std::vector<char> read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("FAIL cannot open %s\n", path);
    exit(2);
  }
  std::vector<char> buf;
  char chunk[65536];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) buf.insert(buf.end(), chunk, chunk + got);
  fclose(f);
  return buf;
}

// the loop on the host
static void model(std::vector<unsigned> &x, std::vector<unsigned> &y, unsigned long long &snaps,
                  int n, int iterations) {
  for (int it = 0; it < iterations; it++) {
    unsigned k = (unsigned)it, salt = salt_of(it);
    for (int i = 0; i < n; i++) x[i] = (x[i] ^ k) + (unsigned)i * 3u;              // <<<>>>
    for (int i = 0; i < n; i++) x[i] = x[i] * 1664525u + salt + k + (unsigned)i;   // drv_mix
    for (int i = 0; i < n; i++) y[i] += x[i] ^ (unsigned)i;                        // drv_fold
    for (int i = 0; i < n; i++) y[i] = (y[i] ^ (k + 1)) + (unsigned)i * 3u;        // mx_add
    snaps = drv_fnv(snaps, y.data(), SNAP * 4);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FATBIN [ITERATIONS=20 [N=65536]]\n", argv[0]);
    return 2;
  }
  int iterations = argc > 2 ? atoi(argv[2]) : 20;
  int n = argc > 3 ? atoi(argv[3]) : 65536;
  if (n < SNAP) n = SNAP;
  setvbuf(stdout, NULL, _IOLBF, 0);
  size_t bytes = (size_t)n * 4;

  // the runtime makes the primary context current; the driver sees it
  RT(cudaSetDevice(0));
  RT(cudaFree(0));
  CUcontext ctx = NULL, primary = NULL;
  CU(cuCtxGetCurrent(&ctx));
  EXPECT(ctx != NULL);
  CUdevice dev = -1;
  CU(cuCtxGetDevice(&dev));
  EXPECT(dev == 0);
  CU(cuDevicePrimaryCtxRetain(&primary, 0));
  EXPECT(primary == ctx);

  // a module of the driver API, used on the runtime's objects
  std::vector<char> image = read_file(argv[1]);
  CUmodule mod;
  MUST(cuModuleLoadData(&mod, image.data()));
  CUfunction f_mix, f_fold, f_vadd, f_add;
  MUST(cuModuleGetFunction(&f_mix, mod, "drv_mix"));
  MUST(cuModuleGetFunction(&f_fold, mod, "_Z8drv_foldPjPKji"));
  MUST(cuModuleGetFunction(&f_vadd, mod, "drv_vadd"));
  CUdeviceptr salt;
  size_t salt_bytes = 0;
  MUST(cuModuleGetGlobal(&salt, &salt_bytes, mod, "drv_salt"));
  EXPECT(salt_bytes == 4);
  // the program's own kernel, as a CUfunction
  cudaFunction_t rf = NULL;
  RT(cudaGetFuncBySymbol(&rf, (const void *)mx_add));
  f_add = (CUfunction)rf;
  EXPECT(f_add != NULL);

  // streams and events of one API used through the other
  cudaStream_t rs;
  RT_MUST(cudaStreamCreate(&rs));
  CUstream ds;
  MUST(cuStreamCreate(&ds, CU_STREAM_NON_BLOCKING));
  cudaEvent_t ev0, ev1, ev_mix;
  RT(cudaEventCreate(&ev0));
  RT(cudaEventCreate(&ev1));
  RT(cudaEventCreateWithFlags(&ev_mix, cudaEventDisableTiming));

  // cudaMalloc'd memory through cuMemcpy*, a kernel of each kind on rs
  std::vector<float> ha(n), hb(n), hc(n);
  for (int i = 0; i < n; i++) ha[i] = (float)i, hb[i] = 0.25f * (float)(i % 1000);
  float *a, *b, *c;
  RT_MUST(cudaMalloc(&a, bytes));
  RT_MUST(cudaMalloc(&b, bytes));
  RT_MUST(cudaMalloc(&c, bytes));
  CU(cuEventRecord((CUevent)ev0, (CUstream)rs));
  CU(cuMemcpyHtoDAsync((CUdeviceptr)a, ha.data(), bytes, (CUstream)rs));
  CU(cuMemcpyHtoDAsync((CUdeviceptr)b, hb.data(), bytes, (CUstream)rs));
  CUdeviceptr dc = (CUdeviceptr)c;
  CUdeviceptr da = (CUdeviceptr)a, db = (CUdeviceptr)b;
  void *vargs[] = {&dc, &da, &db, &n};
  CU(cuLaunchKernel(f_vadd, blocks_for(n), 1, 1, BLOCK, 1, 1, 0, (CUstream)rs, vargs, NULL));
  launches++;
  // <<<>>> on the same stream reads c as unsigned words: c ^ 5 + 3i
  mx_add<<<blocks_for(n), BLOCK, 0, rs>>>((unsigned *)c, n, 5u);
  launches++;
  RT(cudaGetLastError());
  CU(cuEventRecord((CUevent)ev1, (CUstream)rs));
  CU(cuStreamSynchronize((CUstream)rs));
  CU(cuEventSynchronize((CUevent)ev1));
  float ms = -1.0f;
  RT(cudaEventElapsedTime(&ms, ev0, ev1));
  EXPECT(ms >= 0.0f);
  std::vector<unsigned> got(n);
  CU(cuMemcpyDtoH(got.data(), (CUdeviceptr)c, bytes));
  int ok = 1;
  for (int i = 0; i < n; i++) {
    float sum = ha[i] + hb[i];
    unsigned w;
    memcpy(&w, &sum, 4);
    ok &= got[i] == (w ^ 5u) + (unsigned)i * 3u;
  }
  EXPECT(ok);

  // cudaGetFuncBySymbol's function through cuLaunchKernel, on the driver's
  // stream, which the runtime synchronizes
  RT(cudaMemsetAsync(b, 0, bytes, (cudaStream_t)ds));
  CUdeviceptr ub = (CUdeviceptr)b;
  unsigned k7 = 7;
  void *aargs[] = {&ub, &n, &k7};
  CU(cuLaunchKernel(f_add, blocks_for(n), 1, 1, BLOCK, 1, 1, 0, ds, aargs, NULL));
  launches++;
  RT(cudaStreamSynchronize((cudaStream_t)ds));
  RT(cudaMemcpy(got.data(), b, bytes, cudaMemcpyDeviceToHost));
  ok = 1;
  for (int i = 0; i < n; i++) ok &= got[i] == 7u + (unsigned)i * 3u;
  EXPECT(ok);

  // cuMemAlloc'd memory used and freed by the runtime
  CUdeviceptr dm;
  CU(cuMemAlloc(&dm, bytes));
  RT(cudaMemcpy((void *)dm, got.data(), bytes, cudaMemcpyHostToDevice));
  unsigned tail = 0;
  CU(cuMemcpyDtoH(&tail, dm + bytes - 4, 4));
  EXPECT(tail == got[n - 1]);
  cudaPointerAttributes pa;
  RT(cudaPointerGetAttributes(&pa, (void *)dm));
  EXPECT(pa.type == cudaMemoryTypeDevice);
  RT(cudaFree((void *)dm));
  RT(cudaFree(c));

  // ---- the loop: x on rs, y on ds, ordered by a runtime event ----
  unsigned *x = (unsigned *)a, *y = (unsigned *)b, *pin;
  RT_MUST(cudaMallocHost(&pin, SNAP * 4));
  std::vector<unsigned> x0(n), y0(n);
  for (int i = 0; i < n; i++) x0[i] = (unsigned)i * 2654435761u + 1u, y0[i] = (unsigned)i ^ 0xabcu;
  RT_MUST(cudaMemcpy(x, x0.data(), bytes, cudaMemcpyHostToDevice));
  MUST(cuMemcpyHtoD((CUdeviceptr)y, y0.data(), bytes));
  CUdeviceptr ux = (CUdeviceptr)x, uy = (CUdeviceptr)y;
  unsigned long long snaps = 14695981039346656037ull;
  int it;
  for (it = 0; it < iterations; it++) {
    unsigned k = (unsigned)it, k1 = k + 1, s = salt_of(it);
    mx_add<<<blocks_for(n), BLOCK, 0, rs>>>(x, n, k);
    RT_MUST(cudaGetLastError());
    MUST(cuMemcpyHtoD(salt, &s, sizeof s));
    void *margs[] = {&ux, &n, &k};
    MUST(cuLaunchKernel(f_mix, blocks_for(n), 1, 1, BLOCK, 1, 1, 0, (CUstream)rs, margs, NULL));
    MUST(cuEventRecord((CUevent)ev_mix, (CUstream)rs));
    RT_MUST(cudaStreamWaitEvent((cudaStream_t)ds, ev_mix, 0));
    void *fargs[] = {&uy, &ux, &n};
    MUST(cuLaunchKernel(f_fold, blocks_for(n), 1, 1, BLOCK, 1, 1, 0, ds, fargs, NULL));
    void *aargs2[] = {&uy, &n, &k1};
    MUST(cuLaunchKernel(f_add, blocks_for(n), 1, 1, BLOCK, 1, 1, 0, ds, aargs2, NULL));
    launches += 4;
    RT_MUST(cudaMemcpyAsync(pin, y, SNAP * 4, cudaMemcpyDeviceToHost, (cudaStream_t)ds));
    MUST(cuStreamSynchronize(ds));
    snaps = drv_fnv(snaps, pin, SNAP * 4);
    if (it == 0) printf("drv_mixed: running pid %d\n", (int)getpid());
  }
  RT_MUST(cudaDeviceSynchronize());
  std::vector<unsigned> gx(n), gy(n);
  MUST(cuMemcpyDtoH(gx.data(), ux, bytes));
  RT_MUST(cudaMemcpy(gy.data(), y, bytes, cudaMemcpyDeviceToHost));
  unsigned long long msnaps = 14695981039346656037ull;
  model(x0, y0, msnaps, n, it);
  EXPECT(gx == x0);
  EXPECT(gy == y0);
  EXPECT(snaps == msnaps);
  unsigned long long h = 14695981039346656037ull;
  h = drv_fnv(h, gx.data(), bytes);
  h = drv_fnv(h, gy.data(), bytes);
  h = drv_fnv(h, &snaps, sizeof snaps);

  RT(cudaFreeHost(pin));
  RT(cudaFree(a));
  RT(cudaFree(b));
  CU(cuEventDestroy((CUevent)ev0));
  RT(cudaEventDestroy(ev1));
  RT(cudaEventDestroy(ev_mix));
  RT(cudaStreamDestroy((cudaStream_t)ds));
  CU(cuStreamDestroy((CUstream)rs));
  CU(cuModuleUnload(mod));
  CU(cuDevicePrimaryCtxRelease(0));
  size_t free_b = 0, total_b = 0;
  RT(cudaMemGetInfo(&free_b, &total_b));
  printf("device memory in use at exit: %zu\n", total_b - free_b);
  printf("iterations: %d\n", it);
  printf("launches: %d\n", launches);
  printf("checksum: %016llx\n", h);
  return drv_summary();
}
