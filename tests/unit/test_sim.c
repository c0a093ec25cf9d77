/*
 * The CPU simulation must behave like the CUDA driver where the executor
 * depends on it: VMM at exact hints, error codes for bad handles and
 * unmapped copies, parameter layouts, and a faulting kernel turning into
 * a sticky CUDA_ERROR_ILLEGAL_ADDRESS until the context is reset. One
 * device; test_sim_multi.c has three.
 */
#include "sim_fixture.h"

#include <stdio.h>
#include <sys/resource.h>

/* ---- one device (the default) ---- */

static CUcontext ctx;

/* reserves 64 MiB at HINT and maps `mapped` bytes at its start, RW */
static CUmemGenericAllocationHandle map_at_hint(size_t mapped) {
  CUdeviceptr p = 0;
  assert_int_equal(d->MemAddressReserve(&p, 64 * MiB, 0, HINT, 0), CUDA_SUCCESS);
  assert_int_equal(p, HINT);
  CUmemAllocationProp pr = prop();
  CUmemGenericAllocationHandle h;
  assert_int_equal(d->MemCreate(&h, mapped, &pr, 0), CUDA_SUCCESS);
  assert_int_equal(d->MemMap(HINT, mapped, 0, h, 0), CUDA_SUCCESS);
  CUmemAccessDesc acc = {.location = pr.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  assert_int_equal(d->MemSetAccess(HINT, mapped, &acc, 1), CUDA_SUCCESS);
  return h;
}

static void unmap_at_hint(CUmemGenericAllocationHandle h, size_t mapped) {
  assert_int_equal(d->MemUnmap(HINT, mapped), CUDA_SUCCESS);
  assert_int_equal(d->MemRelease(h), CUDA_SUCCESS);
  assert_int_equal(d->MemAddressFree(HINT, 64 * MiB), CUDA_SUCCESS);
}

static void test_init_and_device(void **state) {
  (void)state;
  char err[256];
  d = ferry_driver_sim(UNIT_TWINS, err, sizeof err);
  assert_non_null(d);
  int n = -1;
  assert_int_equal(d->DeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  assert_int_equal(d->Init(0), CUDA_SUCCESS);
  assert_int_equal(d->DeviceGetCount(&n), CUDA_SUCCESS);
  assert_int_equal(n, 1);
  CUdevice dev;
  assert_int_equal(d->DeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(d->DeviceGet(&dev, 0), CUDA_SUCCESS);
  char name[64];
  assert_int_equal(d->DeviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
  assert_string_equal(name, "ferry CPU simulation (sm_90)");
  int v = 0;
  assert_int_equal(d->DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), CUDA_SUCCESS);
  assert_int_equal(v, 132);
  assert_int_equal(d->DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), CUDA_SUCCESS);
  assert_int_equal(v, 9);
  assert_int_equal(d->DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1),
                   CUDA_ERROR_INVALID_DEVICE);
  /* context calls need a current context */
  size_t f, t;
  assert_int_equal(d->MemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(d->DevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  assert_int_equal(d->CtxSetCurrent(ctx), CUDA_SUCCESS);
  assert_int_equal(d->MemGetInfo(&f, &t), CUDA_SUCCESS);
  assert_int_equal(t, 80ull << 30);
  int ver = 0;
  assert_int_equal(d->DriverGetVersion(&ver), CUDA_SUCCESS);
  assert_int_equal(ver, 13000);
}

static void test_vmm_hints(void **state) {
  (void)state;
  CUdeviceptr a = 0, b = 0;
  assert_int_equal(d->MemAddressReserve(&a, 64 * MiB, 0, HINT, 0), CUDA_SUCCESS);
  assert_int_equal(a, HINT);
  /* the range is taken: like the real driver, a different address */
  assert_int_equal(d->MemAddressReserve(&b, 64 * MiB, 0, HINT, 0), CUDA_SUCCESS);
  assert_true(b != HINT);
  assert_int_equal(d->MemAddressFree(b, 64 * MiB), CUDA_SUCCESS);
  assert_int_equal(d->MemAddressFree(a, 64 * MiB), CUDA_SUCCESS);
  assert_int_equal(d->MemAddressFree(a, 64 * MiB), CUDA_ERROR_INVALID_VALUE);
  /* sizes must be multiples of the 2 MiB granularity */
  CUmemAllocationProp pr = prop();
  size_t g = 0;
  assert_int_equal(d->MemGetAllocationGranularity(&g, &pr, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  assert_int_equal(g, 2 * MiB);
  CUmemGenericAllocationHandle h;
  assert_int_equal(d->MemCreate(&h, 3 * MiB, &pr, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemAddressReserve(&a, 3 * MiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  /* mapping outside a reservation fails */
  assert_int_equal(d->MemCreate(&h, 2 * MiB, &pr, 0), CUDA_SUCCESS);
  assert_int_equal(d->MemMap(HINT, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemRelease(h), CUDA_SUCCESS);
  assert_int_equal(d->MemRelease(h), CUDA_ERROR_INVALID_VALUE);
}

static void test_memcpy_bounds(void **state) {
  (void)state;
  size_t free0, free1, t;
  assert_int_equal(d->MemGetInfo(&free0, &t), CUDA_SUCCESS);
  CUmemGenericAllocationHandle h = map_at_hint(4 * MiB);
  assert_int_equal(d->MemGetInfo(&free1, &t), CUDA_SUCCESS);
  assert_int_equal(free0 - free1, 4 * MiB);
  /* double mapping is refused */
  CUmemAllocationProp pr = prop();
  CUmemGenericAllocationHandle h2;
  assert_int_equal(d->MemCreate(&h2, 2 * MiB, &pr, 0), CUDA_SUCCESS);
  assert_int_equal(d->MemMap(HINT + 2 * MiB, 2 * MiB, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemRelease(h2), CUDA_SUCCESS);

  char src[100], dst[100];
  for (int i = 0; i < 100; i++)
    src[i] = (char)i;
  assert_int_equal(d->MemcpyHtoDAsync(HINT + 1000, src, 100, NULL), CUDA_SUCCESS);
  assert_int_equal(((char *)(uintptr_t)HINT)[1000 + 42], 42); /* same address on the host */
  assert_int_equal(d->MemcpyDtoHAsync(dst, HINT + 1000, 100, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  assert_memory_equal(src, dst, 100);
  /* past the mapping, or in the unmapped part of the reservation */
  assert_int_equal(d->MemcpyHtoDAsync(HINT + 4 * MiB - 50, src, 100, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemcpyDtoHAsync(dst, HINT + 8 * MiB, 100, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemsetD8Async(HINT + 5 * MiB, 1, 10, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemcpyDtoDAsync(HINT + 4 * MiB, HINT, 10, NULL), CUDA_ERROR_INVALID_VALUE);
  /* a bad host pointer is an error, not a crash */
  assert_int_equal(d->MemcpyHtoDAsync(HINT, (void *)16, 100, NULL), CUDA_ERROR_INVALID_VALUE);
  /* a bad stream */
  assert_int_equal(d->MemcpyHtoDAsync(HINT, src, 100, (CUstream)src), CUDA_ERROR_INVALID_HANDLE);
  /* 2D and memsets */
  assert_int_equal(d->MemsetD2D8Async(HINT, 256, 7, 100, 10, NULL), CUDA_SUCCESS);
  assert_int_equal(((unsigned char *)(uintptr_t)HINT)[9 * 256 + 99], 7);
  assert_int_equal(((unsigned char *)(uintptr_t)HINT)[9 * 256 + 100], 0);
  CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = HINT, .srcPitch = 256,
                     .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = dst, .dstPitch = 10,
                     .WidthInBytes = 10, .Height = 10};
  assert_int_equal(d->Memcpy2DAsync(&c, NULL), CUDA_SUCCESS);
  assert_int_equal(dst[95], 7);
  c.dstPitch = 5; /* pitch below width */
  assert_int_equal(d->Memcpy2DAsync(&c, NULL), CUDA_ERROR_INVALID_VALUE);
  unmap_at_hint(h, 4 * MiB);
  assert_int_equal(d->MemGetInfo(&free1, &t), CUDA_SUCCESS);
  assert_int_equal(free0, free1);
}

static void test_streams_events(void **state) {
  (void)state;
  CUstream s;
  assert_int_equal(d->StreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -1), CUDA_SUCCESS);
  assert_int_equal(d->StreamQuery(s), CUDA_SUCCESS);
  assert_int_equal(d->StreamSynchronize(CU_STREAM_LEGACY), CUDA_SUCCESS);
  assert_int_equal(d->StreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(d->StreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->StreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->StreamQuery((CUstream)(uintptr_t)0xdeadbeef), CUDA_ERROR_INVALID_HANDLE);
  CUevent a, b, nt;
  float ms = -1;
  assert_int_equal(d->EventCreate(&a, 0), CUDA_SUCCESS);
  assert_int_equal(d->EventCreate(&b, CU_EVENT_BLOCKING_SYNC), CUDA_SUCCESS);
  assert_int_equal(d->EventCreate(&nt, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  assert_int_equal(d->EventCreate(&a, 0x100), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->EventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE); /* never recorded */
  assert_int_equal(d->EventRecord(a, NULL), CUDA_SUCCESS);
  assert_int_equal(d->EventRecord(b, NULL), CUDA_SUCCESS);
  assert_int_equal(d->EventRecord(nt, NULL), CUDA_SUCCESS);
  assert_int_equal(d->EventElapsedTime(&ms, a, b), CUDA_SUCCESS);
  assert_true(ms >= 0 && ms < 1000);
  assert_int_equal(d->EventElapsedTime(&ms, a, nt), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->EventQuery(b), CUDA_SUCCESS);
  assert_int_equal(d->StreamWaitEvent(NULL, b, 0), CUDA_SUCCESS);
  assert_int_equal(d->EventDestroy(a), CUDA_SUCCESS);
  assert_int_equal(d->EventQuery(a), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->EventDestroy(b), CUDA_SUCCESS);
  assert_int_equal(d->EventDestroy(nt), CUDA_SUCCESS);
}

static void test_modules_and_params(void **state) {
  (void)state;
  CUmodule m;
  static const unsigned char elf[16] = {0x7f, 'E', 'L', 'F'};
  assert_int_equal(d->ModuleLoadData(&m, elf), CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(d->ModuleLoadData(&m, fatbin), CUDA_SUCCESS);
  CUfunction f, f2;
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z7missingv"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z5mixedPif1Scd"), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f2, m, "_Z5mixedPif1Scd"), CUDA_SUCCESS);
  assert_ptr_equal(f, f2);
  static const size_t want[5][2] = {{0, 8}, {8, 4}, {16, 24}, {40, 1}, {48, 8}};
  size_t n = 0, off, size;
  while (d->FuncGetParamInfo(f, n, &off, &size) == CUDA_SUCCESS) {
    assert_true(n < 5);
    assert_int_equal(off, want[n][0]);
    assert_int_equal(size, want[n][1]);
    n++;
  }
  assert_int_equal(n, 5);
  assert_int_equal(d->FuncGetParamInfo(f, 5, &off, &size), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr var;
  size_t vs;
  assert_int_equal(d->ModuleGetGlobal(&var, &vs, m, "g_table"), CUDA_SUCCESS);
  assert_int_equal(vs, 1024);
  assert_int_equal(((int *)(uintptr_t)var)[10], 0);
  assert_int_equal(d->ModuleGetGlobal(&var, &vs, m, "nope"), CUDA_ERROR_NOT_FOUND);
  int v;
  assert_int_equal(d->FuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f), CUDA_SUCCESS);
  assert_int_equal(v, 1024);
  assert_int_equal(d->OccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&v, f, 256, 0, 0), CUDA_SUCCESS);
  assert_int_equal(v, 8);
  assert_int_equal(d->OccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&v, f, 32, 0, 0), CUDA_SUCCESS);
  assert_int_equal(v, 32);
  assert_int_equal(d->ModuleUnload(m), CUDA_SUCCESS);
  assert_int_equal(d->FuncGetParamInfo(f, 0, &off, &size), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->ModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
}

#include "image_files.h"

/* a cubin or PTX module has the kernels its image names (inc, only_here),
   each run by its twin; a twin it does not name (poke) is not found */
static void check_named_module(const void *image) {
  CUmodule m;
  CUfunction f;
  assert_int_equal(d->ModuleLoadData(&m, image), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z4pokePi"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(d->ModuleGetFunction(&f, m, "only_here"), CUDA_ERROR_NOT_FOUND); /* no twin */
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z3inc"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z3incPii"), CUDA_SUCCESS);
  CUmemGenericAllocationHandle h = map_at_hint(2 * MiB);
  CUdeviceptr dp = HINT;
  int n = 10;
  void *params[] = {&dp, &n};
  assert_int_equal(d->LaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
  assert_int_equal(((int *)(uintptr_t)HINT)[9], 1);
  assert_int_equal(((int *)(uintptr_t)HINT)[10], 0);
  unmap_at_hint(h, 2 * MiB);
  assert_int_equal(d->ModuleUnload(m), CUDA_SUCCESS);
}

static void test_module_images(void **state) {
  (void)state;
  unsigned char *cubin = slurp("kernels.cubin", NULL), *ptx = slurp("kernels.ptx", NULL);
  unsigned char *fb = slurp("kernels.fatbin", NULL);
  check_named_module(cubin);
  check_named_module(ptx);
  /* from a container any twin is taken, as before */
  CUmodule m;
  CUfunction f;
  assert_int_equal(d->ModuleLoadData(&m, fb), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z4pokePi"), CUDA_SUCCESS);
  assert_int_equal(d->ModuleUnload(m), CUDA_SUCCESS);
  /* the wrapper is cuModuleLoadFatBinary's, not cuModuleLoadData's */
  struct {
    int magic, version;
    const unsigned long long *data;
    void *filename_or_fatbins;
  } w = {0x466243B1, 1, (const unsigned long long *)(void *)fb, NULL};
  assert_int_equal(d->ModuleLoadData(&m, &w), CUDA_ERROR_INVALID_IMAGE);
  /* text that is no PTX module */
  assert_int_equal(d->ModuleLoadData(&m, "hello .entry x("), CUDA_ERROR_INVALID_PTX);
  free(cubin);
  free(ptx);
  free(fb);
}

/* hand-made images whose names point anywhere: loaded without the names
   that do not hold, never read out of bounds (ASan builds check that) */
static void test_malformed_cubin_names(void **state) {
  (void)state;
  /* header, 4 section headers at 64 (null, symtab, strtab, shstrtab), data at 320 */
  static unsigned char elf[320 + 96];
  memset(elf, 0, sizeof elf);
  memcpy(elf, "\177ELF\2\1", 6);
  uint64_t shoff = 64;
  uint16_t shent = 64, shnum = 4, shstrndx = 3;
  memcpy(elf + 40, &shoff, 8);
  memcpy(elf + 58, &shent, 2);
  memcpy(elf + 60, &shnum, 2);
  memcpy(elf + 62, &shstrndx, 2);
  struct { uint32_t name, type; uint64_t flags, addr, off, size; uint32_t link, info;
           uint64_t align, entsize; } sh[4] = {
      {0}, {1, 2, 0, 0, 320, 48, 2, 0, 8, 24}, {0, 3, 0, 0, 368, 16, 0, 0, 1, 0},
      {0, 3, 0, 0, 384, 32, 0, 0, 1, 0}};
  memcpy(elf + 64, sh, sizeof sh);
  /* symbol 0: a FUNC named at 1 of the string table; symbol 1: a FUNC
     named at 200, past the table's 16 bytes */
  uint32_t name0 = 1, name1 = 200;
  memcpy(elf + 320, &name0, 4);
  elf[324] = 0x12; /* GLOBAL FUNC */
  memcpy(elf + 344, &name1, 4);
  elf[348] = 0x12;
  memcpy(elf + 368, "\0_Z3incPii\0", 11);
  memcpy(elf + 384, "\0.text.\0", 8); /* an empty .text. suffix */
  CUmodule m;
  CUfunction f;
  assert_int_equal(d->ModuleLoadData(&m, elf), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z3incPii"), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z4pokePi"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(d->ModuleUnload(m), CUDA_SUCCESS);
  /* the string table unterminated: its name is not taken */
  memcpy(elf + 368, "\0_Z3incPii_____", 16);
  assert_int_equal(d->ModuleLoadData(&m, elf), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z3incPii"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(d->ModuleUnload(m), CUDA_SUCCESS);
  /* the symbol table links to a section that does not exist, or to NOBITS */
  memcpy(elf + 368, "\0_Z3incPii\0", 11);
  sh[1].link = 9;
  memcpy(elf + 64, sh, sizeof sh);
  assert_int_equal(d->ModuleLoadData(&m, elf), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z3incPii"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(d->ModuleUnload(m), CUDA_SUCCESS);
  sh[1].link = 2;
  sh[2].type = 8;
  memcpy(elf + 64, sh, sizeof sh);
  assert_int_equal(d->ModuleLoadData(&m, elf), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z3incPii"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(d->ModuleUnload(m), CUDA_SUCCESS);
}

static void test_memset_wide(void **state) {
  (void)state;
  CUmemGenericAllocationHandle h = map_at_hint(2 * MiB);
  unsigned char *p = (unsigned char *)(uintptr_t)HINT;
  memset(p, 0, 4096);
  assert_int_equal(d->MemsetD2D16Async(HINT, 64, 0xbeef, 5, 3, NULL), CUDA_SUCCESS);
  uint16_t h16;
  memcpy(&h16, p + 2 * 64 + 8, 2);
  assert_int_equal(h16, 0xbeef);
  assert_int_equal(p[2 * 64 + 10], 0);
  assert_int_equal(d->MemsetD2D32Async(HINT + 1024, 40, 0xcafef00du, 10, 1, NULL), CUDA_SUCCESS);
  uint32_t h32;
  memcpy(&h32, p + 1024 + 36, 4);
  assert_int_equal(h32, 0xcafef00du);
  assert_int_equal(p[1024 + 40], 0);
  /* the D2D8 checks: rows past the mapping, pitch below the row; and alignment */
  assert_int_equal(d->MemsetD2D32Async(HINT + 2 * MiB - 16, 16, 1, 4, 2, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemsetD2D16Async(HINT, 8, 1, 5, 2, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemsetD2D16Async(HINT + 1, 64, 1, 5, 1, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemsetD2D32Async(HINT, 66, 1, 5, 2, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemsetD2D32Async(HINT, 1ull << 32, 1, 5, 2, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemsetD2D32Async(HINT, 64, 1, SIZE_MAX / 2, 1, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->MemsetD2D16Async(HINT, 64, 1, 5, 1, (CUstream)p), CUDA_ERROR_INVALID_HANDLE);
  memcpy(&h16, p, 2);
  assert_int_equal(h16, 0xbeef); /* none of them wrote */
  unmap_at_hint(h, 2 * MiB);
}

static void test_launch(void **state) {
  (void)state;
  CUmemGenericAllocationHandle h = map_at_hint(2 * MiB);
  CUmodule m;
  CUfunction inc, mixed, bsum;
  assert_int_equal(d->ModuleLoadData(&m, fatbin), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&inc, m, "_Z3incPii"), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&mixed, m, "_Z5mixedPif1Scd"), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&bsum, m, "_Z9block_sumPi"), CUDA_SUCCESS);
  int *p = (int *)(uintptr_t)HINT;
  CUdeviceptr dp = HINT;
  int n = 1000;
  void *params[] = {&dp, &n};
  assert_int_equal(d->LaunchKernel(inc, 4, 1, 1, 256, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
  assert_int_equal(p[0], 1);
  assert_int_equal(p[999], 1);
  assert_int_equal(p[1000], 0);
  /* validation */
  assert_int_equal(d->LaunchKernel(inc, 1, 1, 1, 1025, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->LaunchKernel(inc, 1, 1, 1, 32, 32, 2, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->LaunchKernel(inc, 0, 1, 1, 32, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->LaunchKernel(inc, 1, 1, 1, 32, 1, 1, 64 * 1024, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->LaunchKernel(inc, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->FuncSetAttribute(bsum, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100 * 1024), CUDA_SUCCESS);
  assert_int_equal(d->FuncSetAttribute(bsum, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 300 * 1024), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->FuncSetAttribute(bsum, CU_FUNC_ATTRIBUTE_NUM_REGS, 1), CUDA_ERROR_INVALID_VALUE);
  void *bparams[] = {&dp};
  assert_int_equal(d->LaunchKernel(bsum, 3, 1, 1, 64, 1, 1, 64 * 1024, NULL, bparams, NULL), CUDA_SUCCESS);
  assert_int_equal(p[0], 64 * 63 / 2);
  assert_int_equal(p[2], 64 * 63 / 2);
  /* parameters land at the driver's layout offsets */
  struct { char c; double d; int i; } s = {'x', 5.0, 6};
  float fl = 3.5f;
  char c = 'q';
  double dd = 7.0;
  void *mparams[] = {&dp, &fl, &s, &c, &dd};
  assert_int_equal(d->LaunchKernel(mixed, 1, 1, 1, 1, 1, 1, 0, NULL, mparams, NULL), CUDA_SUCCESS);
  assert_int_equal(p[0], 3);
  assert_int_equal(p[1], 'x');
  assert_int_equal(p[2], 5);
  assert_int_equal(p[3], 6);
  assert_int_equal(p[4], 'q');
  assert_int_equal(p[5], 7);
  /* twins reach their own module's globals by name; each module has its own */
  CUmodule m2;
  CUfunction bump, bump2;
  CUdeviceptr c1, c2;
  assert_int_equal(d->ModuleLoadData(&m2, fatbin), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&bump, m, "_Z12bump_counterv"), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&bump2, m2, "_Z12bump_counterv"), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetGlobal(&c1, NULL, m, "g_counter"), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetGlobal(&c2, NULL, m2, "g_counter"), CUDA_SUCCESS);
  assert_true(c1 != c2);
  assert_int_equal(d->LaunchKernel(bump, 2, 1, 1, 8, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
  assert_int_equal(*(int *)(uintptr_t)c1, 16);
  assert_int_equal(*(int *)(uintptr_t)c2, 0);
  assert_int_equal(d->ModuleUnload(m2), CUDA_SUCCESS);
  assert_int_equal(d->ModuleUnload(m), CUDA_SUCCESS);
  unmap_at_hint(h, 2 * MiB);
}

static CUlaunchConfig ex_config(unsigned grid, unsigned block, CUlaunchAttribute *attrs,
                                unsigned n) {
  CUlaunchConfig c = {.gridDimX = grid, .gridDimY = 1, .gridDimZ = 1, .blockDimX = block,
                      .blockDimY = 1, .blockDimZ = 1, .attrs = attrs, .numAttrs = n};
  return c;
}

/* cuLaunchKernelEx: attributes are checked like the driver's, then the
   kernel runs as with cuLaunchKernel */
static void test_launch_ex(void **state) {
  (void)state;
  CUmemGenericAllocationHandle h = map_at_hint(2 * MiB);
  CUmodule m;
  CUfunction inc;
  assert_int_equal(d->ModuleLoadData(&m, fatbin), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&inc, m, "_Z3incPii"), CUDA_SUCCESS);
  int *p = (int *)(uintptr_t)HINT;
  memset(p, 0, 4096);
  CUdeviceptr dp = HINT;
  int n = 100;
  void *params[] = {&dp, &n};
  CUlaunchAttribute at[3];
  memset(at, 0, sizeof at);
  at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  at[0].value.clusterDim.x = 2;
  at[0].value.clusterDim.y = 1;
  at[0].value.clusterDim.z = 1;
  at[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  at[1].value.programmaticStreamSerializationAllowed = 1;
  at[2].id = CU_LAUNCH_ATTRIBUTE_IGNORE;
  CUlaunchConfig c = ex_config(4, 32, at, 3);
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_SUCCESS);
  assert_int_equal(p[0], 1);
  assert_int_equal(p[99], 1);
  assert_int_equal(p[100], 0);
  c.numAttrs = 0; /* no attributes at all */
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_SUCCESS);
  assert_int_equal(p[99], 2);
  /* the configuration itself */
  assert_int_equal(d->LaunchKernelEx(NULL, inc, params, NULL), CUDA_ERROR_INVALID_VALUE);
  c = ex_config(4, 32, NULL, 1);
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_ERROR_INVALID_VALUE);
  c = ex_config(4, 2048, at, 1);
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_ERROR_INVALID_VALUE);
  c = ex_config(4, 32, at, 1);
  assert_int_equal(d->LaunchKernelEx(&c, NULL, params, NULL), CUDA_ERROR_INVALID_HANDLE);
  /* cluster dimensions must divide the grid and stay within 8 blocks */
  c = ex_config(3, 32, at, 1);
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
  at[0].value.clusterDim.x = 16;
  c = ex_config(32, 32, at, 1);
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
  assert_int_equal(d->FuncSetAttribute(inc, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                   CUDA_SUCCESS);
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_SUCCESS);
  at[0].value.clusterDim.x = 0;
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_ERROR_INVALID_VALUE);
  /* values out of range, unknown ids and graph-only attributes */
  at[0].id = CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN;
  at[0].value.memSyncDomain = (CUlaunchMemSyncDomain)7;
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_ERROR_INVALID_VALUE);
  at[0].value.memSyncDomain = CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE;
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_SUCCESS);
  at[0].id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
  at[0].value.accessPolicyWindow.hitRatio = 2.0f;
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_ERROR_INVALID_VALUE);
  at[0].id = (CUlaunchAttributeID)99;
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_ERROR_INVALID_VALUE);
  at[0].id = CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE;
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_ERROR_INVALID_VALUE);
  /* a programmatic event must exist and have timing disabled */
  CUevent timed, untimed;
  assert_int_equal(d->EventCreate(&timed, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  assert_int_equal(d->EventCreate(&untimed, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  memset(&at[0], 0, sizeof at[0]);
  at[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT;
  at[0].value.programmaticEvent.event = timed;
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_ERROR_INVALID_VALUE);
  at[0].value.programmaticEvent.event = (CUevent)(uintptr_t)0x1234;
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_ERROR_INVALID_HANDLE);
  at[0].value.programmaticEvent.event = untimed;
  memset(p, 0, 4096);
  assert_int_equal(d->LaunchKernelEx(&c, inc, params, NULL), CUDA_SUCCESS);
  assert_int_equal(p[99], 1);
  assert_int_equal(d->EventSynchronize(untimed), CUDA_SUCCESS);
  assert_int_equal(d->EventDestroy(timed), CUDA_SUCCESS);
  assert_int_equal(d->EventDestroy(untimed), CUDA_SUCCESS);
  assert_int_equal(d->ModuleUnload(m), CUDA_SUCCESS);
  unmap_at_hint(h, 2 * MiB);
}

static void test_limits(void **state) {
  (void)state;
  size_t v = 0;
  assert_int_equal(d->CtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 4 << 20), CUDA_SUCCESS);
  assert_int_equal(d->CtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 4 << 20);
  assert_int_equal(d->CtxGetLimit(&v, CU_LIMIT_MAX), CUDA_ERROR_UNSUPPORTED_LIMIT);
  int lo = 1, hi = 1;
  assert_int_equal(d->CtxGetStreamPriorityRange(&lo, &hi), CUDA_SUCCESS);
  assert_true(lo == 0 && hi < 0);
  void *hp;
  assert_int_equal(d->MemHostAlloc(&hp, 4096, 0), CUDA_SUCCESS);
  assert_int_equal(d->MemFreeHost(hp), CUDA_SUCCESS);
  assert_int_equal(d->MemFreeHost(hp), CUDA_ERROR_INVALID_VALUE);
}

/* last: as on a real GPU (driver 580), a kernel fault leaves CUDA unusable
   in the process, even after a reset */
static void test_sticky_illegal_address(void **state) {
  (void)state;
  CUmemGenericAllocationHandle h = map_at_hint(2 * MiB);
  (void)h;
  CUmodule m;
  CUfunction poke;
  assert_int_equal(d->ModuleLoadData(&m, fatbin), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&poke, m, "_Z4pokePi"), CUDA_SUCCESS);
  CUdeviceptr ok = HINT, bad = HINT + 32 * MiB; /* reserved, not mapped */
  void *params[] = {&ok};
  assert_int_equal(d->LaunchKernel(poke, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
  assert_int_equal(*(int *)(uintptr_t)HINT, 1);
  params[0] = &bad;
  /* the launch succeeds, the fault shows at the next call */
  assert_int_equal(d->LaunchKernel(poke, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
  size_t f, t;
  assert_int_equal(d->CtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(d->MemGetInfo(&f, &t), CUDA_ERROR_ILLEGAL_ADDRESS);
  params[0] = &ok;
  assert_int_equal(d->LaunchKernel(poke, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
  int v = 0; /* device queries still answer */
  assert_int_equal(d->DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_SUCCESS);
  assert_int_equal(d->DevicePrimaryCtxReset(0), CUDA_SUCCESS);
  assert_int_equal(d->CtxSynchronize(), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  assert_int_equal(d->DevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  CUcontext c2;
  assert_int_equal(d->DevicePrimaryCtxRetain(&c2, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
  CUevent e;
  assert_int_equal(d->EventCreate(&e, 0), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  /* the reset freed the reservation: the hint is free for the host again */
  void *p = mmap((void *)(uintptr_t)HINT, 64 * MiB, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  assert_ptr_equal(p, (void *)(uintptr_t)HINT);
  munmap(p, 64 * MiB);
}

/* handles are not file descriptors: far more of them than the open-file
   limit allows can be created and mapped (a session of a program with
   thousands of allocations must not fail at the 1017th) */
static void test_many_handles(void **state) {
  (void)state;
  struct rlimit old, low = {128, 128};
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  low.rlim_max = old.rlim_max;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  enum { N = 600 };
  static CUmemGenericAllocationHandle h[N];
  CUdeviceptr base = 0;
  CUmemAllocationProp p = prop();
  assert_int_equal(d->MemAddressReserve(&base, N * 2 * MiB, 0, HINT, 0), CUDA_SUCCESS);
  int made = 0;
  for (; made < N; made++) {
    if (d->MemCreate(&h[made], 2 * MiB, &p, 0) != CUDA_SUCCESS) break;
    if (d->MemMap(base + made * 2 * MiB, 2 * MiB, 0, h[made], 0) != CUDA_SUCCESS) {
      d->MemRelease(h[made]);
      break;
    }
  }
  setrlimit(RLIMIT_NOFILE, &old);
  assert_int_equal(made, N);
  /* each handle has its own pages */
  CUmemAccessDesc acc = {.location = p.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  assert_int_equal(d->MemSetAccess(base, N * 2 * MiB, &acc, 1), CUDA_SUCCESS);
  for (int i = 0; i < N; i++) ((unsigned char *)(uintptr_t)base)[i * 2 * MiB] = (unsigned char)i;
  for (int i = 0; i < N; i++)
    assert_int_equal(((unsigned char *)(uintptr_t)base)[i * 2 * MiB], (unsigned char)i);
  for (int i = 0; i < N; i++) {
    assert_int_equal(d->MemUnmap(base + i * 2 * MiB, 2 * MiB), CUDA_SUCCESS);
    assert_int_equal(d->MemRelease(h[i]), CUDA_SUCCESS);
  }
  assert_int_equal(d->MemAddressFree(base, N * 2 * MiB), CUDA_SUCCESS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_init_and_device), cmocka_unit_test(test_vmm_hints),
      cmocka_unit_test(test_memcpy_bounds),   cmocka_unit_test(test_streams_events),
      cmocka_unit_test(test_modules_and_params), cmocka_unit_test(test_launch),
      cmocka_unit_test(test_launch_ex),
      cmocka_unit_test(test_module_images), cmocka_unit_test(test_malformed_cubin_names),
      cmocka_unit_test(test_memset_wide),
      cmocka_unit_test(test_limits),          cmocka_unit_test(test_many_handles),
      /* last: it leaves the context unusable, as a kernel fault does */
      cmocka_unit_test(test_sticky_illegal_address),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
