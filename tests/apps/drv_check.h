/* Checks for the driver-API test programs (drv_tour.c, drv_mixed.cu), in C
 * that also compiles as C++. Every check prints one line: "ok   <what>" or
 * "FAIL file:line: <what>" (with the CUresult's name for calls); the
 * program ends with drv_summary(): "PASSED" and 0, or "FAILED: n" and 1.
 *   EXPECT(cond)       a condition
 *   CU(call)           a driver call that must return CUDA_SUCCESS
 *   CU_IS(call, want)  a driver call that must return the error `want`
 *   MUST(call)         a call that later steps need: on failure the program
 *                      says where and why and exits 3 (no line on success,
 *                      so loops stay quiet)
 */
#ifndef FERRY_DRV_CHECK_H
#define FERRY_DRV_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>

static int drv_checks, drv_failures;

static inline const char *cu_name(CUresult r) {
  const char *s = NULL;
  if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s) return "(unknown CUresult)";
  return s;
}

static inline void drv_check(int ok, const char *file, int line, const char *what, const char *why) {
  drv_checks++;
  if (ok) {
    printf("ok   %s\n", what);
    return;
  }
  drv_failures++;
  printf("FAIL %s:%d: %s%s%s\n", file, line, what, why ? " -> " : "", why ? why : "");
}

static inline void drv_check_call(CUresult got, CUresult want, const char *file, int line,
                                  const char *what) {
  drv_check(got == want, file, line, what, got == want ? NULL : cu_name(got));
}

#define EXPECT(cond) drv_check((cond) ? 1 : 0, __FILE__, __LINE__, #cond, NULL)
#define CU(call) drv_check_call((call), CUDA_SUCCESS, __FILE__, __LINE__, #call)
#define CU_IS(call, want) drv_check_call((call), (want), __FILE__, __LINE__, #call " == " #want)
#define MUST(call)                                                                    \
  do {                                                                                \
    CUresult r_ = (call);                                                             \
    if (r_ != CUDA_SUCCESS) {                                                         \
      printf("FAIL %s:%d: %s -> %s\n", __FILE__, __LINE__, #call, cu_name(r_));       \
      exit(3);                                                                        \
    }                                                                                 \
  } while (0)

/* a whole file (a fat binary, cubin or PTX), NUL-terminated; exits 2 when it
   cannot be read */
static inline void *drv_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("FAIL cannot open %s\n", path);
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = (char *)malloc((size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    printf("FAIL cannot read %s\n", path);
    exit(2);
  }
  buf[n] = 0; /* PTX is text: cuModuleLoadData wants it NUL-terminated */
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* device 0's primary context, current */
static inline CUcontext drv_primary(CUdevice *dev) {
  CUcontext ctx;
  MUST(cuInit(0));
  MUST(cuDeviceGet(dev, 0));
  MUST(cuDevicePrimaryCtxRetain(&ctx, *dev));
  MUST(cuCtxSetCurrent(ctx));
  return ctx;
}

/* drv_kernels.cu's drv_salt, which drv_mix adds, set to value */
static inline void drv_set_salt(CUmodule mod, unsigned value) {
  CUdeviceptr at;
  size_t size;
  MUST(cuModuleGetGlobal(&at, &size, mod, "drv_salt"));
  MUST(cuMemcpyHtoD(at, &value, sizeof value));
}

static inline int drv_summary(void) {
  if (drv_failures) {
    printf("FAILED: %d of %d checks\n", drv_failures, drv_checks);
    return 1;
  }
  printf("PASSED (%d checks)\n", drv_checks);
  return 0;
}

/* FNV-1a, for checksums that a migrated run must reproduce */
static inline unsigned long long drv_fnv(unsigned long long h, const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

#endif
