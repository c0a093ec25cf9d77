/*
 * The driver front end without a server: ferry's libcuda.so.1 as NVIDIA's
 * runtime and the math libraries reach it (dlopen, then cuGetProcAddress
 * by name and CUDA version), its error names, its refusals, and that
 * executor/driver_cuda.c can tell it from NVIDIA's driver.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void *lib;
typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);
static get_proc_fn get_proc;

static int setup(void **state) {
  (void)state;
  lib = dlopen(FERRY_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
  if (!lib) fprintf(stderr, "%s\n", dlerror());
  get_proc = lib ? (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2") : NULL;
  return lib && get_proc ? 0 : -1;
}

static void *sym(const char *name) {
  void *p = dlsym(lib, name);
  assert_non_null(p);
  return p;
}

/* cuGetProcAddress hands out the core's own function (libferry-client.so.0),
   which the thin library's export of that name jumps to: the name says which */
static void assert_resolves_to(void *fn, const char *name) {
  const char *(*export_name)(const void *) = (const char *(*)(const void *))sym("ferry_cu_export_name");
  sym(name); /* the thin library exports it too */
  const char *got = export_name(fn);
  assert_non_null(got);
  assert_string_equal(got, name);
}

static void *resolve(const char *name, int version, cuuint64_t flags, CUresult want,
                     CUdriverProcAddressQueryResult want_status) {
  void *fn = (void *)1;
  CUdriverProcAddressQueryResult st = -1;
  assert_int_equal(get_proc(name, &fn, version, flags, &st), want);
  assert_int_equal(st, want_status);
  return fn;
}

/* the newest signature not newer than the version asked for */
static void test_versions(void **state) {
  (void)state;
  assert_resolves_to(resolve("cuMemAlloc", 13000, 0, 0, CU_GET_PROC_ADDRESS_SUCCESS), "cuMemAlloc_v2");
  assert_resolves_to(resolve("cuMemAlloc", 3020, 0, 0, CU_GET_PROC_ADDRESS_SUCCESS), "cuMemAlloc_v2");
  assert_resolves_to(resolve("cuMemAlloc", 3010, 0, 0, CU_GET_PROC_ADDRESS_SUCCESS), "cuMemAlloc");
  assert_resolves_to(resolve("cuCtxCreate", 13000, 0, 0, CU_GET_PROC_ADDRESS_SUCCESS), "cuCtxCreate_v4");
  assert_resolves_to(resolve("cuCtxCreate", 12000, 0, 0, CU_GET_PROC_ADDRESS_SUCCESS), "cuCtxCreate_v3");
  assert_resolves_to(resolve("cuGetProcAddress", 12000, 0, 0, CU_GET_PROC_ADDRESS_SUCCESS), "cuGetProcAddress_v2");
  /* older than the call: not there yet */
  /* the driver answers success and says why in the status (H100, driver 580) */
  assert_null(resolve("cuLaunchKernelEx", 11000, 0, CUDA_SUCCESS,
                      CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT));
  assert_null(resolve("cuNoSuchCall", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND));
  assert_null(resolve("", 0, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND));
}

/* per-thread default stream variants, and the plain one where there is none */
static void test_stream_variants(void **state) {
  (void)state;
  const cuuint64_t pt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  assert_resolves_to(resolve("cuMemcpyHtoD", 13000, pt, 0, CU_GET_PROC_ADDRESS_SUCCESS), "cuMemcpyHtoD_v2_ptds");
  assert_resolves_to(resolve("cuLaunchKernel", 13000, pt, 0, CU_GET_PROC_ADDRESS_SUCCESS), "cuLaunchKernel_ptsz");
  assert_resolves_to(resolve("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, 0,
                           CU_GET_PROC_ADDRESS_SUCCESS), "cuLaunchKernel");
  assert_resolves_to(resolve("cuMemAlloc", 13000, pt, 0, CU_GET_PROC_ADDRESS_SUCCESS), "cuMemAlloc_v2");
  void *fn;
  assert_int_equal(get_proc("cuMemAlloc", &fn, 13000, 8, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(get_proc(NULL, &fn, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
}

/* names the front end serves resolve to ferry's code, the rest to a stub
   that says its name and refuses */
static void test_served_and_refused(void **state) {
  (void)state;
  int (*served)(const char *) = (int (*)(const char *))sym("ferry_cu_served");
  const char *must[] = {"cuInit", "cuDriverGetVersion", "cuDeviceGet", "cuDeviceGetAttribute",
                        "cuDevicePrimaryCtxRetain", "cuCtxGetCurrent", "cuCtxSetCurrent",
                        "cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel",
                        "cuLaunchKernelEx", "cuMemAlloc_v2", "cuMemcpyHtoDAsync_v2",
                        "cuMemsetD32_v2", "cuStreamCreate", "cuEventRecord", "cuGetErrorName",
                        "cuGetProcAddress_v2", "cuPointerGetAttribute", "cuKernelGetFunction",
                        /* what the static runtime calls in a plain program (docs/driver-export-tables.md) */
                        "cuDeviceGetName", "cuDeviceTotalMem_v2", "cuDeviceGetUuid", "cuDeviceGetUuid_v2",
                        "cuModuleGetLoadingMode", "cuLibraryLoadData", "cuCtxGetDevice_v2",
                        "cuMemcpyDtoH_v2", "cuLibraryGetKernel", "cuCtxSynchronize_v2",
                        "cuLibraryGetGlobal", "cuMemFree_v2", "cuLibraryUnload", "cuDevicePrimaryCtxRelease",
                        "cuGetExportTable", "cuEventElapsedTime", "cuEventElapsedTime_v2",
                        "cuStreamGetCaptureInfo_v2", "cuCtxCreate_v2", "cuDeviceGetPCIBusId",
                        /* JIT linking, both names of each (link.c) */
                        "cuLinkCreate", "cuLinkCreate_v2", "cuLinkAddData", "cuLinkAddData_v2",
                        "cuLinkAddFile", "cuLinkAddFile_v2", "cuLinkComplete", "cuLinkDestroy"};
  for (size_t i = 0; i < sizeof must / sizeof *must; i++) {
    if (!served(must[i])) fail_msg("%s is not served", must[i]);
  }
  assert_true(served("cuGraphCreate"));
  assert_true(served("cuGraphAddHostNode"));
  assert_false(served("cuGraphAddMemAllocNode"));
  assert_false(served("cuNoSuchCall"));
  CUresult (*alloc_node)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                         CUDA_MEM_ALLOC_NODE_PARAMS *) =
      (CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUDA_MEM_ALLOC_NODE_PARAMS *))
          resolve("cuGraphAddMemAllocNode", 13000, 0, 0, CU_GET_PROC_ADDRESS_SUCCESS);
  assert_int_equal(alloc_node(NULL, NULL, NULL, 0, NULL), CUDA_ERROR_NOT_SUPPORTED);
}

/* every name NVIDIA's runtime resolves at start-up resolves here too, as
   with the real driver (which has no GL, EGL or VDPAU interop on a server) */
static void test_runtime_startup_names(void **state) {
  (void)state;
  FILE *f = fopen(FERRY_STARTUP_NAMES, "r");
  assert_non_null(f);
  char line[256], name[128];
  int version, n = 0;
  unsigned long long flags;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || sscanf(line, "%127s %d %llu", name, &version, &flags) != 3) continue;
    if (strstr(name, "GL") || strstr(name, "Egl") || strstr(name, "EGL") || strstr(name, "VDPAU") ||
        strstr(name, "Vdpau"))
      continue;
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = -1;
    assert_int_equal(get_proc(name, &fn, version, flags, &st), CUDA_SUCCESS);
    if (!fn || st != CU_GET_PROC_ADDRESS_SUCCESS) fail_msg("%s at %d (flags %llu) does not resolve", name, version, flags);
    n++;
  }
  fclose(f);
  assert_true(n > 400);
}

static void test_error_names(void **state) {
  (void)state;
  CUresult (*name)(CUresult, const char **) = (CUresult(*)(CUresult, const char **))sym("cuGetErrorName");
  CUresult (*str)(CUresult, const char **) = (CUresult(*)(CUresult, const char **))sym("cuGetErrorString");
  const char *s = NULL;
  assert_int_equal(name(CUDA_ERROR_INVALID_CONTEXT, &s), CUDA_SUCCESS);
  assert_string_equal(s, "CUDA_ERROR_INVALID_CONTEXT");
  assert_int_equal(name(CUDA_ERROR_NOT_SUPPORTED, &s), CUDA_SUCCESS);
  assert_string_equal(s, "CUDA_ERROR_NOT_SUPPORTED");
  assert_int_equal(name((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(str(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
  assert_non_null(s);
  assert_true(strlen(s) > 0);
  assert_int_equal(str(CUDA_ERROR_INVALID_CONTEXT, &s), CUDA_SUCCESS);
  assert_non_null(s);
}

/* before cuInit, as CUDA: not initialised, and no server is asked */
static void test_before_init(void **state) {
  (void)state;
  CUresult (*count)(int *) = (CUresult(*)(int *))sym("cuDeviceGetCount");
  CUresult (*cur)(CUcontext *) = (CUresult(*)(CUcontext *))sym("cuCtxGetCurrent");
  int n = -1;
  CUcontext c;
  assert_int_equal(count(&n), CUDA_ERROR_NOT_INITIALIZED);
  assert_int_equal(cur(&c), CUDA_ERROR_NOT_INITIALIZED);
}

/* executor/driver_cuda.c skips a libcuda.so.1 that has this symbol */
static void test_marker(void **state) {
  (void)state;
  assert_non_null(dlsym(lib, "ferry_driver_front_end"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_versions),        cmocka_unit_test(test_stream_variants),
      cmocka_unit_test(test_served_and_refused), cmocka_unit_test(test_runtime_startup_names),
      cmocka_unit_test(test_error_names),
      cmocka_unit_test(test_before_init),     cmocka_unit_test(test_marker),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
