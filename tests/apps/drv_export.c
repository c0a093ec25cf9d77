/*
 * Each entry ferry serves in the driver's private tables (cuGetExportTable),
 * called as NVIDIA's runtime calls them (docs/driver-export-tables.md), and
 * the refusals: an unknown table, an undecoded entry.
 * usage: drv_export FATBIN
 */
#include <stdint.h>
#include <string.h>

#include "drv_check.h"

static const CUuuid cudart_interface = {{0x6b, (char)0xd5, (char)0xfb, 0x6c, 0x5b, (char)0xf4, (char)0xe7, 0x4a, (char)0x89, (char)0x87, (char)0xd9, 0x39, 0x12, (char)0xfd, (char)0x9d, (char)0xf9}};
static const CUuuid tools_tls = {{0x42, (char)0xd8, 0x5a, (char)0x81, 0x23, (char)0xf6, (char)0xcb, 0x47, (char)0x82, (char)0x98, (char)0xf6, (char)0xe7, (char)0x8a, 0x3a, (char)0xec, (char)0xdc}};
static const CUuuid hooks = {{(char)0xa0, (char)0x94, 0x79, (char)0x8c, 0x2e, 0x74, 0x2e, 0x74, (char)0x93, (char)0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66}};
static const CUuuid storage = {{(char)0xc6, (char)0x93, 0x33, 0x6e, 0x11, 0x21, (char)0xdf, 0x11, (char)0xa8, (char)0xc3, 0x68, (char)0xf3, 0x55, (char)0xd8, (char)0x95, (char)0x93}};
static const CUuuid checks = {{0x26, 0x3e, (char)0x88, 0x60, 0x7c, (char)0xd2, 0x61, 0x43, (char)0x92, (char)0xf6, (char)0xbb, (char)0xd5, 0x00, 0x6d, (char)0xfa, 0x7e}};
static const CUuuid integrity = {{(char)0xd4, 0x08, 0x20, 0x55, (char)0xbd, (char)0xe6, 0x70, 0x4b, (char)0x8d, 0x34, (char)0xba, 0x12, 0x3c, 0x66, (char)0xe1, (char)0xf2}};
static const CUuuid tools_context = {{0x21, 0x31, (char)0x8c, 0x60, (char)0x97, 0x14, 0x32, 0x48, (char)0x8c, (char)0xa6, 0x41, (char)0xff, 0x73, 0x24, (char)0xc8, (char)0xf2}};
static const CUuuid tools_module = {{0x6e, 0x16, 0x3f, (char)0xbe, (char)0xb9, 0x58, 0x44, 0x4d, (char)0x83, 0x5c, (char)0xe1, (char)0x82, (char)0xaf, (char)0xf1, (char)0x99, 0x1e}};
static const CUuuid startup = {{(char)0xf8, (char)0xcf, (char)0xf9, 0x51, 0x21, 0x46, (char)0x8b, 0x4e, (char)0xb9, (char)0xe2, (char)0xfb, 0x46, (char)0x9e, 0x7c, 0x0d, (char)0xd9}};
static const CUuuid lt_1734 = {{0x17, 0x34, (char)0xdc, 0x26, (char)0x80, 0x0d, 0x47, 0x45, (char)0x87, 0x26, (char)0xc0, (char)0xf1, (char)0xe7, (char)0xdd, (char)0x8b, (char)0xca}};
static const CUuuid unknown = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};

typedef void *const *table;
static table get(const CUuuid *id) {
  const void *t = NULL;
  MUST(cuGetExportTable(&t, id));
  return (table)t;
}

static int dtor_calls;
static void *dtor_value;
static void dtor(CUcontext ctx, void *key, void *value) {
  (void)ctx, (void)key;
  dtor_calls++;
  dtor_value = value;
}

/* cuFFT's callback for TOOLS_MODULE entry 7 keeps the function; this one
   also checks the arguments the driver passes */
static int callbacks;
static uintptr_t each_function(void *user, CUfunction fn, const char *name, uintptr_t z1, uintptr_t z2,
                               CUmodule module, void *err, void *a5, CUmodule module_again) {
  const char *real = NULL;
  callbacks++;
  EXPECT(cuFuncGetName(&real, fn) == CUDA_SUCCESS && real && name && !strcmp(real, name));
  EXPECT(z1 == 0 && z2 == 0 && module == module_again && err == (void *)&stderr && a5 == (void *)&callbacks);
  *(CUfunction *)user = fn;
  return 10;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = (char *)malloc(n > 0 ? (size_t)n : 1);
  *len = b && n > 0 ? fread(b, 1, (size_t)n, f) : 0;
  fclose(f);
  return b;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FATBIN\n", argv[0]);
    return 2;
  }
  const void *t = (const void *)1;
  CU_IS(cuGetExportTable(&t, &unknown), CUDA_ERROR_INVALID_VALUE);
  EXPECT(t == NULL);
  CU_IS(cuGetExportTable(&t, &startup), CUDA_ERROR_INVALID_VALUE);
  /* cuBLASLt's table: served (cuBLASLt reads it unchecked), every entry an error */
  const void *const *lt = NULL;
  CU_IS(cuGetExportTable((const void **)&lt, &lt_1734), CUDA_SUCCESS);
  EXPECT(lt && (uintptr_t)lt[0] == 17 * sizeof(void *));
  CU_IS(((CUresult(*)(void))lt[4])(), CUDA_ERROR_NOT_SUPPORTED);
  MUST(cuInit(0));
  CUdevice dev;
  MUST(cuDeviceGet(&dev, 0));

  /* CUDART_INTERFACE: the primary context (not retained), modules from wrappers */
  table ci = get(&cudart_interface);
  EXPECT((uintptr_t)ci[0] == 13 * sizeof(void *));
  CUresult (*primary)(CUcontext *, CUdevice) = (CUresult(*)(CUcontext *, CUdevice))ci[2];
  CUcontext p1 = NULL, p2 = NULL;
  CU(primary(&p1, dev));
  CU(cuDevicePrimaryCtxRetain(&p2, dev));
  EXPECT(p1 && p1 == p2);
  CU_IS(primary(&p1, 99), CUDA_ERROR_INVALID_DEVICE);
  CU(cuCtxSetCurrent(p2));
  size_t len = 0;
  char *fat = read_file(argv[1], &len);
  EXPECT(fat && len > 16);
  struct {
    int magic, version;
    const void *data, *rest;
  } wrapper = {0x466243B1, 1, fat, NULL};
  CUresult (*from_wrapper)(CUmodule *, const void *) = (CUresult(*)(CUmodule *, const void *))ci[1];
  CUmodule mod = NULL;
  CUfunction fn = NULL;
  CU(from_wrapper(&mod, &wrapper));
  CU(cuModuleGetFunction(&fn, mod, "drv_vadd"));

  /* TOOLS_RUNTIME_CALLBACK_HOOKS: two buffers */
  table h = get(&hooks);
  EXPECT((uintptr_t)h[0] == 7 * sizeof(void *));
  void *buf = NULL;
  size_t size = 0;
  ((void (*)(void **, size_t *))h[2])(&buf, &size);
  EXPECT(buf && size == 1024);
  buf = NULL;
  ((void (*)(void **, size_t *))h[6])(&buf, &size);
  EXPECT(buf && size == 14);

  /* TOOLS_TLS: the current context */
  table tls = get(&tools_tls);
  CUcontext cur = NULL;
  CU(((CUresult(*)(CUcontext *))tls[2])(&cur));
  EXPECT(cur == p2);

  /* CONTEXT_LOCAL_STORAGE: NULL is the current context; a reset runs the destructor */
  table cls = get(&storage);
  CUresult (*put)(CUcontext, void *, void *, void (*)(CUcontext, void *, void *)) =
      (CUresult(*)(CUcontext, void *, void *, void (*)(CUcontext, void *, void *)))cls[0];
  CUresult (*del)(CUcontext, void *) = (CUresult(*)(CUcontext, void *))cls[1];
  CUresult (*look)(void **, CUcontext, void *) = (CUresult(*)(void **, CUcontext, void *))cls[2];
  int key1, key2, value1, value2;
  void *got = NULL;
  CU_IS(look(&got, NULL, &key1), CUDA_ERROR_INVALID_HANDLE);
  CU(put(NULL, &key1, &value1, dtor));
  CU(put(p2, &key2, &value2, dtor));
  CU(look(&got, NULL, &key1));
  EXPECT(got == &value1);
  CU(look(&got, p2, &key2));
  EXPECT(got == &value2);
  CU(del(p2, &key2));
  CU_IS(look(&got, NULL, &key2), CUDA_ERROR_INVALID_HANDLE);
  EXPECT(dtor_calls == 0);
  CU(cuDevicePrimaryCtxReset(dev));
  EXPECT(dtor_calls == 1 && dtor_value == &value1);
  CU_IS(look(&got, p2, &key1), CUDA_ERROR_INVALID_HANDLE);
  CU(cuCtxSetCurrent(p2));

  /* CONTEXT_CHECKS: nothing to report; entry 1 is not decoded */
  table ck = get(&checks);
  unsigned flags = 7;
  const void *detail = &flags;
  CU(((CUresult(*)(CUcontext, unsigned *, const void **))ck[2])(p2, &flags, &detail));
  EXPECT(flags == 0 && detail == NULL);
  EXPECT(((unsigned (*)(void))ck[3])() == 0);
  CU_IS(((CUresult(*)(void))ck[1])(), CUDA_ERROR_NOT_SUPPORTED);

  /* INTEGRITY_CHECK: fixed answers for x0 and x1, a keyed hash of the time otherwise */
  table ic = get(&integrity);
  CUresult (*hash)(unsigned, uint64_t, uint64_t *) = (CUresult(*)(unsigned, uint64_t, uint64_t *))ic[1];
  uint64_t r0[2], r1[2], a[2], b[2], c[2];
  CU(hash(13000, 1795492473, r0));
  CU(hash(13001, 1795492473, r1));
  EXPECT(r0[0] == 0x3341181c03cb675cull && r0[1] == 0x8ed383aa1f4cd1e8ull);
  EXPECT(r1[0] == 0x1841181c03cb675cull && r1[1] == 0x8ed383aa1f4cd1e8ull);
  CU(hash(13002, 1795492473, a));
  CU(hash(13002, 1795492473, b));
  CU(hash(13002, 1795492474, c));
  EXPECT(a[0] == b[0] && a[1] == b[1]);
  EXPECT(a[0] != c[0] || a[1] != c[1]);

  /* TOOLS_CONTEXT: the context id; entries 51 and 39 go to the driver,
     whose answers (the simulation's: driver 580's) come back as they are,
     with our context where the driver's was; entry 38 is not decoded */
  table tc = get(&tools_context);
  uint64_t id = 0;
  unsigned long long want = 0;
  CU(((CUresult(*)(CUcontext, uint64_t *))tc[4])(p2, &id));
  CU(cuCtxGetId(p2, &want));
  EXPECT(id == want && id != 0);
  CUresult (*object)(CUcontext, CUstream, uint64_t **) = (CUresult(*)(CUcontext, CUstream, uint64_t **))tc[51];
  CUresult (*query)(CUcontext, const void *, uint64_t *) = (CUresult(*)(CUcontext, const void *, uint64_t *))tc[39];
  uint64_t *obj = NULL, *obj2 = NULL, value = 0, fields[4];
  CU(object(p2, NULL, &obj));
  EXPECT(obj && obj[0] == 1 && obj[1] == 0 && obj[2] == (uint64_t)(uintptr_t)p2 && obj[3] == 0);
  printf("TOOLS_CONTEXT[51] object: %llx %llx ctx %llx\n", (unsigned long long)obj[0],
         (unsigned long long)obj[1], (unsigned long long)obj[3]);
  memcpy(fields, obj, sizeof fields);
  CU(query(p2, obj, &value));
  uint64_t first_value = value;
  printf("TOOLS_CONTEXT[39] value: %llu\n", (unsigned long long)value);
  CU_IS(query(p2, fields, &value), CUDA_ERROR_NOT_SUPPORTED); /* not an object the driver gave */
  CU_IS(((CUresult(*)(void))tc[38])(), CUDA_ERROR_NOT_SUPPORTED);

  /* the objects survive a migration (FERRY_MIGRATE_AT=...:launch=1 moves
     the vGPU at this launch): the same object answers on the new GPU */
  /* a variable of a module unloaded before the move is not looked for
     there (cuFFT unloads a module per plan it destroys) */
  CUmodule gone = NULL;
  CUdeviceptr gvar = 0;
  size_t gsize = 0;
  CU(from_wrapper(&gone, &wrapper));
  CU(cuModuleGetGlobal(&gvar, &gsize, gone, "drv_factor"));
  CU(cuModuleUnload(gone));
  CU(from_wrapper(&mod, &wrapper)); /* the reset above unloaded the first */
  CU(cuModuleGetFunction(&fn, mod, "drv_vadd"));
  CUdeviceptr none = 0;
  int zero = 0;
  void *params[] = {&none, &none, &none, &zero};
  CU(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
  CU(cuCtxSynchronize());
  value = 0;
  CU(query(p2, obj, &value));
  /* the driver's answer on the new GPU (driver 580 gives another number
     in another context; the simulation keeps 7) */
  printf("TOOLS_CONTEXT[39] value after the launch: %llu (before: %llu)\n", (unsigned long long)value,
         (unsigned long long)first_value);
  EXPECT(!memcmp(fields, obj, sizeof fields));
  /* one for a stream of the program's (cublasSetStream) */
  CUstream s = NULL;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU(object(p2, s, &obj2));
  EXPECT(obj2 && obj2 != obj && obj2[2] == (uint64_t)(uintptr_t)p2);
  printf("TOOLS_CONTEXT[51] object of a stream: %llx %llx ctx %llx %llx (stream %p)\n",
         (unsigned long long)obj2[0], (unsigned long long)obj2[1], (unsigned long long)obj2[2],
         (unsigned long long)obj2[3], (void *)s);
  CU(query(p2, obj2, &value));
  printf("TOOLS_CONTEXT[39] value for a stream: %llu\n", (unsigned long long)value);
  CU(cuStreamDestroy(s));

  /* TOOLS_MODULE: entry 7 gives a module's one function to a callback, as
     cuFFT asks on each plan's module; a module of several is refused */
  static const char one_kernel_ptx[] =
      ".version 8.0\n.target sm_90\n.address_size 64\n"
      ".visible .entry drv_vadd(.param .u64 c, .param .u64 a, .param .u64 b, .param .u32 n)\n{\n ret;\n}\n";
  table tm = get(&tools_module);
  int (*each)(void *, CUmodule, void *, void *, CUmodule, void *) =
      (int (*)(void *, CUmodule, void *, void *, CUmodule, void *))tm[7];
  CUmodule single = NULL;
  CU(cuModuleLoadData(&single, one_kernel_ptx));
  unsigned count = 0;
  CU(cuModuleGetFunctionCount(&count, single));
  EXPECT(count == 1);
  CUfunction got_fn = NULL, listed = NULL;
  CU(cuModuleEnumerateFunctions(&listed, 1, single));
  EXPECT(each(NULL, single, (void *)each_function, &got_fn, single, &callbacks) == 1);
  EXPECT(callbacks == 1 && got_fn && got_fn == listed);
  CU(cuModuleGetFunctionCount(&count, mod));
  EXPECT(count > 1);
  EXPECT(each(NULL, mod, (void *)each_function, &got_fn, mod, &callbacks) == CUDA_ERROR_NOT_SUPPORTED);
  EXPECT(callbacks == 1);
  CU(cuModuleUnload(single));

  free(fat);
  return drv_summary();
}
