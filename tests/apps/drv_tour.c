/* A tour of the CUDA driver API (cuda.h only, no runtime) that ferry's
 * libcuda.so.1 must forward faithfully, then a loop of launches for the
 * migration tests. Built twice (tests/e2e/driver.cmake): as C with the host
 * compiler and -lcuda, and through nvcc as CUDA C++ with nvcc's default
 * -cudart static ("the same program built with -cudart static").
 *
 * usage: drv_tour FATBIN CUBIN PTX [ITERATIONS=20 [N=65536]]
 *   FATBIN, CUBIN, PTX: tests/apps/drv_kernels.cu built three ways.
 * Every check prints a line (drv_check.h). After the tour, ITERATIONS
 * iterations of a loop (two launches each, on two streams ordered by an
 * event, a module global rewritten each time, buffers re-allocated now and
 * then) run on N words; all its arithmetic is on integers, so a run that
 * migrated must end with the same checksum as one that did not. Prints
 * "tour launches: T" (successful launches before the loop), "iterations: I",
 * "launches: L" (in all), "checksum: <hex>", then "PASSED" or "FAILED: n".
 * CPU twins of the kernels: tests/twins/app_twins.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "drv_check.h"

#define ABSENT_ASKED 20

#define BLOCK 256
static int launches; /* successful launches so far */

static CUmodule mod_fat, mod_cubin, mod_ptx;
static CUfunction f_vadd, f_scale, f_params, f_reverse, f_fill2d, f_mix, f_fold;
static CUstream stream;

static unsigned blocks_for(int n) { return (unsigned)((n + BLOCK - 1) / BLOCK); }

/* a launch that must succeed; counted */
static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned by,
                       unsigned shmem, CUstream s, void **params, void **extra) {
  CUresult r = cuLaunchKernel(f, gx, gy, 1, bx, by, 1, shmem, s, params, extra);
  if (r == CUDA_SUCCESS) launches++;
  return r;
}

/* ---- devices and contexts ---- */
static CUdevice test_device(CUcontext *primary) {
  int version = 0, count = 0, major = 0, minor = 0, sms = 0;
  CU(cuInit(0));
  CU(cuDriverGetVersion(&version));
  printf("driver version: %d\n", version);
  EXPECT(version >= 13000);
  CU(cuDeviceGetCount(&count));
  EXPECT(count >= 1);
  CUdevice dev = -1;
  MUST(cuDeviceGet(&dev, 0));
  CU_IS(cuDeviceGet(&dev, count + 3), CUDA_ERROR_INVALID_DEVICE);
  MUST(cuDeviceGet(&dev, 0));
  char name[256] = "";
  CU(cuDeviceGetName(name, sizeof name, dev));
  printf("device: %s\n", name);
  EXPECT(name[0] != 0);
  CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  printf("compute capability %d.%d, %d SMs\n", major, minor, sms);
  EXPECT(major >= 9); /* the kernels are built for sm_90 */
  EXPECT(sms > 0);
  size_t total = 0;
  CU(cuDeviceTotalMem(&total, dev));
  EXPECT(total >= ((size_t)1 << 30));
  CUuuid uuid;
  memset(&uuid, 0, sizeof uuid);
  CU(cuDeviceGetUuid(&uuid, dev));
  int nonzero = 0;
  for (int i = 0; i < 16; i++) nonzero |= uuid.bytes[i];
  EXPECT(nonzero);

  /* the primary context, made current */
  CUcontext cur = NULL;
  CU(cuCtxGetCurrent(&cur)); /* nothing current yet: NULL, not an error */
  EXPECT(cur == NULL);
  MUST(cuDevicePrimaryCtxRetain(primary, dev));
  MUST(cuCtxSetCurrent(*primary));
  CU(cuCtxGetCurrent(&cur));
  EXPECT(cur == *primary);
  CUdevice cd = -1;
  CU(cuCtxGetDevice(&cd));
  EXPECT(cd == dev);
  CU(cuCtxSynchronize());

  /* a context of its own: cuCtxCreate makes it current (pushed) */
  CUcontext ctx = NULL, popped = NULL;
  CU(cuCtxCreate(&ctx, NULL, 0, dev));
  CU(cuCtxGetCurrent(&cur));
  EXPECT(ctx != NULL && cur == ctx && ctx != *primary);
  CUdeviceptr p = 0;
  unsigned got[4] = {0, 0, 0, 0};
  CU(cuMemAlloc(&p, sizeof got));
  CU(cuMemsetD32(p, 0x5a5a0001u, 4));
  CU(cuMemcpyDtoH(got, p, sizeof got));
  EXPECT(got[0] == 0x5a5a0001u && got[3] == 0x5a5a0001u);
  CU(cuMemFree(p));
  CU(cuCtxPopCurrent(&popped));
  EXPECT(popped == ctx);
  CU(cuCtxGetCurrent(&cur));
  EXPECT(cur == *primary);
  CU(cuCtxPushCurrent(ctx));
  CU(cuCtxGetCurrent(&cur));
  EXPECT(cur == ctx);
  CU(cuCtxGetDevice(&cd));
  EXPECT(cd == dev);
  CU(cuCtxPopCurrent(&popped));
  EXPECT(popped == ctx);
  CU(cuCtxDestroy(ctx));
  CU(cuCtxGetCurrent(&cur));
  EXPECT(cur == *primary);
  return dev;
}

/* ---- modules: a fatbin by path, a cubin and PTX from memory ---- */
static void test_modules(const char *fatbin, const char *cubin, const char *ptx) {
  MUST(cuModuleLoad(&mod_fat, fatbin));
  size_t len;
  void *image = drv_read_file(cubin, &len);
  CU(cuModuleLoadData(&mod_cubin, image));
  free(image);
  image = drv_read_file(ptx, &len);
  CU(cuModuleLoadData(&mod_ptx, image));
  free(image);
  EXPECT(mod_fat && mod_cubin && mod_ptx && mod_fat != mod_cubin && mod_cubin != mod_ptx);

  MUST(cuModuleGetFunction(&f_vadd, mod_fat, "drv_vadd"));
  MUST(cuModuleGetFunction(&f_scale, mod_fat, "drv_scale"));
  MUST(cuModuleGetFunction(&f_params, mod_fat, "drv_params"));
  MUST(cuModuleGetFunction(&f_reverse, mod_fat, "drv_reverse"));
  MUST(cuModuleGetFunction(&f_fill2d, mod_fat, "drv_fill2d"));
  MUST(cuModuleGetFunction(&f_mix, mod_fat, "drv_mix"));
  MUST(cuModuleGetFunction(&f_fold, mod_fat, "_Z8drv_foldPjPKji")); /* C++: mangled */
  CUfunction f = NULL;
  CU_IS(cuModuleGetFunction(&f, mod_fat, "drv_fold"), CUDA_ERROR_NOT_FOUND);
  CU_IS(cuModuleGetFunction(&f, mod_fat, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
  /* asked again and again, as cuDNN does at every step: the same answer
     (ferry keeps it: driver.sh counts the round trips) */
  for (int i = 0; i < ABSENT_ASKED; i++)
    CU_IS(cuModuleGetFunction(&f, mod_fat, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
  printf("absent names asked: %d\n", ABSENT_ASKED);
  MUST(cuModuleGetFunction(&f, mod_fat, "drv_vadd"));
  EXPECT(f == f_vadd);
  CUdeviceptr g;
  size_t bytes = 0;
  CU_IS(cuModuleGetGlobal(&g, &bytes, mod_fat, "no_such_global"), CUDA_ERROR_NOT_FOUND);

  /* each module has its own drv_factor: the PTX module's scale triples,
     the fatbin's doubles (set in test_launches) */
  CUdeviceptr factor_ptx;
  CU(cuModuleGetGlobal(&factor_ptx, &bytes, mod_ptx, "drv_factor"));
  EXPECT(bytes == sizeof(float));
  float three = 3.0f;
  CU(cuMemcpyHtoD(factor_ptx, &three, sizeof three));
}

/* ---- memory: copies, memsets, pitched memory, pinned host memory ---- */
static void test_memory(int n) {
  size_t bytes = (size_t)n * 4;
  unsigned *h = (unsigned *)malloc(bytes), *back = (unsigned *)malloc(bytes);
  for (int i = 0; i < n; i++) h[i] = (unsigned)i * 2654435761u;
  CUdeviceptr a, b;
  MUST(cuMemAlloc(&a, bytes));
  MUST(cuMemAlloc(&b, bytes));
  EXPECT(a != b && a % 256 == 0);
  CU(cuMemcpyHtoD(a, h, bytes));
  CU(cuMemcpyDtoD(b, a, bytes));
  memset(back, 0, bytes);
  CU(cuMemcpyDtoH(back, b, bytes));
  EXPECT(memcmp(back, h, bytes) == 0);
  /* a copy at an offset inside an allocation */
  CU(cuMemcpyDtoH(back, a + 40, 16));
  EXPECT(back[0] == h[10] && back[3] == h[13]);

  /* memsets: 8, 16 and 32 bits, at odd offsets and lengths */
  unsigned char bytes8[64];
  CU(cuMemsetD8(a, 0xab, 64));
  CU(cuMemsetD8(a + 3, 0x11, 5));
  CU(cuMemcpyDtoH(bytes8, a, 64));
  EXPECT(bytes8[0] == 0xab && bytes8[2] == 0xab && bytes8[3] == 0x11 && bytes8[7] == 0x11 &&
         bytes8[8] == 0xab && bytes8[63] == 0xab);
  unsigned short s16[33];
  CU(cuMemsetD16(a, 0x1234, 33));
  CU(cuMemcpyDtoH(s16, a, sizeof s16));
  EXPECT(s16[0] == 0x1234 && s16[32] == 0x1234);
  CU(cuMemsetD32(b, 0xdeadbeefu, (size_t)n));
  CU(cuMemcpyDtoH(back, b, bytes));
  int all = 1;
  for (int i = 0; i < n; i++) all &= back[i] == 0xdeadbeefu;
  EXPECT(all);

  /* pitched memory: 2D memsets, then a 2D kernel */
  int w = 100, hgt = 37;
  CUdeviceptr p;
  size_t pitch = 0;
  CU(cuMemAllocPitch(&p, &pitch, (size_t)w * 4, (size_t)hgt, 4));
  printf("pitch for %d bytes: %zu\n", w * 4, pitch);
  EXPECT(pitch >= (size_t)w * 4 && pitch % 4 == 0);
  unsigned char *img = (unsigned char *)malloc(pitch * (size_t)hgt);
  CU(cuMemsetD8(p, 0, pitch * (size_t)hgt));
  CU(cuMemsetD2D32(p, pitch, 0x01020304u, (size_t)w / 2, (size_t)hgt));
  CU(cuMemsetD2D16(p + (size_t)w * 2, pitch, 0x0506, (size_t)w / 2, (size_t)hgt - 1));
  CU(cuMemsetD2D8(p + (size_t)w * 3, pitch, 0x07, (size_t)w, 2));
  CU(cuMemcpyDtoH(img, p, pitch * (size_t)hgt));
  int ok2d = 1;
  for (int y = 0; y < hgt; y++)
    for (int x = 0; x < w * 4; x++) {
      unsigned char want = 0;
      if (x < w * 2) want = (unsigned char)(0x01020304u >> (8 * (x % 4)));
      else if (x < w * 3 && y < hgt - 1) want = (unsigned char)(0x0506 >> (8 * (x % 2)));
      if (x >= w * 3 && y < 2) want = 0x07;
      ok2d &= img[(size_t)y * pitch + (size_t)x] == want;
    }
  EXPECT(ok2d);
  float base = 0.5f;
  void *args[] = {&p, &pitch, &w, &hgt, &base};
  CU(launch(f_fill2d, (unsigned)(w + 15) / 16, (unsigned)(hgt + 7) / 8, 16, 8, 0, NULL, args, NULL));
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH(img, p, pitch * (size_t)hgt));
  int okfill = 1;
  for (int y = 0; y < hgt; y++)
    for (int x = 0; x < w; x++) {
      float v;
      memcpy(&v, img + (size_t)y * pitch + (size_t)x * 4, 4);
      okfill &= v == base + (float)(y * 1000 + x);
    }
  EXPECT(okfill);
  free(img);
  CU(cuMemFree(p));

  /* pinned host memory, async copies and a memset on a stream */
  unsigned *pin = NULL;
  CU(cuMemHostAlloc((void **)&pin, bytes, CU_MEMHOSTALLOC_PORTABLE));
  EXPECT(pin != NULL);
  for (int i = 0; i < n; i++) pin[i] = (unsigned)i ^ 0x5555u;
  CU(cuMemcpyHtoDAsync(a, pin, bytes, stream));
  CU(cuMemcpyDtoDAsync(b, a, bytes, stream));
  CU(cuMemsetD32Async(a, 7u, (size_t)n / 2, stream));
  CU(cuMemcpyDtoHAsync(back, b, bytes, stream)); /* pageable destination */
  CU(cuMemcpyDtoHAsync(pin, a, bytes, stream));
  CU(cuStreamSynchronize(stream));
  int okasync = 1;
  for (int i = 0; i < n; i++) {
    okasync &= back[i] == ((unsigned)i ^ 0x5555u);
    okasync &= pin[i] == (i < n / 2 ? 7u : ((unsigned)i ^ 0x5555u));
  }
  EXPECT(okasync);

  /* pointer attributes */
  unsigned type = 0;
  CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a));
  EXPECT(type == CU_MEMORYTYPE_DEVICE);
  CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, b + 100));
  EXPECT(type == CU_MEMORYTYPE_DEVICE);
  CU(cuMemFreeHost(pin));

  /* free memory drops by at least a big allocation's size */
  size_t free1 = 0, total = 0, free2 = 0, free3 = 0;
  CU(cuMemGetInfo(&free1, &total));
  EXPECT(total > 0 && free1 <= total);
  CUdeviceptr big;
  CU(cuMemAlloc(&big, (size_t)64 << 20));
  CU(cuMemGetInfo(&free2, &total));
  EXPECT(free2 + ((size_t)64 << 20) <= free1);
  CU(cuMemFree(big));
  CU(cuMemGetInfo(&free3, &total));
  EXPECT(free3 > free2);

  CU(cuMemFree(a));
  CU(cuMemFree(b));
  free(h);
  free(back);
}

/* ---- launches: kernelParams, extra, cuLaunchKernelEx, attributes ---- */
struct pair { /* DrvPair of drv_kernels.cu */
  char tag;
  double val;
  int count;
};
/* drv_params' parameters as nvcc lays them out (natural alignment) */
struct params_buf {
  double *out;
  char c;
  double d;
  int i;
  const int *p;
  struct pair s;
  short h;
};

static void check_params(const double *out, const char *how) {
  int ok = out[0] == 'x' && out[1] == -2.25 && out[2] == -123456 && out[3] == 4242 &&
           out[4] == 'q' && out[5] == 1e300 && out[6] == 77 && out[7] == -31000;
  if (!ok)
    printf("     %s: %g %g %g %g %g %g %g %g\n", how, out[0], out[1], out[2], out[3], out[4],
           out[5], out[6], out[7]);
  drv_check(ok, __FILE__, __LINE__, how, NULL);
}

static void test_launches(int n) {
  size_t bytes = (size_t)n * 4;
  float *ha = (float *)malloc(bytes), *hb = (float *)malloc(bytes), *hc = (float *)malloc(bytes);
  for (int i = 0; i < n; i++) ha[i] = (float)i * 0.5f, hb[i] = (float)(n - i);
  CUdeviceptr a, b, c;
  MUST(cuMemAlloc(&a, bytes));
  MUST(cuMemAlloc(&b, bytes));
  MUST(cuMemAlloc(&c, bytes));
  CU(cuMemcpyHtoD(a, ha, bytes));
  CU(cuMemcpyHtoD(b, hb, bytes));

  /* kernelParams, on a stream, timed with events */
  CUevent e0, e1;
  CU(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CU(cuEventRecord(e0, stream));
  void *args[] = {&c, &a, &b, &n};
  CU(launch(f_vadd, blocks_for(n), 1, BLOCK, 1, 0, stream, args, NULL));
  CU(cuEventRecord(e1, stream));
  CU(cuEventSynchronize(e1));
  CU(cuStreamQuery(stream));
  float ms = -1.0f;
  CU(cuEventElapsedTime(&ms, e0, e1));
  printf("vadd of %d: %.3f ms\n", n, ms);
  EXPECT(ms >= 0.0f);
  CU(cuMemcpyDtoH(hc, c, bytes));
  int ok = 1;
  for (int i = 0; i < n; i++) ok &= hc[i] == ha[i] + hb[i];
  EXPECT(ok);

  /* the same kernel from the cubin module, and drv_scale of the fatbin
     (factor 2) and of the PTX module (factor 3): module globals are per module */
  CUfunction vadd_cubin, scale_ptx, fold_ptx;
  CU(cuModuleGetFunction(&vadd_cubin, mod_cubin, "drv_vadd"));
  CU(cuModuleGetFunction(&scale_ptx, mod_ptx, "drv_scale"));
  CU(cuModuleGetFunction(&fold_ptx, mod_ptx, "_Z8drv_foldPjPKji"));
  EXPECT(vadd_cubin != f_vadd);
  CUdeviceptr factor;
  size_t fbytes = 0;
  CU(cuModuleGetGlobal(&factor, &fbytes, mod_fat, "drv_factor"));
  EXPECT(fbytes == sizeof(float));
  float two = 2.0f, check = 0.0f;
  CU(cuMemcpyHtoD(factor, &two, sizeof two));
  CU(cuMemcpyDtoH(&check, factor, sizeof check));
  EXPECT(check == 2.0f);
  void *args_c[] = {&c, &b, &a, &n};
  CU(launch(vadd_cubin, blocks_for(n), 1, BLOCK, 1, 0, stream, args_c, NULL));
  void *sargs[] = {&c, &n};
  CU(launch(f_scale, blocks_for(n), 1, BLOCK, 1, 0, stream, sargs, NULL));
  CU(launch(scale_ptx, blocks_for(n), 1, BLOCK, 1, 0, stream, sargs, NULL));
  CU(cuStreamSynchronize(stream));
  CU(cuMemcpyDtoH(hc, c, bytes));
  ok = 1;
  for (int i = 0; i < n; i++) ok &= hc[i] == (hb[i] + ha[i]) * 2.0f * 3.0f;
  EXPECT(ok);

  /* the mangled kernel from PTX: y += x ^ i on integers */
  unsigned *hx = (unsigned *)ha, *hy = (unsigned *)hb, *hz = (unsigned *)hc;
  for (int i = 0; i < n; i++) hx[i] = (unsigned)i * 3u + 1u, hy[i] = 1000u;
  CU(cuMemcpyHtoD(a, hx, bytes));
  CU(cuMemcpyHtoD(b, hy, bytes));
  void *fargs[] = {&b, &a, &n};
  CU(launch(fold_ptx, blocks_for(n), 1, BLOCK, 1, 0, NULL, fargs, NULL));
  CU(cuMemcpyDtoH(hz, b, bytes));
  ok = 1;
  for (int i = 0; i < n; i++) ok &= hz[i] == 1000u + (hx[i] ^ (unsigned)i);
  EXPECT(ok);

  /* parameters of every size, a struct among them: kernelParams and extra */
  CUdeviceptr out, ip;
  int four = 4242;
  double hout[8];
  MUST(cuMemAlloc(&out, sizeof hout));
  MUST(cuMemAlloc(&ip, sizeof four));
  CU(cuMemcpyHtoD(ip, &four, sizeof four));
  char pc = 'x';
  double pd = -2.25;
  int pi = -123456;
  struct pair ps;
  memset(&ps, 0, sizeof ps);
  ps.tag = 'q', ps.val = 1e300, ps.count = 77;
  short ph = -31000;
  void *pargs[] = {&out, &pc, &pd, &pi, &ip, &ps, &ph};
  CU(cuMemsetD8(out, 0, sizeof hout));
  CU(launch(f_params, 1, 1, 32, 1, 0, NULL, pargs, NULL));
  CU(cuMemcpyDtoH(hout, out, sizeof hout));
  check_params(hout, "drv_params through kernelParams");

  struct params_buf pb;
  memset(&pb, 0, sizeof pb);
  EXPECT(offsetof(struct params_buf, s) == 40 && offsetof(struct params_buf, h) == 64);
  pb.out = (double *)(uintptr_t)out, pb.c = pc, pb.d = pd, pb.i = pi;
  pb.p = (const int *)(uintptr_t)ip, pb.s = ps, pb.h = ph;
  /* the driver wants the parameters' own size (66), not the padded struct's:
     it refuses 72 with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (H100, driver 580) */
  size_t pbsize = offsetof(struct params_buf, h) + sizeof pb.h;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &pb, CU_LAUNCH_PARAM_BUFFER_SIZE, &pbsize,
                   CU_LAUNCH_PARAM_END};
  CU(cuMemsetD8(out, 0, sizeof hout));
  CU(launch(f_params, 1, 1, 32, 1, 0, stream, NULL, extra));
  CU(cuStreamSynchronize(stream));
  CU(cuMemcpyDtoH(hout, out, sizeof hout));
  check_params(hout, "drv_params through extra (CU_LAUNCH_PARAM_BUFFER_POINTER)");

  /* dynamic shared memory: cuLaunchKernelEx, then beyond 48 KiB after opting in */
  int *hi = (int *)ha, *ho = (int *)hc;
  for (int i = 0; i < n; i++) hi[i] = i;
  CU(cuMemcpyHtoD(a, hi, bytes));
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = blocks_for(n), cfg.gridDimY = 1, cfg.gridDimZ = 1;
  cfg.blockDimX = BLOCK, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  cfg.sharedMemBytes = BLOCK * 4, cfg.hStream = stream, cfg.attrs = NULL, cfg.numAttrs = 0;
  void *rargs[] = {&a, &n};
  CUresult r = cuLaunchKernelEx(&cfg, f_reverse, rargs, NULL);
  if (r == CUDA_SUCCESS) launches++;
  CU(r);
  CU(cuStreamSynchronize(stream));
  CU(cuMemcpyDtoH(ho, a, bytes));
  ok = 1;
  for (int i = 0; i < n; i++) {
    int base = i / BLOCK * BLOCK, len = n - base < BLOCK ? n - base : BLOCK;
    ok &= ho[i] == base + (len - 1 - (i - base));
  }
  EXPECT(ok);

  int maxt = 0, regs = -1, maxdyn = 0;
  CU(cuFuncGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f_reverse));
  CU(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f_reverse));
  printf("drv_reverse: max threads %d, %d registers\n", maxt, regs);
  EXPECT(maxt >= BLOCK && maxt <= 1024);
  EXPECT(regs >= 0);
  unsigned big_shared = 60 * 1024; /* above the 48 KiB default */
  CU_IS(launch(f_reverse, 1, 1, 1024, 1, big_shared, NULL, rargs, NULL), CUDA_ERROR_INVALID_VALUE);
  /* asked before and after the change: a kept answer must not outlive it */
  CU(cuFuncGetAttribute(&maxdyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f_reverse));
  EXPECT(maxdyn > 0 && maxdyn < (int)big_shared);
  CU(cuFuncSetAttribute(f_reverse, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)big_shared));
  CU(cuFuncGetAttribute(&maxdyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f_reverse));
  EXPECT(maxdyn == (int)big_shared);
  CU(launch(f_reverse, 1, 1, 1024, 1, big_shared, NULL, rargs, NULL)); /* undoes block 0..3 */
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH(ho, a, 1024 * 4));
  ok = 1;
  for (int i = 0; i < 1024 && i < n; i++) {
    int rev = 1023 - i; /* position in the chunk reversed again */
    int base = rev / BLOCK * BLOCK;
    ok &= ho[i] == base + (BLOCK - 1 - (rev - base));
  }
  EXPECT(ok);
  int nblocks = 0;
  CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&nblocks, f_vadd, BLOCK, 0));
  printf("occupancy of drv_vadd at %d threads: %d blocks per SM\n", BLOCK, nblocks);
  EXPECT(nblocks >= 1);
  /* the occupancy calculator's search, and the shared memory left per block */
  int min_grid = 0, best_block = 0, cap_blocks = 0;
  CU(cuOccupancyMaxPotentialBlockSize(&min_grid, &best_block, f_vadd, NULL, 0, 0));
  printf("best block for drv_vadd: %d threads, grid of at least %d blocks\n", best_block, min_grid);
  EXPECT(best_block >= 32 && best_block <= 1024 && best_block % 32 == 0 && min_grid >= 1);
  CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&cap_blocks, f_vadd, best_block, 0));
  EXPECT(min_grid % cap_blocks == 0); /* whole SMs at that block size */
  CU(cuOccupancyMaxPotentialBlockSize(&min_grid, &best_block, f_vadd, NULL, 0, 96));
  EXPECT(best_block >= 32 && best_block <= 96);
  size_t smem_one = 0, smem_four = 0;
  CU(cuOccupancyAvailableDynamicSMemPerBlock(&smem_one, f_reverse, 1, BLOCK));
  CU(cuOccupancyAvailableDynamicSMemPerBlock(&smem_four, f_reverse, 4, BLOCK));
  printf("dynamic shared memory per block of drv_reverse: %zu with 1 block per SM, %zu with 4\n",
         smem_one, smem_four);
  EXPECT(smem_one > 0 && smem_four > 0 && smem_four <= smem_one);
  /* whole clusters resident at once (cuBLAS asks before each GEMM set-up);
     without a cluster size (attribute or compiled in) driver 580 says 0 */
  CUlaunchAttribute cluster = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
  cluster.value.clusterDim.x = 2;
  cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
  CUlaunchConfig cc = {.gridDimX = 8, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 256,
                       .blockDimY = 1, .blockDimZ = 1};
  int singles = 0, pairs = 0;
  CU(cuOccupancyMaxActiveClusters(&singles, f_vadd, &cc));
  cc.attrs = &cluster;
  cc.numAttrs = 1;
  CU(cuOccupancyMaxActiveClusters(&pairs, f_vadd, &cc));
  printf("active clusters of drv_vadd: %d of 1 block, %d of 2\n", singles, pairs);
  EXPECT(singles == 0 && pairs >= 1);

  CU(cuEventDestroy(e0));
  CU(cuEventDestroy(e1));
  CU(cuMemFree(out));
  CU(cuMemFree(ip));
  CU(cuMemFree(a));
  CU(cuMemFree(b));
  CU(cuMemFree(c));
  free(ha);
  free(hb);
  free(hc);
}

/* ---- two streams ordered by an event ---- */
static void test_streams(int n) {
  CUstream s1, s2;
  CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CU(cuStreamCreate(&s2, CU_STREAM_DEFAULT));
  CUevent ev;
  CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  size_t bytes = (size_t)n * 4;
  unsigned *h = (unsigned *)calloc((size_t)n, 4);
  CUdeviceptr x;
  MUST(cuMemAlloc(&x, bytes));
  CU(cuMemsetD32Async(x, 5u, (size_t)n, s1));
  unsigned k = 11;
  unsigned zero = 0;
  CUdeviceptr salt;
  size_t sbytes;
  CU(cuModuleGetGlobal(&salt, &sbytes, mod_fat, "drv_salt"));
  CU(cuMemcpyHtoD(salt, &zero, sizeof zero));
  void *margs[] = {&x, &n, &k};
  CU(launch(f_mix, blocks_for(n), 1, BLOCK, 1, 0, s1, margs, NULL));
  CU(cuEventRecord(ev, s1));
  CU(cuStreamWaitEvent(s2, ev, 0));
  CU(cuMemcpyDtoHAsync(h, x, bytes, s2));
  CU(cuStreamSynchronize(s2));
  CU(cuStreamQuery(s2));
  CU(cuEventSynchronize(ev));
  int ok = 1;
  for (int i = 0; i < n; i++) ok &= h[i] == 5u * 1664525u + k + (unsigned)i;
  EXPECT(ok);
  CU(cuMemFree(x));
  CU(cuEventDestroy(ev));
  CU(cuStreamDestroy(s1));
  CU(cuStreamDestroy(s2));
  free(h);
}

/* ---- cuGetProcAddress, and errors that must not break what follows ---- */
typedef CUresult (*mem_alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*mem_free_fn)(CUdeviceptr);

/* TMA descriptors: encoded by the vGPU's driver, the same bytes for the
   same arguments, the address replaced in place; the driver's checks */
static void test_tensor_maps(void) {
  CUdeviceptr base;
  MUST(cuMemAlloc(&base, 1 << 20));
  cuuint64_t dims[2] = {256, 256}, strides[1] = {256 * sizeof(float)};
  cuuint32_t box[2] = {64, 64}, es[2] = {1, 1};
  CUtensorMap m1, m2, m3;
  memset(&m1, 0x55, sizeof m1);
  CU(cuTensorMapEncodeTiled(&m1, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)base, dims, strides, box,
                            es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  CU(cuTensorMapEncodeTiled(&m2, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)base, dims, strides, box,
                            es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  EXPECT(memcmp(&m1, &m2, sizeof m1) == 0);
  m3 = m1;
  CU(cuTensorMapReplaceAddress(&m3, (void *)(base + 4096)));
  EXPECT(memcmp(&m1, &m3, sizeof m1) != 0);
  CU(cuTensorMapReplaceAddress(&m3, (void *)base));
  EXPECT(memcmp(&m1, &m3, sizeof m1) == 0);
  CU_IS(cuTensorMapEncodeTiled(&m2, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)(base + 4), dims,
                               strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                               CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        CUDA_ERROR_INVALID_VALUE);
  CU_IS(cuTensorMapEncodeTiled(&m2, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 0, (void *)base, dims, strides,
                               box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        CUDA_ERROR_INVALID_VALUE);
  MUST(cuMemFree(base));
}

static void test_proc_and_errors(void) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CU(cuGetProcAddress("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
  EXPECT(fn != NULL && q == CU_GET_PROC_ADDRESS_SUCCESS);
  void *fn_free = NULL;
  CU(cuGetProcAddress("cuMemFree", &fn_free, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
  EXPECT(fn_free != NULL);
  if (fn && fn_free) {
    CUdeviceptr p = 0;
    unsigned v = 0;
    CU(((mem_alloc_fn)fn)(&p, 4096));
    CU(cuMemsetD32(p, 99u, 1024));
    CU(cuMemcpyDtoH(&v, p + 4092, 4));
    EXPECT(v == 99u);
    CU(((mem_free_fn)fn_free)(p));
  }
  /* an unknown name: CUDA_SUCCESS with pfn NULL and the status saying
     why (H100, driver 580) */
  fn = (void *)&q;
  CUresult r = cuGetProcAddress("cuNoSuchFunction", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q);
  printf("cuGetProcAddress of an unknown name: %s\n", cu_name(r));
  EXPECT(r == CUDA_SUCCESS && fn == NULL);
  EXPECT(q == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

  r = cuMemFree((CUdeviceptr)0xdead0000ull);
  printf("cuMemFree of a bad pointer: %s\n", cu_name(r));
  EXPECT(r == CUDA_ERROR_INVALID_VALUE);
  int n = 1;
  CUdeviceptr none = 0;
  void *args[] = {&none, &n};
  CU_IS(launch(NULL, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_HANDLE);
  CUfunction f;
  CU_IS(cuModuleGetFunction(&f, mod_cubin, "drv_nothing"), CUDA_ERROR_NOT_FOUND);
  CU(cuCtxSynchronize()); /* none of these errors is sticky */
}

/* ---- the loop (migration tests) ---- */
static unsigned salt_of(int it) { return (unsigned)it * 0x9e3779b9u + 0x7f4a7c15u; }
static int tmp_words(int gen) { return gen % 2 ? 300 + gen * 7 : 20000 + gen * 1001; }
#define SNAP 256

/* the loop on the host: the results the device must reach */
static void loop_model(unsigned *x, unsigned *y, unsigned **tmp, int *ntmp,
                       unsigned long long *snaps, int n, int iterations) {
  for (int it = 0; it < iterations; it++) {
    unsigned salt = salt_of(it);
    for (int i = 0; i < n; i++) x[i] = x[i] * 1664525u + salt + (unsigned)it + (unsigned)i;
    for (int i = 0; i < n; i++) y[i] += x[i] ^ (unsigned)i;
    if (it % 5 == 4) { /* a new tmp: filled with the generation, then y's head */
      int gen = it / 5 + 1, nt = tmp_words(gen), m = nt < 64 ? nt : 64;
      free(*tmp);
      *tmp = (unsigned *)malloc((size_t)nt * 4);
      for (int i = 0; i < nt; i++) (*tmp)[i] = (unsigned)gen;
      memcpy(*tmp, y, (size_t)m * 4);
      *ntmp = nt;
    }
    *snaps = drv_fnv(*snaps, y, SNAP * 4);
  }
}

static int run_loop(int iterations, int n) {
  size_t bytes = (size_t)n * 4;
  unsigned *x0 = (unsigned *)malloc(bytes), *y0 = (unsigned *)malloc(bytes);
  for (int i = 0; i < n; i++) x0[i] = (unsigned)i * 2246822519u + 3266489917u, y0[i] = (unsigned)i;
  CUdeviceptr x, y, tmp, salt;
  size_t sbytes = 0;
  MUST(cuMemAlloc(&x, bytes));
  MUST(cuMemAlloc(&y, bytes));
  int ntmp = tmp_words(0);
  MUST(cuMemAlloc(&tmp, (size_t)ntmp * 4));
  MUST(cuMemsetD32(tmp, 0, (size_t)ntmp));
  MUST(cuMemcpyHtoD(x, x0, bytes));
  MUST(cuMemcpyHtoD(y, y0, bytes));
  MUST(cuModuleGetGlobal(&salt, &sbytes, mod_fat, "drv_salt"));
  CUstream s1, s2;
  MUST(cuStreamCreate(&s1, CU_STREAM_DEFAULT));
  MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent done_mix;
  MUST(cuEventCreate(&done_mix, CU_EVENT_DISABLE_TIMING));
  unsigned *pin;
  MUST(cuMemHostAlloc((void **)&pin, SNAP * 4, 0));
  unsigned long long snaps = 14695981039346656037ull;

  int it;
  for (it = 0; it < iterations; it++) {
    unsigned s = salt_of(it), k = (unsigned)it;
    MUST(cuMemcpyHtoD(salt, &s, sizeof s));
    void *margs[] = {&x, &n, &k};
    MUST(launch(f_mix, blocks_for(n), 1, BLOCK, 1, 0, s1, margs, NULL));
    MUST(cuEventRecord(done_mix, s1));
    MUST(cuStreamWaitEvent(s2, done_mix, 0));
    if (it % 2) { /* drv_fold through extra, or through cuLaunchKernelEx */
      struct { CUdeviceptr y, x; int n; } fb = {y, x, n};
      size_t fbsize = offsetof(__typeof__(fb), n) + sizeof fb.n; /* 20, not 24 */
      void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &fb, CU_LAUNCH_PARAM_BUFFER_SIZE, &fbsize,
                       CU_LAUNCH_PARAM_END};
      MUST(launch(f_fold, blocks_for(n), 1, BLOCK, 1, 0, s2, NULL, extra));
    } else {
      CUlaunchConfig cfg;
      memset(&cfg, 0, sizeof cfg);
      cfg.gridDimX = blocks_for(n), cfg.gridDimY = cfg.gridDimZ = 1;
      cfg.blockDimX = BLOCK, cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.hStream = s2;
      void *fargs[] = {&y, &x, &n};
      MUST(cuLaunchKernelEx(&cfg, f_fold, fargs, NULL));
      launches++;
    }
    if (it % 5 == 4) { /* re-allocate tmp: a new address and size */
      int gen = it / 5 + 1, nt = tmp_words(gen), m = nt < 64 ? nt : 64;
      MUST(cuStreamSynchronize(s2));
      MUST(cuMemFree(tmp));
      MUST(cuMemAlloc(&tmp, (size_t)nt * 4));
      MUST(cuMemsetD32Async(tmp, (unsigned)gen, (size_t)nt, s2));
      MUST(cuMemcpyDtoDAsync(tmp, y, (size_t)m * 4, s2));
      ntmp = nt;
    }
    MUST(cuMemcpyDtoHAsync(pin, y, SNAP * 4, s2));
    MUST(cuStreamSynchronize(s2));
    snaps = drv_fnv(snaps, pin, SNAP * 4);
    if (it == 0) {
      printf("drv_tour: running pid %d\n", (int)getpid());
      fflush(stdout);
    }
  }
  MUST(cuCtxSynchronize());

  unsigned *gx = (unsigned *)malloc(bytes), *gy = (unsigned *)malloc(bytes);
  unsigned *gt = (unsigned *)malloc((size_t)ntmp * 4);
  MUST(cuMemcpyDtoH(gx, x, bytes));
  MUST(cuMemcpyDtoH(gy, y, bytes));
  MUST(cuMemcpyDtoH(gt, tmp, (size_t)ntmp * 4));
  unsigned got_salt = 0;
  MUST(cuMemcpyDtoH(&got_salt, salt, sizeof got_salt));

  unsigned *mt = (unsigned *)malloc((size_t)tmp_words(0) * 4);
  memset(mt, 0, (size_t)tmp_words(0) * 4);
  int nmt = tmp_words(0);
  unsigned long long msnaps = 14695981039346656037ull;
  loop_model(x0, y0, &mt, &nmt, &msnaps, n, it);
  EXPECT(memcmp(gx, x0, bytes) == 0);
  EXPECT(memcmp(gy, y0, bytes) == 0);
  EXPECT(nmt == ntmp && memcmp(gt, mt, (size_t)ntmp * 4) == 0);
  EXPECT(snaps == msnaps);
  EXPECT(it == 0 || got_salt == salt_of(it - 1));

  unsigned long long h = 14695981039346656037ull;
  h = drv_fnv(h, gx, bytes);
  h = drv_fnv(h, gy, bytes);
  h = drv_fnv(h, gt, (size_t)ntmp * 4);
  h = drv_fnv(h, &snaps, sizeof snaps);
  printf("iterations: %d\n", it);
  printf("checksum: %016llx\n", h);

  CU(cuMemFreeHost(pin));
  CU(cuEventDestroy(done_mix));
  CU(cuStreamDestroy(s1));
  CU(cuStreamDestroy(s2));
  CU(cuMemFree(x));
  CU(cuMemFree(y));
  CU(cuMemFree(tmp));
  free(x0), free(y0), free(gx), free(gy), free(gt), free(mt);
  return it;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s FATBIN CUBIN PTX [ITERATIONS=20 [N=65536]]\n", argv[0]);
    return 2;
  }
  int iterations = argc > 4 ? atoi(argv[4]) : 20;
  int n = argc > 5 ? atoi(argv[5]) : 65536;
  if (n < 1024) n = 1024; /* the shared-memory checks use 1024 words */
  setvbuf(stdout, NULL, _IOLBF, 0);

  CUcontext primary = NULL;
  CUdevice dev = test_device(&primary);
  MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  test_modules(argv[1], argv[2], argv[3]);
  test_memory(n);
  test_launches(n);
  test_streams(n);
  test_tensor_maps();
  test_proc_and_errors();
  printf("tour launches: %d\n", launches);

  /* a buffer made before the loop and read after it: it outlives a
     migration in the loop, as do the cubin and PTX modules */
  CUdeviceptr keep;
  float kept[64], seven = 7.0f;
  MUST(cuMemAlloc(&keep, sizeof kept));
  MUST(cuMemsetD32(keep, 0x3f800000u, 64)); /* 1.0f */

  run_loop(iterations, n);

  /* after the loop: the PTX module's drv_factor is still 3 */
  CUfunction scale_ptx;
  int nk = 64;
  CU(cuModuleGetFunction(&scale_ptx, mod_ptx, "drv_scale"));
  void *sargs[] = {&keep, &nk};
  CU(launch(scale_ptx, 1, 1, 64, 1, 0, NULL, sargs, NULL));
  CUdeviceptr factor;
  size_t fbytes;
  CU(cuModuleGetGlobal(&factor, &fbytes, mod_fat, "drv_factor"));
  CU(cuMemcpyHtoD(factor, &seven, sizeof seven));
  CU(launch(f_scale, 1, 1, 64, 1, 0, NULL, sargs, NULL)); /* and the fatbin's is 7 now */
  CU(cuMemcpyDtoH(kept, keep, sizeof kept));
  EXPECT(kept[0] == 21.0f && kept[63] == 21.0f);
  CU(cuMemFree(keep));

  CU(cuModuleUnload(mod_ptx));
  CU(cuModuleUnload(mod_cubin));
  CU(cuModuleUnload(mod_fat));
  CU(cuStreamDestroy(stream));
  CU(cuCtxSynchronize());
  size_t free_b = 0, total_b = 0;
  CU(cuMemGetInfo(&free_b, &total_b));
  printf("device memory in use at exit: %zu\n", total_b - free_b);
  printf("launches: %d\n", launches);
  CU(cuDevicePrimaryCtxRelease(dev));
  return drv_summary();
}
