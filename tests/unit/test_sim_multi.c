/*
 * The CPU simulation with several devices (FERRY_SIM_GPUS): each has its
 * own primary context, memory, objects and sticky errors, as in CUDA, so
 * that two vGPUs can run on two local GPUs of one process in CI.
 */
#include "sim_fixture.h"

/* ---- several devices (FERRY_SIM_GPUS=3, FERRY_SIM_TOTAL_MEM=64 MiB) ---- */

#define HINT1 (HINT + (1ull << 30))
#define DEV_MEM (64 * MiB)
static CUcontext mctx[3];

static void cur(int k) { assert_int_equal(d->CtxSetCurrent(mctx[k]), CUDA_SUCCESS); }

/* memory of device memdev mapped at `at` (inside a reservation), read-write
   for the devices in acc (a bit mask) */
static CUmemGenericAllocationHandle map_on(CUdeviceptr at, size_t size, int memdev, int acc) {
  CUmemAllocationProp pr = prop();
  pr.location.id = memdev;
  CUmemGenericAllocationHandle h;
  assert_int_equal(d->MemCreate(&h, size, &pr, 0), CUDA_SUCCESS);
  assert_int_equal(d->MemMap(at, size, 0, h, 0), CUDA_SUCCESS);
  CUmemAccessDesc ad[3];
  size_t n = 0;
  for (int k = 0; k < 3; k++)
    if (acc & (1 << k))
      ad[n++] = (CUmemAccessDesc){.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = k},
                                  .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  assert_int_equal(d->MemSetAccess(at, size, ad, n), CUDA_SUCCESS);
  return h;
}

static void reserve(CUdeviceptr at) {
  CUdeviceptr p = 0;
  assert_int_equal(d->MemAddressReserve(&p, 64 * MiB, 0, at, 0), CUDA_SUCCESS);
  assert_int_equal(p, at);
}

/* unmaps [at, at + mapped) and frees the reservation at `at` */
static void unreserve(CUdeviceptr at, size_t mapped) {
  if (mapped)
    assert_int_equal(d->MemUnmap(at, mapped), CUDA_SUCCESS);
  assert_int_equal(d->MemAddressFree(at, 64 * MiB), CUDA_SUCCESS);
}

static size_t free_mem(void) {
  size_t f = 0, t = 0;
  assert_int_equal(d->MemGetInfo(&f, &t), CUDA_SUCCESS);
  assert_int_equal(t, DEV_MEM);
  return f;
}

struct objs { CUstream s; CUevent e; CUmodule m; CUfunction f; CUarray a; };

/* one of each context-owned object, in the current context */
static void make_objs(struct objs *o) {
  CUDA_ARRAY3D_DESCRIPTOR ad = {.Width = 16, .Height = 4, .Format = CU_AD_FORMAT_FLOAT,
                                .NumChannels = 1};
  assert_int_equal(d->StreamCreateWithPriority(&o->s, 0, 0), CUDA_SUCCESS);
  assert_int_equal(d->EventCreate(&o->e, 0), CUDA_SUCCESS);
  assert_int_equal(d->ModuleLoadData(&o->m, fatbin), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&o->f, o->m, "_Z3incPii"), CUDA_SUCCESS);
  assert_int_equal(d->Array3DCreate(&o->a, &ad), CUDA_SUCCESS);
}

static void free_objs(const struct objs *o) {
  assert_int_equal(d->StreamDestroy(o->s), CUDA_SUCCESS);
  assert_int_equal(d->EventDestroy(o->e), CUDA_SUCCESS);
  assert_int_equal(d->ModuleUnload(o->m), CUDA_SUCCESS);
  assert_int_equal(d->ArrayDestroy(o->a), CUDA_SUCCESS);
}

static void test_multi_devices(void **state) {
  (void)state;
  char err[256];
  d = ferry_driver_sim(UNIT_TWINS, err, sizeof err);
  assert_non_null(d);
  assert_int_equal(d->Init(0), CUDA_SUCCESS);
  int n = 0;
  assert_int_equal(d->DeviceGetCount(&n), CUDA_SUCCESS);
  assert_int_equal(n, 3);
  CUdevice dev;
  assert_int_equal(d->DeviceGet(&dev, 3), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(d->DeviceGet(&dev, -1), CUDA_ERROR_INVALID_DEVICE);
  CUuuid u[3];
  int bus[3];
  char name[64];
  size_t total;
  for (int k = 0; k < 3; k++) {
    assert_int_equal(d->DeviceGet(&dev, k), CUDA_SUCCESS);
    assert_int_equal(dev, k);
    assert_int_equal(d->DeviceGetName(name, sizeof name, dev), CUDA_SUCCESS);
    assert_string_equal(name, "ferry CPU simulation (sm_90)"); /* identical GPUs */
    assert_int_equal(d->DeviceGetUuid(&u[k], dev), CUDA_SUCCESS);
    assert_int_equal(d->DeviceGetAttribute(&bus[k], CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev), CUDA_SUCCESS);
    assert_int_equal(d->DeviceTotalMem(&total, dev), CUDA_SUCCESS);
    assert_int_equal(total, DEV_MEM); /* per device */
  }
  assert_memory_equal(u[0].bytes, "ferry-sim-gpu-00", 16);
  for (int i = 0; i < 3; i++)
    for (int j = i + 1; j < 3; j++) {
      assert_memory_not_equal(u[i].bytes, u[j].bytes, 16);
      assert_int_not_equal(bus[i], bus[j]);
    }
  /* every per-device call checks the device */
  int v;
  CUcontext c;
  assert_int_equal(d->DeviceGetName(name, sizeof name, 3), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(d->DeviceGetUuid(&u[0], 3), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(d->DeviceTotalMem(&total, 3), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(d->DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(d->DevicePrimaryCtxRetain(&c, 3), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(d->DevicePrimaryCtxRelease(3), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(d->DevicePrimaryCtxReset(3), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(d->DevicePrimaryCtxSetFlags(3, 0), CUDA_ERROR_INVALID_DEVICE);
  /* one primary context per device */
  for (int k = 0; k < 3; k++)
    assert_int_equal(d->DevicePrimaryCtxRetain(&mctx[k], k), CUDA_SUCCESS);
  assert_ptr_not_equal(mctx[0], mctx[1]);
  assert_ptr_not_equal(mctx[1], mctx[2]);
  assert_ptr_not_equal(mctx[0], mctx[2]);
  assert_int_equal(d->DevicePrimaryCtxSetFlags(1, CU_CTX_SCHED_BLOCKING_SYNC), CUDA_SUCCESS);
  assert_int_equal(d->CtxSetCurrent((CUcontext)&v), CUDA_ERROR_INVALID_CONTEXT);
}

/* retains, releases and limits of one device leave the others alone */
static void test_multi_retain_release(void **state) {
  (void)state;
  CUcontext again;
  assert_int_equal(d->DevicePrimaryCtxRetain(&again, 1), CUDA_SUCCESS);
  assert_ptr_equal(again, mctx[1]);
  struct objs o0, o1;
  size_t v = 0;
  cur(0);
  make_objs(&o0);
  assert_int_equal(d->CtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 4 << 20), CUDA_SUCCESS);
  cur(1);
  make_objs(&o1);
  assert_int_equal(d->CtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 1 << 20);
  assert_int_equal(d->CtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 2 << 20), CUDA_SUCCESS);
  assert_int_equal(d->DevicePrimaryCtxRelease(1), CUDA_SUCCESS);
  assert_int_equal(d->StreamQuery(o1.s), CUDA_SUCCESS); /* one reference left */
  assert_int_equal(d->DevicePrimaryCtxRelease(1), CUDA_SUCCESS);
  assert_int_equal(d->StreamQuery(o1.s), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(d->CtxSetCurrent(mctx[1]), CUDA_ERROR_INVALID_CONTEXT);
  /* device 0's context and objects are untouched */
  cur(0);
  int a = 0;
  CUfunction f;
  assert_int_equal(d->StreamQuery(o0.s), CUDA_SUCCESS);
  assert_int_equal(d->EventRecord(o0.e, o0.s), CUDA_SUCCESS);
  assert_int_equal(d->FuncGetAttribute(&a, CU_FUNC_ATTRIBUTE_NUM_REGS, o0.f), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f, o0.m, "_Z3incPii"), CUDA_SUCCESS);
  assert_int_equal(d->CtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 4 << 20);
  /* device 1 again: a fresh context, without the objects of the old one */
  assert_int_equal(d->DevicePrimaryCtxRetain(&again, 1), CUDA_SUCCESS);
  assert_ptr_equal(again, mctx[1]);
  cur(1);
  assert_int_equal(d->StreamQuery(o1.s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->EventQuery(o1.e), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->ModuleGetFunction(&f, o1.m, "_Z3incPii"), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->FuncGetAttribute(&a, CU_FUNC_ATTRIBUTE_NUM_REGS, o1.f), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->ArrayDestroy(o1.a), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->CtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 1 << 20);
  cur(0);
  free_objs(&o0);
}

/* objects of one context are invalid handles in another */
static void test_multi_cross_context(void **state) {
  (void)state;
  struct objs o0, o1;
  CUevent e0b, e1b;
  cur(0);
  make_objs(&o0);
  assert_int_equal(d->EventCreate(&e0b, 0), CUDA_SUCCESS);
  assert_int_equal(d->EventRecord(o0.e, NULL), CUDA_SUCCESS);
  assert_int_equal(d->EventRecord(e0b, o0.s), CUDA_SUCCESS);
  cur(1);
  make_objs(&o1);
  assert_int_equal(d->EventCreate(&e1b, 0), CUDA_SUCCESS);
  char buf[16] = {0};
  CUdeviceptr dp = HINT;
  int n = 1, a;
  void *params[] = {&dp, &n};
  CUfunction f;
  size_t off, size;
  assert_int_equal(d->StreamQuery(o0.s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->StreamSynchronize(o0.s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->StreamDestroy(o0.s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->MemcpyHtoDAsync(HINT, buf, sizeof buf, o0.s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->LaunchKernel(o1.f, 1, 1, 1, 1, 1, 1, 0, o0.s, params, NULL), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->LaunchKernel(o0.f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->FuncGetParamInfo(o0.f, 0, &off, &size), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->FuncGetAttribute(&a, CU_FUNC_ATTRIBUTE_NUM_REGS, o0.f), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->ModuleGetFunction(&f, o0.m, "_Z3incPii"), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->ModuleUnload(o0.m), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->ArrayDestroy(o0.a), CUDA_ERROR_INVALID_HANDLE);
  CUDA_MEMCPY3D c = {.srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = o0.a,
                     .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = buf, .dstPitch = 16,
                     .WidthInBytes = 16, .Height = 1, .Depth = 1};
  assert_int_equal(d->Memcpy3DAsync(&c, NULL), CUDA_ERROR_INVALID_HANDLE);
  c.srcArray = o1.a;
  assert_int_equal(d->Memcpy3DAsync(&c, NULL), CUDA_SUCCESS);
  /* an event records on a stream of its own context */
  assert_int_equal(d->EventRecord(o0.e, NULL), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->EventRecord(o1.e, o0.s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->EventRecord(o1.e, o1.s), CUDA_SUCCESS);
  assert_int_equal(d->EventRecord(e1b, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  /* as documented: a stream may wait for another device's event */
  assert_int_equal(d->StreamWaitEvent(o1.s, o0.e, 0), CUDA_SUCCESS);
  float ms;
  assert_int_equal(d->EventElapsedTime(&ms, o0.e, o1.e), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->EventElapsedTime(&ms, o1.e, e0b), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->EventElapsedTime(&ms, o1.e, e1b), CUDA_SUCCESS);
  assert_int_equal(d->EventElapsedTime(&ms, o0.e, e0b), CUDA_SUCCESS); /* needs no context */
  /* the legacy and per-thread streams are the current context's */
  assert_int_equal(d->StreamSynchronize(NULL), CUDA_SUCCESS);
  assert_int_equal(d->StreamSynchronize(CU_STREAM_LEGACY), CUDA_SUCCESS);
  assert_int_equal(d->StreamQuery(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  assert_int_equal(d->EventDestroy(e1b), CUDA_SUCCESS);
  free_objs(&o1);
  cur(0);
  assert_int_equal(d->EventDestroy(e0b), CUDA_SUCCESS);
  free_objs(&o0);
}

/* each device has its own memory; MemCreate names the device */
static void test_multi_memory(void **state) {
  (void)state;
  CUmemAllocationProp pr = prop();
  CUmemGenericAllocationHandle full, h1, h2, h;
  cur(0);
  assert_int_equal(free_mem(), DEV_MEM);
  assert_int_equal(d->MemCreate(&full, DEV_MEM, &pr, 0), CUDA_SUCCESS);
  assert_int_equal(d->MemCreate(&h, 2 * MiB, &pr, 0), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(free_mem(), 0);
  cur(1);
  assert_int_equal(free_mem(), DEV_MEM);
  pr.location.id = 1;
  assert_int_equal(d->MemCreate(&h1, 2 * MiB, &pr, 0), CUDA_SUCCESS);
  pr.location.id = 2; /* the location decides, not the current context */
  assert_int_equal(d->MemCreate(&h2, 4 * MiB, &pr, 0), CUDA_SUCCESS);
  assert_int_equal(free_mem(), DEV_MEM - 2 * MiB);
  cur(2);
  assert_int_equal(free_mem(), DEV_MEM - 4 * MiB);
  size_t g;
  pr.location.id = 3;
  assert_int_equal(d->MemCreate(&h, 2 * MiB, &pr, 0), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(d->MemGetAllocationGranularity(&g, &pr, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                   CUDA_ERROR_INVALID_DEVICE);
  pr.location.id = -1;
  assert_int_equal(d->MemCreate(&h, 2 * MiB, &pr, 0), CUDA_ERROR_INVALID_DEVICE);
  /* access may only name existing devices */
  reserve(HINT);
  h = map_on(HINT, 2 * MiB, 2, 1 << 2);
  CUmemAccessDesc acc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 3},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  assert_int_equal(d->MemSetAccess(HINT, 2 * MiB, &acc, 1), CUDA_ERROR_INVALID_DEVICE);
  unreserve(HINT, 2 * MiB);
  assert_int_equal(d->MemRelease(h), CUDA_SUCCESS);
  assert_int_equal(d->MemRelease(full), CUDA_SUCCESS); /* any context may release */
  assert_int_equal(d->MemRelease(h1), CUDA_SUCCESS);
  assert_int_equal(d->MemRelease(h2), CUDA_SUCCESS);
  for (int k = 0; k < 3; k++) {
    cur(k);
    assert_int_equal(free_mem(), DEV_MEM);
  }
}

/* unified addressing: copies reach every device's mappings */
static void test_multi_copies(void **state) {
  (void)state;
  cur(0);
  reserve(HINT);
  CUmemGenericAllocationHandle h0 = map_on(HINT, 2 * MiB, 0, 1 << 0);
  cur(1);
  reserve(HINT1);
  CUmemGenericAllocationHandle h1 = map_on(HINT1, 2 * MiB, 1, 1 << 1);
  /* device 1 memory in device 0's reservation: reservations are process-wide */
  CUmemGenericAllocationHandle h1b = map_on(HINT + 2 * MiB, 2 * MiB, 1, 1 << 1);
  char src[64], dst[64];
  for (int i = 0; i < 64; i++)
    src[i] = (char)(i + 1);
  assert_int_equal(d->MemcpyHtoDAsync(HINT + 100, src, 64, NULL), CUDA_SUCCESS);
  assert_int_equal(d->MemcpyDtoDAsync(HINT1, HINT + 100, 64, NULL), CUDA_SUCCESS);
  assert_int_equal(d->MemsetD8Async(HINT + 2 * MiB, 9, 64, NULL), CUDA_SUCCESS);
  cur(0);
  assert_int_equal(d->MemcpyDtoHAsync(dst, HINT1, 64, NULL), CUDA_SUCCESS);
  assert_memory_equal(src, dst, 64);
  CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = HINT1, .srcPitch = 16,
                     .dstMemoryType = CU_MEMORYTYPE_UNIFIED, .dstDevice = HINT + 2 * MiB,
                     .dstPitch = 32, .WidthInBytes = 16, .Height = 4};
  assert_int_equal(d->Memcpy2DAsync(&c, NULL), CUDA_SUCCESS);
  assert_int_equal(d->MemcpyDtoHAsync(dst, HINT + 2 * MiB, 64, NULL), CUDA_SUCCESS);
  assert_memory_equal(dst, src, 16);
  assert_int_equal(dst[16], 9);
  assert_memory_equal(dst + 32, src + 16, 16);
  unreserve(HINT, 4 * MiB);
  unreserve(HINT1, 2 * MiB); /* reserved under device 1 */
  assert_int_equal(d->MemRelease(h0), CUDA_SUCCESS);
  assert_int_equal(d->MemRelease(h1), CUDA_SUCCESS);
  assert_int_equal(d->MemRelease(h1b), CUDA_SUCCESS);
}

/* a reset frees the device's objects, memory and reservations only */
static void test_multi_reset(void **state) {
  (void)state;
  cur(0);
  reserve(HINT);
  CUmemGenericAllocationHandle h0 = map_on(HINT, 2 * MiB, 0, 1 << 0);
  map_on(HINT + 2 * MiB, 2 * MiB, 2, (1 << 0) | (1 << 2)); /* freed by the reset */
  struct objs o0, o2;
  make_objs(&o0);
  cur(2);
  reserve(HINT1);
  CUmemGenericAllocationHandle h2 = map_on(HINT1, 2 * MiB, 2, 1 << 2);
  CUmemGenericAllocationHandle h0b = map_on(HINT1 + 2 * MiB, 2 * MiB, 0, 1 << 2);
  make_objs(&o2);
  assert_int_equal(free_mem(), DEV_MEM - 4 * MiB);
  assert_int_equal(d->DevicePrimaryCtxReset(2), CUDA_SUCCESS);
  assert_int_equal(free_mem(), DEV_MEM); /* still retained: usable */
  assert_int_equal(d->StreamQuery(o2.s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(d->MemRelease(h2), CUDA_ERROR_INVALID_VALUE);
  char buf[16] = "0123456789abcde";
  assert_int_equal(d->MemcpyHtoDAsync(HINT + 2 * MiB, buf, 16, NULL), CUDA_ERROR_INVALID_VALUE);
  /* its reservation is gone, device 0's stays */
  void *p = mmap((void *)(uintptr_t)HINT1, 64 * MiB, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  assert_ptr_equal(p, (void *)(uintptr_t)HINT1);
  munmap(p, 64 * MiB);
  cur(0);
  assert_int_equal(d->MemcpyHtoDAsync(HINT, buf, 16, o0.s), CUDA_SUCCESS);
  assert_int_equal(free_mem(), DEV_MEM - 4 * MiB); /* h0b lost its mapping, not its memory */
  free_objs(&o0);
  assert_int_equal(d->MemUnmap(HINT + 2 * MiB, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
  unreserve(HINT, 2 * MiB);
  assert_int_equal(d->MemRelease(h0), CUDA_SUCCESS);
  assert_int_equal(d->MemRelease(h0b), CUDA_SUCCESS);
  assert_int_equal(free_mem(), DEV_MEM);
}

static void *sync_on_device0(void *arg) {
  CUresult *r = arg;
  r[0] = d->CtxSynchronize(); /* no context current on this thread yet */
  r[1] = d->CtxSetCurrent(mctx[0]);
  r[2] = d->CtxSynchronize();
  return NULL;
}

/* last: a kernel fault on device 1 (here: memory device 1 was not given
   access to) poisons device 1 only */
static void test_multi_fault(void **state) {
  (void)state;
  cur(0);
  reserve(HINT);
  CUmemGenericAllocationHandle h0 = map_on(HINT, 2 * MiB, 0, 1 << 0);
  CUmemGenericAllocationHandle h01 = map_on(HINT + 2 * MiB, 2 * MiB, 0, (1 << 0) | (1 << 1));
  struct objs o0, o1;
  make_objs(&o0);
  cur(1);
  make_objs(&o1);
  int *p0 = (int *)(uintptr_t)HINT, *p01 = (int *)(uintptr_t)(HINT + 2 * MiB);
  CUdeviceptr dp = HINT + 2 * MiB;
  int n = 100;
  void *params[] = {&dp, &n};
  assert_int_equal(d->LaunchKernel(o1.f, 1, 1, 1, 128, 1, 1, 0, o1.s, params, NULL), CUDA_SUCCESS);
  assert_int_equal(d->CtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(p01[99], 1);
  dp = HINT; /* granted to device 0 only */
  assert_int_equal(d->LaunchKernel(o1.f, 1, 1, 1, 128, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
  assert_int_equal(d->CtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(d->StreamQuery(o1.s), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(p0[0], 0); /* nothing written; the host sees the memory again */
  CUresult tr[3];
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, sync_on_device0, tr), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(tr[0], CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(tr[1], CUDA_SUCCESS);
  assert_int_equal(tr[2], CUDA_SUCCESS);
  /* device 0 goes on */
  cur(0);
  assert_int_equal(d->CtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(d->LaunchKernel(o0.f, 1, 1, 1, 128, 1, 1, 0, o0.s, params, NULL), CUDA_SUCCESS);
  assert_int_equal(d->CtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(p0[99], 1);
  assert_int_equal(p0[100], 0);
  CUcontext c;
  assert_int_equal(d->DevicePrimaryCtxRetain(&c, 1), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(d->DevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
  assert_int_equal(d->DevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  assert_int_equal(d->DevicePrimaryCtxReset(1), CUDA_SUCCESS);
  cur(1);
  assert_int_equal(d->CtxSynchronize(), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  cur(0);
  int back[100];
  assert_int_equal(d->MemcpyDtoHAsync(back, HINT, sizeof back, o0.s), CUDA_SUCCESS);
  assert_int_equal(back[99], 1);
  free_objs(&o0);
  unreserve(HINT, 4 * MiB);
  assert_int_equal(d->MemRelease(h0), CUDA_SUCCESS);
  assert_int_equal(d->MemRelease(h01), CUDA_SUCCESS);
  assert_int_equal(free_mem(), DEV_MEM);
}

int main(void) {
  /* read once per process, so this binary is only for several devices */
  setenv("FERRY_SIM_GPUS", "3", 1);
  setenv("FERRY_SIM_TOTAL_MEM", "67108864", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_multi_devices),  cmocka_unit_test(test_multi_retain_release),
      cmocka_unit_test(test_multi_cross_context), cmocka_unit_test(test_multi_memory),
      cmocka_unit_test(test_multi_copies),   cmocka_unit_test(test_multi_reset),
      cmocka_unit_test(test_multi_fault),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
